//! Spanish queries read in English through Apertium (Debian's `apertium-eng-spa`, which the test
//! command installs), and search going on without it when it is missing or broken.

use std::sync::Arc;

use app::search::Filters;
use server::search::translate::{EVERYDAY_WORDS, Translator};
use sqlx::PgPool;

use server::search::translate::DEBIAN_DATA_DIR;

use crate::common::{demo_engine, translator};

const BRIEF_ES: &str = "algo tranquilo, de alguien que viaja solo y ayuda a la gente";
const BRIEF_EN: &str = "something calm, about someone who travels alone and helps people";

/// The server starts the pipeline at start-up (`SearchEngine::warm_up_translator`), so that the
/// first Spanish query does not pay for loading the transducers inside its budget.
#[tokio::test]
async fn the_pipeline_warms_up_and_then_translates() {
    let translator = translator();
    assert!(translator.warm_up().await);
    let spanish = translator.translate(BRIEF_ES).await.unwrap();
    assert!(spanish.english.contains("travels alone"), "{spanish:?}");
    let missing = Translator::new(std::path::Path::new("/nonexistent"));
    assert!(missing.is_none(), "no data, no translator to warm up");
}

#[tokio::test]
async fn spanish_is_translated_and_english_or_romaji_is_not() {
    let translator = translator();
    let spanish = translator.translate(BRIEF_ES).await.unwrap();
    assert!(spanish.is_spanish(), "{spanish:?}");
    assert!(spanish.english.contains("travels alone"), "{spanish:?}");
    for typed in [BRIEF_EN, "Shingeki no Kyojin"] {
        let other = translator.translate(typed).await.unwrap();
        assert!(!other.is_spanish(), "{typed:?} read as Spanish: {other:?}");
    }
}

#[tokio::test]
async fn spanish_typed_without_accents_or_in_diminutives_is_read_plainly() {
    let translator = translator();
    let typed = "Despues de la guerra un huerfano termina en la carcel con Tenma";
    // What Apertium makes of these words as typed: it knows only the accented forms.
    for (word, english) in [
        ("huerfano", "orphan"),
        ("carcel", "prison"),
        ("pueblito", "village"),
    ] {
        let alone = translator.translate(word).await.unwrap();
        assert!(!alone.english.contains(english), "{alone:?}");
    }
    let got = translator.translate(typed).await.unwrap();
    assert!(got.is_spanish(), "{got:?}");
    for english in ["orphan", "prison", "Tenma"] {
        assert!(got.english.contains(english), "{english}: {got:?}");
    }
    // Typed with the accents, the same reading.
    let accented = translator
        .translate("Después de la guerra un huérfano termina en la cárcel con Tenma")
        .await
        .unwrap();
    assert_eq!(got.english, accented.english);
    // Diminutives read as the plain words, and a superlative as its adjective.
    let small = translator
        .translate("un viejito que vive en una casita de un pueblito, tristísimo")
        .await
        .unwrap();
    for english in ["old", "house", "village", "sad"] {
        assert!(small.english.contains(english), "{english}: {small:?}");
    }
    // An English query is left as it was: its unknown words are not Spanish missing accents.
    let english = translator.translate(BRIEF_EN).await.unwrap();
    assert!(!english.is_spanish(), "{english:?}");
}

/// Every entry of the table is a word Apertium does not know and a replacement it does (so the
/// table is dropped entry by entry when Debian's dictionary learns a word), and a query typed
/// with them reads as the standard words would.
#[tokio::test]
async fn everyday_words_apertium_lacks_are_read_as_standard_spanish() {
    let translator = translator();
    for (typed, standard) in EVERYDAY_WORDS {
        let alone = translator.translate(typed).await.unwrap();
        assert_eq!(alone.unknown, [typed], "{typed:?} is known now: {alone:?}");
        let plain = translator.translate(standard).await.unwrap();
        assert!(
            plain.unknown.is_empty(),
            "{standard:?} is unknown: {plain:?}"
        );
    }
    let typed = translator
        .translate("un chavo de la prepa y su profe ven una peli el finde, nomás eso")
        .await
        .unwrap();
    let standard = translator
        .translate("un chico de la escuela secundaria y su profesor ven una película el fin de semana, solamente eso")
        .await
        .unwrap();
    assert!(typed.unknown.is_empty(), "{typed:?}");
    assert_eq!(typed.english, standard.english);
    for english in ["boy", "school", "professor", "film", "weekend"] {
        assert!(typed.english.contains(english), "{english}: {typed:?}");
    }
}

#[tokio::test]
async fn the_stream_stays_in_step_over_reserved_characters_and_many_tasks() {
    let translator = translator();
    // Apertium's stream format reserves these; a query holding them must not desynchronise the
    // long-lived pipeline, so every later answer still belongs to its own query.
    let odd = translator
        .translate("el perro ^$/<>@*#[]{}\\ duerme")
        .await
        .unwrap();
    assert!(odd.english.contains("dog"), "{odd:?}");
    let words = [
        ("perro", "dog"),
        ("gato", "cat"),
        ("caballo", "horse"),
        ("pájaro", "bird"),
        ("ballena", "whale"),
        ("tortuga", "turtle"),
    ];
    let tasks: Vec<_> = (0..3)
        .flat_map(|_| words)
        .map(|(es, en)| {
            let translator = translator.clone();
            tokio::spawn(async move {
                let got = translator
                    .translate(&format!("un {es} muy grande"))
                    .await
                    .unwrap();
                assert!(got.english.contains(en), "{es}: {got:?}");
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// ~950 characters of made-up Spanish-looking words between real ones: each made-up word has as
/// many accent spellings as letters, and trying them all once made one ~68 KB call that failed
/// and restarted the pipeline. The respellings are bounded, so it translates like any query.
#[tokio::test]
async fn a_query_of_long_made_up_words_translates_without_breaking_the_pipeline() {
    let translator = translator();
    assert!(translator.warm_up().await);
    let before = translator.process_ids().await;
    let made_up = |i: usize| {
        let syllables = ["ma", "ne", "ri", "so", "ta", "lu", "ca", "ni", "po", "re"];
        (0..30)
            .map(|j| syllables[(i * 7 + j * 3) % syllables.len()])
            .collect::<String>()
    };
    let hostile = (0..13)
        .map(|i| format!("la casa de {}", made_up(i)))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        (900..=1000).contains(&hostile.chars().count()),
        "{}",
        hostile.len()
    );
    let started = std::time::Instant::now();
    let read = translator.translate(&hostile).await;
    assert!(read.is_some(), "translated within its budget");
    assert!(started.elapsed() < server::search::translate::BUDGET);
    let after = translator.translate("un perro muy grande").await.unwrap();
    assert!(after.english.contains("dog"), "{after:?}");
    assert_eq!(
        translator.process_ids().await,
        before,
        "no pipeline restarted"
    );
}

/// A translation that fails (here: a budget too short for any) takes every stage of its
/// pipeline down with it, not only the first, and the other pipeline keeps running.
#[tokio::test]
async fn a_failed_pipeline_is_killed_whole() {
    let translator = Translator::new(std::path::Path::new(DEBIAN_DATA_DIR))
        .unwrap()
        .with_budget(std::time::Duration::ZERO);
    assert!(
        translator.warm_up().await,
        "warming up has a budget of its own"
    );
    let before = translator.process_ids().await;
    assert_eq!(before.len(), 2 * 12, "two pipelines of twelve stages");
    assert_eq!(translator.translate("un perro").await, None);
    let after = translator.process_ids().await;
    let gone: Vec<u32> = before
        .iter()
        .copied()
        .filter(|id| !after.contains(id))
        .collect();
    assert_eq!(gone.len(), 12, "one pipeline stopped");
    let running = |id: &u32| {
        std::fs::read_to_string(format!("/proc/{id}/stat")).is_ok_and(|stat| {
            stat.rsplit(") ")
                .next()
                .is_some_and(|rest| !rest.starts_with('Z'))
        })
    };
    let mut waited = 0;
    while gone.iter().any(running) {
        assert!(
            waited < 40,
            "stages still running: {:?}",
            gone.iter().filter(|id| running(id)).collect::<Vec<_>>()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited += 1;
    }
    assert!(after.iter().all(running));
}

/// Many searches translating at once each wait for a pipeline within their own budget: a queue
/// of searches cannot hold one past it (it is searched as typed instead).
#[tokio::test]
async fn waiting_for_a_pipeline_counts_against_the_budget() {
    let budget = std::time::Duration::from_millis(30);
    let translator = Arc::new(
        Translator::new(std::path::Path::new(DEBIAN_DATA_DIR))
            .unwrap()
            .with_budget(budget),
    );
    assert!(translator.warm_up().await);
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let translator = translator.clone();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let read = translator
                    .translate(&format!(
                        "un chico numero {i} que viaja solo y ayuda a la gente"
                    ))
                    .await;
                (started.elapsed(), read.is_some())
            })
        })
        .collect();
    let mut slowest = std::time::Duration::ZERO;
    for task in tasks {
        slowest = slowest.max(task.await.unwrap().0);
    }
    assert!(
        slowest < budget + std::time::Duration::from_millis(100),
        "{slowest:?}"
    );
}

#[test]
fn without_apertium_data_there_is_no_translator() {
    let empty = tempfile::tempdir().unwrap();
    assert!(Translator::new(empty.path()).is_none());
}

#[sqlx::test(migrations = "../migrations")]
async fn a_broken_apertium_leaves_the_query_as_typed(pool: PgPool) {
    // Files by the right name that are not Apertium's: the pipeline starts and dies at once.
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("spa-eng.autobil.bin"), "not a transducer").unwrap();
    let translator = Translator::new(data.path()).expect("the file is there");
    assert_eq!(translator.translate("un chico").await, None);
    let engine = demo_engine(&pool)
        .await
        .with_translator(Some(Arc::new(translator)));
    let retrieval = engine
        .retrieve("un hombre que viaja entre bichos", &Filters::default())
        .await
        .unwrap();
    assert_eq!(retrieval.translation, None);
    assert!(retrieval.translation_failed);
    assert!(retrieval.query_vector.is_some());
    assert!(!retrieval.fused.is_empty());
    // A page made without its translation is degraded: served, not kept in the cache.
    for _ in 0..2 {
        let page = engine
            .search("un hombre que viaja entre bichos", &Filters::default())
            .await
            .unwrap();
        assert!(!page.hits.is_empty());
        assert!(!page.cached);
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn a_spanish_query_is_searched_in_english_too(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    let retrieval = engine
        .retrieve(BRIEF_ES, &Filters::default())
        .await
        .unwrap();
    assert!(!retrieval.translation_failed);
    let english = retrieval.translation.expect("translated");
    assert!(english.contains("travels"), "{english}");
    // Found through the English words: no Spanish word of the query is in the catalog's text.
    assert!(
        retrieval.lexical.iter().any(|hit| hit
            .matched_words
            .iter()
            .any(|w| english.contains(w.as_str()))),
        "{:?}",
        retrieval.lexical.first()
    );
    let english_query = engine
        .retrieve(BRIEF_EN, &Filters::default())
        .await
        .unwrap();
    assert_eq!(english_query.translation, None);
}
