//! Spanish queries read in English through Apertium (Debian's `apertium-eng-spa`, which the test
//! command installs), and search going on without it when it is missing or broken.

use std::sync::Arc;

use app::search::Filters;
use server::search::translate::{EVERYDAY_WORDS, Translator};
use sqlx::PgPool;

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
