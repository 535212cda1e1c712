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
    filters, second_view,
};

/// Search settings for one transaction: candidates the HNSW walk keeps (at least the largest
/// LIMIT asked for), and the iterative scan that keeps walking when filters reject rows.
/// `set_config(…, true)` is `SET LOCAL` as a plain query (a `raw_sql` future trips rustc's
/// higher-ranked `Send` check inside axum handlers).
/// `ef_search` is as deep as the larger pool ([`VectorParams::ef_search`](super::params::VectorParams::ef_search)).
static INDEX_SETTINGS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT set_config('hnsw.ef_search', '{}', true),
             set_config('hnsw.iterative_scan', 'relaxed_order', true)",
        super::params::PARAMS.vector.ef_search()
    )
});

/// The models that have an HNSW index (migrations `…_search.sql`, `…_passages.sql`,
/// `…_trained_model_indexes.sql` and `…_second_view_indexes.sql`), with their dimensions.
pub const INDEXED_MODELS: [(&str, usize); 4] = [
    (e5::MODEL_NAME, e5::DIMENSION),
    (e5::TRAINED_MODEL_NAME, e5::DIMENSION),
    (OPENAI_MODEL, OPENAI_DIMENSION),
    (second_view::MODEL_NAME, second_view::DIMENSION),
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
/// vector, `$2` the rows to take, then the filters; nearest first, each row with its anime's
/// popularity and the cosines `cosines` selects (`document`, `passage`, `passage_index`;
/// `{d}` stands for the dimension, `{name}` for the model).
fn walk_sql(model: &str, table: &str, cosines: &str) -> Result<String, VectorError> {
    let (name, dimension) = index_terms(model)?;
    let cosines = cosines
        .replace("{d}", &dimension.to_string())
        .replace("{name}", name);
    Ok(format!(
        "SELECT e.anime_id, a.members AS popularity, {cosines}
         FROM {table} e JOIN anime a ON a.id = e.anime_id
         WHERE e.model = '{name}' {filters}
         ORDER BY e.embedding::vector({dimension}) <=> $1::vector({dimension})
         LIMIT $2",
        filters = filters::sql(3)
    ))
}

/// The document walk of [`search`]: one row per anime with its document cosine (the nearest
/// passage is read afterwards, for those the passage walk did not bring).
pub fn search_sql(model: &str) -> Result<String, VectorError> {
    walk_sql(
        model,
        "embeddings",
        "1 - (e.embedding::vector({d}) <=> $1::vector({d})) AS document,
         NULL::float8 AS passage, NULL::int4 AS passage_index",
    )
}

/// The passage walk of [`search`]: an anime may come more than once, each row with its
/// anime's document cosine, read by primary key for the rows the walk returns only.
pub fn passage_search_sql(model: &str) -> Result<String, VectorError> {
    walk_sql(
        model,
        "passage_embeddings",
        "1 - (SELECT d.embedding::vector({d}) <=> $1::vector({d})
              FROM embeddings d WHERE d.anime_id = e.anime_id AND d.model = '{name}') AS document,
         1 - (e.embedding::vector({d}) <=> $1::vector({d})) AS passage,
         e.passage AS passage_index",
    )
}

/// [`SearchParams`](super::params::SearchParams)`::vector.passage_pool`.
pub const PASSAGE_POOL: usize = super::params::PARAMS.vector.passage_pool;
/// [`SearchParams`](super::params::SearchParams)`::vector.document_pool`.
pub const DOCUMENT_POOL: usize = super::params::PARAMS.vector.document_pool;
/// [`SearchParams`](super::params::SearchParams)`::vector.passage_weight`.
const PASSAGE_WEIGHT: f64 = super::params::PARAMS.vector.passage_weight;
/// [`SearchParams`](super::params::SearchParams)`::vector.popularity_weight`.
const POPULARITY_WEIGHT: f64 = super::params::PARAMS.vector.popularity_weight;

/// Changes whenever the vector branch's SQL or settings do (part of the results cache's
/// pipeline fingerprint; its numbers are in [`SearchParams`](super::params::SearchParams)).
pub fn fingerprint(model: &str) -> String {
    let sql = [search_sql, passage_search_sql, evidence_sql]
        .iter()
        .map(|sql| sql(model).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("|");
    format!("{sql}|{}", *INDEX_SETTINGS)
}

/// An anime the vector branch found, with the evidence it was scored by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorHit {
    pub anime_id: i32,
    /// Cosine similarity of the query and the document vector.
    pub document: f64,
    /// Cosine similarity of the query and the anime's nearest passage; `None` without passages.
    pub passage: Option<f64>,
    /// Which passage that is (1-based, as `documents.passages` is indexed).
    pub passage_index: Option<i32>,
    /// What the branch orders by: document + [`PASSAGE_WEIGHT`] × passage (the document again
    /// without passages) + the popularity prior.
    pub score: f64,
}

impl VectorHit {
    /// The branch's order: best score first, ties by id (both ways of searching use it).
    pub fn best_first(a: &Self, b: &Self) -> std::cmp::Ordering {
        b.score
            .total_cmp(&a.score)
            .then(a.anime_id.cmp(&b.anime_id))
    }
}

/// One anime's evidence as [`evidence_sql`] and the two walks read it.
#[derive(sqlx::FromRow)]
struct EvidenceRow {
    anime_id: i32,
    popularity: i32,
    document: Option<f64>,
    passage: Option<f64>,
    passage_index: Option<i32>,
}

/// The SQL of [`evidence`]: for each id of `$2`, the cosine of the query `$1` to its document
/// vector and to its nearest passage (and which), and its popularity. Exact: a few hundred
/// candidates of a few passages each.
fn evidence_sql(model: &str) -> Result<String, VectorError> {
    let (name, dimension) = index_terms(model)?;
    Ok(format!(
        "SELECT a.id AS anime_id, a.members AS popularity,
                1 - (SELECT e.embedding::vector({dimension}) <=> $1::vector({dimension})
                     FROM embeddings e WHERE e.anime_id = a.id AND e.model = '{name}') AS document,
                1 - nearest.distance AS passage, nearest.passage AS passage_index
         FROM anime a
         LEFT JOIN LATERAL (
             SELECT p.passage, {distance} AS distance FROM passage_embeddings p
             WHERE p.anime_id = a.id AND p.model = '{name}'
             ORDER BY {distance}, p.passage LIMIT 1
         ) nearest ON true
         WHERE a.id = ANY($2)",
        distance = format!("p.embedding::vector({dimension}) <=> $1::vector({dimension})"),
    ))
}

/// The evidence of each of `ids` that has a document vector for `model`, scored.
pub async fn evidence(
    pool: &PgPool,
    model: &str,
    vector: &[f32],
    ids: &[i32],
) -> Result<Vec<VectorHit>, VectorError> {
    let rows = sqlx::query_as::<_, EvidenceRow>(&evidence_sql(model)?)
        .bind(pgvector::Vector::from(vector.to_vec()))
        .bind(ids)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().filter_map(scored).collect())
}

/// A row's [`VectorHit`]; `None` when the anime has no document vector yet.
fn scored(row: EvidenceRow) -> Option<VectorHit> {
    let document = row.document?;
    Some(VectorHit {
        anime_id: row.anime_id,
        document,
        passage: row.passage,
        passage_index: row.passage_index,
        score: score(document, row.passage.unwrap_or(document), row.popularity),
    })
}

/// [`VectorHit::score`] from its parts.
pub(crate) fn score(document: f64, passage: f64, popularity: i32) -> f64 {
    document + PASSAGE_WEIGHT * passage + POPULARITY_WEIGHT * super::popularity_prior(popularity)
}

/// Of the anime only the document walk found, those whose nearest passage is worth looking up:
/// the ones that could still rank in the top `limit`. Their nearest passage is no nearer than
/// the passage walk's farthest (`passage_floor`), or they have none and the document stands in,
/// which bounds their score; once `limit` anime whose cosines are all known score above that
/// bound, a look-up cannot change the result. `passage_floor` is `None` when the passage walk
/// took fewer than [`PASSAGE_POOL`] rows (nothing is known then, and every one is looked up).
///
/// The walk is approximate, so the bound is too: it may skip an anime whose passage the index
/// missed. Looking every one up instead moved the project's MRR 0.887 → 0.891 (one case) for
/// 8–11 ms more per page, p50 (`docs/measurements.md`, "The whole document walk").
fn worth_looking_up(
    rows: &HashMap<i32, EvidenceRow>,
    passage_floor: Option<f64>,
    limit: usize,
) -> Vec<i32> {
    // The passage walk's farthest, and the `limit`-th score among anime whose cosines are known.
    let bound = passage_floor.and_then(|floor| {
        let mut known: Vec<f64> = rows
            .values()
            .filter_map(|row| Some(score(row.document?, row.passage?, row.popularity)))
            .collect();
        known.sort_by(|a, b| b.total_cmp(a));
        Some((floor, *known.get(limit.checked_sub(1)?)?))
    });
    rows.values()
        .filter(|row| row.passage.is_none())
        .filter(|row| match (bound, row.document) {
            (Some((floor, bar)), Some(document)) => {
                score(document, floor.max(document), row.popularity) >= bar
            }
            _ => true,
        })
        .map(|row| row.anime_id)
        .collect()
}

/// Up to `limit` anime for `vector`, best first (ties by id), with their evidence.
///
/// Candidates come from two HNSW walks, over [`DOCUMENT_POOL`] document vectors and
/// [`PASSAGE_POOL`] passage vectors, so an
/// anime whose one matching sentence is drowned in its document's single vector is still found.
/// Each candidate is then scored ([`VectorHit::score`]) by its document cosine and its nearest
/// passage's, as the walks read them (an anime the passage walk missed gets its nearest passage
/// looked up exactly): measured on both evaluation sets, document and passage cosines each alone
/// rank worse than their sum, and the popularity prior added to it.
pub async fn search(
    pool: &PgPool,
    model: &str,
    vector: &[f32],
    filters: &Filters,
    limit: usize,
) -> Result<Vec<VectorHit>, VectorError> {
    let bound = pgvector::Vector::from(vector.to_vec());
    let mut tx = pool.begin().await?;
    sqlx::query(&INDEX_SETTINGS).execute(&mut *tx).await?;
    let mut walked: Vec<EvidenceRow> = Vec::new();
    for (sql, take) in [
        (search_sql(model)?, limit.max(DOCUMENT_POOL)),
        (passage_search_sql(model)?, PASSAGE_POOL),
    ] {
        // Planned with its values each time (an unnamed statement): after a few runs of a
        // prepared statement PostgreSQL may switch to a generic plan, which cannot see the LIMIT
        // and sorts every row instead of walking the index (measured: 57 ms against 4 ms).
        let walk = sqlx::query_as::<_, EvidenceRow>(&sql)
            .persistent(false)
            .bind(&bound)
            .bind(take as i64);
        walked.extend(filters::bind(walk, filters).fetch_all(&mut *tx).await?);
    }
    tx.commit().await?;
    let (passages, farthest) = walked
        .iter()
        .filter_map(|row| row.passage)
        .fold((0, f64::INFINITY), |(n, far), p| (n + 1, far.min(p)));
    let passage_floor = (passages >= PASSAGE_POOL).then_some(farthest);
    let mut rows = merge_walks(walked);
    // The walks already read every cosine but the nearest passage of anime only the document
    // walk found: one exact look-up for those that could still make the list, instead of
    // re-reading all candidates. The rest cannot, and are dropped.
    let lookup = worth_looking_up(&rows, passage_floor, limit);
    let mut hits: Vec<VectorHit> = Vec::with_capacity(rows.len());
    if !lookup.is_empty() {
        hits.extend(evidence(pool, model, vector, &lookup).await?);
        for id in &lookup {
            rows.remove(id);
        }
    }
    hits.extend(
        rows.into_values()
            .filter(|row| row.passage.is_some())
            .filter_map(scored),
    );
    hits.sort_by(VectorHit::best_first);
    hits.truncate(limit);
    Ok(hits)
}

/// One row per anime from the rows of both walks: the document cosine from whichever walk read
/// it, and the nearest of the anime's walked passages.
fn merge_walks(walked: Vec<EvidenceRow>) -> HashMap<i32, EvidenceRow> {
    let mut rows: HashMap<i32, EvidenceRow> = HashMap::new();
    for row in walked {
        match rows.entry(row.anime_id) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(row);
            }
            std::collections::hash_map::Entry::Occupied(mut slot) => {
                let kept = slot.get_mut();
                kept.document = kept.document.or(row.document);
                if row.passage > kept.passage {
                    kept.passage = row.passage;
                    kept.passage_index = row.passage_index;
                }
            }
        }
    }
    rows
}

/// Cosine distance from `vector` to the document vector of each of `ids` that has one (for
/// re-scoring a candidate list, as the seed-001 method does).
pub async fn distances(
    pool: &PgPool,
    model: &str,
    vector: &[f32],
    ids: &[i32],
) -> Result<Vec<(i32, f64)>, VectorError> {
    let (name, dimension) = index_terms(model)?;
    let rows: Vec<DocumentDistance> = sqlx::query_as(&format!(
        "SELECT anime_id, embedding::vector({dimension}) <=> $1::vector({dimension}) AS distance
         FROM embeddings WHERE model = '{name}' AND anime_id = ANY($2)"
    ))
    .bind(pgvector::Vector::from(vector.to_vec()))
    .bind(ids)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (r.anime_id, r.distance)).collect())
}

/// An anime's document distance, as [`distances`] reads it.
#[derive(sqlx::FromRow)]
struct DocumentDistance {
    anime_id: i32,
    distance: f64,
}

/// A passage shown as the reason a result matched, as [`passage_texts`] reads it.
#[derive(sqlx::FromRow)]
struct PassageRow {
    anime_id: i32,
    passage: Option<String>,
    title: Option<String>,
}

/// The text of each `(anime, passage index)` without the title that leads it (the page shows it
/// as the reason a result matched).
pub async fn passage_texts(
    pool: &PgPool,
    passages: &[(i32, i32)],
) -> Result<HashMap<i32, String>, VectorError> {
    let (ids, indexes): (Vec<i32>, Vec<i32>) = passages.iter().copied().unzip();
    let rows: Vec<PassageRow> = sqlx::query_as(
        "SELECT d.anime_id, d.passages[w.passage] AS passage,
                coalesce(nullif(trim(a.title_romaji), ''), nullif(trim(a.title_english), ''),
                         nullif(trim(a.title_native), '')) AS title
         FROM unnest($1::int[], $2::int[]) AS w(anime_id, passage)
         JOIN documents d ON d.anime_id = w.anime_id
         JOIN anime a ON a.id = w.anime_id",
    )
    .bind(ids)
    .bind(indexes)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let passage = row.passage?;
            let lead = format!("{}: ", row.title.unwrap_or_default().trim());
            let text = passage.strip_prefix(&lead).unwrap_or(&passage);
            Some((row.anime_id, text.to_string()))
        })
        .collect())
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
const SIMILAR_THEME_WEIGHT: f64 = 1.0;
const SIMILAR_TEXT_WEIGHT: f64 = 0.5;
const SIMILAR_POPULARITY_WEIGHT: f64 = 2.0;
const SIMILAR_SCORE_WEIGHT: f64 = 0.5;

/// A candidate of "similar to" as [`similar_sql`] reads it.
#[derive(sqlx::FromRow)]
pub(crate) struct SimilarRow {
    pub anime_id: i32,
    text_cosine: f64,
    theme_cosine: f64,
    popularity: i32,
    average_score: i32,
    franchise_root_id: Option<i32>,
    /// The candidate's romaji and English titles, and the source's.
    titles: Vec<String>,
    source_titles: Vec<String>,
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
                    a.franchise_root_id AS franchise,
                    array_remove(ARRAY[a.title_romaji, a.title_english], NULL) AS titles
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
                a.members AS popularity,
                coalesce(a.average_score, 0) AS average_score,
                a.franchise_root_id,
                array_remove(ARRAY[a.title_romaji, a.title_english], NULL) AS titles,
                (SELECT titles FROM source) AS source_titles
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
        Scan::Indexes => INDEX_SETTINGS.as_str(),
        Scan::Exact => {
            "SELECT set_config('enable_indexscan', 'off', true),
                    set_config('enable_bitmapscan', 'off', true)"
        }
    };
    let mut tx = pool.begin().await?;
    sqlx::query(settings).execute(&mut *tx).await?;
    // An unnamed statement, like the search walks: a generic plan would not walk the indexes.
    let rows = sqlx::query_as::<_, SimilarRow>(&similar_sql(model)?)
        .persistent(false)
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
/// franchise too, and the entries named as parts of it, [`crate::catalog::titles::same_work`]),
/// best first, at most one per other franchise. Empty when `id` has no vector for `model`.
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
        // The source's own films and specials that the catalog links to nothing are its
        // franchise too, by their titles ("Made in Abyss Movie 1: …").
        .filter(|row| {
            !(exclude_franchise
                && crate::catalog::titles::same_work(&row.source_titles, &row.titles))
        })
        .map(
            |SimilarRow {
                 anime_id,
                 text_cosine,
                 theme_cosine,
                 popularity,
                 average_score,
                 franchise_root_id: franchise,
                 ..
             }| {
                let known = super::popularity_prior(popularity);
                let liked = average_score.clamp(0, 100) as f64 / 100.0;
                let score = SIMILAR_THEME_WEIGHT * theme_cosine
                    + SIMILAR_TEXT_WEIGHT * text_cosine
                    + SIMILAR_POPULARITY_WEIGHT * known
                    + SIMILAR_SCORE_WEIGHT * liked;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(anime_id: i32, document: f64, passage: Option<f64>) -> EvidenceRow {
        EvidenceRow {
            anime_id,
            popularity: 0,
            document: Some(document),
            passage,
            passage_index: passage.map(|_| 1),
        }
    }

    #[test]
    fn the_walks_merge_into_one_row_per_anime_with_its_nearest_walked_passage() {
        let walked = vec![
            // The document walk: document cosines, no passage.
            row(1, 0.80, None),
            row(2, 0.70, None),
            // The passage walk, nearest first (an anime may come twice).
            EvidenceRow {
                passage_index: Some(3),
                ..row(2, 0.70, Some(0.90))
            },
            EvidenceRow {
                passage_index: Some(1),
                ..row(2, 0.70, Some(0.85))
            },
            EvidenceRow {
                passage_index: Some(2),
                ..row(4, 0.60, Some(0.88))
            },
        ];
        let rows = merge_walks(walked);
        assert_eq!(rows.len(), 3);
        let both = &rows[&2];
        assert_eq!(
            (both.document, both.passage, both.passage_index),
            (Some(0.70), Some(0.90), Some(3))
        );
        // Found by the document walk only: its passage is left for the exact look-up.
        assert_eq!(rows[&1].passage, None);
        assert_eq!(
            (rows[&4].document, rows[&4].passage),
            (Some(0.60), Some(0.88))
        );
    }

    #[test]
    fn only_anime_that_could_still_make_the_list_get_their_passage_looked_up() {
        let rows: HashMap<i32, EvidenceRow> = [
            // Both cosines known (the passage walk found them): scores 2.5 and 2.2.
            row(1, 0.70, Some(0.90)),
            row(2, 0.60, Some(0.80)),
            // Document walk only. Its passage is at most the walk's farthest, 0.75: 0.72 + 1.5
            // can reach the second score, 2.2; 0.60 + 1.5 cannot.
            row(3, 0.72, None),
            row(4, 0.60, None),
            // A document nearer than the floor bounds itself (without passages it stands in):
            // 3 × 0.76.
            row(5, 0.76, None),
        ]
        .into_iter()
        .map(|r| (r.anime_id, r))
        .collect();
        let mut lookup = worth_looking_up(&rows, Some(0.75), 2);
        lookup.sort();
        assert_eq!(lookup, vec![3, 5]);
        // Fewer known scores than the list needs, or no floor: every one is looked up.
        let mut all = worth_looking_up(&rows, Some(0.75), 3);
        all.sort();
        assert_eq!(all, vec![3, 4, 5]);
        let mut unknown = worth_looking_up(&rows, None, 2);
        unknown.sort();
        assert_eq!(unknown, vec![3, 4, 5]);
    }

    #[test]
    fn a_matching_passage_lifts_an_anime_above_a_closer_document() {
        let close = scored(row(1, 0.80, Some(0.75))).unwrap();
        let said = scored(row(2, 0.75, Some(0.90))).unwrap();
        assert!(said.score > close.score);
        // Without passages the document stands in for them.
        let bare = scored(row(3, 0.78, None)).unwrap();
        assert!((bare.score - 3.0 * 0.78).abs() < 1e-9);
        // No document vector yet: not a hit.
        assert!(
            scored(EvidenceRow {
                document: None,
                ..row(5, 0.0, None)
            })
            .is_none()
        );
    }

    #[test]
    fn the_better_known_of_two_equal_matches_ranks_first() {
        let obscure = scored(row(1, 0.80, Some(0.80))).unwrap();
        let known = scored(EvidenceRow {
            popularity: 300_000,
            ..row(2, 0.80, Some(0.80))
        })
        .unwrap();
        assert!(known.score > obscure.score);
    }
}
