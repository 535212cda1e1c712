//! Catalog ingestion against the real PostgreSQL: the demo catalog, the shared reference
//! catalog, idempotent re-imports, franchise premises.

use crate::common::{MOB_PSYCHO_III, MODEL, document, shared_catalog};

use server::{
    catalog::{self, Media, import},
    search,
};
use sqlx::PgPool;

/// Transaction ids of the last write to every row: unchanged means nothing was written.
async fn row_versions(pool: &PgPool) -> Vec<(i32, String, String)> {
    sqlx::query_as(
        "SELECT a.id, a.xmin::text, coalesce(d.xmin::text, '') FROM anime a
         LEFT JOIN documents d ON d.anime_id = a.id ORDER BY a.id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrations = "../migrations")]
async fn demo_catalog_loads_once_and_reloading_changes_nothing(pool: PgPool) {
    let demo = import::demo_catalog();
    let first = catalog::load_demo_if_empty(&pool, MODEL, None, None)
        .await
        .unwrap()
        .expect("empty catalog");
    assert_eq!(first.load.inserted, demo.len());
    assert_eq!(first.documents.documents_written, demo.len());
    assert!(first.documents.franchises >= 10, "{:?}", first.documents);
    // Not empty any more: the demo is not loaded twice.
    assert!(
        catalog::load_demo_if_empty(&pool, MODEL, None, None)
            .await
            .unwrap()
            .is_none()
    );

    let before = row_versions(&pool).await;
    let version = search::cache::catalog_version(&pool).await.unwrap();
    let again = catalog::ingest(&pool, &demo, false, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!((again.load.inserted, again.load.updated), (0, 0));
    assert_eq!(again.load.unchanged, demo.len());
    assert_eq!(again.documents.documents_written, 0);
    assert_eq!(again.documents.premises_created, 0);
    assert_eq!(
        row_versions(&pool).await,
        before,
        "a no-change ingest wrote rows"
    );
    // ...so the results cache stays valid.
    assert_eq!(
        search::cache::catalog_version(&pool).await.unwrap(),
        version
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn sequels_carry_their_franchise_premise(pool: PgPool) {
    catalog::load_demo_if_empty(&pool, MODEL, None, None)
        .await
        .unwrap();
    let root: Option<i32> = sqlx::query_scalar("SELECT franchise_root_id FROM anime WHERE id = $1")
        .bind(MOB_PSYCHO_III)
        .fetch_one(&pool)
        .await
        .unwrap();
    let root = root.expect("Mob Psycho 100 III belongs to a franchise");
    assert_ne!(root, MOB_PSYCHO_III);
    let sequel = document(&pool, MOB_PSYCHO_III).await;
    assert!(
        sequel.starts_with("Series premise (Mob Psycho 100"),
        "{sequel}"
    );
    // The root itself does not repeat its own premise.
    assert!(!document(&pool, root).await.starts_with("Series premise"));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_changed_entry_is_updated_and_only_its_documents_rebuilt(pool: PgPool) {
    let mut demo = import::demo_catalog();
    catalog::ingest(&pool, &demo, false, MODEL, None, None)
        .await
        .unwrap();
    let standalone = demo
        .iter_mut()
        .find(|m| m.relation_edges().is_empty())
        .expect("a standalone anime in the demo");
    standalone.genres.push("Mystery".into());
    let id = standalone.id;
    // Another mystery: one more anime carries its genre, so its theme vector weighs it less.
    let themes_of_another_mystery = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT d.themes::text FROM documents d JOIN anime a ON a.id = d.anime_id
             WHERE 'Mystery' = ANY(a.genres) AND a.id <> $1 ORDER BY a.id LIMIT 1",
        )
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    let before = themes_of_another_mystery().await;
    let report = catalog::ingest(&pool, &demo, false, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!(report.load.updated, 1);
    assert_eq!(report.documents.documents_written, 1);
    assert!(document(&pool, id).await.contains("Mystery"));
    assert_ne!(themes_of_another_mystery().await, before);
}

#[sqlx::test(migrations = "../migrations")]
async fn adult_entries_are_skipped_unless_asked(pool: PgPool) {
    let adult: Media =
        serde_json::from_str(r#"{"id": 1, "title": {"romaji": "X"}, "isAdult": true}"#).unwrap();
    let report = catalog::ingest(
        &pool,
        std::slice::from_ref(&adult),
        false,
        MODEL,
        None,
        None,
    )
    .await
    .unwrap();
    assert_eq!((report.load.skipped_adult, report.load.inserted), (1, 0));
    let report = catalog::ingest(&pool, &[adult], true, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!(report.load.inserted, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn another_embedding_model_gives_every_document_a_new_hash(pool: PgPool) {
    let demo = import::demo_catalog();
    catalog::ingest(&pool, &demo, false, MODEL, None, None)
        .await
        .unwrap();
    let report = catalog::ingest(&pool, &demo, false, "text-embedding-3-small", None, None)
        .await
        .unwrap();
    assert_eq!(report.documents.documents_written, demo.len());
    let models: Vec<String> = sqlx::query_scalar("SELECT DISTINCT model FROM documents")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(models, vec!["text-embedding-3-small".to_string()]);
}

#[sqlx::test(migrations = "../migrations")]
async fn shared_reference_catalog_imports_completely_and_idempotently(pool: PgPool) {
    let media = import::read_media_file(&shared_catalog()).unwrap();
    assert_eq!(media.len(), 6855);
    let first = catalog::ingest(&pool, &media, false, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!(first.load.inserted + first.load.skipped_adult, 6855);
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM documents")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count as usize, first.load.inserted);
    assert!(
        first.documents.franchises_with_premise > 500,
        "{:?}",
        first.documents
    );
    let mob = document(&pool, MOB_PSYCHO_III).await;
    assert!(mob.starts_with("Series premise ("), "{mob}");

    let before = row_versions(&pool).await;
    let again = catalog::ingest(&pool, &media, false, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!(
        (
            again.load.inserted,
            again.load.updated,
            again.documents.documents_written
        ),
        (0, 0, 0)
    );
    assert_eq!(row_versions(&pool).await, before);
}

/// Found by fuzzing the document builder: a NUL (or another control character) in any string
/// of an AniList entry. PostgreSQL's text and jsonb refuse U+0000, so one such entry failed the
/// whole import; now it is stored without it, and documents carry no control characters.
#[sqlx::test(migrations = "../migrations")]
async fn control_characters_in_an_entry_neither_fail_the_import_nor_reach_documents(pool: PgPool) {
    let media: Media = serde_json::from_value(serde_json::json!({
        "id": 9_000_001,
        "title": { "romaji": "Nul\u{0}Title\u{7}", "english": "Bell\u{7f}" },
        "synonyms": ["a\u{0}b"],
        "description": "A quiet\u{0} traveller\u{1b}[31m helps <br>people.\u{7f}",
        "genres": ["Drama\u{0}"],
        "tags": [{ "name": "Iyashikei\u{0}", "rank": 90 }],
    }))
    .unwrap();
    catalog::ingest(&pool, &[media], false, MODEL, None, None)
        .await
        .unwrap();
    let text = document(&pool, 9_000_001).await;
    assert!(!text.chars().any(char::is_control), "{text:?}");
    assert!(text.contains("A quiet traveller [31m helps"), "{text:?}");
    let raw: String = sqlx::query_scalar("SELECT raw::text FROM anime WHERE id = 9000001")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(raw.contains("NulTitle"), "{raw}");
}

/// Mushishi (TV 2005), AniList id 457.
const MUSHISHI: i32 = 457;

/// Whether the Spanish word index of `anime_id` holds `word` (as the 'spanish' configuration
/// reads it).
async fn spanish_index_holds(pool: &PgPool, anime_id: i32, word: &str) -> bool {
    sqlx::query_scalar(
        "SELECT lexical_es @@ plainto_tsquery('spanish', $2) FROM documents WHERE anime_id = $1",
    )
    .bind(anime_id)
    .bind(word)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Mushishi's demo document says "travels" and "quiet"; its Spanish translation says "viaja" and
/// "tranquilo", which the Spanish stemmer meets with a query's "viajaba" or "tranquila". Built
/// once: a second ingest translates nothing.
#[sqlx::test(migrations = "../migrations")]
async fn documents_are_indexed_in_spanish_from_their_translation(pool: PgPool) {
    let demo = import::demo_catalog();
    let translator = crate::common::document_translator();
    let first = catalog::ingest(&pool, &demo, false, MODEL, None, Some(translator))
        .await
        .unwrap();
    assert_eq!(
        (first.spanish.translated, first.spanish.untranslated),
        (demo.len(), 0),
        "{:?}",
        first.spanish
    );
    for word in ["viajaba", "tranquila", "mushishi"] {
        assert!(spanish_index_holds(&pool, MUSHISHI, word).await, "{word}");
    }
    let stats: i64 = sqlx::query_scalar("SELECT count(*) FROM lexeme_stats_es")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(stats > 1000, "{stats} Spanish lexemes");

    let again = catalog::ingest(&pool, &demo, false, MODEL, None, Some(translator))
        .await
        .unwrap();
    assert_eq!(
        (again.spanish.translated, again.spanish.unchanged),
        (0, demo.len())
    );
    // A process without Apertium (a server started elsewhere) keeps the translations.
    let without = catalog::spanish::index(&pool, None).await.unwrap();
    assert_eq!((without.untranslated, without.unchanged), (0, demo.len()));
    assert!(spanish_index_holds(&pool, MUSHISHI, "viajaba").await);

    // The typed words of a Spanish query are searched there: "brumoso" finds Mushishi through
    // its translation of "misty" (no English document has the word, and the English reading here
    // matches nothing).
    let hits = search::lexical::search(
        &pool,
        "brumoso",
        Some("zzxq"),
        None,
        &app::search::Filters::default(),
        50,
    )
    .await
    .unwrap();
    let mushishi = hits
        .iter()
        .find(|h| h.anime_id == MUSHISHI)
        .expect("Mushishi is found");
    assert_eq!(mushishi.matched_words, ["brumoso"]);
}

/// Without Apertium the index is built from the English text (typed Spanish still finds titles
/// as written), and marked so that an ingest with Apertium translates it later.
#[sqlx::test(migrations = "../migrations")]
async fn without_a_translator_the_english_text_is_indexed_until_one_is_there(pool: PgPool) {
    let demo = import::demo_catalog();
    let report = catalog::ingest(&pool, &demo, false, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!(
        (report.spanish.translated, report.spanish.untranslated),
        (0, demo.len())
    );
    assert!(spanish_index_holds(&pool, MUSHISHI, "mushishi").await);
    assert!(!spanish_index_holds(&pool, MUSHISHI, "viajaba").await);

    let later = catalog::spanish::index(&pool, Some(crate::common::document_translator()))
        .await
        .unwrap();
    assert_eq!((later.translated, later.unchanged), (demo.len(), 0));
    assert!(spanish_index_holds(&pool, MUSHISHI, "viajaba").await);
}

/// An Apertium that fails (here: a data directory whose analyser is an empty file) leaves the
/// index built from the English text, says why, and is retried by the next ingest.
#[sqlx::test(migrations = "../migrations")]
async fn a_failing_translator_falls_back_to_the_english_text(pool: PgPool) {
    let broken = tempfile::tempdir().unwrap();
    std::fs::write(broken.path().join("eng-spa.automorf.bin"), b"").unwrap();
    let translator = catalog::DocumentTranslator::new(broken.path()).expect("the file is there");
    let demo = import::demo_catalog();
    let report = catalog::ingest(&pool, &demo, false, MODEL, None, Some(&translator))
        .await
        .unwrap();
    assert_eq!(
        (report.spanish.translated, report.spanish.untranslated),
        (0, demo.len())
    );
    assert!(
        report.spanish.translator_error.is_some(),
        "{:?}",
        report.spanish
    );
    assert!(spanish_index_holds(&pool, MUSHISHI, "mushishi").await);

    let retried = catalog::spanish::index(&pool, Some(crate::common::document_translator()))
        .await
        .unwrap();
    assert_eq!(retried.translated, demo.len());
}

/// An ingested anime's own popularity and its estimate.
async fn popularity_row(pool: &PgPool, id: i32) -> (Option<i32>, Option<i32>) {
    sqlx::query_as("SELECT popularity, estimated_popularity FROM anime WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The demo's anime that have no relations (so no franchise premise moves their documents).
fn standalone_demo_anime() -> impl Iterator<Item = Media> {
    import::demo_catalog()
        .into_iter()
        .filter(|m| m.relation_edges().is_empty())
}

/// Sets the facts the popularity estimate reads: start year, average score, members.
fn set_facts(media: &mut Media, year: Option<i32>, score: Option<i32>, popularity: Option<i32>) {
    media.season_year = year;
    media.start_date = None;
    media.average_score = score;
    media.popularity = popularity;
}

/// What search reads as an anime's popularity (the column `anime.members`).
async fn members_read(pool: &PgPool, id: i32) -> i32 {
    sqlx::query_scalar("SELECT members FROM anime WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A record without a popularity gets the median popularity of the anime scored within 2 points
/// of it, else the catalog's median; a record with one keeps its own; and the estimates follow
/// the catalog: an ingest that moves no median changes none, one that does changes them. (The
/// records are undated, so no year's counts can be partial: the next test.)
#[sqlx::test(migrations = "../migrations")]
async fn an_anime_without_a_popularity_gets_that_of_anime_scored_like_it(pool: PgPool) {
    let mut catalog: Vec<Media> = standalone_demo_anime().take(7).collect();
    assert_eq!(catalog.len(), 7, "seven standalone anime in the demo");
    // (score, popularity): a band of three around 71, two far above, and two without one.
    let rows = [
        (Some(70), Some(100)),
        (Some(71), Some(300)),
        (Some(72), Some(200)),
        (Some(90), Some(5000)),
        (Some(95), Some(6000)),
        (Some(71), None), // its band, 69-73: 100, 200, 300
        (None, None),     // no score: the catalog's 100, 200, 300, 5000, 6000
    ];
    for (media, (score, popularity)) in catalog.iter_mut().zip(rows) {
        set_facts(media, None, score, popularity);
    }
    let (banded, unscored) = (catalog[5].id, catalog[6].id);
    let report = catalog::ingest(&pool, &catalog, false, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!(report.documents.popularity_estimates_changed, 2);
    assert_eq!(popularity_row(&pool, banded).await, (None, Some(200)));
    assert_eq!(popularity_row(&pool, unscored).await, (None, Some(300)));
    assert_eq!(
        popularity_row(&pool, catalog[0].id).await,
        (Some(100), None)
    );

    let again = catalog::ingest(&pool, &catalog, false, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!(again.documents.popularity_estimates_changed, 0);

    // A little-known anime scored 71 joins: the band's median and the catalog's both fall.
    let mut newcomer = standalone_demo_anime()
        .nth(7)
        .expect("an eighth standalone anime");
    set_facts(&mut newcomer, None, Some(71), Some(50));
    catalog.push(newcomer);
    let moved = catalog::ingest(&pool, &catalog, false, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!(moved.documents.popularity_estimates_changed, 2);
    assert_eq!(popularity_row(&pool, banded).await, (None, Some(100)));
    assert_eq!(popularity_row(&pool, unscored).await, (None, Some(200)));
}

/// The counts of the trailing run of start years where most records have none are partial:
/// such a record gets the estimate too, from complete years' counts only, and search reads the
/// larger of the two. Once a later year is complete, the run ends before it and the count stands.
#[sqlx::test(migrations = "../migrations")]
async fn counts_from_the_latest_years_where_most_are_missing_are_read_as_at_least_the_estimate(
    pool: PgPool,
) {
    let mut catalog: Vec<Media> = standalone_demo_anime().take(8).collect();
    assert_eq!(catalog.len(), 8, "eight standalone anime in the demo");
    // (year, score, popularity): 2000 and 2001 complete; 2002 has two counts of three, under
    // 90%, and is the latest year.
    let rows = [
        (2000, 70, Some(100)),
        (2000, 71, Some(300)),
        (2000, 72, Some(200)),
        (2001, 90, Some(5000)),
        (2001, 71, Some(400)),
        (2002, 71, Some(10)), // partial: its band over complete years is 100, 200, 300, 400
        (2002, 71, None),
        (2002, 90, Some(9000)), // partial, but above its estimate (5000): its own stands
    ];
    for (media, (year, score, popularity)) in catalog.iter_mut().zip(rows) {
        set_facts(media, Some(year), Some(score), popularity);
    }
    let (partial, missing, famous) = (catalog[5].id, catalog[6].id, catalog[7].id);
    let report = catalog::ingest(&pool, &catalog, false, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!(report.documents.popularity_estimates_changed, 3);
    assert_eq!(popularity_row(&pool, partial).await, (Some(10), Some(200)));
    assert_eq!(popularity_row(&pool, missing).await, (None, Some(200)));
    assert_eq!(
        popularity_row(&pool, famous).await,
        (Some(9000), Some(5000))
    );
    assert_eq!(members_read(&pool, partial).await, 200);
    assert_eq!(members_read(&pool, missing).await, 200);
    assert_eq!(members_read(&pool, famous).await, 9000);
    assert_eq!(
        popularity_row(&pool, catalog[4].id).await,
        (Some(400), None),
        "a complete year's count is not estimated"
    );

    // A complete 2003 joins: 2002 is no longer the latest, its counts stand, and its missing
    // record's band now holds them (10, 50, 100, 200, 300, 400).
    let mut newcomer = standalone_demo_anime()
        .nth(8)
        .expect("a ninth standalone anime");
    set_facts(&mut newcomer, Some(2003), Some(71), Some(50));
    catalog.push(newcomer);
    catalog::ingest(&pool, &catalog, false, MODEL, None, None)
        .await
        .unwrap();
    assert_eq!(popularity_row(&pool, partial).await, (Some(10), None));
    assert_eq!(members_read(&pool, partial).await, 10);
    assert_eq!(popularity_row(&pool, famous).await, (Some(9000), None));
    assert_eq!(popularity_row(&pool, missing).await, (None, Some(100)));
}
