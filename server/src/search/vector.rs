//! The vector branch and "similar to": nearest neighbours by cosine distance over one model's
//! vectors, through that model's partial HNSW index.
//!
//! The index is on `embedding::vector(D)` for rows `WHERE model = '<name>'`, so every query here
//! repeats that cast and predicate literally (a bound parameter would not match the index
//! predicate). Filters are applied while scanning the index (pgvector's iterative scan, enabled
//! per transaction by [`INDEX_SETTINGS`]), so a narrow filter still yields up to `limit` rows.

use std::collections::HashMap;

use app::search::Filters;
use sqlx::PgPool;

use super::{
    e5,
    embedder::{OPENAI_DIMENSION, OPENAI_MODEL},
    filters,
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

/// The SQL of an HNSW walk over `table` (`embeddings` or `passage_embeddings`): `$1` the query
/// vector, `$2` the rows to take, then the filters; each anime once with its nearest row's
/// distance, nearest first. The iterative scan may return rows slightly out of order, so the
/// materialised set is sorted again.
fn walk_sql(model: &str, table: &str) -> Result<String, VectorError> {
    let (name, dimension) = index_terms(model)?;
    Ok(format!(
        "WITH nearest AS MATERIALIZED (
             SELECT e.anime_id, e.embedding::vector({dimension}) <=> $1::vector({dimension}) AS distance
             FROM {table} e JOIN anime a ON a.id = e.anime_id
             WHERE e.model = '{name}' {filters}
             ORDER BY e.embedding::vector({dimension}) <=> $1::vector({dimension})
             LIMIT $2
         )
         SELECT anime_id, min(distance) AS distance FROM nearest GROUP BY anime_id
         ORDER BY distance, anime_id",
        filters = filters::sql(3)
    ))
}

/// The document walk of [`search`] (one row per anime).
pub fn search_sql(model: &str) -> Result<String, VectorError> {
    walk_sql(model, "embeddings")
}

/// The passage walk of [`search`] (several passages may belong to one anime).
pub fn passage_search_sql(model: &str) -> Result<String, VectorError> {
    walk_sql(model, "passage_embeddings")
}

/// Passages the passage walk takes (several may belong to one anime): pgvector's `ef_search`
/// of [`INDEX_SETTINGS`], so the walk is one pass of the index.
pub const PASSAGE_POOL: usize = 100;

/// Up to `limit` anime nearest to `vector`, best first, with their document's cosine distance.
///
/// Candidates come from two HNSW walks, over document vectors and over passage vectors, so an
/// anime whose one matching sentence is drowned in its document's single vector is still found.
/// Each candidate is scored exactly by its document cosine plus its best passage cosine
/// (measured on both evaluation sets: either alone ranks worse than the sum): what one walk did
/// not give is read for the ids that lack it, one grouped query each.
pub async fn search(
    pool: &PgPool,
    model: &str,
    vector: &[f32],
    filters: &Filters,
    limit: usize,
) -> Result<Vec<(i32, f64)>, VectorError> {
    let bound = pgvector::Vector::from(vector.to_vec());
    let mut tx = pool.begin().await?;
    sqlx::query(INDEX_SETTINGS).execute(&mut *tx).await?;
    let mut walks = Vec::with_capacity(2);
    for (sql, take) in [
        (search_sql(model)?, limit),
        (passage_search_sql(model)?, PASSAGE_POOL),
    ] {
        let query = sqlx::query_as::<_, (i32, f64)>(&sql)
            .bind(&bound)
            .bind(take as i64);
        walks.push(filters::bind(query, filters).fetch_all(&mut *tx).await?);
    }
    let (passages, documents) = (
        walks.pop().unwrap_or_default(),
        walks.pop().unwrap_or_default(),
    );
    tx.commit().await?;

    let mut document: HashMap<i32, f64> = documents.into_iter().collect();
    let mut passage: HashMap<i32, f64> = passages.into_iter().collect();
    let without_document: Vec<i32> = passage
        .keys()
        .copied()
        .filter(|id| !document.contains_key(id))
        .collect();
    let without_passage: Vec<i32> = document
        .keys()
        .copied()
        .filter(|id| !passage.contains_key(id))
        .collect();
    let documents = match without_document.is_empty() {
        true => Vec::new(),
        false => distances(pool, model, vector, &without_document).await?,
    };
    let passages = match without_passage.is_empty() {
        true => Vec::new(),
        false => passage_distances(pool, model, vector, &without_passage).await?,
    };
    document.extend(documents);
    passage.extend(passages);
    let evidence = document
        .into_iter()
        .map(|(id, distance)| (id, distance, passage.get(&id).copied()))
        .collect();
    Ok(rank_by_evidence(evidence, limit))
}

/// Each of `ids`' nearest passage distance to `vector` (ids without passages are left out).
pub async fn passage_distances(
    pool: &PgPool,
    model: &str,
    vector: &[f32],
    ids: &[i32],
) -> Result<Vec<(i32, f64)>, VectorError> {
    nearest_row_distances(pool, model, vector, ids, "passage_embeddings").await
}

/// For each of `ids`, the smallest cosine distance from `vector` to its rows of `table`
/// (`embeddings` has one per anime and model, `passage_embeddings` several).
async fn nearest_row_distances(
    pool: &PgPool,
    model: &str,
    vector: &[f32],
    ids: &[i32],
    table: &str,
) -> Result<Vec<(i32, f64)>, VectorError> {
    let (name, dimension) = index_terms(model)?;
    Ok(sqlx::query_as::<_, (i32, f64)>(&format!(
        "SELECT anime_id, min(embedding::vector({dimension}) <=> $1::vector({dimension}))
         FROM {table} WHERE model = '{name}' AND anime_id = ANY($2)
         GROUP BY anime_id"
    ))
    .bind(pgvector::Vector::from(vector.to_vec()))
    .bind(ids)
    .fetch_all(pool)
    .await?)
}

/// For each of `ids`, the text of its passage nearest `vector`, without the title that leads
/// it (the page shows it as the reason a result matched).
pub async fn nearest_passages(
    pool: &PgPool,
    model: &str,
    vector: &[f32],
    ids: &[i32],
) -> Result<HashMap<i32, String>, VectorError> {
    let (name, dimension) = index_terms(model)?;
    let rows: Vec<(i32, Option<String>, Option<String>)> = sqlx::query_as(&format!(
        "SELECT DISTINCT ON (p.anime_id) p.anime_id, d.passages[p.passage],
                coalesce(nullif(trim(a.title_romaji), ''), nullif(trim(a.title_english), ''),
                         nullif(trim(a.title_native), ''))
         FROM passage_embeddings p
         JOIN documents d ON d.anime_id = p.anime_id
         JOIN anime a ON a.id = p.anime_id
         WHERE p.model = '{name}' AND p.anime_id = ANY($2)
         ORDER BY p.anime_id, p.embedding::vector({dimension}) <=> $1::vector({dimension})"
    ))
    .bind(pgvector::Vector::from(vector.to_vec()))
    .bind(ids)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, passage, title)| {
            let passage = passage?;
            let lead = format!("{}: ", title.unwrap_or_default().trim());
            let text = passage.strip_prefix(&lead).unwrap_or(&passage);
            Some((id, text.to_string()))
        })
        .collect())
}

/// Orders candidates by document cosine + best passage cosine (an anime without passages counts
/// its document twice), ties by id; returns (id, document distance).
pub fn rank_by_evidence(evidence: Vec<(i32, f64, Option<f64>)>, limit: usize) -> Vec<(i32, f64)> {
    let mut scored: Vec<(i32, f64, f64)> = evidence
        .into_iter()
        .map(|(id, document, passage)| {
            let score = (1.0 - document) + (1.0 - passage.unwrap_or(document));
            (id, document, score)
        })
        .collect();
    scored.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    scored
        .into_iter()
        .take(limit)
        .map(|(id, document, _)| (id, document))
        .collect()
}

/// Candidates of "similar to" from the document vectors (nearest text).
const SIMILAR_TEXT_POOL: usize = 40;
/// Candidates of "similar to" from the theme vectors. Themes decide most of the score and the
/// priors below can lift a well-known anime over closer obscure ones, so this pool is wider: on
/// both evaluation sets, 200 ranked like scoring the whole catalog and 40 lost one case in eight.
const SIMILAR_THEME_POOL: usize = 200;
/// Weights of "similar to": theme cosine (genres and tags, rare ones weighing most), document
/// cosine, a popularity prior (log10 of AniList members over 6) and AniList's average score
/// (over 100). Themes carry the match: document vectors alone put Code Geass 3,087th from Death
/// Note. The priors are what people recommend: of two anime sharing a rare theme, fans name the
/// one they know and liked. Chosen by a grid on both sets' similar-to cases, leave-one-out
/// (`docs/measurements.md`).
const THEME_WEIGHT: f64 = 1.0;
const TEXT_WEIGHT: f64 = 0.5;
const POPULARITY_WEIGHT: f64 = 2.0;
const SCORE_WEIGHT: f64 = 0.5;

/// A candidate of "similar to" as [`similar_sql`] reads it.
#[derive(sqlx::FromRow)]
pub(crate) struct SimilarRow {
    pub anime_id: i32,
    text_cosine: f64,
    theme_cosine: f64,
    popularity: i32,
    average_score: i32,
    franchise_root_id: Option<i32>,
}

/// One "similar to" result and its evidence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimilarHit {
    pub anime_id: i32,
    /// What results are ordered by (higher is more similar).
    pub score: f64,
    pub text_cosine: f64,
    pub theme_cosine: f64,
}

/// The SQL of [`similar`]: the source's stored vectors are read once in a MATERIALIZED CTE, so
/// each candidate CTE orders by distance to a constant and the planner walks the HNSW indexes
/// (document vectors and theme vectors), `$3` and `$4` candidates.
pub fn similar_sql(model: &str) -> Result<String, VectorError> {
    let (name, dimension) = index_terms(model)?;
    Ok(format!(
        "WITH source AS MATERIALIZED (
             SELECT e.embedding::vector({dimension}) AS v, d.themes AS t,
                    a.franchise_root_id AS franchise
             FROM embeddings e JOIN anime a ON a.id = e.anime_id
             JOIN documents d ON d.anime_id = e.anime_id
             WHERE e.anime_id = $1 AND e.model = '{name}'
         ),
         by_text AS MATERIALIZED (
             SELECT e.anime_id, e.embedding::vector({dimension}) <=> (SELECT v FROM source) AS d
             FROM embeddings e JOIN anime a ON a.id = e.anime_id
             WHERE e.model = '{name}' AND e.anime_id <> $1 AND EXISTS (SELECT 1 FROM source)
               AND NOT ($2 AND a.franchise_root_id IS NOT DISTINCT FROM (SELECT franchise FROM source)
                        AND a.franchise_root_id IS NOT NULL)
             ORDER BY e.embedding::vector({dimension}) <=> (SELECT v FROM source)
             LIMIT $3
         ),
         by_theme AS MATERIALIZED (
             SELECT d.anime_id, d.themes <=> (SELECT t FROM source) AS d
             FROM documents d JOIN anime a ON a.id = d.anime_id
             WHERE d.anime_id <> $1 AND (SELECT t FROM source) IS NOT NULL
               AND NOT ($2 AND a.franchise_root_id IS NOT DISTINCT FROM (SELECT franchise FROM source)
                        AND a.franchise_root_id IS NOT NULL)
             ORDER BY d.themes <=> (SELECT t FROM source)
             LIMIT $4
         )
         -- Each candidate's other distance is read only when its other index did not return it;
         -- one that has none yet (a vector still being computed) counts as unrelated on that side.
         SELECT c.anime_id,
                1 - coalesce(x.d, (SELECT e.embedding::vector({dimension}) <=> (SELECT v FROM source)
                                   FROM embeddings e
                                   WHERE e.anime_id = c.anime_id AND e.model = '{name}'), 1) AS text_cosine,
                1 - coalesce(y.d, (SELECT d.themes <=> (SELECT t FROM source) FROM documents d
                                   WHERE d.anime_id = c.anime_id), 1) AS theme_cosine,
                coalesce(a.popularity, 0) AS popularity,
                coalesce(a.average_score, 0) AS average_score,
                a.franchise_root_id
         FROM (SELECT anime_id FROM by_text UNION SELECT anime_id FROM by_theme) c
         LEFT JOIN by_text x ON x.anime_id = c.anime_id
         LEFT JOIN by_theme y ON y.anime_id = c.anime_id
         JOIN anime a ON a.id = c.anime_id"
    ))
}

/// How [`similar_candidates`] finds its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// Through the HNSW indexes (served).
    Indexes,
    /// Every row compared (the baseline `server bench` measures the indexes against).
    Exact,
}

/// The unscored candidates of "similar to" anime `id`.
pub(crate) async fn similar_candidates(
    pool: &PgPool,
    model: &str,
    id: i32,
    exclude_franchise: bool,
    scan: Scan,
) -> Result<Vec<SimilarRow>, VectorError> {
    let settings = match scan {
        // The theme pool is larger than the default `ef_search`: the walk needs the settings.
        Scan::Indexes => INDEX_SETTINGS,
        Scan::Exact => {
            "SELECT set_config('enable_indexscan', 'off', true),
                    set_config('enable_bitmapscan', 'off', true)"
        }
    };
    let mut tx = pool.begin().await?;
    sqlx::query(settings).execute(&mut *tx).await?;
    let rows = sqlx::query_as::<_, SimilarRow>(&similar_sql(model)?)
        .bind(id)
        .bind(exclude_franchise)
        .bind(SIMILAR_TEXT_POOL as i64)
        .bind(SIMILAR_THEME_POOL as i64)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(rows)
}

/// The `limit` anime most similar to anime `id` (itself excluded; with `exclude_franchise`, its
/// franchise too), best first, at most one per other franchise. Empty when `id` has no vector
/// for `model`.
pub async fn similar(
    pool: &PgPool,
    model: &str,
    id: i32,
    exclude_franchise: bool,
    limit: usize,
) -> Result<Vec<SimilarHit>, VectorError> {
    let rows = similar_candidates(pool, model, id, exclude_franchise, Scan::Indexes).await?;
    let mut scored: Vec<(SimilarHit, Option<i32>)> = rows
        .into_iter()
        .map(
            |SimilarRow {
                 anime_id,
                 text_cosine,
                 theme_cosine,
                 popularity,
                 average_score,
                 franchise_root_id: franchise,
             }| {
                let known = (1.0 + popularity.max(0) as f64).log10() / 6.0;
                let liked = average_score.clamp(0, 100) as f64 / 100.0;
                let score = THEME_WEIGHT * theme_cosine
                    + TEXT_WEIGHT * text_cosine
                    + POPULARITY_WEIGHT * known
                    + SCORE_WEIGHT * liked;
                (
                    SimilarHit {
                        anime_id,
                        score,
                        text_cosine,
                        theme_cosine,
                    },
                    franchise,
                )
            },
        )
        .collect();
    scored.sort_by(|a, b| {
        b.0.score
            .total_cmp(&a.0.score)
            .then(a.0.anime_id.cmp(&b.0.anime_id))
    });
    // A list of five seasons of one other show is not five recommendations: keep the best entry
    // of each franchise.
    let mut seen = std::collections::HashSet::new();
    Ok(scored
        .into_iter()
        .filter(|(_, franchise)| franchise.is_none_or(|root| seen.insert(root)))
        .map(|(hit, _)| hit)
        .take(limit)
        .collect())
}

/// Cosine distance from `vector` to each of `ids` that has a vector (for re-scoring a candidate
/// list, as the seed-001 method does).
pub async fn distances(
    pool: &PgPool,
    model: &str,
    vector: &[f32],
    ids: &[i32],
) -> Result<Vec<(i32, f64)>, VectorError> {
    nearest_row_distances(pool, model, vector, ids, "embeddings").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matching_passage_lifts_an_anime_above_a_closer_document() {
        let evidence = vec![
            (1, 0.20, Some(0.25)), // close document, ordinary passages: 0.80 + 0.75
            (2, 0.25, Some(0.10)), // further document, one passage says it: 0.75 + 0.90
            (3, 0.22, None),       // no passages: its document twice, 0.78 + 0.78
        ];
        assert_eq!(
            rank_by_evidence(evidence.clone(), 10),
            vec![(2, 0.25), (3, 0.22), (1, 0.20)]
        );
        assert_eq!(rank_by_evidence(evidence, 1), vec![(2, 0.25)]);
    }
}
