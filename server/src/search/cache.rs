//! Search caches in plain PostgreSQL tables (migration `…_search_caches.sql`): query vectors,
//! and whole pages of results keyed by the normalised query, the filters and a fingerprint of
//! the pipeline. Rows expire; results also carry the catalog version they were computed at, and
//! any change to anime, documents or vectors bumps that version (triggers), so neither a
//! pipeline change nor a catalog change can serve a stale page.

use std::time::Duration;

use app::search::{Filters, SearchResults};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use unicode_normalization::UnicodeNormalization;

use super::{lexical, rerank};

/// Bump when search code changes what a query returns in a way the constants below miss.
const PIPELINE_REVISION: u32 = 4;
/// How long a query vector is kept (it only changes with the model).
pub const EMBEDDING_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
/// How long a page of results is kept (the catalog version guards freshness; this bounds size).
pub const RESULTS_TTL: Duration = Duration::from_secs(15 * 60);

/// The query as two searches for the same thing write it: Unicode NFKC, lower case, single
/// spaces, no control characters. NFKC and lower-casing do not commute ("İ" lower-cases to "i"
/// plus a combining dot that NFKC then reorders; "ᴬ" is lower case until NFKC makes it "A"),
/// so both are applied until nothing changes: a normalised query normalises to itself, and so
/// keeps its cache key (found by fuzzing).
pub fn normalise(query: &str) -> String {
    let mut text = normalise_once(query);
    for _ in 0..4 {
        let again = normalise_once(&text);
        if again == text {
            break;
        }
        text = again;
    }
    text
}

fn normalise_once(query: &str) -> String {
    query
        .nfkc()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Everything that shapes a results page besides the query and the catalog: the models, every
/// number ([`super::params::PARAMS`]), the SQL and word tables, and a revision number for code
/// changes those miss.
/// `synonyms` says whether English words also match their WordNet synonyms.
pub fn pipeline_fingerprint(
    embedding_model: &str,
    second_view: Option<&str>,
    reranker: &str,
    translator: &str,
    synonyms: bool,
    in_memory: &str,
) -> String {
    // The vector branch's SQL and weights too, and where it runs (the scan in memory is
    // exact, the walks approximate): a change there changes pages.
    let mut vector = format!(
        "{}|memory:{in_memory}",
        super::vector::fingerprint(embedding_model)
    );
    if let Some(view) = second_view {
        vector = format!("{vector}|second:{}", super::vector::fingerprint(view));
    }
    format!(
        "r{PIPELINE_REVISION}|{embedding_model}|{reranker}|{translator}|w{synonyms}|{}|{}",
        *FIXED_PART,
        hex::encode(Sha256::digest(vector.as_bytes())),
    )
}

/// The part of [`pipeline_fingerprint`] no engine setting changes (the numbers, the snippet
/// length, the rerank features, the lexical SQL): hashed once per process, not per search.
static FIXED_PART: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{}|s{}|{}|{}",
        super::params::PARAMS.fingerprint(),
        crate::catalog::pages::SNIPPET_CHARS,
        rerank::fingerprint(rerank::FEATURES),
        lexical::fingerprint(),
    )
});

/// The key of a page: `normalised` is the query as [`normalise`] leaves it
/// ([`super::Query::results_key`]).
pub fn results_key(pipeline: &str, normalised: &str, filters: &Filters) -> String {
    let mut hasher = Sha256::new();
    hasher.update(pipeline.as_bytes());
    hasher.update([0]);
    hasher.update(normalised.as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::to_vec(filters).expect("filters serialise"));
    hex::encode(hasher.finalize())
}

pub async fn catalog_version(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT version FROM catalog_version")
        .fetch_one(pool)
        .await
}

/// A cached page, if one exists for this key at the current catalog version and has not expired.
pub async fn get_results(pool: &PgPool, key: &str) -> Result<Option<SearchResults>, sqlx::Error> {
    let row: Option<sqlx::types::Json<SearchResults>> = sqlx::query_scalar(
        "SELECT results FROM search_result_cache
         WHERE cache_key = $1 AND expires_at > now()
           AND catalog_version = (SELECT version FROM catalog_version)",
    )
    .bind(key)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|json| json.0))
}

/// Stores a page computed at `version` (read before the search ran, so a catalog change during
/// the search leaves the row unusable rather than wrongly current).
pub async fn put_results(
    pool: &PgPool,
    key: &str,
    version: i64,
    results: &SearchResults,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO search_result_cache (cache_key, catalog_version, results, expires_at)
         VALUES ($1, $2, $3, now() + make_interval(secs => $4))
         ON CONFLICT (cache_key) DO UPDATE SET catalog_version = EXCLUDED.catalog_version,
             results = EXCLUDED.results, expires_at = EXCLUDED.expires_at",
    )
    .bind(key)
    .bind(version)
    .bind(sqlx::types::Json(results))
    .bind(RESULTS_TTL.as_secs_f64())
    .execute(pool)
    .await?;
    Ok(())
}

pub async fn get_embedding(
    pool: &PgPool,
    model: &str,
    query: &str,
) -> Result<Option<Vec<f32>>, sqlx::Error> {
    let stored: Option<pgvector::Vector> = sqlx::query_scalar(
        "SELECT embedding FROM query_embedding_cache
         WHERE model = $1 AND query = $2 AND expires_at > now()",
    )
    .bind(model)
    .bind(query)
    .fetch_optional(pool)
    .await?;
    Ok(stored.map(|vector| vector.to_vec()))
}

pub async fn put_embedding(
    pool: &PgPool,
    model: &str,
    query: &str,
    vector: &[f32],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO query_embedding_cache (model, query, embedding, expires_at)
         VALUES ($1, $2, $3::vector, now() + make_interval(secs => $4))
         ON CONFLICT (model, query) DO UPDATE SET embedding = EXCLUDED.embedding,
             expires_at = EXCLUDED.expires_at",
    )
    .bind(model)
    .bind(query)
    .bind(pgvector::Vector::from(vector.to_vec()))
    .bind(EMBEDDING_TTL.as_secs_f64())
    .execute(pool)
    .await?;
    Ok(())
}

/// Deletes expired rows of both caches; returns how many.
pub async fn sweep(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let a = sqlx::query("DELETE FROM search_result_cache WHERE expires_at <= now()")
        .execute(pool)
        .await?
        .rows_affected();
    let b = sqlx::query("DELETE FROM query_embedding_cache WHERE expires_at <= now()")
        .execute(pool)
        .await?
        .rows_affected();
    Ok(a + b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equivalent_queries_share_a_key_and_filters_do_not() {
        let filters = Filters::default();
        let key = |q: &str, f: &Filters| results_key("p", &normalise(q), f);
        assert_eq!(key("Mushi  Shi", &filters), key("mushi shi", &filters));
        // NFKC: full-width letters and a composed accent read the same.
        assert_eq!(key("ＭＵＳＨＩ", &filters), key("mushi", &filters));
        assert_eq!(key("cafe\u{301}", &filters), key("café", &filters));
        // Where NFKC and lower case disagree (the fuzzer's finding), one pass is not enough.
        for tricky in ["\u{130}\u{7fd}a", "\u{1d2c}bc"] {
            assert_eq!(
                normalise(&normalise(tricky)),
                normalise(tricky),
                "{tricky:?}"
            );
        }
        let movies = Filters {
            formats: vec!["MOVIE".into()],
            ..Filters::default()
        };
        assert_ne!(key("mushi", &filters), key("mushi", &movies));
        assert_ne!(
            results_key("p1", "mushi", &filters),
            results_key("p2", "mushi", &filters)
        );
    }
}
