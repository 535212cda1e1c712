//! Popularity for anime whose record has none, or only a partial one. Search weighs a popularity
//! prior (of two anime that fit a description, people mostly mean the one they have heard of).
//!
//! - About one record in ten in the shared catalog has no popularity at all (*Frieren*, *Ranma
//!   ½*): read as 0, each ranked as the most obscure anime in the catalog, and the vector branch
//!   put *Frieren* below its 200th for a description whose 3rd-nearest passage was *Frieren*'s.
//! - The counts of the latest years are partial: taken while those anime were new (*Bocchi the
//!   Rock!* 468 members, *Ranking of Kings* 1,503, against about 50,000 for a typical 2016–2019
//!   anime). They show as the trailing run of start years where most records have no count.
//!
//! Such an anime gets the median popularity of the anime whose average score is within 2 points
//! of its own (members and score go together), else the catalog's median, both over complete
//! counts; search reads the larger of its own count and the estimate. The estimate is computed
//! in SQL by `estimate_popularity()` (migrations `…_estimated_popularity.sql` and
//! `…_partial_popularity.sql`, which say how a year is judged partial), and ingest runs it after
//! every load because a new anime moves the medians.

use sqlx::{Postgres, Transaction};

// The popularity search weighs is the column `anime.members` (migration `…_members_column.sql`):
// the larger of an anime's own count and the estimate made here, else 0.

/// Recomputes every estimate; returns how many changed (0 when the catalog did not move them,
/// so an unchanged ingest leaves the catalog version, and the results cache, alone).
pub async fn estimate(tx: &mut Transaction<'_, Postgres>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT estimate_popularity()")
        .fetch_one(&mut **tx)
        .await
}
