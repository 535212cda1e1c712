//! Throttling of log-in attempts, sign-up and password reset requests, and the links they mail,
//! per mailbox (for a link: per link) and per client network. The
//! counts live in PostgreSQL (`auth_attempts`), not in memory, so every app server behind a load
//! balancer sees the same counts and a restart forgets nothing. Addresses are counted whether or
//! not an account exists, so being throttled says nothing about an address.
//!
//! An attempt is recorded *before* the password is checked, in a transaction that holds advisory
//! locks on the address and the network and counts the attempt itself: a burst of concurrent
//! guesses cannot all read "no failures yet" and slip through. A successful log-in takes its own
//! attempt back.

use sqlx::PgPool;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    LogIn,
    /// A sign-up request (each one sends a mail).
    SignUp,
    /// A sign-up link confirmed with a password (keyed by the link, not an address).
    Confirm,
    /// A password reset request (each one may send a mail).
    Reset,
    /// A reset link followed with a new password (keyed by the link).
    ResetConfirm,
}

/// How many attempts of a kind are allowed in a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From one network at one address: the guessing limit.
    pub per_address_and_network: i64,
    /// At one address from anywhere: stops a distributed guess. It does not apply on a network
    /// the owner has logged in from before, so failures elsewhere cannot lock them out there.
    pub per_address: i64,
    pub per_network: i64,
    pub window_minutes: i64,
}

impl Attempt {
    fn kind(self) -> &'static str {
        match self {
            Attempt::LogIn => "login",
            Attempt::SignUp => "signup",
            Attempt::Confirm => "confirm",
            Attempt::Reset => "reset",
            Attempt::ResetConfirm => "reset-confirm",
        }
    }

    /// The default limits.
    pub fn limits(self) -> Limits {
        match self {
            Attempt::LogIn => Limits {
                per_address_and_network: 5,
                per_address: 50,
                per_network: 30,
                window_minutes: 15,
            },
            // Each sign-up sends a mail: bound the mail one address can be sent.
            Attempt::SignUp | Attempt::Reset => Limits {
                per_address_and_network: 3,
                per_address: 3,
                per_network: 10,
                window_minutes: 60,
            },
            // A real link is confirmed once or twice (a too-short password first); made-up links
            // come in floods from one network.
            Attempt::Confirm | Attempt::ResetConfirm => Limits {
                per_address_and_network: 10,
                per_address: 20,
                per_network: 20,
                window_minutes: 15,
            },
        }
    }
}

/// Recent attempts of one kind that an attempt is checked against ([`admit`]).
#[derive(sqlx::FromRow)]
struct Counts {
    /// At this address from this network.
    both: i64,
    /// At this address from anywhere.
    by_email: i64,
    /// From this network at any address.
    by_network: i64,
    /// The address's owner has logged in from this network before.
    owners_network: bool,
}

/// Records one attempt if it is within `limits`; `None` (nothing recorded) when it is not.
/// The id lets a successful log-in take its attempt back ([`forgive`]).
pub async fn admit(
    pool: &PgPool,
    attempt: Attempt,
    limits: &Limits,
    email: &str,
    network: &str,
) -> Result<Option<i64>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    // Address first, then network, in every transaction: no two can wait on each other.
    for key in [
        format!("throttle:{email}"),
        format!("throttle-net:{network}"),
    ] {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(key)
            .execute(&mut *tx)
            .await?;
    }
    // The address's owner has logged in from this network before: failures at the address
    // from elsewhere do not lock them out here (only this network's own count applies).
    let Counts {
        both,
        by_email,
        by_network,
        owners_network,
    } = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE email = $2 AND network = $3) AS both,
                count(*) FILTER (WHERE email = $2) AS by_email,
                count(*) FILTER (WHERE network = $3) AS by_network,
                $1 = 'login' AND EXISTS (SELECT 1 FROM login_networks
                                          WHERE email = $2 AND network = $3) AS owners_network
           FROM auth_attempts
          WHERE kind = $1 AND (email = $2 OR network = $3)
            AND attempted_at > now() - make_interval(mins => $4::int)",
    )
    .bind(attempt.kind())
    .bind(email)
    .bind(network)
    .bind(limits.window_minutes as i32)
    .fetch_one(&mut *tx)
    .await?;
    // The owner's own network lets them through the network's limits too (an office whose
    // address many share, sprayed by one of them): only their address's count there applies.
    if both >= limits.per_address_and_network
        || (by_email >= limits.per_address && !owners_network)
        || (by_network >= limits.per_network && !owners_network)
    {
        // Ended now, not when the dropped transaction's queued ROLLBACK is next flushed: until
        // then the pooled connection would keep holding the address's and the network's
        // advisory locks, and the next attempt for either would wait on them.
        tx.rollback().await?;
        return Ok(None);
    }
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO auth_attempts (kind, email, network) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(attempt.kind())
    .bind(email)
    .bind(network)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(id))
}

/// After a successful log-in: its own attempt, and the address's failures from this network,
/// no longer count, and the network is remembered as one the owner uses.
pub async fn forgive(
    pool: &PgPool,
    attempt_id: i64,
    email: &str,
    network: &str,
) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "DELETE FROM auth_attempts
          WHERE id = $1 OR (kind = 'login' AND email = $2 AND network = $3)",
    )
    .bind(attempt_id)
    .bind(email)
    .bind(network)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO login_networks (email, network) VALUES ($1, $2)
         ON CONFLICT (email, network) DO UPDATE SET last_login = now()",
    )
    .bind(email)
    .bind(network)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// Deletes attempts older than any window, and networks not logged in from for a year (called
/// by the periodic sweep).
pub async fn sweep(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let attempts =
        sqlx::query("DELETE FROM auth_attempts WHERE attempted_at < now() - interval '1 day'")
            .execute(pool)
            .await?
            .rows_affected();
    let networks =
        sqlx::query("DELETE FROM login_networks WHERE last_login < now() - interval '1 year'")
            .execute(pool)
            .await?
            .rows_affected();
    Ok(attempts + networks)
}
