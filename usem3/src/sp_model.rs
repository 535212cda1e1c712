//! `sp.model`: the SentencePiece `ModelProto`, read with a minimal protobuf decoder.
//!
//! Only three things are needed: the pieces (field 1, repeated: `piece` string = 1,
//! `score` float = 2), and the normaliser's precompiled character map (field 3,
//! `normalizer_spec`, its field 2). Everything else (trainer spec, piece types, normaliser
//! flags) is ignored, exactly as the reference's `pure_tokenizer.py` ignores it: it treats
//! every piece, control pieces such as `<s>` included, as an ordinary scored piece.

use std::path::Path;

use crate::Error;

/// What the tokenizer needs from `sp.model`.
pub struct SentencePieceModel {
    /// Piece strings, indexed by token id.
    pub pieces: Vec<String>,
    /// Log-probability of each piece (0.0 when the piece has none).
    pub scores: Vec<f32>,
    /// The normaliser's precompiled charsmap, if the model has one.
    pub charsmap: Option<Vec<u8>>,
}

impl SentencePieceModel {
    pub fn load(path: &Path) -> Result<Self, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&bytes).map_err(|reason| Error::SentencePiece {
            path: path.to_owned(),
            reason,
        })
    }

    fn parse(bytes: &[u8]) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut scores = Vec::new();
        let mut charsmap = None;
        for field in Fields::new(bytes) {
            match field? {
                Field {
                    number: 1,
                    value: Value::Bytes(message),
                } => {
                    let mut piece = None;
                    let mut score = None;
                    for field in Fields::new(message) {
                        match field? {
                            Field {
                                number: 1,
                                value: Value::Bytes(text),
                            } if piece.is_none() => piece = Some(text),
                            Field {
                                number: 2,
                                value: Value::Fixed32(bits),
                            } if score.is_none() => score = Some(f32::from_bits(bits)),
                            _ => {}
                        }
                    }
                    // The reference skips a piece without a string (so later ids shift).
                    if let Some(text) = piece {
                        let text = std::str::from_utf8(text)
                            .map_err(|_| format!("piece {} is not UTF-8", pieces.len()))?;
                        pieces.push(text.to_owned());
                        scores.push(score.unwrap_or(0.0));
                    }
                }
                Field {
                    number: 3,
                    value: Value::Bytes(spec),
                } if charsmap.is_none() => {
                    // Only the first normalizer_spec counts, and only its first charsmap.
                    charsmap = Some(Vec::new());
                    for field in Fields::new(spec) {
                        if let Field {
                            number: 2,
                            value: Value::Bytes(map),
                        } = field?
                        {
                            charsmap = Some(map.to_vec());
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        if pieces.is_empty() {
            return Err("no pieces".into());
        }
        // An empty charsmap means "no normalisation rules", like a missing one.
        let charsmap = charsmap.filter(|map| !map.is_empty());
        Ok(SentencePieceModel {
            pieces,
            scores,
            charsmap,
        })
    }
}

/// A decoded protobuf field; varints and 64-bit values are not needed, only skipped.
struct Field<'a> {
    number: u64,
    value: Value<'a>,
}

enum Value<'a> {
    Bytes(&'a [u8]),
    Fixed32(u32),
    Other,
}

/// The fields of one protobuf message, in order.
struct Fields<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Fields<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Fields { bytes, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.bytes.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 64 bits".into())
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len())
            .ok_or("field runs past the end of its message")?;
        let slice = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(slice)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let field = (|| {
            let tag = self.varint()?;
            let value = match tag & 7 {
                0 => {
                    self.varint()?;
                    Value::Other
                }
                1 => {
                    self.take(8)?;
                    Value::Other
                }
                2 => {
                    let len = usize::try_from(self.varint()?).map_err(|_| "huge length")?;
                    Value::Bytes(self.take(len)?)
                }
                5 => {
                    let b = self.take(4)?;
                    Value::Fixed32(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                }
                wire => return Err(format!("unsupported wire type {wire}")),
            };
            Ok(Field {
                number: tag >> 3,
                value,
            })
        })();
        if field.is_err() {
            // Stop after the first error instead of decoding garbage.
            self.pos = self.bytes.len();
        }
        Some(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pieces_scores_and_charsmap() {
        // piece "<unk>" score 0 type 2; piece "▁a" score -1.5; trainer_spec with a field 31;
        // normalizer_spec with name "x" and charsmap [1, 2, 3].
        let mut model = Vec::new();
        let mut piece = |text: &str, score: f32| {
            let mut inner = vec![0x0a, text.len() as u8];
            inner.extend_from_slice(text.as_bytes());
            inner.push(0x15);
            inner.extend_from_slice(&score.to_le_bytes());
            inner.extend_from_slice(&[0x18, 0x01]);
            model.push(0x0a);
            model.push(inner.len() as u8);
            model.extend(inner);
        };
        piece("<unk>", 0.0);
        piece("▁a", -1.5);
        model.extend_from_slice(&[0x12, 0x04, 0xfa, 0x01, 0x01, b'z']);
        model.extend_from_slice(&[0x1a, 0x08, 0x0a, 0x01, b'x', 0x12, 0x03, 1, 2, 3]);

        let parsed = SentencePieceModel::parse(&model).unwrap();
        assert_eq!(parsed.pieces, vec!["<unk>", "▁a"]);
        assert_eq!(parsed.scores, vec![0.0, -1.5]);
        assert_eq!(parsed.charsmap, Some(vec![1, 2, 3]));
    }

    #[test]
    fn rejects_truncated_input() {
        assert!(SentencePieceModel::parse(&[0x0a, 0x10, 0x0a]).is_err());
        assert!(SentencePieceModel::parse(&[]).is_err());
    }
}
