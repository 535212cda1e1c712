//! The lexical branch: PostgreSQL full text over each document's weighted fields (titles and
//! synonyms A, genres and themes B, premise and synopsis C) plus trigram similarity against every
//! title, for typos, odd spacing and titles as people type them.
//!
//! Queries are descriptions more often than keywords, so a document matches when it holds any
//! of the query's words (an OR of per-word `websearch_to_tsquery`, which never raises a syntax
//! error), ranked by `ts_rank`, with a bonus when it also matches the whole query as
//! `websearch_to_tsquery` reads it (all words, quoted phrases, `-excluded`). Documents are
//! English; a word that is a Spanish or English stop word is dropped, so "el", "que" or "de" in
//! a Spanish query match nothing instead of everything.

use app::search::Filters;
use sqlx::PgPool;

use super::filters;

/// Most words of a query that take part (a pasted synopsis is long).
const MAX_WORDS: usize = 48;
/// Added to the rank of documents that match the whole query, not just some words.
const ALL_WORDS_BONUS: f32 = 0.1;
// A title matches when its trigram similarity to the whole query reaches pg_trgm's
// `similarity_threshold` (0.3 by default; the `%` operator reads it and the index serves it).
/// A title match outweighs word matches: typing a title means that title.
const TITLE_WEIGHT: f32 = 1.0;

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

/// Up to `limit` anime ids, best first, with their lexical score.
pub async fn search(
    pool: &PgPool,
    query: &str,
    filters: &Filters,
    limit: usize,
) -> Result<Vec<(i32, f32)>, sqlx::Error> {
    let sql = format!(
        "WITH words AS (
             SELECT websearch_to_tsquery('english', w) AS q FROM unnest($1::text[]) AS w
             WHERE numnode(websearch_to_tsquery('spanish', w)) > 0
         ),
         query AS (
             SELECT tsquery_or_all(q) AS any_word, websearch_to_tsquery('english', $2) AS whole
             FROM words WHERE numnode(q) > 0
         ),
         text_hits AS (
             SELECT d.anime_id,
                    ts_rank(d.lexical, query.any_word, 1)
                    + CASE WHEN d.lexical @@ query.whole THEN $4::real ELSE 0 END AS score
             FROM documents d JOIN anime a ON a.id = d.anime_id, query
             WHERE d.lexical @@ query.any_word {filters}
             ORDER BY score DESC LIMIT $5
         ),
         title_hits AS (
             SELECT t.anime_id, max(similarity(t.title, $3)) AS score
             FROM anime_titles t JOIN anime a ON a.id = t.anime_id
             WHERE t.title % $3 {filters}
             GROUP BY t.anime_id
         )
         SELECT anime_id,
                (coalesce(x.score, 0) + $6::real * coalesce(t.score, 0))::real AS score
         FROM text_hits x FULL JOIN title_hits t USING (anime_id)
         ORDER BY score DESC, anime_id LIMIT $5",
        filters = filters::sql(7)
    );
    let query = sqlx::query_as::<_, (i32, f32)>(&sql)
        .bind(words(query))
        .bind(query)
        .bind(title_text(query))
        .bind(ALL_WORDS_BONUS)
        .bind(limit as i64)
        .bind(TITLE_WEIGHT);
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
}
