//! The previous forward pass, through candle's tensors and its f32 gemm: kept as the baseline
//! `server bench embed` measures the native encoder against, and as a second implementation
//! its output is checked against. Not used to serve.

use std::path::Path;

use anyhow::Result;
use candle_core::{Device, Module, Tensor, quantized::QMatMul};
use e5::{E5Tokenizer, Kind, container::Container};

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
    eps: f32,
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        candle_nn::ops::layer_norm(x, &self.weight, &self.bias, self.eps)
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

pub struct CandleE5 {
    tokenizer: E5Tokenizer,
    word_rows: Vec<u8>,
    positions: Tensor,
    token_type: Tensor,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
}

impl CandleE5 {
    pub fn load(weights: &Path, tokenizer: &Path) -> Result<Self> {
        let file = Container::read(weights)?;
        let dims = file.dimensions;
        let (h, f) = (dims.hidden, dims.ffn);
        let device = Device::Cpu;
        let vector = |name: &str, shape: &[usize]| -> Result<Tensor> {
            let values = file.f32(name, shape.iter().product())?;
            Ok(Tensor::from_vec(values, shape, &device)?)
        };
        let linear = |prefix: &str, rows: usize, cols: usize| -> Result<Linear> {
            let values =
                e5::container::dequantize(file.q4(&format!("{prefix}.w"), rows, cols)?, rows, cols);
            Ok(Linear {
                weight: QMatMul::Tensor(Tensor::from_vec(values, (rows, cols), &device)?),
                bias: vector(&format!("{prefix}.b"), &[rows])?,
            })
        };
        let norm = |prefix: &str| -> Result<LayerNorm> {
            Ok(LayerNorm {
                weight: vector(&format!("{prefix}.w"), &[h])?,
                bias: vector(&format!("{prefix}.b"), &[h])?,
                eps: dims.layer_norm_eps,
            })
        };
        let layers = (0..dims.layers)
            .map(|l| {
                Ok(Layer {
                    query: linear(&format!("l{l}.q"), h, h)?,
                    key: linear(&format!("l{l}.k"), h, h)?,
                    value: linear(&format!("l{l}.v"), h, h)?,
                    attention_out: linear(&format!("l{l}.ao"), h, h)?,
                    attention_norm: norm(&format!("l{l}.aln"))?,
                    intermediate: linear(&format!("l{l}.fi"), f, h)?,
                    output: linear(&format!("l{l}.fo"), h, f)?,
                    output_norm: norm(&format!("l{l}.oln"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let types = file.elements("emb.type")? / h;
        Ok(Self {
            tokenizer: E5Tokenizer::load(tokenizer, dims.max_positions.min(512))?,
            word_rows: file.q4("emb.word", dims.vocab, h)?.to_vec(),
            positions: vector("emb.pos", &[dims.max_positions, h])?,
            token_type: vector("emb.type", &[types, h])?.get(0)?,
            embedding_norm: norm("emb.ln")?,
            layers,
            hidden: h,
            heads: dims.heads,
        })
    }

    pub fn embed(&self, text: &str, kind: Kind, max_tokens: usize) -> Result<Vec<f32>> {
        let ids = self.tokenizer.ids(text, kind, max_tokens)?;
        let hidden = self.forward(&ids)?;
        let pooled = hidden.mean(0)?;
        let norm = pooled.sqr()?.sum_all()?.sqrt()?;
        Ok(pooled.broadcast_div(&norm)?.to_vec1::<f32>()?)
    }

    fn forward(&self, ids: &[u32]) -> Result<Tensor> {
        let seq = ids.len();
        let mut words = Vec::with_capacity(seq * self.hidden);
        for &id in ids {
            e5::container::dequantize_row(&self.word_rows, id as usize, self.hidden, &mut words);
        }
        let words = Tensor::from_vec(words, (seq, self.hidden), &Device::Cpu)?;
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
