//! The lexical branch: PostgreSQL full text over each document's weighted fields (titles and
//! synonyms A, genres and themes B, premise and synopsis C) plus trigram similarity against every
//! title, for typos, odd spacing and titles as people type them.
//!
//! Queries are descriptions more often than keywords, so a document matches when it holds any
//! of the query's informative words (per-word `websearch_to_tsquery`, which never raises a syntax
//! error; words in more than 5% of documents, and in more than 20, are dropped and the 12 rarest
//! kept, counted in `lexeme_stats`). A document scores the sum over the words it holds of IDF
//! (ln N/df) times `ts_rank` for that word (which counts repeats and weighs the field: A 1.0, B 0.8, C 0.6 —
//! flatter than PostgreSQL's default 1.0/0.4/0.2, because descriptions match synopses, not titles), plus a bonus when it
//! also matches the whole query as
//! `websearch_to_tsquery` reads it (all words, quoted phrases, `-excluded`). Documents are
//! English; a word that is a Spanish or English stop word is dropped, so "el", "que" or "de" in
//! a Spanish query match nothing instead of everything. A Spanish query's words as typed are
//! searched in each document's Spanish word index instead ([`WordIndex::Spanish`], built from
//! its translation by `catalog::spanish`), with the 'spanish' configuration and its own
//! document frequencies; its English translation is searched in the English index.
//!
//! An English word also matches its WordNet synonyms ([`super::thesaurus`]) at
//! [`SYNONYM_WEIGHT`] of its score and coverage; a word too common to keep is dropped with its
//! synonyms, and one the catalog lacks is kept when a synonym bridges it ("tranquil": "serene").

use app::search::Filters;
use sha2::Digest;
use sqlx::PgPool;

use super::{filters, thesaurus::Thesaurus};

/// [`SearchParams`](super::params::SearchParams)`::lexical.max_words`.
const MAX_WORDS: usize = super::params::PARAMS.lexical.max_words;
/// [`SearchParams`](super::params::SearchParams)`::lexical.max_word_share`.
const MAX_WORD_SHARE: f32 = super::params::PARAMS.lexical.max_word_share;
/// [`SearchParams`](super::params::SearchParams)`::lexical.min_common_documents`.
const MIN_COMMON_DOCUMENTS: usize = super::params::PARAMS.lexical.min_common_documents;
/// [`SearchParams`](super::params::SearchParams)`::lexical.max_query_words`.
const MAX_QUERY_WORDS: usize = super::params::PARAMS.lexical.max_query_words;
/// [`SearchParams`](super::params::SearchParams)`::lexical.all_words_bonus`.
const ALL_WORDS_BONUS: f32 = super::params::PARAMS.lexical.all_words_bonus;
// A title matches when its trigram similarity to the whole query reaches pg_trgm's
// `similarity_threshold` (0.3 by default; the `%` operator reads it and the index serves it).
/// Words on PostgreSQL's Spanish stop list that are also English content words ("pirates who
/// sail the sea", "the Meiji era"): kept, though Spanish stop words are otherwise dropped.
const ENGLISH_WORDS_IN_SPANISH_STOPLIST: [&str; 9] = [
    "sea", "seas", "son", "sons", "era", "eras", "sin", "sins", "nada",
];
/// [`SearchParams`](super::params::SearchParams)`::lexical.max_title_query_chars`.
const MAX_TITLE_QUERY_CHARS: usize = super::params::PARAMS.lexical.max_title_query_chars;
/// [`SearchParams`](super::params::SearchParams)`::lexical.synonym_weight`.
const SYNONYM_WEIGHT: f32 = super::params::PARAMS.lexical.synonym_weight;
/// [`SearchParams`](super::params::SearchParams)`::lexical.title_weight`.
const TITLE_WEIGHT: f32 = super::params::PARAMS.lexical.title_weight;

/// Distinct lower-case words of `query` (letters and digits, any script).
pub fn words(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 1)
    {
        let word = word.to_lowercase();
        if !out.contains(&word) {
            out.push(word);
        }
        if out.len() == MAX_WORDS {
            break;
        }
    }
    out
}

/// The query as compared with titles: lower case, single spaces.
pub fn title_text(query: &str) -> String {
    query
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// One lexical match and the evidence behind it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct LexicalHit {
    pub anime_id: i32,
    /// What the branch ranks by: word score plus weighted title similarity.
    pub score: f32,
    /// `ts_rank` (and the whole-query bonus); 0 for a title-only match.
    pub text_score: f32,
    /// Best trigram similarity between the query and one of its titles; 0 when none matched.
    pub title_similarity: f32,
    /// Share of the query's (non stop) words the document holds.
    pub coverage: f32,
    /// The query's words the document holds (of those searched for), best scoring first; a word
    /// matched through a synonym is followed by it: "magician (sorcerer)".
    pub matched_words: Vec<String>,
    /// The title the query matched by trigram similarity, if one did.
    pub matched_title: Option<String>,
}

/// Which of a document's two word indexes a reading of the query searches: the English one built
/// from the document as written, or the Spanish one built from its translation
/// ([`crate::catalog::spanish`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WordIndex {
    English,
    Spanish,
}

impl WordIndex {
    /// The index's column in `documents`, its text search configuration and its table of
    /// document frequencies.
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            WordIndex::English => ("lexical", "english", "lexeme_stats"),
            WordIndex::Spanish => ("lexical_es", "spanish", "lexeme_stats_es"),
        }
    }
}

/// The SQL of [`search`] (its text and the constants bound to it are part of the results
/// cache's pipeline fingerprint, see [`fingerprint`]).
fn search_sql(index: WordIndex) -> String {
    let (column, config, stats) = index.names();
    format!(
        "WITH total AS (
             SELECT count(*)::real AS n,
                    greatest($7::real * count(*), {MIN_COMMON_DOCUMENTS}) AS common
             FROM documents
         ),
         variants AS (
             SELECT u.w, u.v, u.weight, websearch_to_tsquery('{config}', u.v) AS q,
                    (SELECT max(s.documents) FROM unnest(to_tsvector('{config}', u.v)) AS t
                     JOIN {stats} s ON s.lexeme = t.lexeme) AS df
             FROM unnest($1::text[], $10::text[], $11::real[]) AS u(w, v, weight)
             WHERE numnode(websearch_to_tsquery('spanish', u.w)) > 0 OR u.w = ANY($9::text[])
         ),
         -- A word too common to say much (or an English stop word) is dropped with its
         -- synonyms; one the catalog lacks is kept when a synonym is there to bridge.
         own AS (
             SELECT w, df FROM variants
             WHERE v = w AND numnode(websearch_to_tsquery('{config}', w)) > 0
         ),
         informative AS (
             SELECT v.* FROM variants v JOIN own o USING (w), total
             WHERE numnode(v.q) > 0 AND v.df <= total.common
               AND coalesce(o.df, 0) <= total.common
         ),
         kept_words AS (
             SELECT w FROM informative GROUP BY w
             ORDER BY coalesce(min(df) FILTER (WHERE v = w), min(df)), w LIMIT $8
         ),
         kept AS (
             SELECT i.w, i.v, i.q, i.weight, ln(total.n / i.df) AS idf
             FROM informative i JOIN kept_words USING (w), total
         ),
         query AS (
             SELECT (SELECT count(*) FROM kept_words) AS words,
                    websearch_to_tsquery('{config}', $2) AS whole
         ),
         form_hits AS (
             SELECT d.anime_id, k.w, k.v, k.weight,
                    k.weight * k.idf * ts_rank('{field_weights}', d.{column}, k.q) AS score,
                    d.{column} @@ query.whole AS whole
             FROM kept k JOIN documents d ON d.{column} @@ k.q JOIN anime a ON a.id = d.anime_id,
                  query
             WHERE true {filters}
         ),
         -- Per anime and query word, its best form: the word itself, or a synonym at a discount
         -- (named beside the word, so the page can say which one matched).
         term_hits AS (
             SELECT anime_id, w, max(score) AS score, max(weight) AS weight, bool_or(whole) AS whole,
                    (array_agg(v ORDER BY weight DESC, score DESC))[1] AS form
             FROM form_hits GROUP BY anime_id, w
         ),
         text_hits AS (
             SELECT h.anime_id,
                    (sum(h.score) + CASE WHEN bool_or(h.whole) THEN $4::real ELSE 0 END)::real
                        AS score,
                    sum(h.weight)::real / greatest(query.words, 1) AS coverage,
                    array_agg(CASE WHEN h.form = h.w THEN h.w ELSE h.w || ' (' || h.form || ')' END
                              ORDER BY h.score DESC) AS words
             FROM term_hits h, query
             GROUP BY h.anime_id, query.words
             ORDER BY score DESC LIMIT 200
         ),
         title_hits AS (
             SELECT t.anime_id, max(similarity(t.title, $3)) AS score,
                    (array_agg(t.title ORDER BY similarity(t.title, $3) DESC))[1] AS title
             FROM anime_titles t JOIN anime a ON a.id = t.anime_id
             WHERE length($3) <= {MAX_TITLE_QUERY_CHARS} AND t.title % $3 {filters}
             GROUP BY t.anime_id
         )
         SELECT anime_id,
                (coalesce(x.score, 0) + $6::real * coalesce(t.score, 0))::real AS score,
                coalesce(x.score, 0)::real AS text_score,
                coalesce(t.score, 0)::real AS title_similarity,
                coalesce(x.coverage, 0)::real AS coverage,
                coalesce(x.words, '{{}}') AS matched_words,
                t.title AS matched_title
         FROM text_hits x FULL JOIN title_hits t USING (anime_id)
         ORDER BY score DESC, anime_id LIMIT $5",
        filters = filters::sql(12),
        field_weights = field_weights(),
    )
}

/// `ts_rank`'s weights as a PostgreSQL array literal, e.g. `{0.1, 0.6, 0.8, 1.0}`.
fn field_weights() -> String {
    let [d, c, b, a] = super::params::PARAMS.lexical.field_weights;
    format!("{{{d}, {c}, {b}, {a}}}")
}

/// Changes whenever the lexical branch's SQL or word lists do (its numbers are in
/// [`SearchParams`](super::params::SearchParams)).
pub fn fingerprint() -> String {
    let inputs = format!(
        "{}|{}|{:?}",
        search_sql(WordIndex::English),
        search_sql(WordIndex::Spanish),
        ENGLISH_WORDS_IN_SPANISH_STOPLIST
    );
    hex::encode(sha2::Sha256::digest(inputs.as_bytes()))
}

/// Up to `limit` matches, best first. With `english` (a Spanish query's translation) the query as
/// typed is searched in the Spanish word index and its translation in the English one, and each
/// anime keeps its better match: the typed words find the Spanish of the documents (and their
/// titles and synonyms as written), the English ones the documents' own words, and neither's stray
/// words can add up with the other's.
pub async fn search(
    pool: &PgPool,
    query: &str,
    english: Option<&str>,
    thesaurus: Option<&Thesaurus>,
    filters: &Filters,
    limit: usize,
) -> Result<Vec<LexicalHit>, sqlx::Error> {
    let Some(english) = english else {
        return search_text(
            pool,
            WordIndex::English,
            &WordForms::of(query, thesaurus),
            query,
            filters,
            limit,
        )
        .await;
    };
    // Synonyms are English: a Spanish text's words are looked up as typed only ("mar" is not
    // WordNet's "mar").
    let (typed_forms, english_forms) = (
        WordForms::of(query, None),
        WordForms::of(english, thesaurus),
    );
    let (typed, translated) = tokio::join!(
        search_text(
            pool,
            WordIndex::Spanish,
            &typed_forms,
            query,
            filters,
            limit
        ),
        search_text(
            pool,
            WordIndex::English,
            &english_forms,
            english,
            filters,
            limit
        )
    );
    Ok(better_of(typed?, translated?, limit))
}

/// Each anime once, with its higher-scoring hit, best first (ties by id).
pub fn better_of(a: Vec<LexicalHit>, b: Vec<LexicalHit>, limit: usize) -> Vec<LexicalHit> {
    let mut best: std::collections::HashMap<i32, LexicalHit> = std::collections::HashMap::new();
    for hit in a.into_iter().chain(b) {
        match best.get(&hit.anime_id) {
            Some(kept) if kept.score >= hit.score => {}
            _ => {
                best.insert(hit.anime_id, hit);
            }
        }
    }
    let mut hits: Vec<LexicalHit> = best.into_values().collect();
    hits.sort_by(|x, y| {
        y.score
            .total_cmp(&x.score)
            .then(x.anime_id.cmp(&y.anime_id))
    });
    hits.truncate(limit);
    hits
}

/// The forms each word of a query is looked up in, as three parallel columns (bound as arrays):
/// the word itself at full weight, then each of its synonyms at [`SYNONYM_WEIGHT`].
#[derive(Debug, Default, PartialEq)]
struct WordForms {
    words: Vec<String>,
    forms: Vec<String>,
    weights: Vec<f32>,
}

impl WordForms {
    fn of(query: &str, thesaurus: Option<&Thesaurus>) -> Self {
        let mut columns = Self::default();
        for word in words(query) {
            let synonyms = thesaurus.map(|t| t.synonyms(&word)).unwrap_or_default();
            for (form, weight) in std::iter::once((word.clone(), 1.0))
                .chain(synonyms.into_iter().map(|s| (s, SYNONYM_WEIGHT)))
            {
                columns.words.push(word.clone());
                columns.forms.push(form);
                columns.weights.push(weight);
            }
        }
        columns
    }
}

async fn search_text(
    pool: &PgPool,
    index: WordIndex,
    forms: &WordForms,
    query: &str,
    filters: &Filters,
    limit: usize,
) -> Result<Vec<LexicalHit>, sqlx::Error> {
    let sql = search_sql(index);
    // Not a named prepared statement: after five runs PostgreSQL may switch a named one to a
    // generic plan that ignores how rare the query's words are (measured: 0.8 s instead of
    // 10 ms); an unnamed statement is planned with its values every time.
    let query = sqlx::query_as::<_, LexicalHit>(&sql)
        .persistent(false)
        .bind(&forms.words)
        .bind(query)
        .bind(title_text(query))
        .bind(ALL_WORDS_BONUS)
        .bind(limit as i64)
        .bind(TITLE_WEIGHT)
        .bind(MAX_WORD_SHARE)
        .bind(MAX_QUERY_WORDS as i64)
        .bind(ENGLISH_WORDS_IN_SPANISH_STOPLIST.map(String::from).to_vec())
        .bind(&forms.forms)
        .bind(&forms.weights);
    filters::bind(query, filters).fetch_all(pool).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_distinct_lowercase_and_skip_single_letters() {
        assert_eq!(
            words("Algo TRANQUILO, de alguien que viaja; a solo (algo)"),
            ["algo", "tranquilo", "de", "alguien", "que", "viaja", "solo"]
        );
        assert_eq!(words("進撃の巨人 s2"), ["進撃の巨人", "s2"]);
        assert!(words("& | ! <-> :*").is_empty());
    }

    #[test]
    fn without_a_thesaurus_each_word_is_its_only_form() {
        let forms = WordForms::of("Calm sea, calm", None);
        assert_eq!(forms.words, ["calm", "sea"]);
        assert_eq!(forms.forms, forms.words);
        assert_eq!(forms.weights, [1.0, 1.0]);
    }

    #[test]
    fn each_anime_keeps_its_better_match_of_the_two_texts() {
        let hit = |anime_id, score: f32, word: &str| LexicalHit {
            anime_id,
            score,
            text_score: score,
            title_similarity: 0.0,
            coverage: 0.5,
            matched_words: vec![word.to_string()],
            matched_title: None,
        };
        let typed = vec![hit(1, 3.0, "guerreras"), hit(2, 1.0, "pelo")];
        let english = vec![
            hit(2, 2.0, "hair"),
            hit(3, 2.5, "warriors"),
            hit(4, 0.5, "girl"),
        ];
        let merged = better_of(typed, english, 3);
        let got: Vec<(i32, &str)> = merged
            .iter()
            .map(|h| (h.anime_id, h.matched_words[0].as_str()))
            .collect();
        assert_eq!(got, [(1, "guerreras"), (3, "warriors"), (2, "hair")]);
    }
}
