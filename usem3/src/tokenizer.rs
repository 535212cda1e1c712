//! Text to token ids: the SentencePiece normaliser, then unigram Viterbi segmentation.
//!
//! A port of `UsePureTokenizer` in the reference's `pure_tokenizer.py`, which reproduces
//! sentencepiece for this model. Its quirks are kept because the ids must be identical:
//! every piece is matchable, control pieces included (a literal `<s>` in a text becomes id 1),
//! an empty or blank text becomes `[<unk>]`, and a character no piece covers becomes `<unk>`
//! with the lowest piece score minus 10. Scores are summed in f64, as Python's floats are, so
//! that ties break the same way.

use crate::normalizer::Normalizer;
use crate::sp_model::SentencePieceModel;

pub const UNK_ID: u32 = 0;
pub const BOS_ID: u32 = 1;
pub const EOS_ID: u32 = 2;

pub struct Tokenizer {
    normalizer: Normalizer,
    trie: PieceTrie,
    scores: Vec<f32>,
    unk_score: f64,
}

impl Tokenizer {
    pub fn new(model: SentencePieceModel) -> Result<Self, String> {
        let normalizer = Normalizer::new(model.charsmap.as_deref())?;
        let unk_score = model
            .scores
            .iter()
            .map(|&s| f64::from(s))
            .fold(f64::INFINITY, f64::min)
            - 10.0;
        Ok(Tokenizer {
            normalizer,
            trie: PieceTrie::new(&model.pieces),
            scores: model.scores,
            unk_score,
        })
    }

    /// How many pieces the vocabulary has (ids are below this).
    pub fn vocab_size(&self) -> usize {
        self.scores.len()
    }

    /// `text`'s token ids between BOS and EOS.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let normalized = self.normalizer.normalize(text);
        let mut ids = Vec::with_capacity(normalized.len() / 3 + 3);
        ids.push(BOS_ID);
        if normalized.is_empty() {
            ids.push(UNK_ID);
        } else {
            self.viterbi(&normalized, &mut ids);
        }
        ids.push(EOS_ID);
        ids
    }

    /// Appends the best segmentation of `text` (non-empty) to `ids`.
    ///
    /// A left-to-right dynamic programme over byte positions (only character boundaries are
    /// ever reached): `best[j]` is the highest score of a segmentation of `text[..j]`, and
    /// `(start_of[j], piece_of[j])` its last piece. Candidates are visited by start, then by
    /// increasing length, and only a strictly better score replaces the current one, which
    /// reproduces sentencepiece's tie-breaking (see the reference's `_viterbi`).
    fn viterbi(&self, text: &str, ids: &mut Vec<u32>) {
        let bytes = text.as_bytes();
        let len = bytes.len();
        let mut best = vec![-1e38f64; len + 1];
        best[0] = 0.0;
        let mut start_of = vec![0usize; len + 1];
        let mut piece_of = vec![UNK_ID; len + 1];
        for (start, c) in text.char_indices() {
            let base = best[start];
            let one_char_end = start + c.len_utf8();
            let mut has_one_char_piece = false;
            let mut node = PieceTrie::ROOT;
            for (end, &byte) in (start + 1..).zip(&bytes[start..]) {
                let Some(child) = self.trie.child(node, byte) else {
                    break;
                };
                node = child;
                if let Some(id) = self.trie.piece(node) {
                    let score = base + f64::from(self.scores[id as usize]);
                    if score > best[end] {
                        best[end] = score;
                        start_of[end] = start;
                        piece_of[end] = id;
                    }
                    has_one_char_piece |= end == one_char_end;
                }
            }
            if !has_one_char_piece {
                let score = base + self.unk_score;
                if score > best[one_char_end] {
                    best[one_char_end] = score;
                    start_of[one_char_end] = start;
                    piece_of[one_char_end] = UNK_ID;
                }
            }
        }

        let first = ids.len();
        let mut end = len;
        while end > 0 {
            ids.push(piece_of[end]);
            end = start_of[end];
        }
        ids[first..].reverse();
    }
}

/// The pieces as a byte trie: nodes in breadth-first order, so a node's children are
/// consecutive and sorted by byte (found by binary search). About 330k nodes and 4 MB for
/// this vocabulary, a third of a hash map of every prefix.
struct PieceTrie {
    /// Per node: the id of its first child (children are `first_child..first_child + count`).
    first_child: Vec<u32>,
    child_count: Vec<u16>,
    /// Per node: the byte on the edge from its parent.
    label: Vec<u8>,
    /// Per node: the piece it spells, or `NO_PIECE`.
    piece: Vec<u32>,
}

impl PieceTrie {
    const ROOT: u32 = 0;
    const NO_PIECE: u32 = u32::MAX;

    /// Builds the trie. When two pieces are equal the later id wins, as in the reference's
    /// `prefixes` dict.
    fn new(pieces: &[String]) -> Self {
        let mut order: Vec<u32> = (0..pieces.len() as u32).collect();
        order.sort_by(|&a, &b| {
            pieces[a as usize]
                .as_bytes()
                .cmp(pieces[b as usize].as_bytes())
                .then(b.cmp(&a))
        });
        order.dedup_by(|later, earlier| pieces[*later as usize] == pieces[*earlier as usize]);
        let key = |i: usize| pieces[order[i] as usize].as_bytes();

        let mut trie = PieceTrie {
            first_child: vec![0],
            child_count: vec![0],
            label: vec![0],
            piece: vec![Self::NO_PIECE],
        };
        // Breadth-first: each queued node covers the sorted keys `lo..hi` sharing its
        // `depth`-byte prefix.
        let mut queue = std::collections::VecDeque::from([(0usize, 0usize, order.len(), 0usize)]);
        while let Some((node, mut lo, hi, depth)) = queue.pop_front() {
            // Sorted order puts the key that ends here (if any) first.
            if lo < hi && key(lo).len() == depth {
                trie.piece[node] = order[lo];
                lo += 1;
            }
            trie.first_child[node] = trie.label.len() as u32;
            while lo < hi {
                let byte = key(lo)[depth];
                let group_end = lo
                    + order[lo..hi]
                        .partition_point(|&i| pieces[i as usize].as_bytes()[depth] == byte);
                let child = trie.label.len();
                trie.first_child.push(0);
                trie.child_count.push(0);
                trie.label.push(byte);
                trie.piece.push(Self::NO_PIECE);
                trie.child_count[node] += 1;
                queue.push_back((child, lo, group_end, depth + 1));
                lo = group_end;
            }
        }
        trie
    }

    fn child(&self, node: u32, byte: u8) -> Option<u32> {
        let first = self.first_child[node as usize] as usize;
        let count = usize::from(self.child_count[node as usize]);
        let labels = &self.label[first..first + count];
        labels.binary_search(&byte).ok().map(|i| (first + i) as u32)
    }

    fn piece(&self, node: u32) -> Option<u32> {
        Some(self.piece[node as usize]).filter(|&p| p != Self::NO_PIECE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer(pieces: &[(&str, f32)]) -> Tokenizer {
        Tokenizer::new(SentencePieceModel {
            pieces: pieces.iter().map(|(p, _)| p.to_string()).collect(),
            scores: pieces.iter().map(|&(_, s)| s).collect(),
            charsmap: None,
        })
        .unwrap()
    }

    #[test]
    fn prefers_the_best_scoring_segmentation() {
        let t = tokenizer(&[
            ("<unk>", 0.0),
            ("<s>", 0.0),
            ("</s>", 0.0),
            ("▁", -1.0),
            ("▁ab", -2.0),
            ("a", -1.0),
            ("b", -1.0),
            ("c", -5.0),
            ("▁abc", -9.0),
        ]);
        assert_eq!(t.encode("ab"), vec![1, 4, 2]);
        assert_eq!(t.encode("abc"), vec![1, 4, 7, 2]);
        // 'z' has no piece: one <unk> per character.
        assert_eq!(t.encode("zz"), vec![1, 3, 0, 0, 2]);
        assert_eq!(t.encode(""), vec![1, 0, 2]);
        assert_eq!(t.encode("  "), vec![1, 0, 2]);
    }

    #[test]
    fn duplicate_pieces_resolve_to_the_later_id() {
        let t = tokenizer(&[
            ("<unk>", 0.0),
            ("<s>", 0.0),
            ("</s>", 0.0),
            ("▁x", -1.0),
            ("▁x", -1.0),
        ]);
        assert_eq!(t.encode("x"), vec![1, 4, 2]);
    }
}
