//! The vector branch and "similar to": nearest neighbours by cosine distance over one model's
//! vectors, through that model's partial HNSW index.
//!
//! The index is on `embedding::vector(D)` for rows `WHERE model = '<name>'`, so every query here
//! repeats that cast and predicate literally (a bound parameter would not match the index
//! predicate). Filters are applied while scanning the index (pgvector's iterative scan, enabled
//! per transaction by [`INDEX_SETTINGS`]), so a narrow filter still yields up to `limit` rows.

use app::search::Filters;
use sqlx::PgPool;

use super::{
    e5,
    embedder::{OPENAI_DIMENSION, OPENAI_MODEL},
    filters,
    vectors::literal,
};

/// Search settings for one transaction: candidates the HNSW walk keeps (at least the largest
/// LIMIT asked for), and the iterative scan that keeps walking when filters reject rows.
/// `set_config(…, true)` is `SET LOCAL` as a plain query (a `raw_sql` future trips rustc's
/// higher-ranked `Send` check inside axum handlers).
const INDEX_SETTINGS: &str = "SELECT set_config('hnsw.ef_search', '100', true),
    set_config('hnsw.iterative_scan', 'relaxed_order', true)";

/// The models that have an HNSW index (migration `…_search.sql`), with their dimensions.
pub const INDEXED_MODELS: [(&str, usize); 2] = [
    (e5::MODEL_NAME, e5::DIMENSION),
    (OPENAI_MODEL, OPENAI_DIMENSION),
];

#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    #[error("no vector index for model {0:?}")]
    UnknownModel(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The SQL pieces that reach `model`'s index: its literal name and the cast to its dimension.
fn index_terms(model: &str) -> Result<(&'static str, usize), VectorError> {
    INDEXED_MODELS
        .iter()
        .find(|(name, _)| *name == model)
        .map(|&(name, dimension)| (name, dimension))
        .ok_or_else(|| VectorError::UnknownModel(model.to_string()))
}

/// Up to `limit` anime nearest to `vector`, nearest first, with their cosine distance.
pub async fn search(
    pool: &PgPool,
    model: &str,
    vector: &[f32],
    filters: &Filters,
    limit: usize,
) -> Result<Vec<(i32, f64)>, VectorError> {
    let (name, dimension) = index_terms(model)?;
    // The iterative scan may return rows slightly out of order: sort the materialised set.
    let sql = format!(
        "WITH nearest AS MATERIALIZED (
             SELECT e.anime_id, e.embedding::vector({dimension}) <=> $1::vector({dimension}) AS distance
             FROM embeddings e JOIN anime a ON a.id = e.anime_id
             WHERE e.model = '{name}' {filters}
             ORDER BY e.embedding::vector({dimension}) <=> $1::vector({dimension})
             LIMIT $2
         )
         SELECT anime_id, distance FROM nearest ORDER BY distance, anime_id",
        filters = filters::sql(3)
    );
    let mut tx = pool.begin().await?;
    sqlx::query(INDEX_SETTINGS).execute(&mut *tx).await?;
    let query = sqlx::query_as::<_, (i32, f64)>(&sql)
        .bind(literal(vector))
        .bind(limit as i64);
    let rows = filters::bind(query, filters).fetch_all(&mut *tx).await?;
    tx.commit().await?;
    Ok(rows)
}

/// The SQL of [`similar`]: the source's stored vector is read once in a MATERIALIZED CTE, so the
/// outer ORDER BY compares against a constant and the planner can walk the HNSW index.
pub fn similar_sql(model: &str) -> Result<String, VectorError> {
    let (name, dimension) = index_terms(model)?;
    Ok(format!(
        "WITH source AS MATERIALIZED (
             SELECT e.embedding::vector({dimension}) AS v, a.franchise_root_id AS franchise
             FROM embeddings e JOIN anime a ON a.id = e.anime_id
             WHERE e.anime_id = $1 AND e.model = '{name}'
         ),
         nearest AS MATERIALIZED (
             SELECT e.anime_id, e.embedding::vector({dimension}) <=> (SELECT v FROM source) AS distance
             FROM embeddings e JOIN anime a ON a.id = e.anime_id
             WHERE e.model = '{name}' AND e.anime_id <> $1 AND EXISTS (SELECT 1 FROM source)
               AND NOT ($2 AND a.franchise_root_id IS NOT DISTINCT FROM (SELECT franchise FROM source)
                        AND a.franchise_root_id IS NOT NULL)
             ORDER BY e.embedding::vector({dimension}) <=> (SELECT v FROM source)
             LIMIT $3
         )
         SELECT anime_id, distance FROM nearest ORDER BY distance, anime_id"
    ))
}

/// The `limit` anime nearest to anime `id` (itself excluded; with `exclude_franchise`, its
/// franchise too). Empty when `id` has no vector for `model`.
pub async fn similar(
    pool: &PgPool,
    model: &str,
    id: i32,
    exclude_franchise: bool,
    limit: usize,
) -> Result<Vec<(i32, f64)>, VectorError> {
    let mut tx = pool.begin().await?;
    sqlx::query(INDEX_SETTINGS).execute(&mut *tx).await?;
    let rows = sqlx::query_as::<_, (i32, f64)>(&similar_sql(model)?)
        .bind(id)
        .bind(exclude_franchise)
        .bind(limit as i64)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Cosine distance from `vector` to each of `ids` that has a vector (for re-scoring a candidate
/// list, as the seed-001 method does).
pub async fn distances(
    pool: &PgPool,
    model: &str,
    vector: &[f32],
    ids: &[i32],
) -> Result<Vec<(i32, f64)>, VectorError> {
    let (name, dimension) = index_terms(model)?;
    Ok(sqlx::query_as::<_, (i32, f64)>(&format!(
        "SELECT anime_id, embedding::vector({dimension}) <=> $1::vector({dimension})
         FROM embeddings WHERE model = '{name}' AND anime_id = ANY($2)"
    ))
    .bind(literal(vector))
    .bind(ids)
    .fetch_all(pool)
    .await?)
}
