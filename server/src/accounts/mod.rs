//! Who is searching: anonymous visitors (a signed cookie, [`visitor`]) and registered users
//! (email and password, sessions in PostgreSQL through tower-sessions).
//!
//! Signing up goes through an emailed link, so that neither sign-up nor log-in ever tells
//! whether an address has an account: a sign-up for a new address mails a link that creates the
//! account; one for a registered address mails "you already have an account"; the page says the
//! same in both cases. Log-in failures say "email or password is wrong" whether or not the
//! address exists, and an unknown address still costs one password verification. A password
//! reset answers the same whether or not the address has an account, too.
//!
//! One mailbox is one account: `ana+2@…` finds `ana@…`'s account ([`email::mailbox`]).
//! Each signed-in session has a row in `user_sessions` (its network, when it started and was
//! last seen); deleting the row signs the session out, which is how a password reset ends every
//! other session.

pub mod csrf;
pub mod email;
pub mod letters;
pub mod network;
pub mod password;
pub mod throttle;
pub mod visitor;

use app::i18n::Lang;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use tower_sessions::Session;

use crate::{
    mail,
    quota::{Payer, Plan},
};
use throttle::Attempt;

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "zenbu_session";
/// The session cookie's name over https (see `visitor::SECURE_COOKIE` for why `__Host-`).
/// Renaming ends the sessions started under the old name once: their holders sign in again.
pub const SECURE_SESSION_COOKIE: &str = "__Host-zenbu_session";

/// The session cookie's name on a site served over https or not.
pub fn session_cookie_name(secure: bool) -> &'static str {
    if secure {
        SECURE_SESSION_COOKIE
    } else {
        SESSION_COOKIE
    }
}
/// The session key that holds the signed-in session's key (its `user_sessions` row is found by
/// the key's SHA-256).
const SESSION_KEY: &str = "session_key";
/// A session not used for this many days ends (tower-sessions' expiry on inactivity).
pub const SESSION_DAYS: i64 = 30;
/// How long a sign-up link works.
const SIGN_UP_LINK_HOURS: i32 = 24;
/// How long a password reset link works.
const RESET_LINK_MINUTES: i32 = 60;

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

impl TryFrom<String> for StoredPlan {
    type Error = app::plans::UnknownPlan;

    fn try_from(plan: String) -> Result<Self, Self::Error> {
        Plan::from_stored(&plan).map(StoredPlan)
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
    /// The current password, asked again before a change, is wrong.
    #[error("the current password is wrong")]
    WrongPassword,
    #[error("too many attempts; try again in {0} minutes")]
    Throttled(i64),
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source");
    hex::encode(bytes)
}

fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Handles a sign-up form (an address only): a mail is queued for it (a link for a new one, a
/// notice for a registered one) and the caller shows the same "check your mail" page either
/// way. The password is chosen on the page the link opens, so whoever asked for the sign-up
/// cannot know the password of an account created for someone else's address. `public_url` is
/// where links in mail point; `lang` the language the mail is written in.
pub async fn request_sign_up(
    pool: &PgPool,
    raw_email: &str,
    network: &str,
    public_url: &str,
    lang: Lang,
) -> Result<Result<(), FormError>, AccountError> {
    let email = match email::normalise(raw_email) {
        Ok(email) => email,
        Err(error) => return Ok(Err(error.into())),
    };
    let mailbox = email::mailbox(pool, &email).await?;
    let limits = Attempt::SignUp.limits();
    if throttle::admit(pool, Attempt::SignUp, &limits, &mailbox, network)
        .await?
        .is_none()
    {
        return Ok(Err(FormError::Throttled(limits.window_minutes)));
    }
    let mut tx = pool.begin().await?;
    // Another spelling of the same mailbox (`ana+2@…`) counts as registered.
    let registered: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users WHERE mailbox = $1)")
            .bind(&mailbox)
            .fetch_one(&mut *tx)
            .await?;
    if registered {
        mail::queue(
            &mut *tx,
            &email,
            &letters::already_registered(lang, public_url),
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
        let link = format!("{public_url}/register/confirm?token={token}");
        mail::queue(
            &mut *tx,
            &email,
            &letters::sign_up_link(lang, link, SIGN_UP_LINK_HOURS),
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
    // One account per mailbox: two links for `ana@…` and `ana+2@…` confirmed at once create
    // one account (the lock orders them; the second sees the first's row).
    let mailbox = email::mailbox(&mut *tx, &email).await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("mailbox:{mailbox}"))
        .execute(&mut *tx)
        .await?;
    let user: Option<User> = sqlx::query_as(
        "INSERT INTO users (email, password_hash)
         SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM users WHERE mailbox = mailbox_of($1))
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
    // Throttled by mailbox: guesses at `ana+1@…`, `ana+2@…` all count against `ana@…`.
    let mailbox = email::mailbox(pool, &email).await?;
    let limits = Attempt::LogIn.limits();
    let Some(attempt) = throttle::admit(pool, Attempt::LogIn, &limits, &mailbox, network).await?
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
            throttle::forgive(pool, attempt, &mailbox, network).await?;
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
/// holding a new random key, whose `user_sessions` row ties it to the user.
pub async fn start_session(
    pool: &PgPool,
    session: &Session,
    user: &User,
    network: &str,
) -> Result<(), AccountError> {
    let key = new_token();
    sqlx::query("INSERT INTO user_sessions (key, user_id, network) VALUES ($1, $2, $3)")
        .bind(token_hash(&key))
        .bind(user.id)
        .bind(network)
        .execute(pool)
        .await?;
    session.cycle_id().await?;
    session.insert(SESSION_KEY, key).await?;
    Ok(())
}

/// Ends the session: its rows are deleted and the cookie cleared; the next request starts afresh.
pub async fn end_session(pool: &PgPool, session: &Session) -> Result<(), AccountError> {
    if let Some(key) = session.get::<String>(SESSION_KEY).await? {
        sqlx::query("DELETE FROM user_sessions WHERE key = $1")
            .bind(token_hash(&key))
            .execute(pool)
            .await?;
    }
    session.flush().await?;
    Ok(())
}

/// The signed-in user of a session, if any: a session whose `user_sessions` row is gone (ended
/// elsewhere, a password reset, a deleted user) counts as signed out. Marks the session seen (at
/// most every five minutes: one write per session, not per request).
pub async fn session_user(pool: &PgPool, session: &Session) -> Result<Option<User>, AccountError> {
    let Some(key) = session.get::<String>(SESSION_KEY).await? else {
        return Ok(None);
    };
    let key = token_hash(&key);
    let user: Option<User> = sqlx::query_as(
        "SELECT u.id, u.email, u.plan FROM user_sessions s JOIN users u ON u.id = s.user_id
          WHERE s.key = $1",
    )
    .bind(&key)
    .fetch_optional(pool)
    .await?;
    if user.is_some() {
        sqlx::query(
            "UPDATE user_sessions SET last_seen = now()
              WHERE key = $1 AND last_seen < now() - interval '5 minutes'",
        )
        .bind(&key)
        .execute(pool)
        .await?;
    }
    Ok(user)
}

/// One signed-in session of a user, as the account page lists it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SessionRow {
    /// `YYYY-MM-DD HH:MM` UTC.
    pub created: String,
    pub last_seen: String,
    pub network: String,
    /// The session the list is shown in.
    pub current: bool,
}

/// The `user_sessions` key of the signed-in session, if any.
async fn current_key(session: &Session) -> Result<Option<String>, AccountError> {
    Ok(session
        .get::<String>(SESSION_KEY)
        .await?
        .map(|key| token_hash(&key)))
}

/// The user's live sessions, newest first, `session` marked as the current one.
pub async fn sessions(
    pool: &PgPool,
    user_id: i64,
    session: &Session,
) -> Result<Vec<SessionRow>, AccountError> {
    let current = current_key(session).await?.unwrap_or_default();
    Ok(sqlx::query_as(
        "SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS created,
                to_char(last_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS last_seen,
                network, key = $2 AS current
           FROM user_sessions WHERE user_id = $1 ORDER BY created_at DESC, key",
    )
    .bind(user_id)
    .bind(current)
    .fetch_all(pool)
    .await?)
}

/// Signs out every session of `user` but `session`; how many ended.
pub async fn end_other_sessions(
    pool: &PgPool,
    user: &User,
    session: &Session,
) -> Result<u64, AccountError> {
    let current = current_key(session).await?.unwrap_or_default();
    Ok(
        sqlx::query("DELETE FROM user_sessions WHERE user_id = $1 AND key <> $2")
            .bind(user.id)
            .bind(current)
            .execute(pool)
            .await?
            .rows_affected(),
    )
}

/// Asks a signed-in user for their password again before something that cannot be undone
/// (a change of password, deleting the account): checked and throttled like a log-in, so a
/// borrowed session cannot guess it.
pub async fn check_password(
    pool: &PgPool,
    user: &User,
    password: &str,
    network: &str,
) -> Result<Result<(), FormError>, AccountError> {
    let mailbox = email::mailbox(pool, &user.email).await?;
    let limits = Attempt::LogIn.limits();
    let Some(attempt) = throttle::admit(pool, Attempt::LogIn, &limits, &mailbox, network).await?
    else {
        return Ok(Err(FormError::Throttled(limits.window_minutes)));
    };
    let stored: String = sqlx::query_scalar("SELECT password_hash FROM users WHERE id = $1")
        .bind(user.id)
        .fetch_one(pool)
        .await?;
    let bounded = password.chars().count() <= password::MAX_CHARS;
    if !(bounded && password::verify(password, Some(&stored)).await) {
        return Ok(Err(FormError::WrongPassword));
    }
    throttle::forgive(pool, attempt, &mailbox, network).await?;
    Ok(Ok(()))
}

/// Deletes a user and their personal data: the account, its sessions and links, its counted
/// searches, the networks it logged in from, its throttling rows, its queued mail. Kept: the
/// Stripe subscription's state (id, Stripe customer id, status, period end; no name or address,
/// its `user_id` cleared), because invoices and refunds refer to it; Stripe keeps the invoices.
/// The caller cancels live subscriptions first (`billing::Billing::cancel_live_subscriptions`).
pub async fn delete_user(pool: &PgPool, user: &User, lang: Lang) -> Result<(), AccountError> {
    let mut tx = pool.begin().await?;
    // The user's row first, then their subscription rows (its deletion clears their
    // `user_id`): the order a Stripe webhook takes them in, so the cancellation's webhook,
    // arriving meanwhile, waits instead of deadlocking with this.
    sqlx::query("SELECT id FROM users WHERE id = $1 FOR UPDATE")
        .bind(user.id)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "SELECT s.id FROM stripe_subscriptions s, users u
          WHERE u.id = $1 AND (s.user_id = u.id OR s.customer_id = u.stripe_customer_id)
          ORDER BY s.id FOR UPDATE OF s",
    )
    .bind(user.id)
    .execute(&mut *tx)
    .await?;
    let mailbox = email::mailbox(&mut *tx, &user.email).await?;
    for (statement, key) in [
        (
            "DELETE FROM search_usage WHERE subject = $1",
            user.subject(),
        ),
        (
            "DELETE FROM login_networks WHERE email = $1",
            mailbox.clone(),
        ),
        (
            "DELETE FROM auth_attempts WHERE email = $1",
            mailbox.clone(),
        ),
        (
            "DELETE FROM mail_outbox WHERE recipient = $1",
            user.email.clone(),
        ),
        (
            "DELETE FROM pending_signups WHERE email = $1",
            user.email.clone(),
        ),
    ] {
        sqlx::query(statement).bind(key).execute(&mut *tx).await?;
    }
    // user_sessions and password_resets go with the row (ON DELETE CASCADE).
    sqlx::query("DELETE FROM users WHERE id = $1")
        .bind(user.id)
        .execute(&mut *tx)
        .await?;
    mail::queue(&mut *tx, &user.email, &letters::account_deleted(lang)).await?;
    tx.commit().await?;
    tracing::info!(user = user.id, "account deleted");
    Ok(())
}

/// Starts moving a signed-in user's account to `raw_email` (the password asked again): a link
/// goes to the new address; nothing changes until it is followed. When the new address's
/// mailbox already has an account, that address gets the "you already have an account" mail
/// instead, so the form never tells whether an address is registered. Throttled per mailbox and
/// network like a sign-up (each request sends a mail).
#[allow(clippy::too_many_arguments)] // the form's two fields, and who asks from where
pub async fn request_email_change(
    pool: &PgPool,
    user: &User,
    password: &str,
    raw_email: &str,
    network: &str,
    public_url: &str,
    lang: Lang,
) -> Result<Result<(), FormError>, AccountError> {
    let new_email = match email::normalise(raw_email) {
        Ok(email) => email,
        Err(error) => return Ok(Err(error.into())),
    };
    if let Err(error) = check_password(pool, user, password, network).await? {
        return Ok(Err(error));
    }
    let mailbox = email::mailbox(pool, &new_email).await?;
    let limits = Attempt::SignUp.limits();
    if throttle::admit(pool, Attempt::SignUp, &limits, &mailbox, network)
        .await?
        .is_none()
    {
        return Ok(Err(FormError::Throttled(limits.window_minutes)));
    }
    let mut tx = pool.begin().await?;
    let taken: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users WHERE mailbox = $1 AND id <> $2)")
            .bind(&mailbox)
            .bind(user.id)
            .fetch_one(&mut *tx)
            .await?;
    if taken {
        mail::queue(
            &mut *tx,
            &new_email,
            &letters::already_registered(lang, public_url),
        )
        .await?;
    } else {
        let token = new_token();
        sqlx::query(
            "INSERT INTO email_changes (token_hash, user_id, new_email, expires_at)
             VALUES ($1, $2, $3, now() + make_interval(hours => $4))",
        )
        .bind(token_hash(&token))
        .bind(user.id)
        .bind(&new_email)
        .bind(SIGN_UP_LINK_HOURS)
        .execute(&mut *tx)
        .await?;
        let link = format!("{public_url}/account/email/confirm?token={token}");
        mail::queue(
            &mut *tx,
            &new_email,
            &letters::email_change_link(lang, link),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Ok(()))
}

/// What following an address-change link did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmailChange {
    /// The account uses the new address now; the old one was told.
    Done(User),
    /// The new address's mailbox got an account meanwhile.
    Taken,
    /// Unknown, used or expired link.
    Invalid,
    Throttled(i64),
}

/// Moves the account to the address a change link was mailed to. Works once; throttled per
/// network like the other links; the old address is told.
pub async fn confirm_email_change(
    pool: &PgPool,
    token: &str,
    network: &str,
    public_url: &str,
    lang: Lang,
) -> Result<EmailChange, AccountError> {
    let limits = Attempt::Confirm.limits();
    let token_hash = token_hash(token.trim());
    if throttle::admit(pool, Attempt::Confirm, &limits, &token_hash, network)
        .await?
        .is_none()
    {
        return Ok(EmailChange::Throttled(limits.window_minutes));
    }
    let mut tx = pool.begin().await?;
    let change: Option<(i64, String)> = sqlx::query_as(
        "DELETE FROM email_changes WHERE token_hash = $1 AND expires_at > now()
         RETURNING user_id, new_email",
    )
    .bind(&token_hash)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((user_id, new_email)) = change else {
        return Ok(EmailChange::Invalid);
    };
    let mailbox = email::mailbox(&mut *tx, &new_email).await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("mailbox:{mailbox}"))
        .execute(&mut *tx)
        .await?;
    let old_email: Option<String> = sqlx::query_scalar("SELECT email FROM users WHERE id = $1")
        .bind(user_id)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(old_email) = old_email else {
        return Ok(EmailChange::Invalid);
    };
    let user: Option<User> = sqlx::query_as(
        "UPDATE users SET email = $2, stripe_email_stale = true WHERE id = $1
            AND NOT EXISTS (SELECT 1 FROM users WHERE mailbox = mailbox_of($2) AND id <> $1)
         RETURNING id, email, plan",
    )
    .bind(user_id)
    .bind(&new_email)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(user) = user else {
        tx.commit().await?; // the link is used up either way
        return Ok(EmailChange::Taken);
    };
    sqlx::query("DELETE FROM email_changes WHERE user_id = $1")
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    // The networks the owner logs in from follow the address (they let the owner through the
    // throttles there), so the change does not lock them out of their own network.
    let old_mailbox = email::mailbox(&mut *tx, &old_email).await?;
    sqlx::query(
        "WITH moved AS (DELETE FROM login_networks WHERE email = $1 RETURNING *)
         INSERT INTO login_networks (email, network, last_login)
         SELECT $2, network, last_login FROM moved
         ON CONFLICT DO NOTHING",
    )
    .bind(&old_mailbox)
    .bind(&mailbox)
    .execute(&mut *tx)
    .await?;
    mail::queue(
        &mut *tx,
        &old_email,
        &letters::email_changed(lang, &new_email, public_url),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(user = user.id, "address changed");
    Ok(EmailChange::Done(user))
}

/// Changes a signed-in user's password: the current one is required (checked and throttled
/// like a log-in, so a borrowed session cannot guess it), every other session ends, and the
/// address is told.
#[allow(clippy::too_many_arguments)] // the form's two fields, and who asks from where
pub async fn change_password(
    pool: &PgPool,
    user: &User,
    session: &Session,
    current_password: &str,
    new_password: &str,
    network: &str,
    public_url: &str,
    lang: Lang,
) -> Result<Result<(), FormError>, AccountError> {
    if let Err(error) = check_password(pool, user, current_password, network).await? {
        return Ok(Err(error));
    }
    if let Err(error) = password::check(new_password) {
        return Ok(Err(error.into()));
    }
    let hash = password::hash(new_password).await?;
    let current = current_key(session).await?.unwrap_or_default();
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE users SET password_hash = $2 WHERE id = $1")
        .bind(user.id)
        .bind(&hash)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM user_sessions WHERE user_id = $1 AND key <> $2")
        .bind(user.id)
        .bind(&current)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM password_resets WHERE user_id = $1")
        .bind(user.id)
        .execute(&mut *tx)
        .await?;
    mail::queue(
        &mut *tx,
        &user.email,
        &letters::password_changed(lang, public_url),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(user = user.id, "password changed; other sessions ended");
    Ok(Ok(()))
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

/// Handles a "forgot my password" form: if the address's mailbox has an account, a single-use
/// link (an hour) is mailed to the account's address. The caller shows the same "check your
/// mail" page whether or not there is an account; throttled per mailbox and per network like a
/// sign-up, because each request may send a mail.
pub async fn request_password_reset(
    pool: &PgPool,
    raw_email: &str,
    network: &str,
    public_url: &str,
    lang: Lang,
) -> Result<Result<(), FormError>, AccountError> {
    let email = match email::normalise(raw_email) {
        Ok(email) => email,
        Err(error) => return Ok(Err(error.into())),
    };
    let mailbox = email::mailbox(pool, &email).await?;
    let limits = Attempt::Reset.limits();
    if throttle::admit(pool, Attempt::Reset, &limits, &mailbox, network)
        .await?
        .is_none()
    {
        return Ok(Err(FormError::Throttled(limits.window_minutes)));
    }
    let account: Option<(i64, String)> =
        sqlx::query_as("SELECT id, email FROM users WHERE mailbox = $1 ORDER BY id LIMIT 1")
            .bind(&mailbox)
            .fetch_optional(pool)
            .await?;
    let Some((user_id, address)) = account else {
        return Ok(Ok(()));
    };
    let token = new_token();
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO password_resets (token_hash, user_id, expires_at)
         VALUES ($1, $2, now() + make_interval(mins => $3))",
    )
    .bind(token_hash(&token))
    .bind(user_id)
    .bind(RESET_LINK_MINUTES)
    .execute(&mut *tx)
    .await?;
    let link = format!("{public_url}/password/reset?token={token}");
    mail::queue(&mut *tx, &address, &letters::password_reset(lang, link)).await?;
    tx.commit().await?;
    Ok(Ok(()))
}

/// What following a password reset link did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reset {
    /// The password is changed and every session of the account has ended.
    Done(User),
    /// The new password breaks the length rules; the link still works.
    BadPassword(password::PasswordError),
    /// Unknown, used or expired link.
    Invalid,
    /// Too many tries from this network; try again in this many minutes.
    Throttled(i64),
}

/// Sets the password a reset link was sent for. The link works once (every other link of the
/// account goes with it), and every session of the account ends: whoever knew the old password
/// is signed out. Throttled per network like a sign-up link, and checked before the password is
/// hashed.
pub async fn reset_password(
    pool: &PgPool,
    token: &str,
    new_password: &str,
    network: &str,
    public_url: &str,
    lang: Lang,
) -> Result<Reset, AccountError> {
    let limits = Attempt::ResetConfirm.limits();
    let token_hash = token_hash(token.trim());
    if throttle::admit(pool, Attempt::ResetConfirm, &limits, &token_hash, network)
        .await?
        .is_none()
    {
        return Ok(Reset::Throttled(limits.window_minutes));
    }
    if let Err(error) = password::check(new_password) {
        return Ok(Reset::BadPassword(error));
    }
    let live: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM password_resets WHERE token_hash = $1 AND expires_at > now())",
    )
    .bind(&token_hash)
    .fetch_one(pool)
    .await?;
    if !live {
        return Ok(Reset::Invalid);
    }
    let password_hash = password::hash(new_password).await?;
    let mut tx = pool.begin().await?;
    let user_id: Option<i64> = sqlx::query_scalar(
        "DELETE FROM password_resets WHERE token_hash = $1 AND expires_at > now()
         RETURNING user_id",
    )
    .bind(&token_hash)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(user_id) = user_id else {
        return Ok(Reset::Invalid);
    };
    let user: User = sqlx::query_as(
        "UPDATE users SET password_hash = $2 WHERE id = $1 RETURNING id, email, plan",
    )
    .bind(user_id)
    .bind(&password_hash)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM password_resets WHERE user_id = $1")
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM user_sessions WHERE user_id = $1")
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    mail::queue(
        &mut *tx,
        &user.email,
        &letters::password_changed(lang, public_url),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(user = user.id, "password reset; every session ended");
    Ok(Reset::Done(user))
}

/// Deletes expired sessions, sign-up and reset links, and old throttling rows.
pub async fn sweep(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut rows = sqlx::query(
        "DELETE FROM user_sessions WHERE last_seen < now() - make_interval(days => $1)",
    )
    .bind(SESSION_DAYS as i32)
    .execute(pool)
    .await?
    .rows_affected();
    for statement in [
        "DELETE FROM tower_sessions.session WHERE expiry_date < now()",
        "DELETE FROM pending_signups WHERE expires_at < now()",
        "DELETE FROM password_resets WHERE expires_at < now()",
        "DELETE FROM email_changes WHERE expires_at < now()",
    ] {
        rows += sqlx::query(statement).execute(pool).await?.rows_affected();
    }
    Ok(rows + throttle::sweep(pool).await?)
}
