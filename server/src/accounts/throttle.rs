//! Throttling of log-in failures and sign-up requests, per email and per client network. The
//! counts live in PostgreSQL (`auth_attempts`), not in memory, so every app server behind a load
//! balancer sees the same counts and a restart forgets nothing. Emails are counted whether or
//! not an account exists, so being throttled says nothing about an address.

use sqlx::PgPool;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// A failed log-in.
    LogIn,
    /// A sign-up request (each one sends a mail).
    SignUp,
}

/// How many attempts of a kind are allowed in a window.
#[derive(Debug, Clone, Copy)]
struct Limits {
    per_email: i64,
    per_network: i64,
    window_minutes: i64,
}

impl Attempt {
    fn kind(self) -> &'static str {
        match self {
            Attempt::LogIn => "login",
            Attempt::SignUp => "signup",
        }
    }

    fn limits(self) -> Limits {
        match self {
            // Five guesses at one account per quarter hour; a shared network (an office, a
            // campus) gets more before all its users are locked out.
            Attempt::LogIn => Limits {
                per_email: 5,
                per_network: 30,
                window_minutes: 15,
            },
            // Each sign-up sends a mail: bound the mail one address can be sent.
            Attempt::SignUp => Limits {
                per_email: 3,
                per_network: 10,
                window_minutes: 60,
            },
        }
    }

    /// The window, in minutes, a throttled person is told to wait at most.
    pub fn window_minutes(self) -> i64 {
        self.limits().window_minutes
    }
}

/// Whether another attempt is allowed now.
pub async fn allowed(
    pool: &PgPool,
    attempt: Attempt,
    email: &str,
    network: &str,
) -> Result<bool, sqlx::Error> {
    let limits = attempt.limits();
    let (by_email, by_network): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE email = $2), count(*) FILTER (WHERE network = $3)
           FROM auth_attempts
          WHERE kind = $1 AND (email = $2 OR network = $3)
            AND attempted_at > now() - make_interval(mins => $4::int)",
    )
    .bind(attempt.kind())
    .bind(email)
    .bind(network)
    .bind(limits.window_minutes as i32)
    .fetch_one(pool)
    .await?;
    Ok(by_email < limits.per_email && by_network < limits.per_network)
}

/// Records one attempt.
pub async fn record(
    pool: &PgPool,
    attempt: Attempt,
    email: &str,
    network: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO auth_attempts (kind, email, network) VALUES ($1, $2, $3)")
        .bind(attempt.kind())
        .bind(email)
        .bind(network)
        .execute(pool)
        .await?;
    Ok(())
}

/// Forgets an email's failed log-ins (after a successful one).
pub async fn clear(pool: &PgPool, attempt: Attempt, email: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM auth_attempts WHERE kind = $1 AND email = $2")
        .bind(attempt.kind())
        .bind(email)
        .execute(pool)
        .await?;
    Ok(())
}

/// Deletes attempts older than any window (called by the periodic sweep).
pub async fn sweep(pool: &PgPool) -> Result<u64, sqlx::Error> {
    Ok(
        sqlx::query("DELETE FROM auth_attempts WHERE attempted_at < now() - interval '1 day'")
            .execute(pool)
            .await?
            .rows_affected(),
    )
}
