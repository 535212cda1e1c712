//! Popularity for anime whose record has none. Search weighs a popularity prior (of two anime
//! that fit a description, people mostly mean the one they have heard of), and about one record
//! in ten in the shared catalog has no popularity at all (*Frieren*, *Ranma ½*): read as 0, each
//! ranked as the most obscure anime in the catalog, and the vector branch put *Frieren* below its
//! 200th for a description whose 3rd-nearest passage was *Frieren*'s. Such an anime gets the
//! median popularity of the anime whose average score is within 2 points of its own (members and
//! score go together), else the catalog's median: the estimate is computed in SQL by
//! `estimate_missing_popularity()` (migration `…_estimated_popularity.sql`), which ingest runs
//! after every load because a new anime moves the medians.

use sqlx::{Postgres, Transaction};

/// The popularity search weighs, as SQL over the `anime` row aliased `a`: its own, else the
/// estimate, else 0 (a catalog where no anime has one).
pub const MEMBERS_SQL: &str = "coalesce(a.popularity, a.estimated_popularity, 0)";

/// Recomputes every estimate; returns how many changed (0 when the catalog did not move them,
/// so an unchanged ingest leaves the catalog version, and the results cache, alone).
pub async fn estimate_missing(tx: &mut Transaction<'_, Postgres>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT estimate_missing_popularity()")
        .fetch_one(&mut **tx)
        .await
}
