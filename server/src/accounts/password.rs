//! Password hashing: argon2id with the argon2 crate's defaults (19 MiB, 2 passes, 1 lane, the
//! OWASP minimum), stored as PHC strings so parameters can be raised later without breaking old
//! hashes.
//!
//! Hashing is deliberately expensive, so it runs on the blocking pool, at most one per core at a
//! time (a burst of log-ins must not take all memory: 19 MiB each), and passwords are bounded.

use std::sync::{Arc, LazyLock};

use argon2::{
    Argon2, PasswordHash, PasswordHasher, PasswordVerifier,
    password_hash::{SaltString, rand_core::OsRng},
};
use tokio::sync::Semaphore;

/// Shortest password accepted (characters).
pub const MIN_CHARS: usize = 8;
/// Longest password accepted (characters): bounds the hashing cost of one request.
pub const MAX_CHARS: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    #[error("the password must have at least {MIN_CHARS} characters")]
    TooShort,
    #[error("the password must have at most {MAX_CHARS} characters")]
    TooLong,
}

/// Checks the length rules (counted in characters, as a person counts them).
pub fn check(password: &str) -> Result<(), PasswordError> {
    let chars = password.chars().count();
    if chars < MIN_CHARS {
        Err(PasswordError::TooShort)
    } else if chars > MAX_CHARS {
        Err(PasswordError::TooLong)
    } else {
        Ok(())
    }
}

/// Hashes running at once: one per core.
fn hashing_permits() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

static HASHING: LazyLock<Arc<Semaphore>> =
    LazyLock::new(|| Arc::new(Semaphore::new(hashing_permits())));

/// Takes every hashing permit until the guard is dropped: while it is held, any hashing waits.
/// For tests proving that a path hashes nothing (a bogus sign-up confirmation).
#[doc(hidden)]
pub async fn hold_every_permit() -> tokio::sync::OwnedSemaphorePermit {
    HASHING
        .clone()
        .acquire_many_owned(hashing_permits() as u32)
        .await
        .expect("the semaphore is never closed")
}

/// A hash of a password nobody has, verified when an email is unknown so that a log-in for an
/// unknown email costs the same time as one with a wrong password.
static DUMMY_HASH: LazyLock<String> =
    LazyLock::new(|| hash_now("not a password anyone has: dummy").expect("hashing works"));

/// Computes the dummy hash now (at start-up), so the first log-in for an unknown address does
/// not take two hashes' time.
pub async fn prepare() {
    on_blocking_pool(|| LazyLock::force(&DUMMY_HASH).len()).await;
}

fn hash_now(password: &str) -> Result<String, argon2::password_hash::Error> {
    let salt = SaltString::generate(&mut OsRng);
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)?
        .to_string())
}

fn verify_now(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .and_then(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed))
        .is_ok()
}

/// Runs `work` on the blocking pool, at most one per core. The permit goes with the work onto
/// its thread and is returned the moment the hash is done: held by the awaiting task instead,
/// it would stay taken for as long as that task is not polled again (a caller that gave up, a
/// runtime whose thread is busy), and log-ins elsewhere would wait for it.
async fn on_blocking_pool<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let permit = HASHING
        .clone()
        .acquire_owned()
        .await
        .expect("the semaphore is never closed");
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        work()
    })
    .await
    .expect("password hashing does not panic")
}

/// The PHC string of `password` (argon2id, random salt).
pub async fn hash(password: &str) -> anyhow::Result<String> {
    let password = password.to_string();
    on_blocking_pool(move || hash_now(&password))
        .await
        .map_err(|error| anyhow::anyhow!("hashing a password: {error}"))
}

/// Whether `password` matches `phc`; with `None` (no such account) a dummy hash is checked, so
/// the answer (false) takes as long as a wrong password.
pub async fn verify(password: &str, phc: Option<&str>) -> bool {
    let password = password.to_string();
    let known = phc.is_some();
    let phc = phc.map(str::to_string);
    on_blocking_pool(move || {
        let phc = phc.as_deref().unwrap_or(DUMMY_HASH.as_str());
        verify_now(&password, phc) && known
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_rules_count_characters() {
        assert_eq!(check("short"), Err(PasswordError::TooShort));
        assert_eq!(check("ñññññññ"), Err(PasswordError::TooShort)); // 7 chars, 14 bytes
        assert_eq!(check("ñññññññ1"), Ok(()));
        assert_eq!(check(&"a".repeat(MAX_CHARS)), Ok(()));
        assert_eq!(
            check(&"a".repeat(MAX_CHARS + 1)),
            Err(PasswordError::TooLong)
        );
    }

    #[tokio::test]
    async fn hashes_are_argon2id_salted_and_verify() {
        let first = hash("correct horse").await.unwrap();
        let second = hash("correct horse").await.unwrap();
        assert!(
            first.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{first}"
        );
        assert_ne!(first, second, "salts differ");
        assert!(verify("correct horse", Some(&first)).await);
        assert!(!verify("correct horsE", Some(&first)).await);
        assert!(!verify("correct horse", Some("not a phc string")).await);
        // No account: the dummy hash is checked and the answer is always no.
        assert!(!verify("not a password anyone has: dummy", None).await);
    }
}
