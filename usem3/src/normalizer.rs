//! SentencePiece's `nmt_nfkc` normaliser over a precompiled charsmap, and its whitespace
//! handling (a dummy prefix, `▁` for spaces, extra spaces removed).
//!
//! The charsmap is a darts-clone double-array trie over UTF-8 byte strings followed by a blob of
//! NUL-terminated replacements; at each input position the longest key that matches is
//! replaced. This is a port of `_Normalizer` in the reference's `pure_tokenizer.py` (itself a
//! port of sentencepiece's `Normalizer::NormalizePrefix`), including its choices where the
//! input does not match: a position no key covers keeps one UTF-8 character.

/// The space symbol that replaces `' '` in normalised text.
const SPACE_SYMBOL: &str = "\u{2581}";

pub struct Normalizer {
    /// The darts-clone units (empty when the model has no charsmap: then only whitespace is
    /// handled).
    units: Vec<u32>,
    /// NUL-terminated replacement strings, addressed by the trie's leaf values.
    replacements: Vec<u8>,
}

/// Where a darts-clone unit's children start, relative to its own position.
fn offset(unit: u32) -> usize {
    ((unit >> 10) << ((unit & 0x200) >> 6)) as usize
}

impl Normalizer {
    /// Splits a precompiled charsmap (`u32` trie size, trie, replacements) into its parts.
    pub fn new(charsmap: Option<&[u8]>) -> Result<Self, String> {
        let Some(charsmap) = charsmap else {
            return Ok(Normalizer {
                units: Vec::new(),
                replacements: Vec::new(),
            });
        };
        let trie_size = charsmap
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or("charsmap shorter than its header")?;
        let trie = charsmap
            .get(4..4 + trie_size)
            .filter(|trie| trie.len() % 4 == 0 && !trie.is_empty())
            .ok_or("charsmap trie truncated or misaligned")?;
        Ok(Normalizer {
            units: trie
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            replacements: charsmap[4 + trie_size..].to_vec(),
        })
    }

    /// The replacement at `value`: bytes up to the next NUL.
    fn replacement(&self, value: usize) -> &[u8] {
        let rest = &self.replacements[value..];
        &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
    }

    /// What `text[pos..]` starts with once normalised, and how many bytes of `text` that
    /// consumed (at least one when `pos < text.len()`).
    fn normalize_prefix<'a>(&'a self, text: &'a [u8], pos: usize) -> (&'a [u8], usize) {
        let mut best_len = 0;
        let mut best_value = 0;
        if let Some(&root) = self.units.first() {
            let mut node = offset(root);
            for (i, &c) in text[pos..].iter().enumerate() {
                node ^= usize::from(c);
                // Out of range cannot happen in a well-formed trie; treat it as a mismatch.
                let Some(&unit) = self.units.get(node) else {
                    break;
                };
                if unit & 0x8000_00ff != u32::from(c) {
                    break;
                }
                node ^= offset(unit);
                if unit & 0x100 != 0 {
                    // Has a leaf: the bytes so far are a key.
                    let Some(&leaf) = self.units.get(node) else {
                        break;
                    };
                    best_len = i + 1;
                    best_value = (leaf & 0x7fff_ffff) as usize;
                }
            }
        }
        if best_len == 0 || best_value >= self.replacements.len() {
            // No rule: keep one UTF-8 character (one byte if it is malformed, which a `&str`
            // never is, but the reference handles it so this does too).
            let first = text[pos];
            let mut len = match first {
                0x00..=0x7f => 1,
                _ if first >> 5 == 0x6 => 2,
                _ if first >> 4 == 0xe => 3,
                _ if first >> 3 == 0x1e => 4,
                _ => 1,
            };
            if (1..len).any(|k| text.get(pos + k).is_none_or(|&b| b & 0xc0 != 0x80)) {
                len = 1;
            }
            return (&text[pos..pos + len], len);
        }
        (self.replacement(best_value), best_len)
    }

    /// The normalised form of `text`, with spaces as `▁` and a leading `▁`; empty when `text`
    /// is empty or only whitespace.
    pub fn normalize(&self, text: &str) -> String {
        let raw = text.as_bytes();
        let n = raw.len();
        let mut pos = 0;
        // Leading whitespace (anything that normalises to exactly one space) is dropped.
        while pos < n {
            let (piece, consumed) = self.normalize_prefix(raw, pos);
            if piece != b" " {
                break;
            }
            pos += consumed;
        }
        if pos >= n {
            return String::new();
        }

        let mut out: Vec<u8> = Vec::with_capacity(n + n / 2 + SPACE_SYMBOL.len());
        out.extend_from_slice(SPACE_SYMBOL.as_bytes());
        let mut previous_was_space = true;
        while pos < n {
            let (mut piece, consumed) = self.normalize_prefix(raw, pos);
            pos += consumed;
            // Collapse runs of spaces: drop the ones a piece starts with after a space.
            if previous_was_space {
                while let [b' ', rest @ ..] = piece {
                    piece = rest;
                }
            }
            if let Some(&last) = piece.last() {
                for &byte in piece {
                    if byte == b' ' {
                        out.extend_from_slice(SPACE_SYMBOL.as_bytes());
                    } else {
                        out.push(byte);
                    }
                }
                previous_was_space = last == b' ';
            }
        }
        while out.ends_with(SPACE_SYMBOL.as_bytes()) {
            out.truncate(out.len() - SPACE_SYMBOL.len());
        }
        // The replacements of a sound charsmap are UTF-8; if one were not, keep going with
        // U+FFFD rather than fail (the reference would raise instead).
        String::from_utf8(out)
            .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_charsmap_only_whitespace_changes() {
        let normalizer = Normalizer::new(None).unwrap();
        assert_eq!(normalizer.normalize("  hola   mundo  "), "▁hola▁mundo");
        assert_eq!(normalizer.normalize("   "), "");
        assert_eq!(normalizer.normalize(""), "");
        assert_eq!(normalizer.normalize("ñandú"), "▁ñandú");
    }
}
