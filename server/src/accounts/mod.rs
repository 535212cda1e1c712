//! Who is searching: anonymous visitors (a signed cookie, [`visitor`]) and registered users
//! (email and password, sessions in PostgreSQL through tower-sessions).
//!
//! Signing up goes through an emailed link, so that neither sign-up nor log-in ever tells
//! whether an address has an account: a sign-up for a new address mails a link that creates the
//! account; one for a registered address mails "you already have an account"; the page says the
//! same in both cases. Log-in failures say "email or password is wrong" whether or not the
//! address exists, and an unknown address still costs one password verification.

pub mod csrf;
pub mod email;
pub mod mail;
pub mod network;
pub mod password;
pub mod throttle;
pub mod visitor;

use sha2::{Digest, Sha256};
use sqlx::PgPool;
use tower_sessions::Session;

use crate::quota::{Payer, Plan};
use throttle::Attempt;

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "zenbu_session";
/// The session key that holds the signed-in user's id.
const SESSION_USER: &str = "user_id";
/// How long a sign-up link works.
const SIGN_UP_LINK_HOURS: i32 = 24;

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error("session store: {0}")]
    Session(#[from] tower_sessions::session::Error),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// A registered user.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct User {
    pub id: i64,
    pub email: String,
    #[sqlx(try_from = "String")]
    pub plan: StoredPlan,
}

/// `users.plan` as read from the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredPlan(pub Plan);

impl From<String> for StoredPlan {
    fn from(plan: String) -> Self {
        StoredPlan(Plan::from_stored(&plan))
    }
}

impl User {
    pub fn subject(&self) -> String {
        format!("user:{}", self.id)
    }

    pub fn plan(&self) -> Plan {
        self.plan.0
    }
}

/// Why a sign-up or log-in form was not accepted; each maps to a message on the form's page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FormError {
    #[error(transparent)]
    Email(#[from] email::EmailError),
    #[error(transparent)]
    Password(#[from] password::PasswordError),
    #[error("email or password is wrong")]
    WrongCredentials,
    #[error("too many attempts; try again in {0} minutes")]
    Throttled(i64),
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source");
    crate::catalog::document::hex(&bytes)
}

fn token_hash(token: &str) -> String {
    crate::catalog::document::hex(&Sha256::digest(token.as_bytes()))
}

/// Handles a sign-up form (an address only): a mail is queued for it (a link for a new one, a
/// notice for a registered one) and the caller shows the same "check your mail" page either
/// way. The password is chosen on the page the link opens, so whoever asked for the sign-up
/// cannot know the password of an account created for someone else's address. `public_url` is
/// where links in mail point.
pub async fn request_sign_up(
    pool: &PgPool,
    raw_email: &str,
    network: &str,
    public_url: &str,
) -> Result<Result<(), FormError>, AccountError> {
    let email = match email::normalise(raw_email) {
        Ok(email) => email,
        Err(error) => return Ok(Err(error.into())),
    };
    let limits = Attempt::SignUp.limits();
    if throttle::admit(pool, Attempt::SignUp, &limits, &email, network)
        .await?
        .is_none()
    {
        return Ok(Err(FormError::Throttled(limits.window_minutes)));
    }
    let mut tx = pool.begin().await?;
    let registered: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users WHERE email = $1)")
            .bind(&email)
            .fetch_one(&mut *tx)
            .await?;
    if registered {
        mail::send(
            &mut *tx,
            &email,
            "Zenbu: you already have an account",
            &format!(
                "Someone (maybe you) asked to create a Zenbu account for this address, which \
                 already has one. Log in at {public_url}/login\n\nIf it was not you, you can \
                 ignore this message."
            ),
        )
        .await?;
    } else {
        let token = new_token();
        sqlx::query(
            "INSERT INTO pending_signups (token_hash, email, expires_at)
             VALUES ($1, $2, now() + make_interval(hours => $3))",
        )
        .bind(token_hash(&token))
        .bind(&email)
        .bind(SIGN_UP_LINK_HOURS)
        .execute(&mut *tx)
        .await?;
        mail::send(
            &mut *tx,
            &email,
            "Zenbu: finish creating your account",
            &format!(
                "Open this link to choose your password and finish creating your Zenbu account \
                 (it works for {SIGN_UP_LINK_HOURS} hours):\n\
                 {public_url}/register/confirm?token={token}\n\n\
                 If you did not ask for an account, you can ignore this message."
            ),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Ok(()))
}

/// What following a sign-up link did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmation {
    /// The account exists now.
    Created(User),
    /// The password breaks the length rules; the link still works.
    BadPassword(password::PasswordError),
    /// The address got an account in the meantime (another link was used first).
    AlreadyRegistered,
    /// Unknown, used or expired link.
    Invalid,
    /// Too many confirmations from this network; try again in this many minutes.
    Throttled(i64),
}

/// Turns a pending sign-up into a user with the password chosen on the link's page. A link
/// works once. Attempts are throttled per network, and the link is checked before the password
/// is hashed: a flood of made-up links costs a database read each, not an argon2 hash (19 MiB
/// and the permits log-in needs).
pub async fn confirm_sign_up(
    pool: &PgPool,
    token: &str,
    password: &str,
    network: &str,
) -> Result<Confirmation, AccountError> {
    let limits = Attempt::Confirm.limits();
    let token_hash = token_hash(token.trim());
    if throttle::admit(pool, Attempt::Confirm, &limits, &token_hash, network)
        .await?
        .is_none()
    {
        return Ok(Confirmation::Throttled(limits.window_minutes));
    }
    if let Err(error) = password::check(password) {
        return Ok(Confirmation::BadPassword(error));
    }
    let live: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pending_signups WHERE token_hash = $1 AND expires_at > now())",
    )
    .bind(&token_hash)
    .fetch_one(pool)
    .await?;
    if !live {
        return Ok(Confirmation::Invalid);
    }
    let password_hash = password::hash(password).await?;
    let mut tx = pool.begin().await?;
    // Used by a concurrent confirmation meanwhile: this one finds nothing to delete.
    let email: Option<String> = sqlx::query_scalar(
        "DELETE FROM pending_signups WHERE token_hash = $1 AND expires_at > now()
         RETURNING email",
    )
    .bind(&token_hash)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(email) = email else {
        return Ok(Confirmation::Invalid);
    };
    let user: Option<User> = sqlx::query_as(
        "INSERT INTO users (email, password_hash) VALUES ($1, $2)
         ON CONFLICT (email) DO NOTHING RETURNING id, email, plan",
    )
    .bind(&email)
    .bind(&password_hash)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(user.map_or(Confirmation::AlreadyRegistered, Confirmation::Created))
}

/// A user's id and password hash (PHC string), looked up by address to check a log-in.
#[derive(sqlx::FromRow)]
struct StoredCredentials {
    id: i64,
    password_hash: String,
}

/// Checks a log-in form. Attempts are throttled per address and network, per address and per
/// network (see [`throttle`]), and an unknown address is indistinguishable from a wrong
/// password (same error, one verification either way).
pub async fn log_in(
    pool: &PgPool,
    raw_email: &str,
    password: &str,
    network: &str,
) -> Result<Result<User, FormError>, AccountError> {
    // A malformed address cannot have an account; it is answered like any wrong pair.
    let email = email::normalise(raw_email).unwrap_or_else(|_| raw_email.trim().to_lowercase());
    let limits = Attempt::LogIn.limits();
    let Some(attempt) = throttle::admit(pool, Attempt::LogIn, &limits, &email, network).await?
    else {
        return Ok(Err(FormError::Throttled(limits.window_minutes)));
    };
    let stored: Option<StoredCredentials> =
        sqlx::query_as("SELECT id, password_hash FROM users WHERE email = $1")
            .bind(&email)
            .fetch_optional(pool)
            .await?;
    let bounded = password.chars().count() <= password::MAX_CHARS;
    let matches = password::verify(
        if bounded { password } else { "" },
        stored.as_ref().map(|user| user.password_hash.as_str()),
    )
    .await;
    match stored {
        Some(StoredCredentials { id, .. }) if matches && bounded => {
            throttle::forgive(pool, attempt, &email, network).await?;
            Ok(Ok(user_by_id(pool, id).await?.ok_or_else(|| {
                AccountError::Internal(anyhow::anyhow!("user {id} vanished while logging in"))
            })?))
        }
        // The attempt stays recorded: it was a failure.
        _ => Ok(Err(FormError::WrongCredentials)),
    }
}

pub async fn user_by_id(pool: &PgPool, id: i64) -> Result<Option<User>, sqlx::Error> {
    sqlx::query_as("SELECT id, email, plan FROM users WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await
}

/// Starts a signed-in session: a new session id (so an id planted before log-in is worthless)
/// holding the user's id.
pub async fn start_session(session: &Session, user: &User) -> Result<(), AccountError> {
    session.cycle_id().await?;
    session.insert(SESSION_USER, user.id).await?;
    Ok(())
}

/// Ends the session: its row is deleted and the cookie cleared; the next request starts afresh.
pub async fn end_session(session: &Session) -> Result<(), AccountError> {
    session.flush().await?;
    Ok(())
}

/// The signed-in user of a session, if any (a deleted user counts as signed out).
pub async fn session_user(pool: &PgPool, session: &Session) -> Result<Option<User>, AccountError> {
    let Some(id) = session.get::<i64>(SESSION_USER).await? else {
        return Ok(None);
    };
    Ok(user_by_id(pool, id).await?)
}

/// Who a request's searches are charged to: the signed-in user, else the anonymous visitor and
/// its network. `parts` must have passed the session and visitor middleware.
pub async fn payer(
    pool: &PgPool,
    parts: &axum::http::request::Parts,
) -> Result<(Payer, Option<User>), AccountError> {
    if let Some(session) = parts.extensions.get::<Session>()
        && let Some(user) = session_user(pool, session).await?
    {
        let payer = Payer {
            subject: user.subject(),
            plan: user.plan(),
            network: None,
        };
        return Ok((payer, Some(user)));
    }
    let visitor = parts
        .extensions
        .get::<visitor::Visitor>()
        .ok_or_else(|| anyhow::anyhow!("the visitor middleware did not run"))?;
    let payer = Payer {
        subject: visitor.subject(),
        plan: Plan::Anonymous,
        network: Some(network::ClientNetwork::of_parts(parts).0),
    };
    Ok((payer, None))
}

/// Deletes expired sessions and sign-up links, and old throttling rows.
pub async fn sweep(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let sessions = sqlx::query("DELETE FROM tower_sessions.session WHERE expiry_date < now()")
        .execute(pool)
        .await?
        .rows_affected();
    let links = sqlx::query("DELETE FROM pending_signups WHERE expires_at < now()")
        .execute(pool)
        .await?
        .rows_affected();
    Ok(sessions + links + throttle::sweep(pool).await?)
}
