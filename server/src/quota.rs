//! The search quota: anonymous visitors 10 text searches per calendar year, free accounts 30 per
//! calendar month, Premium 200 per calendar month, all in UTC. Only text searches count.
//!
//! [`reserve`] decides in one transaction that holds `pg_advisory_xact_lock` for the subject, so
//! concurrent searches of one subject are decided one after another and can neither overspend
//! nor double-count:
//! 1. the same normalised query (filters included) counted and confirmed within the last 3
//!    minutes: runs, not counted again;
//! 2. else, allowance used up: refused (nothing runs);
//! 3. else one unit is recorded, pending; [`confirm`] makes it final once the search has
//!    answered, and [`refund`] gives it back at once if the search fails.
//!
//! A pending unit counts only while its search may still be running ([`IN_FLIGHT`]): when the
//! database goes away mid-search (so neither confirmation nor refund can be written) or the app
//! dies, the unit gives itself back, and a search whose confirmation cannot be written is not
//! served. A metered search has a deadline well inside that minute ([`Rules::deadline`]), and a
//! confirmation that still arrives after its unit lapsed re-checks the allowance (others may
//! have been counted in its place), so a stall cannot turn one allowance into two. A served
//! search is a counted search, and nothing else is.
//!
//! Time comes from PostgreSQL (`now()`), or from the `at` argument in tests, so "3 minutes
//! later" and "next month" are checked without waiting.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use sqlx::PgPool;
use tokio::sync::watch;

/// How long a repeated query is free after the counted one.
pub const REPEAT_WINDOW: &str = "3 minutes";

/// How long an unconfirmed reservation counts: longer than any metered search may take (see
/// [`MAX_DEADLINE`]), short enough that a lost one comes back soon.
pub const IN_FLIGHT: &str = "1 minute";

/// The longest deadline a metered search may be given: well inside [`IN_FLIGHT`], so that a
/// search is over (served or refunded) while its unit still counts. The configuration's bound.
pub const MAX_DEADLINE: Duration = crate::config::MAX_SEARCH_DEADLINE;

/// How long a refund or a confirmation may wait for the database before the unit is left to
/// lapse (a refund) or the results are not served (a confirmation).
pub const BOOKKEEPING_TIMEOUT: Duration = Duration::from_secs(5);

/// The plans are defined once, in `app::plans`.
pub use app::plans::Plan;

/// Where a subject stands in the current period.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    pub used: i64,
    pub limit: i64,
    /// First day of the next period, `YYYY-MM-DD` (UTC).
    pub resets_on: String,
}

impl Usage {
    pub fn remaining(&self) -> i64 {
        (self.limit - self.used).max(0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// One unit recorded; refund it with this id if the search fails outright.
    Counted { usage_id: i64, usage: Usage },
    /// The same query was counted within the last 3 minutes (as unit `of`): it is free, and
    /// shows the page stored with that unit when there is one.
    Repeat { usage: Usage, of: i64 },
    /// The allowance is used up: the search must not run.
    Refused { usage: Usage },
    /// A new anonymous id, from a network that started too many today: the search must not run.
    NetworkCapped { usage: Usage, per_day: i64 },
    /// Anonymous searches from this network reached their daily cap (whatever the ids): the
    /// search must not run.
    NetworkBusy { usage: Usage, per_day: i64 },
}

/// Who a search is charged to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payer {
    /// `user:<id>` or `visitor:<id>`.
    pub subject: String,
    pub plan: Plan,
    /// For an anonymous visitor, the network (see `accounts::network`) its new ids are counted
    /// against; `None` skips that check.
    pub network: Option<String>,
}

/// Limits set by configuration rather than by plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// How many anonymous ids one network may start (first counted search) in 24 hours. Clearing
    /// cookies gives a new id and a new allowance; this bounds how far that goes.
    pub new_visitors_per_network_per_day: i64,
    /// How many anonymous searches one network may make in 24 hours, whatever the ids (ids
    /// started on other days, or elsewhere, keep their allowance and could be banked).
    pub anonymous_searches_per_network_per_day: i64,
    /// How long a metered search may run before it is given up and its unit refunded (at most
    /// [`MAX_DEADLINE`]).
    pub deadline: Duration,
}

impl Default for Rules {
    fn default() -> Self {
        Self {
            new_visitors_per_network_per_day: 3,
            // As many as the new ids of a day can make.
            anonymous_searches_per_network_per_day: 3 * Plan::Anonymous.limit(),
            deadline: Duration::from_secs(20),
        }
    }
}

/// Reserves one text search for `subject` (see the module documentation). `at` overrides the
/// clock (an ISO 8601 timestamp; tests only).
pub async fn reserve(
    pool: &PgPool,
    subject: &str,
    plan: Plan,
    query_key: &str,
    at: Option<&str>,
) -> Result<Reservation, sqlx::Error> {
    let payer = Payer {
        subject: subject.to_string(),
        plan,
        network: None,
    };
    reserve_for(pool, &payer, &Rules::default(), query_key, at).await
}

/// [`reserve`] for a [`Payer`]: an anonymous visitor's first counted search is also checked
/// against its network's cap on new ids, under a second advisory lock (taken after the
/// subject's, always in that order, so two visitors cannot deadlock).
pub async fn reserve_for(
    pool: &PgPool,
    payer: &Payer,
    rules: &Rules,
    query_key: &str,
    at: Option<&str>,
) -> Result<Reservation, sqlx::Error> {
    let (subject, plan) = (payer.subject.as_str(), payer.plan);
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(subject)
        .execute(&mut *tx)
        .await?;
    let Standing {
        now,
        used,
        resets_on,
        repeat_of,
    } = sqlx::query_as(&standing_sql(plan))
        .bind(subject)
        .bind(at)
        .bind(query_key)
        .fetch_one(&mut *tx)
        .await?;
    let usage = Usage {
        used,
        limit: plan.limit(),
        resets_on,
    };
    let network = payer.network.as_deref().filter(|_| plan == Plan::Anonymous);
    let reservation = if let Some(of) = repeat_of {
        Reservation::Repeat { usage, of }
    } else if used >= plan.limit() {
        Reservation::Refused { usage }
    } else if let Some(network) = network
        && let Some(refusal) = network_refusal(&mut tx, subject, network, rules, &now).await?
    {
        match refusal {
            NetworkLimit::NewVisitors => Reservation::NetworkCapped {
                usage,
                per_day: rules.new_visitors_per_network_per_day,
            },
            NetworkLimit::Searches => Reservation::NetworkBusy {
                usage,
                per_day: rules.anonymous_searches_per_network_per_day,
            },
        }
    } else {
        let usage_id: i64 = sqlx::query_scalar(
            "INSERT INTO search_usage (subject, query_key, counted_at, network)
             VALUES ($1, $2, $3::timestamptz, $4) RETURNING id",
        )
        .bind(subject)
        .bind(query_key)
        .bind(&now)
        .bind(network)
        .fetch_one(&mut *tx)
        .await?;
        Reservation::Counted {
            usage_id,
            usage: Usage {
                used: used + 1,
                ..usage
            },
        }
    };
    tx.commit().await?;
    Ok(reservation)
}

/// A network's anonymous activity in the 24 hours before a moment ([`network_refusal`]).
#[derive(sqlx::FromRow)]
struct NetworkStanding {
    /// Its anonymous searches (confirmed, or possibly still running).
    searches: i64,
    /// The subject has started before (from any network).
    started: bool,
    /// Anonymous ids it started.
    recent_starts: i64,
}

/// A per-network limit an anonymous search ran into.
enum NetworkLimit {
    NewVisitors,
    Searches,
}

/// Whether an anonymous search of `subject` from `network` is over a per-network limit, under
/// the network's advisory lock (taken after the subject's, always in that order, so two
/// visitors cannot deadlock): the network's anonymous searches of the last 24 hours, and, for an
/// id that never started, the ids the network started in that time (the start is recorded, in
/// the caller's transaction, when admitted).
async fn network_refusal(
    tx: &mut sqlx::PgConnection,
    subject: &str,
    network: &str,
    rules: &Rules,
    now: &str,
) -> Result<Option<NetworkLimit>, sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("network:{network}"))
        .execute(&mut *tx)
        .await?;
    let live = live_unit("u", "$3::timestamptz");
    let NetworkStanding {
        searches,
        started,
        recent_starts,
    } = sqlx::query_as(&format!(
        "SELECT
             (SELECT count(*) FROM search_usage u
               WHERE u.network = $1 AND {live}
                 AND u.counted_at > $3::timestamptz - interval '1 day'
                 AND u.counted_at <= $3::timestamptz) AS searches,
             EXISTS (SELECT 1 FROM anonymous_starts WHERE subject = $2) AS started,
             (SELECT count(*) FROM anonymous_starts
               WHERE network = $1 AND started_at > $3::timestamptz - interval '1 day'
                 AND started_at <= $3::timestamptz) AS recent_starts"
    ))
    .bind(network)
    .bind(subject)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    if searches >= rules.anonymous_searches_per_network_per_day {
        return Ok(Some(NetworkLimit::Searches));
    }
    if started {
        return Ok(None);
    }
    if recent_starts >= rules.new_visitors_per_network_per_day {
        return Ok(Some(NetworkLimit::NewVisitors));
    }
    sqlx::query(
        "INSERT INTO anonymous_starts (subject, network, started_at) VALUES ($1, $2, $3::timestamptz)",
    )
    .bind(subject)
    .bind(network)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(None)
}

/// Makes a reserved unit final: its search answered, with the page it `served` (kept for free
/// repeats of the query, see `run_metered`). Returns whether it is (a confirmed unit
/// stays confirmed). A unit still in flight is confirmed at once. One that lapsed meanwhile
/// (its search outran [`IN_FLIGHT`]: a stalled database) stopped counting, so other searches
/// may have been counted in its place: it is confirmed only if it still fits the allowance of
/// its period, decided under the subject's lock as [`reserve`] decides, and given back
/// otherwise (the search must then not be served).
pub async fn confirm(
    pool: &PgPool,
    usage_id: i64,
    plan: Plan,
    served: Option<&serde_json::Value>,
) -> Result<bool, sqlx::Error> {
    let on_time = sqlx::query(&format!(
        "UPDATE search_usage SET confirmed_at = now(), served = $2
          WHERE id = $1 AND refunded_at IS NULL AND confirmed_at IS NULL
            AND counted_at > now() - interval '{IN_FLIGHT}'"
    ))
    .bind(usage_id)
    .bind(served)
    .execute(pool)
    .await?;
    if on_time.rows_affected() == 1 {
        return Ok(true);
    }
    let mut tx = pool.begin().await?;
    let Some(subject) =
        sqlx::query_scalar::<_, String>("SELECT subject FROM search_usage WHERE id = $1")
            .bind(usage_id)
            .fetch_optional(&mut *tx)
            .await?
    else {
        return Ok(false);
    };
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(&subject)
        .execute(&mut *tx)
        .await?;
    let period = plan.period();
    let others = live_unit("u", "now()");
    let confirmed: bool = sqlx::query_scalar(&format!(
        "WITH late AS (
             SELECT id, subject, refunded_at, confirmed_at,
                    date_trunc('{period}', counted_at, 'UTC') AS starts
             FROM search_usage WHERE id = $1
         ),
         fits AS (
             SELECT (SELECT count(*) FROM search_usage u
                      WHERE u.subject = late.subject AND u.id <> late.id AND {others}
                        AND u.counted_at >= late.starts
                        AND u.counted_at < late.starts + interval '1 {period}') < $2 AS fits,
                    late.*
             FROM late
         ),
         decided AS (
             UPDATE search_usage s
                SET confirmed_at = CASE WHEN fits.fits THEN now() END,
                    refunded_at = CASE WHEN fits.fits THEN NULL ELSE now() END,
                    served = CASE WHEN fits.fits THEN $3::jsonb END
               FROM fits
              WHERE s.id = fits.id AND fits.refunded_at IS NULL AND fits.confirmed_at IS NULL
          RETURNING fits.fits
         )
         SELECT coalesce((SELECT fits FROM decided),
                         (SELECT confirmed_at IS NOT NULL AND refunded_at IS NULL FROM late))"
    ))
    .bind(usage_id)
    .bind(plan.limit())
    .bind(served)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    if !confirmed {
        tracing::warn!(
            usage_id,
            "a search that outran its unit no longer fits the allowance: not served"
        );
    }
    Ok(confirmed)
}

/// The page stored with a confirmed unit (see [`confirm`]), if it is still kept and readable.
async fn served_page(
    pool: &PgPool,
    usage_id: i64,
) -> Result<Option<app::search::SearchResults>, sqlx::Error> {
    let stored: Option<serde_json::Value> =
        sqlx::query_scalar("SELECT served FROM search_usage WHERE id = $1")
            .bind(usage_id)
            .fetch_optional(pool)
            .await?
            .flatten();
    Ok(stored.and_then(|page| serde_json::from_value(page).ok()))
}

/// Gives a counted unit back (the search it paid for failed outright). Idempotent.
pub async fn refund(pool: &PgPool, usage_id: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE search_usage SET refunded_at = now() WHERE id = $1 AND refunded_at IS NULL",
    )
    .bind(usage_id)
    .execute(pool)
    .await?;
    Ok(())
}

/// Where `subject` stands, without reserving anything.
pub async fn usage(
    pool: &PgPool,
    subject: &str,
    plan: Plan,
    at: Option<&str>,
) -> Result<Usage, sqlx::Error> {
    let standing: Standing = sqlx::query_as(&standing_sql(plan))
        .bind(subject)
        .bind(at)
        .bind("")
        .fetch_one(pool)
        .await?;
    Ok(Usage {
        used: standing.used,
        limit: plan.limit(),
        resets_on: standing.resets_on,
    })
}

/// The SQL condition for a unit of `search_usage` (aliased `unit`) that counts at time `at`:
/// not refunded, and confirmed or reserved so recently that its search may still be running.
fn live_unit(unit: &str, at: &str) -> String {
    format!(
        "{unit}.refunded_at IS NULL
         AND ({unit}.confirmed_at IS NOT NULL OR {unit}.counted_at > {at} - interval '{IN_FLIGHT}')"
    )
}

/// Where a subject stands at a moment ([`standing_sql`]).
#[derive(sqlx::FromRow)]
struct Standing {
    /// The moment, as an ISO 8601 timestamp (PostgreSQL's clock unless a test set it).
    now: String,
    used: i64,
    resets_on: String,
    /// The latest unit that counted and confirmed the query within the repeat window.
    repeat_of: Option<i64>,
}

/// The clock, units used this period, the next period's first day and the unit that counted
/// and confirmed `$3` within the repeat window (if any), for subject `$1` at time `$2` (NULL: now). A pending
/// unit does not make a repeat free: its search may never answer.
fn standing_sql(plan: Plan) -> String {
    let period = plan.period();
    let live = live_unit("u", "p.t");
    format!(
        "WITH clock AS (SELECT coalesce($2::timestamptz, now()) AS t),
         period AS (
             SELECT t, date_trunc('{period}', t, 'UTC') AS starts,
                    date_trunc('{period}', t, 'UTC') + interval '1 {period}' AS ends
             FROM clock
         )
         SELECT to_char(p.t AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS now,
                (SELECT count(*) FROM search_usage u
                  WHERE u.subject = $1 AND {live}
                    AND u.counted_at >= p.starts AND u.counted_at < p.ends) AS used,
                to_char(p.ends AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS resets_on,
                (SELECT u.id FROM search_usage u
                  WHERE u.subject = $1 AND u.query_key = $3
                    AND u.refunded_at IS NULL AND u.confirmed_at IS NOT NULL
                    AND u.counted_at > p.t - interval '{REPEAT_WINDOW}'
                    AND u.counted_at <= p.t
                  ORDER BY u.counted_at DESC LIMIT 1) AS repeat_of
         FROM period p"
    )
}

/// Runs text searches charged to their payer, so that each served search is paid for exactly
/// once whatever the client does:
/// - reserve → search → confirm runs in a task of its own: a client that drops the connection
///   mid-search cannot stop the confirmation (the search still answers, and is paid for);
/// - identical searches of one payer running at the same time share that one task: one
///   pipeline run and one unit, however many copies a script sends;
/// - when the shared run fails (its unit is given back), the copies that waited on it share
///   the next run the same way: one of them leads it, the others wait on it;
/// - a repeat within [`REPEAT_WINDOW`] is free only once the earlier unit is confirmed.
///
/// The sharing is per process; across app servers an identical search in flight elsewhere is
/// simply charged again.
#[derive(Clone, Default)]
pub struct Meter {
    in_flight: Arc<Mutex<HashMap<String, watch::Receiver<Flight>>>>,
}

/// What an identical search in flight ends with: `None` while it runs; then its results, or
/// `Some(None)` when it failed (the copies that waited then share a new run).
type Flight = Option<Option<app::search::SearchResults>>;

/// Removes a finished (or panicked) search from the in-flight map.
struct Landing {
    in_flight: Arc<Mutex<HashMap<String, watch::Receiver<Flight>>>>,
    key: String,
}

impl Drop for Landing {
    fn drop(&mut self) {
        self.in_flight
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&self.key);
    }
}

impl Meter {
    /// A text search charged to `payer`: the query is checked first (a query that cannot run
    /// costs nothing), then it joins an identical search of the same payer in flight, or
    /// reserves a unit and runs in a task of its own (see [`Meter`]).
    pub async fn search(
        &self,
        db: &crate::db::Db,
        engine: &crate::search::SearchEngine,
        payer: &Payer,
        rules: &Rules,
        query: &str,
        filters: &app::search::Filters,
    ) -> Result<app::search::SearchResults, Metered> {
        let parsed = crate::search::Query::parse(query)?;
        crate::search::check_filters(filters)?;
        let key = parsed.results_key("quota", filters);
        let flight_key = format!("{}\n{key}", payer.subject);
        let (db, engine, payer, rules) = (db.clone(), engine.clone(), payer.clone(), *rules);
        let (query, filters) = (query.to_string(), filters.clone());
        self.shared(flight_key, move || {
            let (db, engine, payer, query, filters, key) = (
                db.clone(),
                engine.clone(),
                payer.clone(),
                query.clone(),
                filters.clone(),
                key.clone(),
            );
            async move { run_metered(&db, &engine, &payer, &rules, &query, &filters, &key).await }
        })
        .await
    }

    /// Runs `run` once for every caller of the same `flight_key` in flight: the first leads (in
    /// a task of its own), the others wait for its results. When the run fails, the waiting
    /// callers go round again, so the next run is shared too and one failure never turns into
    /// one run (and one unit) per copy. Each caller leads at most once, so this ends.
    async fn shared<F, R>(
        &self,
        flight_key: String,
        run: F,
    ) -> Result<app::search::SearchResults, Metered>
    where
        F: Fn() -> R,
        R: std::future::Future<Output = Result<app::search::SearchResults, Metered>>
            + Send
            + 'static,
    {
        // Join the run in flight, or lead one; a caller whose run failed goes round again.
        let sender = loop {
            let mut receiver = {
                let mut in_flight = self
                    .in_flight
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                match in_flight.get(&flight_key) {
                    Some(receiver) => receiver.clone(),
                    None => {
                        let (sender, receiver) = watch::channel(None);
                        in_flight.insert(flight_key.clone(), receiver);
                        break sender;
                    }
                }
            };
            if let Ok(outcome) = receiver.wait_for(Option::is_some).await
                && let Some(Some(results)) = outcome.clone()
            {
                crate::metrics::search_joined();
                return Ok(results);
            }
        };
        let landing = Landing {
            in_flight: self.in_flight.clone(),
            key: flight_key,
        };
        let running = run();
        let task = tokio::spawn(async move {
            let outcome = running.await;
            // Off the map before the waiting copies wake, so that after a failure they find no
            // flight and one of them leads the next.
            drop(landing);
            sender.send_replace(Some(outcome.as_ref().ok().cloned()));
            outcome
        });
        match task.await {
            Ok(outcome) => outcome,
            Err(join_error) => std::panic::resume_unwind(join_error.into_panic()),
        }
    }
}

/// Reserve → search → confirm (or refund): a refused reservation runs nothing; a search that
/// answers confirms its unit (and is not served if that cannot be written), and one that fails
/// gives its unit back.
async fn run_metered(
    db: &crate::db::Db,
    engine: &crate::search::SearchEngine,
    payer: &Payer,
    rules: &Rules,
    query: &str,
    filters: &app::search::Filters,
    key: &str,
) -> Result<app::search::SearchResults, Metered> {
    let plan = payer.plan;
    let reservation = reserve_for(&db.primary, payer, rules, key, None).await?;
    let usage = match &reservation {
        Reservation::Counted { usage, .. } => usage.clone(),
        Reservation::Repeat { usage, of } => {
            // The page the counted search served, when the results cache did not keep it (a
            // degraded page, e.g. one whose translation failed): a free repeat must not buy a
            // pipeline run each time.
            if let Some(mut page) = served_page(&db.primary, *of).await? {
                page.cached = true;
                page.took_ms = 0.0;
                page.quota = Some(info(plan, usage));
                return Ok(page);
            }
            usage.clone()
        }
        Reservation::Refused { usage } => {
            crate::metrics::quota_refused("exhausted");
            return Err(Metered::Exhausted(info(plan, usage)));
        }
        Reservation::NetworkCapped { per_day, .. } => {
            crate::metrics::quota_refused("network_cap");
            return Err(Metered::NetworkCapped { per_day: *per_day });
        }
        Reservation::NetworkBusy { per_day, .. } => {
            crate::metrics::quota_refused("network_searches");
            return Err(Metered::NetworkBusy { per_day: *per_day });
        }
    };
    let outcome = match tokio::time::timeout(rules.deadline, engine.search_kept(query, filters))
        .await
    {
        Ok(outcome) => outcome,
        Err(_) => {
            crate::metrics::search_deadline_passed();
            tracing::warn!(deadline = ?rules.deadline, "a metered search passed its deadline: given up, its unit refunded");
            Err(crate::search::SearchError::TimedOut(rules.deadline))
        }
    };
    match outcome {
        Ok((mut results, kept)) => {
            if let Reservation::Counted { usage_id, .. } = reservation {
                // Not confirmed (the database just went away, or the unit lapsed and others
                // took its place): not served; a pending unit gives itself back.
                // A page the results cache kept is found there by a repeat (fresh, should the
                // catalog change); one it did not keep is stored with the unit.
                let served = (!kept)
                    .then(|| serde_json::to_value(&results).ok())
                    .flatten();
                let confirmed = tokio::time::timeout(
                    BOOKKEEPING_TIMEOUT,
                    confirm(&db.primary, usage_id, plan, served.as_ref()),
                )
                .await
                .map_err(|_| crate::search::SearchError::TimedOut(BOOKKEEPING_TIMEOUT))??;
                if !confirmed {
                    let usage = self::usage(&db.primary, &payer.subject, plan, None).await?;
                    crate::metrics::quota_refused("lapsed");
                    return Err(Metered::Exhausted(info(plan, &usage)));
                }
            }
            results.quota = Some(info(plan, &usage));
            Ok(results)
        }
        Err(error) => {
            // With the database gone the refund cannot be written either (and would wait for a
            // connection): the pending unit lapses by itself. With a read replica, what went
            // away is most likely the replica, and the primary takes the refund.
            if let Reservation::Counted { usage_id, .. } = reservation
                && (!error.is_unavailable()
                    || db.has_replica()
                    || matches!(error, crate::search::SearchError::TimedOut(_)))
            {
                match tokio::time::timeout(BOOKKEEPING_TIMEOUT, refund(&db.primary, usage_id)).await
                {
                    Ok(Ok(())) => {}
                    Ok(Err(refund_error)) => {
                        tracing::warn!(%refund_error, usage_id, "a failed search's unit was not given back now; it lapses in {IN_FLIGHT}")
                    }
                    Err(_) => tracing::warn!(
                        usage_id,
                        "a failed search's refund did not answer in time; its unit lapses in {IN_FLIGHT}"
                    ),
                }
            }
            Err(error.into())
        }
    }
}

/// What the pages show of a usage.
pub fn info(plan: Plan, usage: &Usage) -> app::search::QuotaInfo {
    app::search::QuotaInfo {
        used: usage.used,
        limit: usage.limit,
        period: plan.period().to_string(),
        resets_on: usage.resets_on.clone(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Metered {
    #[error("the search allowance is used up")]
    Exhausted(app::search::QuotaInfo),
    #[error("too many new visitors from this network today (at most {per_day} a day)")]
    NetworkCapped { per_day: i64 },
    #[error(
        "too many searches without an account from this network today (at most {per_day} a day)"
    )]
    NetworkBusy { per_day: i64 },
    #[error(transparent)]
    Search(#[from] crate::search::SearchError),
}

impl From<sqlx::Error> for Metered {
    fn from(error: sqlx::Error) -> Self {
        Metered::Search(error.into())
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::atomic::{AtomicUsize, Ordering},
        time::Duration,
    };

    use super::*;

    fn results(query: &str) -> app::search::SearchResults {
        app::search::SearchResults {
            query: query.to_string(),
            hits: Vec::new(),
            semantic: true,
            ranking: app::search::Ranking::Reranked,
            reranker: "local".into(),
            cached: false,
            took_ms: 1.0,
            quota: None,
        }
    }

    /// Eight identical copies at once, and the first run fails (a brief database error): the
    /// copies share one more run, not one each (each run reserves a unit).
    #[tokio::test]
    async fn copies_of_a_failed_search_share_its_next_run() {
        let meter = Meter::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let run = {
            let runs = runs.clone();
            move || {
                let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                async move {
                    // Long enough for every copy to find the flight.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    match run {
                        1 => Err(Metered::from(sqlx::Error::PoolTimedOut)),
                        _ => Ok(results("piratas")),
                    }
                }
            }
        };
        let copies = (0..8).map(|_| meter.shared("payer\nkey".into(), run.clone()));
        let outcomes = futures_util::future::join_all(copies).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(outcomes.iter().filter(|o| o.is_err()).count(), 1);
        assert!(outcomes.iter().flatten().all(|r| r == &results("piratas")));
        assert!(meter.in_flight.lock().unwrap().is_empty());
    }

    /// A run that fails every time is still run at most once per copy, one at a time.
    #[tokio::test]
    async fn copies_of_a_search_that_keeps_failing_each_lead_once() {
        let meter = Meter::default();
        let (runs, running) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let run = {
            let (runs, running) = (runs.clone(), running.clone());
            move || {
                runs.fetch_add(1, Ordering::SeqCst);
                let running = running.clone();
                async move {
                    assert_eq!(
                        running.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two runs at once"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    Err(Metered::from(sqlx::Error::PoolTimedOut))
                }
            }
        };
        let copies = (0..4).map(|_| meter.shared("payer\nkey".into(), run.clone()));
        let outcomes = futures_util::future::join_all(copies).await;
        assert!(outcomes.iter().all(Result::is_err));
        assert_eq!(runs.load(Ordering::SeqCst), 4);
    }
}
