//! A model's vectors held in this process and scanned whole (the `nearest` crate), in place of
//! [`vector::search`](super::vector::search)'s two HNSW walks in PostgreSQL.
//!
//! Why: the walks are approximate and, on two cores shared with the lexical branch, slow: the
//! second view's two walks added 36–43 ms to a page's p50, the primary's took 15–26 ms. A scan
//! of every document and passage vector of the catalog held as int8 (15 MB for e5-small's 384
//! dimensions, 20 MB for USE's 512) takes about a millisecond on one core. Its cosines are within a few
//! thousandths of the exact ones, which is enough to choose but not to order near-ties, so the
//! anime within [`RESCORE_MARGIN`] of the cut are then scored exactly from the vectors as stored
//! (kept as floats too: 60 MB for e5-small, 80 MB for USE): the branch's list is the exact one,
//! document + 2 × nearest passage + popularity prior over every anime, as PostgreSQL would
//! compute it ([`vector::evidence`](super::vector::evidence), which the tests compare it with). Filters are applied to the scan by one query for the ids they allow (none without
//! filters), so the filters stay one SQL fragment ([`filters`]).
//!
//! The vectors are a snapshot of one catalog version (any change to anime, documents or vectors
//! moves it). A search that reads a newer version ([`VectorsInMemory::catch_up`]) reloads them
//! first, at most once every [`RELOAD_GAP`] so a long ingest, which moves the version with
//! every batch, does not reload them at every search; a page served from an older snapshot is
//! not kept in the results cache. A search meanwhile reads the snapshot it started with.

use std::{
    collections::HashSet,
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use app::search::Filters;
use sqlx::PgPool;

use super::{cache, filters, vector::VectorHit};

/// [`SearchParams`](super::params::SearchParams)`::vector.rescore_margin`.
const RESCORE_MARGIN: f64 = super::params::PARAMS.vector.rescore_margin;
/// [`SearchParams`](super::params::SearchParams)`::vector.rescore_most`.
const RESCORE_MOST: usize = super::params::PARAMS.vector.rescore_most;

/// Which models `held` searches in memory (part of the results cache's pipeline fingerprint:
/// the exact list and the HNSW walks' may differ; the rescoring numbers are in `PARAMS`).
pub fn fingerprint(held: &[Arc<VectorsInMemory>]) -> String {
    let mut models: Vec<&str> = held.iter().map(|vectors| vectors.model()).collect();
    models.sort_unstable();
    models.join(",")
}

/// The shortest time between two reloads for searches ([`VectorsInMemory::catch_up`]): the
/// catalog's vectors take about half a second to read.
pub const RELOAD_GAP: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum InMemoryError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error("a stored {model} vector of anime {anime_id} is unusable: {reason}")]
    Stored {
        model: String,
        anime_id: i32,
        reason: nearest::Error,
    },
    #[error("the query's vector does not fit the {model} vectors: {reason}")]
    Query {
        model: String,
        reason: nearest::Error,
    },
}

/// One catalog version's vectors of one model.
struct Snapshot {
    catalog_version: i64,
    index: nearest::Index,
    /// Per item of `index`, in its order: the anime, its members for the popularity prior, and
    /// its passages.
    anime: Vec<Item>,
}

struct Item {
    id: i32,
    members: i32,
    /// Its passages' positions (`passage_embeddings.passage`), in the order pushed.
    passages: Vec<i32>,
}

/// A model's vectors in memory, searched exactly.
pub struct VectorsInMemory {
    model: String,
    dimension: usize,
    snapshot: RwLock<Arc<Snapshot>>,
    /// Held while a search reloads the snapshot, with when its last reload began.
    reloading: tokio::sync::Mutex<Option<Instant>>,
}

#[derive(sqlx::FromRow)]
struct DocumentRow {
    anime_id: i32,
    members: i32,
    embedding: pgvector::Vector,
}

#[derive(sqlx::FromRow)]
struct PassageRow {
    anime_id: i32,
    passage: i32,
    embedding: pgvector::Vector,
}

impl VectorsInMemory {
    /// Every stored vector of `model` (`dimension` long), read from `pool`.
    pub async fn load(pool: &PgPool, model: &str, dimension: usize) -> Result<Self, InMemoryError> {
        let snapshot = read(pool, model, dimension).await?;
        tracing::info!(
            model,
            anime = snapshot.anime.len(),
            passages = snapshot.index.passages(),
            megabytes = snapshot.index.bytes() / 1_000_000,
            "vectors held in memory"
        );
        Ok(Self {
            model: model.to_string(),
            dimension,
            snapshot: RwLock::new(Arc::new(snapshot)),
            reloading: tokio::sync::Mutex::new(None),
        })
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// Anime in the snapshot.
    pub fn len(&self) -> usize {
        self.current().anime.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn current(&self) -> Arc<Snapshot> {
        // A panic while swapping cannot leave a half-written snapshot (the swap is one
        // assignment), so a poisoned lock still holds a whole one.
        self.snapshot
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Reloads the vectors when the catalog version has moved since the snapshot was read;
    /// whether it did.
    pub async fn refresh(&self, pool: &PgPool) -> Result<bool, InMemoryError> {
        let version = cache::catalog_version(pool).await?;
        if version == self.current().catalog_version {
            return Ok(false);
        }
        self.reload(pool).await?;
        Ok(true)
    }

    async fn reload(&self, pool: &PgPool) -> Result<(), InMemoryError> {
        let snapshot = Arc::new(read(pool, &self.model, self.dimension).await?);
        tracing::info!(
            model = self.model,
            anime = snapshot.anime.len(),
            catalog_version = snapshot.catalog_version,
            "vectors in memory reloaded"
        );
        *self
            .snapshot
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = snapshot;
        Ok(())
    }

    /// Whether the snapshot is of catalog version `version` (read by a search) or newer,
    /// reloading it first when it is older, no other search is reloading it and the last reload
    /// began at least [`RELOAD_GAP`] ago. A failed reload keeps the snapshot (logged): the
    /// search is answered from it, and the next one past the gap tries again.
    pub async fn catch_up(&self, pool: &PgPool, version: i64) -> bool {
        if self.current().catalog_version >= version {
            return true;
        }
        let Ok(mut last) = self.reloading.try_lock() else {
            return false;
        };
        // Another search may have reloaded it between the check and the lock.
        if self.current().catalog_version >= version {
            return true;
        }
        if last.is_some_and(|began| began.elapsed() < RELOAD_GAP) {
            return false;
        }
        *last = Some(Instant::now());
        if let Err(error) = self.reload(pool).await {
            tracing::warn!(%error, model = self.model, "vectors in memory not reloaded");
        }
        self.current().catalog_version >= version
    }

    /// Up to `limit` anime for `vector`, best first (ties by id), scored exactly as
    /// [`super::vector::search`] scores them, among those `filters` allow: the int8 scan picks
    /// the anime within [`RESCORE_MARGIN`] of the `limit`-th, and their vectors as stored score
    /// them exactly.
    pub async fn search(
        &self,
        pool: &PgPool,
        vector: &[f32],
        filters: &Filters,
        limit: usize,
    ) -> Result<Vec<VectorHit>, InMemoryError> {
        let allowed = if filters.is_empty() {
            None
        } else {
            Some(allowed_ids(pool, filters).await?)
        };
        let snapshot = self.current();
        let matches = snapshot
            .index
            .scan(vector)
            .map_err(|reason| InMemoryError::Query {
                model: self.model.clone(),
                reason,
            })?;
        let mut near: Vec<(f64, usize)> = snapshot
            .anime
            .iter()
            .zip(matches)
            .enumerate()
            .filter(|(_, (item, _))| allowed.as_ref().is_none_or(|ids| ids.contains(&item.id)))
            .map(|(at, (item, found))| {
                let document = f64::from(found.document);
                let passage = found
                    .passage
                    .map_or(document, |(cosine, _)| f64::from(cosine));
                (super::vector::score(document, passage, item.members), at)
            })
            .collect();
        let best_first =
            |a: &(f64, usize), b: &(f64, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let most = limit.saturating_mul(RESCORE_MOST).max(1);
        if near.len() > most {
            near.select_nth_unstable_by(most, best_first);
            near.truncate(most);
        }
        near.sort_by(best_first);
        if let Some(&(cut, _)) = near.get(limit.saturating_sub(1)) {
            near.retain(|&(score, _)| score >= cut - RESCORE_MARGIN);
        }
        let mut hits = Vec::with_capacity(near.len());
        for (_, at) in near {
            let item = &snapshot.anime[at];
            let exact =
                snapshot
                    .index
                    .exact(at, vector)
                    .map_err(|reason| InMemoryError::Query {
                        model: self.model.clone(),
                        reason,
                    })?;
            let passage = exact.passage.map(|(cosine, _)| cosine);
            hits.push(VectorHit {
                anime_id: item.id,
                document: exact.document,
                passage,
                passage_index: exact.passage.map(|(_, position)| item.passages[position]),
                score: super::vector::score(
                    exact.document,
                    passage.unwrap_or(exact.document),
                    item.members,
                ),
            });
        }
        hits.sort_by(VectorHit::best_first);
        hits.truncate(limit);
        Ok(hits)
    }
}

/// The anime `filters` allow.
async fn allowed_ids(pool: &PgPool, filters: &Filters) -> Result<HashSet<i32>, sqlx::Error> {
    #[derive(sqlx::FromRow)]
    struct Id {
        id: i32,
    }
    let sql = format!("SELECT a.id FROM anime a WHERE true {}", filters::sql(1));
    let ids = filters::bind(sqlx::query_as::<_, Id>(&sql), filters)
        .fetch_all(pool)
        .await?;
    Ok(ids.into_iter().map(|row| row.id).collect())
}

/// The catalog's vectors of `model` now: documents and passages read in one transaction, so
/// they and the version belong together.
async fn read(pool: &PgPool, model: &str, dimension: usize) -> Result<Snapshot, InMemoryError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .execute(&mut *tx)
        .await?;
    let catalog_version: i64 = sqlx::query_scalar("SELECT version FROM catalog_version")
        .fetch_one(&mut *tx)
        .await?;
    let documents: Vec<DocumentRow> = sqlx::query_as(
        "SELECT e.anime_id, a.members, e.embedding
         FROM embeddings e JOIN anime a ON a.id = e.anime_id
         WHERE e.model = $1 ORDER BY e.anime_id",
    )
    .bind(model)
    .fetch_all(&mut *tx)
    .await?;
    let passages: Vec<PassageRow> = sqlx::query_as(
        "SELECT anime_id, passage, embedding FROM passage_embeddings
         WHERE model = $1 ORDER BY anime_id, passage",
    )
    .bind(model)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;

    let mut index = nearest::Index::new(dimension);
    let mut anime = Vec::with_capacity(documents.len());
    let mut passages = passages.into_iter().peekable();
    for document in documents {
        // Both lists are in anime order: skip passages of anime without a document vector.
        while passages
            .peek()
            .is_some_and(|p| p.anime_id < document.anime_id)
        {
            passages.next();
        }
        let mut own = Vec::new();
        while let Some(passage) = passages.next_if(|p| p.anime_id == document.anime_id) {
            own.push(passage);
        }
        index
            .push(
                document.embedding.as_slice(),
                own.iter().map(|p| p.embedding.as_slice()),
            )
            .map_err(|reason| InMemoryError::Stored {
                model: model.to_string(),
                anime_id: document.anime_id,
                reason,
            })?;
        anime.push(Item {
            id: document.anime_id,
            members: document.members,
            passages: own.iter().map(|p| p.passage).collect(),
        });
    }
    Ok(Snapshot {
        catalog_version,
        index,
        anime,
    })
}
