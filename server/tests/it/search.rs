//! Search end to end on the demo catalog in a real PostgreSQL (one database per test) with the
//! real local model: both branches, fusion labels, filters, titles with typos, "similar to" and
//! its query plan, incremental embedding, and the OpenAI embedder against the fake API.

use std::{sync::Arc, time::Duration};

use app::search::{Branch, Filters, Ranking};
use fakes::openai::{ChatBehaviour, EMBEDDING_DIMENSION, EmbeddingBehaviour, FakeOpenAi};
use server::{
    catalog,
    search::{
        Budgets, CONFIDENT_MARGIN, SearchEngine, SearchError, cache,
        embedder::{EmbedError, Embedder, OpenAiEmbedder},
        fused_margin, fusion,
        lexical::{self, LexicalHit},
        parts,
        rerank::{self, LlmReranker},
        vector,
        vectors::embed_missing,
    },
};
use sqlx::PgPool;

use crate::common::{MOB_PSYCHO_III, MODEL, demo_engine, local_embedder, thesaurus};

const MUSHISHI: i32 = 457;
const SPIRITED_AWAY: i32 = 199;

fn ids(hits: &[vector::VectorHit]) -> Vec<i32> {
    hits.iter().map(|hit| hit.anime_id).collect()
}

fn similar_ids(hits: &[vector::SimilarHit]) -> Vec<i32> {
    hits.iter().map(|hit| hit.anime_id).collect()
}

fn lexical_ids(hits: &[LexicalHit]) -> Vec<i32> {
    hits.iter().map(|hit| hit.anime_id).collect()
}

/// The brief's own example on the demo catalog: Mushishi in the top 3, in Spanish and in English
/// (measured with `server eval` on the demo catalog: 1st and 3rd). It was 6th in Spanish while
/// the 5% cut dropped nearly every word of the query on 257 documents and the anime holding the
/// one or two left got the whole query's coverage (`lexical::MIN_COMMON_DOCUMENTS`).
#[sqlx::test(migrations = "../migrations")]
async fn the_briefs_example_puts_mushishi_in_the_top_3(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    for (query, within) in [
        (
            "algo tranquilo, de alguien que viaja solo y ayuda a la gente",
            3,
        ),
        (
            "something calm, about someone who travels alone and helps people",
            3,
        ),
    ] {
        let results = engine.search(query, &Filters::default()).await.unwrap();
        assert!(results.semantic);
        let top: Vec<(i32, &str)> = results
            .hits
            .iter()
            .take(within)
            .map(|h| (h.anime.id, h.anime.title.as_str()))
            .collect();
        assert!(
            top.iter().any(|&(id, _)| id == MUSHISHI),
            "{query:?}: top {within} {top:?}"
        );
    }
}

/// A record without a popularity is scored with its estimate ([`catalog::popularity`]), not as
/// the most obscure anime in the catalog: Mushishi's vector score for the brief's example with its
/// popularity removed, before and after the estimate is computed.
#[sqlx::test(migrations = "../migrations")]
async fn a_missing_popularity_is_estimated_not_read_as_zero(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    let query = "something calm, about someone who travels alone and helps people";
    let retrieval = engine.retrieve(query, &Filters::default()).await.unwrap();
    assert!(retrieval.vector.iter().any(|hit| hit.anime_id == MUSHISHI));
    let query_vector = retrieval.query_vector.expect("the query is embedded");
    // The vector branch's score for Mushishi, wherever it ranks (without its popularity it
    // falls out of the demo's top 50 altogether).
    let mushishi_score = || async {
        vector::evidence(&pool, MODEL, &query_vector, &[MUSHISHI])
            .await
            .unwrap()[0]
            .score
    };
    let with_its_own = mushishi_score().await;
    sqlx::query("UPDATE anime SET popularity = NULL WHERE id = $1")
        .bind(MUSHISHI)
        .execute(&pool)
        .await
        .unwrap();
    let without = mushishi_score().await;
    assert!(without < with_its_own, "{without} vs {with_its_own}");
    // What ingest runs after a load (the medians may move others' estimates too).
    let mut tx = pool.begin().await.unwrap();
    let changed = catalog::popularity::estimate(&mut tx).await.unwrap();
    tx.commit().await.unwrap();
    assert!(changed >= 1, "{changed}");
    let with_estimate = mushishi_score().await;
    assert!(with_estimate > without, "{with_estimate} vs {without}");
}

/// "magician" is in no demo document; WordNet's second sense of it holds "sorcerer" and
/// "wizard", which are. The synonym's match counts half (coverage 0.5 for a one-word query).
#[sqlx::test(migrations = "../migrations")]
async fn an_english_word_matches_documents_through_its_synonyms(pool: PgPool) {
    catalog::ingest(
        &pool,
        &catalog::import::demo_catalog(),
        false,
        MODEL,
        None,
        None,
    )
    .await
    .unwrap();
    let filters = Filters::default();
    let query = "a magician";
    let plain = lexical::search(&pool, query, None, None, &filters, 50)
        .await
        .unwrap();
    assert!(plain.is_empty(), "{plain:?}");
    let thesaurus = thesaurus();
    let synonyms = thesaurus.synonyms("magician");
    let hits = lexical::search(&pool, query, None, Some(&thesaurus), &filters, 50)
        .await
        .unwrap();
    assert!(!hits.is_empty());
    let holding: Vec<i32> = sqlx::query_scalar(
        "SELECT anime_id FROM documents
         WHERE lexical @@ to_tsquery('english', 'sorcerer | wizard') ORDER BY anime_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for hit in &hits {
        let [word] = hit.matched_words.as_slice() else {
            panic!("one matched word: {hit:?}")
        };
        // The synonym that matched is named beside the word ("magician (sorcerer)").
        assert!(
            synonyms.iter().any(|s| *word == format!("magician ({s})")),
            "{hit:?} {synonyms:?}"
        );
        assert_eq!(hit.coverage, 0.5, "{hit:?}");
    }
    let mut found = lexical_ids(&hits);
    found.sort();
    assert!(
        holding.iter().all(|id| found.contains(id)),
        "{holding:?} {found:?}"
    );
    // A Spanish query reaches the synonyms through its English reading.
    let spanish = lexical::search(
        &pool,
        "un mago",
        Some("a magician"),
        Some(&thesaurus),
        &filters,
        50,
    )
    .await
    .unwrap();
    let spanish = lexical_ids(&spanish);
    assert!(found.iter().all(|id| spanish.contains(id)), "{spanish:?}");
}

#[sqlx::test(migrations = "../migrations")]
async fn every_result_is_labelled_with_the_branches_that_found_it(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    let mut vector_only = 0;
    for query in [
        "a boy who can see ghosts joins a club at school",
        "piratas buscando un tesoro legendario",
        "mushi shi",
    ] {
        let retrieval = engine.retrieve(query, &Filters::default()).await.unwrap();
        let (lexical, vector) = (lexical_ids(&retrieval.lexical), ids(&retrieval.vector));
        assert!(!vector.is_empty());
        for hit in &retrieval.fused {
            let expected = match (
                lexical.contains(&hit.anime_id),
                vector.contains(&hit.anime_id),
            ) {
                (true, true) => Branch::Both,
                (true, false) => Branch::Lexical,
                (false, true) => Branch::Vector,
                (false, false) => panic!("{} came from no branch", hit.anime_id),
            };
            assert_eq!(hit.branch, expected, "{query}: anime {}", hit.anime_id);
            vector_only += usize::from(expected == Branch::Vector);
        }
    }
    assert!(
        vector_only > 0,
        "the queries should produce vector-only hits"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn titles_with_typos_spacing_or_in_spanish_are_found(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    for (query, expected) in [
        ("mushi shi", MUSHISHI),
        ("Mushishii", MUSHISHI),
        ("el viaje de chihiro", SPIRITED_AWAY),
        ("sen to chihiro no kamikakusi", SPIRITED_AWAY),
    ] {
        let retrieval = engine.retrieve(query, &Filters::default()).await.unwrap();
        let lexical = lexical_ids(&retrieval.lexical);
        assert_eq!(
            lexical.first(),
            Some(&expected),
            "{query}: lexical {lexical:?}"
        );
        let fused: Vec<i32> = retrieval.fused.iter().take(3).map(|f| f.anime_id).collect();
        assert!(fused.contains(&expected), "{query}: fused top 3 {fused:?}");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn operators_and_odd_input_never_raise_errors(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    for query in [
        "\"unclosed quote",
        "-",
        "a & | ! <-> :* (",
        "'; DROP TABLE anime; --",
        "or or or",
        "\\",
        "進撃の巨人",
        "😀 🎌",
    ] {
        let outcome = engine.search(query, &Filters::default()).await;
        assert!(outcome.is_ok(), "{query:?}: {outcome:?}");
    }
    assert!(matches!(
        engine.search("  \n ", &Filters::default()).await,
        Err(SearchError::EmptyQuery)
    ));
    assert!(matches!(
        engine.search(&"a".repeat(5_000), &Filters::default()).await,
        Err(SearchError::QueryTooLong(5_000))
    ));
}

#[sqlx::test(migrations = "../migrations")]
async fn filters_apply_inside_both_branches(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    let filters = Filters {
        formats: vec!["MOVIE".into()],
        year_from: Some(1990),
        year_to: Some(2010),
        genres: vec!["Supernatural".into()],
    };
    let retrieval = engine
        .retrieve("a girl has to work in a bathhouse for spirits", &filters)
        .await
        .unwrap();
    let mut all = lexical_ids(&retrieval.lexical);
    all.extend(ids(&retrieval.vector));
    assert!(
        !retrieval.vector.is_empty(),
        "the filters leave some movies"
    );
    type Row = (i32, Option<String>, Option<i32>, Vec<String>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, format, coalesce(season_year, start_year), genres FROM anime WHERE id = ANY($1)",
    )
    .bind(&all)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), {
        let mut unique = all.clone();
        unique.sort();
        unique.dedup();
        unique.len()
    });
    for (id, format, year, genres) in rows {
        assert_eq!(format.as_deref(), Some("MOVIE"), "anime {id}");
        assert!(
            year.is_some_and(|y| (1990..=2010).contains(&y)),
            "anime {id}: {year:?}"
        );
        assert!(
            genres.iter().any(|g| g == "Supernatural"),
            "anime {id}: {genres:?}"
        );
    }
    // Spirited Away (2001 supernatural film) passes the filters and is what the words describe.
    let fused: Vec<i32> = retrieval.fused.iter().take(5).map(|f| f.anime_id).collect();
    assert!(fused.contains(&SPIRITED_AWAY), "{fused:?}");
}

#[sqlx::test(migrations = "../migrations")]
async fn similar_to_leaves_out_the_source_and_optionally_its_franchise(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    let franchise: Vec<i32> = sqlx::query_scalar(
        "SELECT id FROM anime WHERE franchise_root_id =
             (SELECT franchise_root_id FROM anime WHERE id = $1)",
    )
    .bind(MUSHISHI)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(franchise.len() > 1, "Mushishi has a franchise in the demo");

    let with_franchise = vector::similar(&pool, MODEL, MUSHISHI, false, 10)
        .await
        .unwrap();
    assert_eq!(with_franchise.len(), 10);
    assert!(!similar_ids(&with_franchise).contains(&MUSHISHI));
    // Its own franchise is its closest match, collapsed to one entry.
    let own: Vec<i32> = similar_ids(&with_franchise)
        .into_iter()
        .filter(|id| franchise.contains(id))
        .collect();
    assert_eq!(own.len(), 1, "{own:?}");
    assert!(
        with_franchise.windows(2).all(|w| w[0].score >= w[1].score),
        "best first"
    );

    let without = vector::similar(&pool, MODEL, MUSHISHI, true, 10)
        .await
        .unwrap();
    assert_eq!(without.len(), 10);
    assert!(
        similar_ids(&without)
            .iter()
            .all(|id| !franchise.contains(id))
    );

    let cards = engine.similar(MUSHISHI, true, 5).await.unwrap();
    assert_eq!(
        cards.iter().map(|c| c.id).collect::<Vec<_>>(),
        similar_ids(&without)[..5]
    );
    assert!(
        vector::similar(&pool, MODEL, -1, true, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A film or special the catalog links to nothing is still its work's franchise when its title
/// extends the work's: "Mushishi Zoku Shou: Suzu no Shizuku", cut loose from the franchise here,
/// is among the candidates of "similar to Mushishi Zoku Shou" while the franchise is kept, and
/// is left out with it.
#[sqlx::test(migrations = "../migrations")]
async fn similar_to_leaves_out_parts_named_after_the_source(pool: PgPool) {
    const ZOKU_SHOU: i32 = 20595;
    const SUZU_NO_SHIZUKU: i32 = 21008;
    const EVERY_CANDIDATE: usize = 1000;
    demo_engine(&pool).await;
    let title: String = sqlx::query_scalar(
        "UPDATE anime SET franchise_root_id = NULL WHERE id = $1 RETURNING title_romaji",
    )
    .bind(SUZU_NO_SHIZUKU)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(title, "Mushishi Zoku Shou: Suzu no Shizuku");
    let kept = vector::similar(&pool, MODEL, ZOKU_SHOU, false, EVERY_CANDIDATE)
        .await
        .unwrap();
    assert!(similar_ids(&kept).contains(&SUZU_NO_SHIZUKU));
    let left_out = vector::similar(&pool, MODEL, ZOKU_SHOU, true, EVERY_CANDIDATE)
        .await
        .unwrap();
    assert!(!similar_ids(&left_out).contains(&SUZU_NO_SHIZUKU));
}

#[sqlx::test(migrations = "../migrations")]
async fn similar_to_walks_the_hnsw_index(pool: PgPool) {
    demo_engine(&pool).await;
    // With 257 rows a sequential scan is cheaper and the planner rightly takes it; at catalog
    // scale (here 3,000 more anime with random unit vectors) the index must win.
    sqlx::query(
        "INSERT INTO anime (id, raw, source_hash) SELECT g, '{}'::jsonb, 'synthetic'
         FROM generate_series(1000001, 1003000) g",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO embeddings (anime_id, model, content_hash, embedding)
         SELECT g, $1, 'synthetic', l2_normalize((SELECT array_agg(random() - 0.5)
                                                   FROM generate_series(1, 384) WHERE g > 0)::vector)
         FROM generate_series(1000001, 1003000) g",
    )
    .bind(MODEL)
    .execute(&pool)
    .await
    .unwrap();
    // ...and theme vectors of three themes each, out of 300.
    sqlx::query(
        "INSERT INTO documents (anime_id, body, model, content_hash, themes)
         SELECT g, '', $1, 'synthetic',
                format('{%s:0.6,%s:0.6,%s:0.5}/1048576', g % 100 + 1, g % 97 + 101, g % 89 + 201)
                    ::sparsevec
         FROM generate_series(1000001, 1003000) g",
    )
    .bind(MODEL)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE").execute(&pool).await.unwrap();
    let sql = vector::similar_sql(MODEL).unwrap();
    let plan: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN {sql}"))
        .bind(MUSHISHI)
        .bind(true)
        .bind(12i64)
        .bind(200i64)
        .fetch_all(&pool)
        .await
        .unwrap();
    let plan = plan.join("\n");
    assert!(
        plan.contains("Index Scan using embeddings_hnsw_multilingual_e5_small"),
        "{plan}"
    );
    assert!(
        plan.contains("Index Scan using documents_themes_hnsw"),
        "{plan}"
    );
    // The text search's vector branch, as `vector::search` builds it (no filter chosen), reaches
    // the same index. (With a narrow filter the planner may rightly prefer an exact scan of the
    // few rows left; `filters_apply_inside_both_branches` checks those results.)
    let query_vector: String = sqlx::query_scalar(
        "SELECT embedding::text FROM embeddings WHERE anime_id = $1 AND model = $2",
    )
    .bind(MUSHISHI)
    .bind(MODEL)
    .fetch_one(&pool)
    .await
    .unwrap();
    let plan: Vec<String> =
        sqlx::query_scalar(&format!("EXPLAIN {}", vector::search_sql(MODEL).unwrap()))
            .bind(query_vector)
            .bind(50i64)
            .bind(Vec::<String>::new())
            .bind(None::<i32>)
            .bind(None::<i32>)
            .bind(Vec::<String>::new())
            .fetch_all(&pool)
            .await
            .unwrap();
    let plan = plan.join("\n");
    assert!(
        plan.contains("Index Scan using embeddings_hnsw_multilingual_e5_small"),
        "{plan}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn only_documents_without_a_vector_for_their_text_are_embedded(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    let embedder = local_embedder();
    let again = embed_missing(&pool, embedder.as_ref(), None, false)
        .await
        .unwrap();
    assert_eq!((again.missing, again.embedded), (0, 0));
    assert_eq!((again.passages_missing, again.passages_embedded), (0, 0));
    let passages = || {
        sqlx::query_as::<_, (i64, i64)>(
            "SELECT (SELECT sum(cardinality(passages)) FROM documents),
                    (SELECT count(*) FROM passage_embeddings WHERE model = $1)",
        )
        .bind(MODEL)
        .fetch_one(&pool)
    };
    let (cut, embedded) = passages().await.unwrap();
    assert!(cut > 257, "{cut} passages for 257 documents");
    assert_eq!(embedded, cut, "every passage has its vector");

    // A changed synopsis gives one document a new hash: exactly that one is embedded again.
    sqlx::query(
        "UPDATE anime SET raw = jsonb_set(raw, '{description}', '\"A wholly new synopsis.\"')
         WHERE id = $1",
    )
    .bind(MUSHISHI)
    .execute(&pool)
    .await
    .unwrap();
    let hashes = || {
        sqlx::query_as::<_, (i32, String)>("SELECT anime_id, content_hash FROM documents")
            .fetch_all(&pool)
    };
    let before = hashes().await.unwrap();
    catalog::store::rebuild_documents(&pool, MODEL, None)
        .await
        .unwrap();
    let after = hashes().await.unwrap();
    // Its document changes, and so do its sequels' (the franchise premise comes from it).
    let changed_documents = after.iter().filter(|row| !before.contains(row)).count();
    assert!(changed_documents >= 1);
    let changed = embed_missing(&pool, embedder.as_ref(), None, false)
        .await
        .unwrap();
    assert_eq!(
        (changed.missing, changed.embedded, changed.from_cache),
        (changed_documents, changed_documents, 0)
    );
    // Only changed passages were embedded again (a sequel's own synopsis passages kept theirs),
    // and a shorter document lost the vectors of the passages it no longer has.
    let changed_ids: Vec<i32> = after
        .iter()
        .filter(|row| !before.contains(row))
        .map(|row| row.0)
        .collect();
    let their_passages: i64 = sqlx::query_scalar(
        "SELECT sum(cardinality(passages)) FROM documents WHERE anime_id = ANY($1)",
    )
    .bind(&changed_ids)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(changed.passages_embedded >= 1);
    assert!(
        changed.passages_embedded as i64 <= their_passages,
        "{} passages re-embedded; the changed documents have {their_passages}",
        changed.passages_embedded
    );
    let (cut, embedded) = passages().await.unwrap();
    assert_eq!(embedded, cut);
    assert_eq!(engine.embedder().embed_query("x").await.unwrap().len(), 384);
    let hashes_match: bool = sqlx::query_scalar(
        "SELECT e.content_hash = d.content_hash FROM embeddings e
         JOIN documents d USING (anime_id) WHERE anime_id = $1 AND e.model = $2",
    )
    .bind(MUSHISHI)
    .bind(MODEL)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(hashes_match);
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM embeddings")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 257, "one vector per anime and model");
}

/// A sentence from the middle of a synopsis, asked for on its own: the passage walk finds its
/// anime first, and so does the vector branch that serves.
#[sqlx::test(migrations = "../migrations")]
async fn a_sentence_deep_in_a_synopsis_is_found_through_its_passage(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    let (id, passage, title): (i32, String, String) = sqlx::query_as(
        "SELECT d.anime_id, d.passages[2], coalesce(a.title_romaji, a.title_english)
         FROM documents d JOIN anime a ON a.id = d.anime_id WHERE cardinality(d.passages) >= 3
         ORDER BY cardinality(d.passages) DESC, d.anime_id LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    // Passages lead with the title (which may itself hold ": ").
    let sentence = passage.strip_prefix(&format!("{title}: ")).unwrap();
    let query = engine.embedder().embed_query(sentence).await.unwrap();
    let nearest: Vec<i32> = sqlx::query_scalar(&vector::passage_search_sql(MODEL).unwrap())
        .bind(pgvector::Vector::from(query.clone()))
        .bind(20i64)
        .bind(Vec::<String>::new())
        .bind(None::<i32>)
        .bind(None::<i32>)
        .bind(Vec::<String>::new())
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        nearest.first(),
        Some(&id),
        "passage {sentence:?}: {nearest:?}"
    );
    let served = vector::search(&pool, MODEL, &query, &Filters::default(), 5)
        .await
        .unwrap();
    assert_eq!(ids(&served).first(), Some(&id), "{served:?}");

    // The page gives that passage, without its title, as the reason the anime matched.
    let page = engine.search(sentence, &Filters::default()).await.unwrap();
    let hit = page.hits.iter().find(|h| h.anime.id == id).unwrap();
    assert_eq!(hit.matched_passage.as_deref(), Some(sentence));
    assert!(
        page.hits
            .iter()
            .filter(|h| h.vector_rank.is_none())
            .all(|h| h.matched_passage.is_none()),
        "only results found by meaning carry a passage"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn openai_vectors_are_stored_beside_local_ones_without_mixing(pool: PgPool) {
    demo_engine(&pool).await;
    let fake = FakeOpenAi::start("sk-test").await.unwrap();
    let openai = OpenAiEmbedder::new("sk-test", Some(&fake.base_url()), Duration::from_secs(5));
    catalog::store::rebuild_documents(&pool, openai.model(), None)
        .await
        .unwrap();
    let report = embed_missing(&pool, &openai, None, false).await.unwrap();
    assert_eq!((report.missing, report.embedded), (257, 257));
    // Each document's passages too, once each.
    let passages: i64 = sqlx::query_scalar("SELECT sum(cardinality(passages)) FROM documents")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(report.passages_embedded as i64, passages);
    assert_eq!(fake.embedded_inputs() as i64, 257 + passages);
    let dimensions: Vec<(String, i32)> = sqlx::query_as(
        "SELECT model, vector_dims(embedding) FROM embeddings GROUP BY 1, 2 ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        dimensions,
        [
            (MODEL.to_string(), 384),
            (
                "text-embedding-3-small".to_string(),
                EMBEDDING_DIMENSION as i32
            )
        ]
    );
    let engine = SearchEngine::new(pool.clone(), Arc::new(openai));
    let retrieval = engine
        .retrieve("Ginko travels mountain villages mushi", &Filters::default())
        .await
        .unwrap();
    assert_eq!(retrieval.vector.first().map(|v| v.anime_id), Some(MUSHISHI));
}

#[tokio::test]
async fn the_openai_embedder_rejects_wrong_answers() {
    let fake = FakeOpenAi::start("sk-test").await.unwrap();
    let openai = OpenAiEmbedder::new(
        "sk-test",
        Some(&fake.base_url()),
        Duration::from_millis(500),
    );
    let texts = vec!["one".to_string(), "two".to_string()];
    let vectors = openai.embed_passages(&texts).await.unwrap();
    assert_eq!(vectors.len(), 2);
    assert!(vectors.iter().all(|v| v.len() == EMBEDDING_DIMENSION));

    fake.set_embedding_behaviour(EmbeddingBehaviour::WrongDimension(384));
    assert!(matches!(
        openai.embed_passages(&texts).await,
        Err(EmbedError::BadResponse(_))
    ));
    fake.set_embedding_behaviour(EmbeddingBehaviour::MissingVector);
    assert!(matches!(
        openai.embed_passages(&texts).await,
        Err(EmbedError::BadResponse(_))
    ));
    fake.set_embedding_behaviour(EmbeddingBehaviour::MalformedJson);
    assert!(matches!(
        openai.embed_query("q").await,
        Err(EmbedError::Api(_))
    ));
    fake.set_embedding_behaviour(EmbeddingBehaviour::Status(500));
    // async-openai retries 5xx with backoff; the embedder's timeout bounds that.
    let outcome = openai.embed_query("q").await;
    assert!(
        matches!(outcome, Err(EmbedError::Api(_) | EmbedError::Timeout(_))),
        "{outcome:?}"
    );
    fake.set_embedding_behaviour(EmbeddingBehaviour::Hang(Duration::from_secs(5)));
    assert!(matches!(
        openai.embed_query("q").await,
        Err(EmbedError::Timeout(_) | EmbedError::Api(_))
    ));

    let wrong_key = OpenAiEmbedder::new("sk-wrong", Some(&fake.base_url()), Duration::from_secs(5));
    fake.set_embedding_behaviour(EmbeddingBehaviour::Normal);
    assert!(matches!(
        wrong_key.embed_query("q").await,
        Err(EmbedError::Api(_))
    ));
}

#[sqlx::test(migrations = "../migrations")]
async fn without_a_query_vector_the_lexical_branch_still_answers(pool: PgPool) {
    demo_engine(&pool).await;
    let metrics = server::metrics::handle();
    let fake = FakeOpenAi::start("sk-test").await.unwrap();
    fake.set_embedding_behaviour(EmbeddingBehaviour::Status(503));
    let openai = OpenAiEmbedder::new("sk-test", Some(&fake.base_url()), Duration::from_secs(5));
    let engine = SearchEngine::new(pool.clone(), Arc::new(openai));
    let results = engine
        .search("mushi shi", &Filters::default())
        .await
        .unwrap();
    assert!(!results.semantic);
    // Counted for /metrics.
    assert!(
        metrics
            .render()
            .contains(r#"zenbu_search_fallbacks_total{kind="lexical_only"}"#)
    );
    assert_eq!(results.hits.first().map(|h| h.anime.id), Some(MUSHISHI));
    assert!(results.hits.iter().all(|h| h.branch == Branch::Lexical));
}

/// The ids of the fused order's first page (what a fallback serves).
fn fused_page(retrieval: &server::search::Retrieval) -> Vec<i32> {
    retrieval
        .fused
        .iter()
        .take(server::search::PAGE_SIZE)
        .map(|f| f.anime_id)
        .collect()
}

/// `engine` with an LLM reranker against the fake OpenAI server, behaving as told.
async fn with_llm(engine: SearchEngine, behaviour: ChatBehaviour) -> (SearchEngine, FakeOpenAi) {
    let fake = FakeOpenAi::start("sk-test").await.unwrap();
    fake.set_behaviour(behaviour);
    let llm = LlmReranker::new(
        "sk-test",
        Some(&fake.base_url()),
        "gpt-5.4-mini",
        Duration::from_secs(10),
    );
    let engine = engine.with_reranker(Arc::new(llm)).with_budgets(Budgets {
        embed: Duration::from_secs(10),
        rerank: Duration::from_millis(700),
    });
    (engine, fake)
}

/// Descriptions to try; tests pick one whose fused order is (or is not) confident. A confident
/// one needs a leader both branches rank first and no other anime in both lists, which on the
/// demo takes a word only one document holds ("Totoro", "Lain": margin 0.51).
const QUERIES: [&str; 10] = [
    "a quiet story about people in the countryside",
    "piratas buscando un tesoro legendario",
    "a boy who can see ghosts joins a club at school",
    "robots gigantes y pilotos adolescentes",
    "Spirited Away",
    "death note",
    "chicas en una banda de rock",
    "un detective que es un niño",
    "Totoro",
    "Lain",
];

async fn query_where(engine: &SearchEngine, confident: bool) -> &'static str {
    for query in QUERIES {
        let retrieval = engine.retrieve(query, &Filters::default()).await.unwrap();
        if (fused_margin(&retrieval.fused) >= CONFIDENT_MARGIN) == confident {
            return query;
        }
    }
    panic!("no query with confident = {confident}");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_llm_reranker_sends_a_schema_and_low_effort_and_its_order_is_served(pool: PgPool) {
    let (engine, fake) = with_llm(demo_engine(&pool).await, ChatBehaviour::Normal).await;
    let query = query_where(&engine, false).await;
    let retrieval = engine.retrieve(query, &Filters::default()).await.unwrap();
    let results = engine.search(query, &Filters::default()).await.unwrap();
    assert_eq!(results.ranking, Ranking::Reranked);
    assert_eq!(results.reranker, "openai:gpt-5.4-mini");
    let request = fake.requests().pop().expect("one chat request").body;
    assert_eq!(request["reasoning_effort"], "low");
    assert!(request.get("temperature").is_none());
    assert_eq!(request["response_format"]["type"], "json_schema");
    assert_eq!(request["response_format"]["json_schema"]["strict"], true);
    // The fake ranks by shared words; the page follows its order, not the fused one.
    let fused: Vec<i32> = fused_page(&retrieval);
    let served: Vec<i32> = results.hits.iter().map(|h| h.anime.id).collect();
    assert_ne!(served, fused);
    let mut sorted_served = served.clone();
    sorted_served.sort();
    assert_eq!(sorted_served.len(), 20);
    sorted_served.dedup();
    assert_eq!(sorted_served.len(), 20, "no result twice");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_failing_slow_or_garbled_reranker_falls_back_to_the_fused_order(pool: PgPool) {
    server::metrics::handle(); // so that the fallbacks below are counted
    let engine = demo_engine(&pool).await;
    let query = query_where(&engine, false).await;
    let retrieval = engine.retrieve(query, &Filters::default()).await.unwrap();
    let fused: Vec<i32> = fused_page(&retrieval);
    for behaviour in [
        ChatBehaviour::Status(500),
        ChatBehaviour::Hang(Duration::from_secs(5)),
        ChatBehaviour::MalformedJson,
        ChatBehaviour::NotJson,
    ] {
        let (engine, _fake) = with_llm(engine.clone(), behaviour.clone()).await;
        let began = std::time::Instant::now();
        let results = engine.search(query, &Filters::default()).await.unwrap();
        assert_eq!(results.ranking, Ranking::Fallback, "{behaviour:?}");
        assert!(
            server::metrics::handle()
                .render()
                .contains(r#"zenbu_search_fallbacks_total{kind="fused_order"}"#)
        );
        let served: Vec<i32> = results.hits.iter().map(|h| h.anime.id).collect();
        assert_eq!(served, fused, "{behaviour:?}");
        assert!(
            began.elapsed() < Duration::from_secs(4),
            "{behaviour:?}: {:?}",
            began.elapsed()
        );
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn wrong_ids_from_the_llm_are_dropped_and_missing_ones_appended(pool: PgPool) {
    let (engine, _fake) = with_llm(demo_engine(&pool).await, ChatBehaviour::WrongIds).await;
    let query = query_where(&engine, false).await;
    let retrieval = engine.retrieve(query, &Filters::default()).await.unwrap();
    let results = engine.search(query, &Filters::default()).await.unwrap();
    assert_eq!(results.ranking, Ranking::Reranked);
    let served: Vec<i32> = results.hits.iter().map(|h| h.anime.id).collect();
    // The model's (partial) order leads, then the rest in fused order: not the fused order.
    let fused: Vec<i32> = fused_page(&retrieval);
    assert_ne!(served, fused);
    let mut unique = served.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), served.len(), "an id was served twice");
    assert_eq!(served.len(), 20);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_slow_query_embedding_gives_word_results_within_the_budget(pool: PgPool) {
    demo_engine(&pool).await;
    let fake = FakeOpenAi::start("sk-test").await.unwrap();
    fake.set_embedding_behaviour(EmbeddingBehaviour::Hang(Duration::from_secs(10)));
    let openai = OpenAiEmbedder::new("sk-test", Some(&fake.base_url()), Duration::from_secs(30));
    let engine = SearchEngine::new(pool.clone(), Arc::new(openai)).with_budgets(Budgets {
        embed: Duration::from_millis(300),
        rerank: Duration::from_secs(1),
    });
    let began = std::time::Instant::now();
    let results = engine
        .search("mushi shi", &Filters::default())
        .await
        .unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
    assert!(!results.semantic);
    assert_eq!(results.hits.first().map(|h| h.anime.id), Some(MUSHISHI));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_confident_fused_order_skips_the_rerank(pool: PgPool) {
    let (engine, fake) = with_llm(demo_engine(&pool).await, ChatBehaviour::Normal).await;
    let query = query_where(&engine, true).await;
    let retrieval = engine.retrieve(query, &Filters::default()).await.unwrap();
    let results = engine.search(query, &Filters::default()).await.unwrap();
    assert_eq!(results.ranking, Ranking::Confident);
    assert!(fake.requests().is_empty(), "no model call when confident");
    let served: Vec<i32> = results.hits.iter().map(|h| h.anime.id).collect();
    let fused: Vec<i32> = fused_page(&retrieval);
    assert_eq!(served, fused);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_repeated_query_is_served_from_the_cache_until_the_catalog_changes(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    async fn cached(engine: &SearchEngine) -> bool {
        let results = engine.search("mushi shi", &Filters::default()).await;
        results.unwrap().cached
    }
    let first = engine
        .search("mushi shi", &Filters::default())
        .await
        .unwrap();
    assert!(!first.cached);
    // Case, spacing and Unicode width do not make a new query.
    let again = engine
        .search("  MUSHI   shi ", &Filters::default())
        .await
        .unwrap();
    assert!(again.cached);
    assert_eq!(again.query, "MUSHI shi");
    let ids =
        |r: &app::search::SearchResults| r.hits.iter().map(|h| h.anime.id).collect::<Vec<_>>();
    assert_eq!(ids(&again), ids(&first));
    // Other filters, another key.
    let movies = Filters {
        formats: vec!["MOVIE".into()],
        ..Filters::default()
    };
    assert!(!engine.search("mushi shi", &movies).await.unwrap().cached);

    // Any catalog change (here a document rewritten) retires every cached page.
    sqlx::query("UPDATE documents SET built_at = now() WHERE anime_id = $1")
        .bind(MUSHISHI)
        .execute(&pool)
        .await
        .unwrap();
    assert!(!cached(&engine).await);
    assert!(cached(&engine).await);

    // Expired rows are ignored, then swept.
    sqlx::query("UPDATE search_result_cache SET expires_at = now() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    assert!(!cached(&engine).await);
    sqlx::query("UPDATE search_result_cache SET expires_at = now() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    assert!(cache::sweep(&pool).await.unwrap() >= 1);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM search_result_cache")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn another_pipeline_or_a_degraded_page_never_reuses_the_cache(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    let query = query_where(&engine, false).await;
    assert!(
        !engine
            .search(query, &Filters::default())
            .await
            .unwrap()
            .cached
    );
    assert!(
        engine
            .search(query, &Filters::default())
            .await
            .unwrap()
            .cached
    );
    // A different reranker is a different pipeline.
    let (llm, _fake) = with_llm(engine.clone(), ChatBehaviour::Status(500)).await;
    let degraded = llm.search(query, &Filters::default()).await.unwrap();
    assert!(!degraded.cached);
    assert_eq!(degraded.ranking, Ranking::Fallback);
    // …and its degraded page was not kept.
    assert!(!llm.search(query, &Filters::default()).await.unwrap().cached);
}

#[sqlx::test(migrations = "../migrations")]
async fn query_vectors_are_cached_per_model(pool: PgPool) {
    demo_engine(&pool).await;
    let fake = FakeOpenAi::start("sk-test").await.unwrap();
    let openai = OpenAiEmbedder::new("sk-test", Some(&fake.base_url()), Duration::from_secs(5));
    let engine = SearchEngine::new(pool.clone(), Arc::new(openai));
    engine
        .retrieve("mushi shi", &Filters::default())
        .await
        .unwrap();
    assert_eq!(fake.embedded_inputs(), 1);
    let again = engine
        .retrieve("mushi shi", &Filters::default())
        .await
        .unwrap();
    assert_eq!(
        fake.embedded_inputs(),
        1,
        "the second embedding came from the cache"
    );
    assert_eq!(
        again.query_vector.map(|v| v.len()),
        Some(EMBEDDING_DIMENSION)
    );
    let models: Vec<String> = sqlx::query_scalar("SELECT model FROM query_embedding_cache")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(models, ["text-embedding-3-small"]);
}

/// The demo catalog loaded, and Mob Psycho 100 III with its franchise's first entry as a fused
/// list (the sequel first).
async fn mob_psycho_iii_and_its_root(pool: &PgPool) -> (i32, Vec<fusion::Fused>) {
    demo_engine(pool).await;
    let root: i32 = sqlx::query_scalar("SELECT franchise_root_id FROM anime WHERE id = $1")
        .bind(MOB_PSYCHO_III)
        .fetch_one(pool)
        .await
        .unwrap();
    (root, fusion::rrf(&[MOB_PSYCHO_III, root], &[], fusion::K))
}

/// A retrieval that found `fused` and nothing else (no query vector, no branch lists).
fn fused_only(fused: Vec<fusion::Fused>) -> server::search::Retrieval {
    server::search::Retrieval {
        fused,
        ..server::search::Retrieval::default()
    }
}

/// What a language-model reranker reads of a sequel starts from its franchise's premise (the
/// sequel's own synopsis assumes the story so far); the franchise's first entry has none.
#[sqlx::test(migrations = "../migrations")]
async fn a_sequels_rerank_summary_carries_its_franchise_premise(pool: PgPool) {
    let (root, fused) = mob_psycho_iii_and_its_root(&pool).await;
    let candidates = rerank::candidates(&pool, MODEL, "mob psycho", &fused_only(fused))
        .await
        .unwrap();
    let summary = |id: i32| {
        candidates
            .pool
            .iter()
            .find(|c| c.anime_id == id)
            .map(|c| c.summary.clone())
            .unwrap()
    };
    let premise: String =
        sqlx::query_scalar("SELECT premise FROM franchise_premises WHERE root_id = $1")
            .bind(root)
            .fetch_one(&pool)
            .await
            .unwrap();
    let start: String = premise.chars().take(60).collect();
    assert!(
        summary(MOB_PSYCHO_III).contains(&format!("Series premise: {start}")),
        "{}",
        summary(MOB_PSYCHO_III)
    );
    assert!(
        !summary(root).contains("Series premise"),
        "{}",
        summary(root)
    );
}

/// The era, format and genres a query names are read against each candidate's stored row:
/// "la temporada de 2022" matches the 2022 series by era and every TV series by format;
/// "una comedia de terror" names two genres, of which Mob Psycho has Comedy.
#[sqlx::test(migrations = "../migrations")]
async fn candidates_know_whether_they_have_the_era_format_and_genres_the_query_names(pool: PgPool) {
    let (root, fused) = mob_psycho_iii_and_its_root(&pool).await;
    let read = |query: &'static str| {
        let pool = pool.clone();
        let fused = fused.clone();
        async move {
            rerank::candidates(&pool, MODEL, query, &fused_only(fused))
                .await
                .unwrap()
                .pool
                .into_iter()
                .map(|c| (c.anime_id, (c.era_match, c.format_match, c.genre_match)))
                .collect::<std::collections::HashMap<_, _>>()
        }
    };
    let season = read("mob psycho, la temporada de 2022").await;
    assert_eq!(season[&MOB_PSYCHO_III], (true, true, 0.0));
    assert_eq!(
        season[&root],
        (false, true, 0.0),
        "the 2016 series: a TV series, not from 2022"
    );
    let film = read("la película de mob psycho de los 80").await;
    assert_eq!(film[&MOB_PSYCHO_III], (false, false, 0.0));
    let plain = read("mob psycho").await;
    assert_eq!(plain[&MOB_PSYCHO_III], (false, false, 0.0));
    let comedy = read("mob psycho, una comedia de terror").await;
    assert_eq!(comedy[&MOB_PSYCHO_III], (false, false, 0.5));
    let comedy = read("mob psycho, la comedia").await;
    assert_eq!(comedy[&MOB_PSYCHO_III], (false, false, 1.0));
}

/// The parts of the page's leading works ([`parts`]): placed after the first ten, at most two
/// per work and four in all, the best known first, within the filters, read from the demo
/// catalog's real titles (Made in Abyss's sequel and film, Cowboy Bebop's film, Trigun's).
#[sqlx::test(migrations = "../migrations")]
async fn the_leading_works_parts_follow_the_first_ten(pool: PgPool) {
    const ABYSS: i32 = 97986;
    const ABYSS_2: i32 = 114745;
    const ABYSS_MOVIE_3: i32 = 100643;
    const BEBOP: i32 = 1;
    const BEBOP_MOVIE: i32 = 5;
    const TRIGUN: i32 = 6;
    const TRIGUN_MOVIE: i32 = 4106;
    demo_engine(&pool).await;
    let order = [ABYSS, BEBOP, TRIGUN, SPIRITED_AWAY];
    let (placed, found) = parts::placed(&pool, &order, &Filters::default())
        .await
        .unwrap();
    let of = |part: i32| found.iter().find(|p| p.anime_id == part).map(|p| p.of);
    assert_eq!(found.len(), parts::MAX_PARTS, "{found:?}");
    assert_eq!(of(ABYSS_2), Some(ABYSS));
    assert_eq!(of(ABYSS_MOVIE_3), Some(ABYSS));
    assert_eq!(of(BEBOP_MOVIE), Some(BEBOP));
    assert_eq!(of(TRIGUN_MOVIE), Some(TRIGUN));
    // A short order: the parts follow it; nothing of it moves.
    assert_eq!(&placed[..4], &order);
    assert_eq!(placed.len(), 8);

    // Filters bind the parts as they bind both branches: only films.
    let films = Filters {
        formats: vec!["MOVIE".into()],
        ..Filters::default()
    };
    let (_, found) = parts::placed(&pool, &order, &films).await.unwrap();
    let ids: Vec<i32> = found.iter().map(|p| p.anime_id).collect();
    assert_eq!(ids.len(), 3, "{found:?}");
    assert!(
        !ids.contains(&ABYSS_2),
        "a TV sequel under a films-only filter"
    );

    // A part already among the first ten keeps its place and is not repeated.
    let order = [ABYSS, ABYSS_2, BEBOP, TRIGUN];
    let (placed, found) = parts::placed(&pool, &order, &Filters::default())
        .await
        .unwrap();
    assert!(found.iter().all(|p| p.anime_id != ABYSS_2));
    assert_eq!(placed.iter().filter(|&&id| id == ABYSS_2).count(), 1);
}

/// On the page, a part brought in says whose part it is and comes after the first ten: on the
/// demo catalog, Kino's description has *Odd Taxi* third, and its film follows the ten.
#[sqlx::test(migrations = "../migrations")]
async fn a_part_on_the_page_names_its_work(pool: PgPool) {
    const ODD_TAXI_MOVIE: i32 = 143080;
    let engine = demo_engine(&pool).await;
    let query = "una viajera que va en una moto que habla y nunca se queda mas de tres dias en cada pais, cada capitulo un pais distinto con costumbres raras";
    let results = engine.search(query, &Filters::default()).await.unwrap();
    let leaders: Vec<&str> = results
        .hits
        .iter()
        .take(3)
        .map(|h| h.anime.title.as_str())
        .collect();
    let with_part: Vec<(usize, &app::search::SearchHit)> = results
        .hits
        .iter()
        .enumerate()
        .filter(|(_, hit)| hit.part_of.is_some())
        .collect();
    assert!(
        with_part
            .iter()
            .any(|(_, hit)| hit.anime.id == ODD_TAXI_MOVIE),
        "leaders {leaders:?}, parts {:?}",
        with_part
            .iter()
            .map(|(i, h)| (i, h.anime.id))
            .collect::<Vec<_>>()
    );
    for (index, hit) in with_part {
        assert!(index >= parts::PARTS_AFTER, "{} at {index}", hit.anime.id);
        let work = hit.part_of.as_deref().unwrap();
        assert!(leaders.contains(&work), "{work:?} not among {leaders:?}");
        if hit.lexical_rank.is_none() && hit.vector_rank.is_none() {
            assert_eq!(hit.branch, Branch::SameWork);
        }
    }
}

/// The fine-tuned local model keeps its vectors beside the base model's in one database, under
/// its own name, and search through it reads its own HNSW indexes (migration 25): switching
/// `--embedding-model` never mixes the two.
#[sqlx::test(migrations = "../migrations")]
async fn the_trained_model_searches_its_own_vectors_beside_the_base_models(pool: PgPool) {
    let base = demo_engine(&pool).await;
    let trained_model = server::search::e5::load_model(
        &crate::common::cache_dir(),
        server::search::e5::TRAINED_MODEL_NAME,
        None,
    )
    .unwrap();
    let trained = Arc::new(server::search::embedder::LocalEmbedder::named(
        server::search::e5::TRAINED_MODEL_NAME,
        Arc::new(trained_model),
        2,
    ));
    assert_eq!(trained.model(), "e5-small-zenbu-2");
    // Documents are written for the model that ingests them (their hash names it), as
    // `server ingest` does with `--embedding-model`.
    catalog::ingest(
        &pool,
        &server::catalog::import::demo_catalog(),
        false,
        trained.model(),
        None,
        Some(crate::common::document_translator()),
    )
    .await
    .unwrap();
    let mut cache = server::search::vectors::VectorCache::open(
        &crate::common::cache_dir().join("vectors"),
        &trained.cache_version(),
        trained.dimension(),
    )
    .unwrap();
    embed_missing(&pool, trained.as_ref(), Some(&mut cache), false)
        .await
        .unwrap();
    let counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT model, count(*) FROM embeddings GROUP BY model ORDER BY model")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        counts,
        [("e5-small-zenbu-2".into(), 257), (MODEL.into(), 257)]
    );
    let engine = SearchEngine::new(pool.clone(), trained)
        .with_translator(Some(crate::common::translator()))
        .with_thesaurus(Some(thesaurus()));
    let query = "a girl who can see ghosts and helps them move on";
    let (from_trained, from_base) = (
        engine.retrieve(query, &Filters::default()).await.unwrap(),
        base.retrieve(query, &Filters::default()).await.unwrap(),
    );
    assert_eq!(from_trained.vector.len(), from_base.vector.len());
    // Each ranks its own vectors: the two models' cosines differ for the same hits.
    let score = |r: &server::search::Retrieval| r.vector.first().map(|h| h.score).unwrap();
    assert_ne!(score(&from_trained), score(&from_base));
}
