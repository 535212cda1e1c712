//! How long personal data is kept, in one place. Run by the periodic sweeper (`startup`); each
//! rule says what needs the data for that long. Documented for operators in docs/operations.md.
//!
//! | data | kept | because |
//! |---|---|---|
//! | delivered or given-up mail | 30 days | support questions ("I never got the link") |
//! | Stripe webhook events, payment failures | 90 days | replays are refused by their signature's age long before; the account page shows recent failures |
//! | the page a counted search served | an hour | a repeat of the query within 3 minutes is served from it |
//! | counted searches | a year and a day | the longest allowance period (anonymous: a year) |
//! | anonymous visitors' first search | a year | the same |
//! | network addresses on counted searches and first searches | a day | the per-network daily caps read them |
//!
//! Sessions, sign-up and reset links and log-in attempts are swept by `accounts::sweep`.

use sqlx::PgPool;

/// Days delivered mail is kept.
pub const MAIL_DAYS: i32 = 30;
/// Days Stripe events are kept.
pub const STRIPE_EVENT_DAYS: i32 = 90;

/// Applies every rule once; how many rows were deleted or cleared.
pub async fn sweep(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut rows = 0;
    rows += sqlx::query(
        "DELETE FROM mail_outbox
          WHERE coalesce(sent_at, failed_at) < now() - make_interval(days => $1)",
    )
    .bind(MAIL_DAYS)
    .execute(pool)
    .await?
    .rows_affected();
    let mut tx = pool.begin().await?;
    rows += sqlx::query(
        "DELETE FROM payment_failures f USING stripe_events e
          WHERE e.id = f.event_id AND e.received_at < now() - make_interval(days => $1)",
    )
    .bind(STRIPE_EVENT_DAYS)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    rows += sqlx::query(
        "DELETE FROM stripe_events WHERE received_at < now() - make_interval(days => $1)",
    )
    .bind(STRIPE_EVENT_DAYS)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    for statement in [
        "DELETE FROM search_usage WHERE counted_at < now() - interval '1 year 1 day'",
        "DELETE FROM anonymous_starts WHERE started_at < now() - interval '1 year'",
        "UPDATE search_usage SET served = NULL
          WHERE served IS NOT NULL AND counted_at < now() - interval '1 hour'",
        "UPDATE search_usage SET network = NULL
          WHERE network IS NOT NULL AND counted_at < now() - interval '1 day'",
        "UPDATE anonymous_starts SET network = NULL
          WHERE network IS NOT NULL AND started_at < now() - interval '1 day'",
    ] {
        rows += sqlx::query(statement).execute(pool).await?.rows_affected();
    }
    Ok(rows)
}
