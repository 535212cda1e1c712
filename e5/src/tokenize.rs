//! Text to token ids the way multilingual-e5 was trained: a `query: ` or `passage: ` prefix,
//! XLM-R's Unigram pieces between `<s>` and `</s>`, cut to the length asked for.

use std::path::Path;

use crate::error::{Error, Result};
use tokenizers::Tokenizer;

/// Which prefix the model expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Query,
    Passage,
}

pub struct E5Tokenizer {
    inner: Tokenizer,
    max_tokens: usize,
    /// Whether texts get their `query: ` / `passage: ` prefix (e5 was trained with them; a
    /// sentence-transformers model such as MiniLM without).
    prefixed: bool,
}

impl E5Tokenizer {
    /// Loads `tokenizer.json`; no input is ever longer than `max_tokens` (the model's positions).
    pub fn load(path: &Path, max_tokens: usize) -> Result<Self> {
        let mut inner = Tokenizer::from_file(path)
            .map_err(|e| Error::Tokenizer(format!("loading {}: {e}", path.display())))?;
        inner
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| Error::Tokenizer(format!("truncation: {e}")))?;
        inner.with_padding(None);
        Ok(Self {
            inner,
            max_tokens,
            prefixed: true,
        })
    }

    /// The same, for a model trained without prefixes (the `kind` of [`ids`](Self::ids) is then
    /// ignored).
    pub fn load_unprefixed(path: &Path, max_tokens: usize) -> Result<Self> {
        Ok(Self {
            prefixed: false,
            ..Self::load(path, max_tokens)?
        })
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The ids of `text` with its prefix, at most `max_tokens` of them (the closing `</s>` kept).
    pub fn ids(&self, text: &str, kind: Kind, max_tokens: usize) -> Result<Vec<u32>> {
        let prefixed = match (self.prefixed, kind) {
            (false, _) => text.to_string(),
            (true, Kind::Query) => format!("query: {text}"),
            (true, Kind::Passage) => format!("passage: {text}"),
        };
        let encoding = self
            .inner
            .encode(prefixed, true)
            .map_err(|e| Error::Tokenizer(format!("tokenizing: {e}")))?;
        let mut ids = encoding.get_ids().to_vec();
        if ids.len() < 2 || ids.len() > self.max_tokens {
            return Err(Error::Tokenizer(format!("bad token count {}", ids.len())));
        }
        let max_tokens = max_tokens.clamp(2, self.max_tokens);
        if ids.len() > max_tokens {
            let end = ids[ids.len() - 1];
            ids.truncate(max_tokens - 1);
            ids.push(end);
        }
        Ok(ids)
    }
}
