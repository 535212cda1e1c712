//! Every tunable of the search pipeline in one value, [`PARAMS`]: the stages read their numbers
//! from it (each module names the ones it uses), and the results cache's key holds its hash
//! ([`SearchParams::fingerprint`]), so a changed number can never serve a page kept under the
//! old one. Why each value is what it is lives beside it here; the measurements are in
//! `docs/measurements.md`.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The numbers that shape a results page, by stage.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SearchParams {
    pub fusion: FusionParams,
    pub lexical: LexicalParams,
    pub vector: VectorParams,
    pub translate: TranslateParams,
    pub rerank: RerankParams,
    pub page: PageParams,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct FusionParams {
    /// Reciprocal rank fusion's constant, from Cormack et al. (2009), the usual choice.
    pub k: f64,
    /// Candidates each branch hands to fusion.
    pub branch_limit: usize,
    /// The rerank stage is skipped when the fused top result leads the second by at least this
    /// share of its score (see `server eval`: which cases it skips and what they would have
    /// gained).
    pub confident_margin: f64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct LexicalParams {
    /// Most words of a query that are looked up (a pasted synopsis is long).
    pub max_words: usize,
    /// A word held by more than this share of documents says little about any of them
    /// ("story", "young", "world"): it is left out, as in IDF weighting.
    pub max_word_share: f32,
    /// A word held by at most this many documents is never too common, whatever their share: on
    /// a small catalog the share cut drops nearly every word of a description (on the 257-anime
    /// demo 5% is 13 documents, and "tranquilo" is in 16 translations, "ayuda" in 14), and the
    /// one or two left decide the lexical branch alone, each covering "the whole query". It
    /// changes nothing from 400 documents on, where 5% is more than this.
    pub min_common_documents: usize,
    /// Of the remaining words, the rarest this many make the query (bounds the OR's cost).
    pub max_query_words: usize,
    /// Added to the score of documents that match the whole query, not just some words.
    pub all_words_bonus: f32,
    /// `ts_rank`'s weights of the document's fields D, C, B, A (title and names are A).
    pub field_weights: [f32; 4],
    /// Longer queries skip title matching: no title is long enough to reach the similarity
    /// threshold against them, and a long query makes the trigram index scan slow (54 ms for
    /// 150 characters).
    pub max_title_query_chars: usize,
    /// What a synonym's match counts for, against the word's own (score and coverage alike): a
    /// synonym is weaker evidence than the word the person chose.
    pub synonym_weight: f32,
    /// A title match outweighs word matches: typing a title means that title.
    pub title_weight: f32,
    /// WordNet senses per part of speech whose words count as synonyms (WordNet orders senses
    /// by frequency).
    pub synonym_senses: usize,
    /// Synonyms kept per query word, in WordNet's order (bounds the lexical branch's lookups).
    pub max_synonyms: usize,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct VectorParams {
    /// Anime the document walk takes, one pass of the index. The branch ranks by both cosines,
    /// so an anime whose document is 150th and whose best passage is outside the passage walk
    /// can still score in its top 5: taking the walk's first 50 only (the branch's limit, as
    /// before) lost *Mind Game* (document 150th by cosine, 5th in the branch now) for "un chico
    /// muere de un balazo, regresa a la vida y acaba atrapado dentro de una ballena" (measured:
    /// `docs/measurements.md`, "The whole document walk").
    pub document_pool: usize,
    /// Passages the passage walk takes (several may belong to one anime). 200 rather than 100:
    /// an anime whose document and best passage both match fairly, but neither well enough for
    /// the first 100, is still found (measured: `docs/measurements.md`, "A deeper passage
    /// walk").
    pub passage_pool: usize,
    /// Weight of the nearest passage's cosine against the document's: a passage is one sentence
    /// window, so its match is the more specific evidence. Measured on both evaluation sets
    /// (vector branch alone, recall@20): 1 gave 0.88 and 0.68, 1.5 0.90 and 0.69, 2 0.90 and
    /// 0.70, 3 0.88 and 0.70.
    pub passage_weight: f64,
    /// Weight of the popularity prior, log10(AniList members) / 6 (0 to about 1; members
    /// estimated for a record without them, `catalog::popularity`). Of two anime that fit a
    /// description about as well, people mostly mean the one they have heard of: e5's cosines
    /// crowd within a few hundredths, and without it obscure titles whose synopses happen to
    /// share the query's words fill the list. 0.05, 0.1 and 0.2 were measured; 0.2 lost on
    /// both sets.
    pub popularity_weight: f64,
    /// How far below the `limit`-th anime's score, by the int8 scan in memory, an anime is
    /// still scored exactly: the scan's cosines are within a few thousandths of the exact ones
    /// (the `nearest` crate's tests), and a score weighs the passage's twice, so a tie at the
    /// cut may be off by up to about a hundredth.
    pub rescore_margin: f64,
    /// At most this many times `limit` anime are scored exactly, however many are within the
    /// margin.
    pub rescore_most: usize,
}

impl VectorParams {
    /// pgvector's `hnsw.ef_search`: each walk is one pass of the index, as deep as the larger
    /// pool.
    pub const fn ef_search(&self) -> usize {
        if self.document_pool > self.passage_pool {
            self.document_pool
        } else {
            self.passage_pool
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct TranslateParams {
    /// A query is translated when at least this share of its words are Spanish words Apertium
    /// knows.
    pub min_spanish_share: f32,
    /// Unknown words of one query whose other spellings are tried (the rest stay as typed).
    pub max_restored_words: usize,
    /// Other spellings tried per unknown word, and in all: a made-up word has as many accent
    /// variants as letters, and a query of long made-up words once made a 68 KB call.
    pub max_spellings_per_word: usize,
    pub max_spellings: usize,
    /// A longer unknown word is not respelled (Spanish words this long are rare; made-up ones
    /// not).
    pub max_respelled_chars: usize,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct RerankParams {
    /// Candidates handed to the rerank stage (the fused top). 25 rather than 50: the top 25
    /// keeps the same members, so recall@25 can never drop, and cross-validated MRR was higher
    /// (0.733 against 0.704 with 50).
    pub candidates: usize,
    /// Each branch's own top this many also go to the rerank stage, wherever fusion put them.
    /// RRF sums ranks, so an anime only one branch found (the lexical 13th, the vector 19th)
    /// falls behind every anime both found at middling ranks (fused 26th–40th) and the reranker
    /// never saw it. Measured with 10, 15, 20 and 30: with 15 no column of either evaluation set
    /// is lower, cross-validated, and MRR is higher on both; 20 and 30 lost dev hit@5.
    pub branch_heads: usize,
    /// Synopsis characters in a candidate's summary for a language model.
    pub summary_chars: usize,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct PageParams {
    /// Results a search page lists.
    pub size: usize,
    /// How many of the page's leading results have their parts (a franchise's other entries)
    /// brought in.
    pub leading_works: usize,
    /// At most this many parts per leading work (the best known first), and in all: a long
    /// franchise's films must not fill the page.
    pub parts_per_work: usize,
    pub max_parts: usize,
    /// The parts go right after this many results; those keep their places.
    pub parts_after: usize,
}

/// The pipeline's numbers.
pub const PARAMS: SearchParams = SearchParams {
    fusion: FusionParams {
        k: 60.0,
        branch_limit: 50,
        confident_margin: 0.4,
    },
    lexical: LexicalParams {
        max_words: 64,
        max_word_share: 0.05,
        min_common_documents: 20,
        max_query_words: 12,
        all_words_bonus: 0.5,
        field_weights: [0.1, 0.6, 0.8, 1.0],
        max_title_query_chars: 80,
        synonym_weight: 0.5,
        title_weight: 1.0,
        synonym_senses: 3,
        max_synonyms: 8,
    },
    vector: VectorParams {
        document_pool: 200,
        passage_pool: 200,
        passage_weight: 2.0,
        popularity_weight: 0.1,
        rescore_margin: 0.03,
        rescore_most: 3,
    },
    translate: TranslateParams {
        min_spanish_share: 0.5,
        max_restored_words: 12,
        max_spellings_per_word: 12,
        max_spellings: 96,
        max_respelled_chars: 20,
    },
    rerank: RerankParams {
        candidates: 25,
        branch_heads: 15,
        summary_chars: 300,
    },
    page: PageParams {
        size: 20,
        leading_works: 3,
        parts_per_work: 2,
        max_parts: 4,
        parts_after: 10,
    },
};

impl SearchParams {
    /// A hash of every number here and of the query-cue tables (`cues::fingerprint`): part of
    /// the results cache's key.
    pub fn fingerprint(&self) -> String {
        let numbers = serde_json::to_string(self).expect("plain numbers serialise");
        let mut hasher = Sha256::new();
        hasher.update(numbers.as_bytes());
        hasher.update([0]);
        hasher.update(super::cues::fingerprint().as_bytes());
        hex::encode(hasher.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any number, and the cue tables, change the fingerprint.
    #[test]
    fn every_number_is_in_the_fingerprint() {
        let base = PARAMS.fingerprint();
        assert_eq!(base, PARAMS.fingerprint(), "stable");
        let mut changed = PARAMS;
        changed.page.parts_after += 1;
        assert_ne!(base, changed.fingerprint());
        let mut changed = PARAMS;
        changed.lexical.field_weights[0] = 0.2;
        assert_ne!(base, changed.fingerprint());
        assert_eq!(PARAMS.vector.ef_search(), 200);
    }
}
