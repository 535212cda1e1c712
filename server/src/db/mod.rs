//! The database: which PostgreSQL to use, the connection pool, the pgvector check and the
//! migrations.

pub mod embedded;
mod pg_trgm;

use std::time::Duration;

use sqlx::{PgPool, migrate::Migrator, postgres::PgPoolOptions};

use crate::config::{Config, DbConfig};
use embedded::EmbeddedPostgres;

/// The database in its two roles: the primary, for every write and every read that must see
/// its own writes (accounts, quota, billing, the caches' writes), and where the search pipeline
/// reads (a streaming replica when one is configured, else the primary). Built once at start
/// and handed to each service: none reaches the pools through another.
#[derive(Debug, Clone)]
pub struct Db {
    pub primary: PgPool,
    pub reads: PgPool,
    replica: bool,
}

impl Db {
    /// One server for everything.
    pub fn new(primary: PgPool) -> Self {
        Self {
            reads: primary.clone(),
            primary,
            replica: false,
        }
    }

    /// Reads of the pipeline go to `replica`; writes stay on the primary.
    pub fn with_replica(mut self, replica: PgPool) -> Self {
        self.reads = replica;
        self.replica = true;
        self
    }

    /// Whether the pipeline reads from a replica (then an unreachable database during a
    /// search most likely means the replica, and the primary can still take a refund).
    pub fn has_replica(&self) -> bool {
        self.replica
    }
}

impl From<PgPool> for Db {
    fn from(primary: PgPool) -> Self {
        Self::new(primary)
    }
}

/// The schema steps in `migrations/`, embedded in the binary at build time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Oldest pgvector with HNSW indexes, which search relies on.
pub const MIN_PGVECTOR: &str = "0.5";

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("embedded PostgreSQL: {0:#}")]
    Embedded(anyhow::Error),
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(#[source] sqlx::Error),
    #[error(
        "pgvector is not available on this PostgreSQL server; Zenbu needs the `vector` extension \
         (pgvector >= {MIN_PGVECTOR}) installed on the server, or unset DATABASE_URL to use the \
         embedded one"
    )]
    PgvectorMissing,
    #[error("pgvector {0} is too old; Zenbu needs >= {MIN_PGVECTOR} (HNSW indexes)")]
    PgvectorTooOld(String),
    #[error(
        "pg_trgm is not available on this PostgreSQL server; Zenbu needs it for fuzzy title \
         matching (it ships with PostgreSQL's contrib packages and every managed PostgreSQL)"
    )]
    TrigramMissing,
    #[error("migrations failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(transparent)]
    Query(#[from] sqlx::Error),
}

/// The URL of the database to use: `DATABASE_URL` when set, else the embedded server, started
/// (and installed, initialised, given its database) when needed.
pub async fn database_url(config: &DbConfig) -> Result<String, DbError> {
    // An empty DATABASE_URL means "not set" (the e2e suite blanks it to keep a .env's out).
    if let Some(url) = config
        .database_url
        .as_deref()
        .filter(|url| !url.trim().is_empty())
    {
        return Ok(url.to_string());
    }
    let embedded = EmbeddedPostgres::from_config(&config.embedded).map_err(DbError::Embedded)?;
    let starter = embedded.clone();
    tokio::task::spawn_blocking(move || starter.start())
        .await
        .map_err(|join| DbError::Embedded(join.into()))?
        .map_err(DbError::Embedded)?;
    ensure_database(&embedded).await?;
    embedded.url().map_err(DbError::Embedded)
}

/// Creates the app's database in the embedded server when it does not exist yet.
async fn ensure_database(embedded: &EmbeddedPostgres) -> Result<(), DbError> {
    let admin_url = embedded.url_for("postgres").map_err(DbError::Embedded)?;
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(&admin_url)
        .await
        .map_err(DbError::Connect)?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(embedded.database())
            .fetch_one(&admin)
            .await?;
    if !exists {
        // The name was validated as a plain identifier; CREATE DATABASE takes no parameters.
        sqlx::query(&format!("CREATE DATABASE \"{}\"", embedded.database()))
            .execute(&admin)
            .await?;
    }
    admin.close().await;
    Ok(())
}

/// Whether an error means the database cannot be reached (down, restarting, pool exhausted):
/// worth a 503 and a retry, not a 500.
pub fn is_unavailable(error: &sqlx::Error) -> bool {
    matches!(
        error,
        sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
    ) || matches!(error, sqlx::Error::Database(db) if db.code().is_some_and(|code| {
        // admin_shutdown, crash_shutdown, cannot_connect_now: a restarting server;
        // query_canceled: a statement past the serving pool's statement_timeout (a stall).
        ["57P01", "57P02", "57P03", "57014"].contains(&code.as_ref())
    }))
}

/// A pool like `pool` (same server, same settings) whose statements PostgreSQL cancels past
/// `timeout`: the pool that serves requests, so that no statement outlives the request it was
/// made for (a stalled one was left running after its request had given up). Start-up work
/// (migrations, loading a catalog, embedding) runs on the pool without it.
pub async fn with_statement_timeout(pool: &PgPool, timeout: Duration) -> Result<PgPool, DbError> {
    let options = (*pool.connect_options())
        .clone()
        .options([("statement_timeout", timeout.as_millis().to_string())]);
    Ok(pool_options().connect_lazy_with(options))
}

/// The pool of the database `config` names (starting the embedded one when needed).
pub async fn open(config: &Config) -> Result<PgPool, DbError> {
    connect(&database_url(&config.db).await?).await
}

/// The pool of the read replica at `url` (`ZENBU_REPLICA_URL`), when one is configured. A
/// replica that is not in recovery still works (it may be a logical copy) but is worth a
/// warning: what is written there never reaches the primary.
pub async fn open_replica(url: Option<&str>) -> Result<Option<PgPool>, DbError> {
    let Some(url) = url.filter(|url| !url.trim().is_empty()) else {
        return Ok(None);
    };
    let pool = match connect(url).await {
        Ok(pool) => pool,
        // Unreachable now (an outage, not a wrong URL or password): start anyway, and let
        // searches answer 503 until it is back, rather than take accounts down with it.
        Err(DbError::Connect(error)) if is_unavailable(&error) => {
            tracing::warn!(%error, "the read replica is unreachable: searches fail until it is back");
            return Ok(Some(
                pool_options().connect_lazy(url).map_err(DbError::Connect)?,
            ));
        }
        Err(error) => return Err(error),
    };
    let standby: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&pool)
        .await?;
    if standby {
        tracing::info!("search reads go to the read replica");
    } else {
        tracing::warn!("ZENBU_REPLICA_URL is not a standby (pg_is_in_recovery() is false)");
    }
    Ok(Some(pool))
}

/// What `/healthz` says of the read replica.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ReplicaHealth {
    /// `ok`, or `unavailable` when it cannot be reached.
    pub status: String,
    pub in_recovery: Option<bool>,
    /// Seconds since the last transaction it replayed was committed on the primary: its lag
    /// while the primary writes (it grows while the primary is idle, too).
    pub replay_lag_seconds: Option<f64>,
}

/// What a replica says of itself.
#[derive(sqlx::FromRow)]
struct ReplicaState {
    in_recovery: bool,
    replay_lag_seconds: Option<f64>,
}

pub async fn replica_health(replica: &PgPool) -> ReplicaHealth {
    let state: Result<ReplicaState, sqlx::Error> = sqlx::query_as(
        "SELECT pg_is_in_recovery() AS in_recovery,
                extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8
                    AS replay_lag_seconds",
    )
    .fetch_one(replica)
    .await;
    match state {
        Ok(state) => ReplicaHealth {
            status: "ok".into(),
            in_recovery: Some(state.in_recovery),
            replay_lag_seconds: state.replay_lag_seconds,
        },
        Err(error) => {
            tracing::warn!(%error, "read replica unreachable");
            ReplicaHealth {
                status: "unavailable".into(),
                in_recovery: None,
                replay_lag_seconds: None,
            }
        }
    }
}

/// Opens the pool and checks that pgvector and pg_trgm can be used. A short acquire timeout
/// makes requests fail fast (503) while the database is down instead of hanging.
pub async fn connect(url: &str) -> Result<PgPool, DbError> {
    let pool = pool_options()
        .connect(url)
        .await
        .map_err(DbError::Connect)?;
    check_extensions(&pool).await?;
    Ok(pool)
}

fn pool_options() -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(2))
}

/// Fails with a clear error unless the server offers pgvector >= [`MIN_PGVECTOR`] and pg_trgm;
/// returns the pgvector version it offers.
pub async fn check_extensions(pool: &PgPool) -> Result<String, DbError> {
    let available = |name: &'static str| {
        sqlx::query_scalar::<_, String>(
            "SELECT default_version FROM pg_available_extensions WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(pool)
    };
    let pgvector = pgvector_usable(available("vector").await?)?;
    available("pg_trgm").await?.ok_or(DbError::TrigramMissing)?;
    Ok(pgvector)
}

fn pgvector_usable(available: Option<String>) -> Result<String, DbError> {
    let version = available.ok_or(DbError::PgvectorMissing)?;
    if major_minor(&version) < major_minor(MIN_PGVECTOR) {
        return Err(DbError::PgvectorTooOld(version));
    }
    Ok(version)
}

fn major_minor(version: &str) -> (u32, u32) {
    let mut parts = version
        .split('.')
        .map(|part| part.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

pub async fn migrate(pool: &PgPool) -> Result<(), DbError> {
    MIGRATOR.run(pool).await?;
    Ok(())
}

/// Versions reported by `/healthz`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Versions {
    pub postgres: String,
    pub pgvector: Option<String>,
}

pub async fn versions(pool: &PgPool) -> Result<Versions, sqlx::Error> {
    let postgres: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(pool)
        .await?;
    let pgvector: Option<String> =
        sqlx::query_scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            .fetch_optional(pool)
            .await?;
    Ok(Versions { postgres, pgvector })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgvector_version_gate() {
        assert!(matches!(
            pgvector_usable(None),
            Err(DbError::PgvectorMissing)
        ));
        assert!(
            matches!(pgvector_usable(Some("0.4.4".into())), Err(DbError::PgvectorTooOld(v)) if v == "0.4.4")
        );
        assert_eq!(pgvector_usable(Some("0.5.0".into())).unwrap(), "0.5.0");
        assert_eq!(pgvector_usable(Some("0.8.5".into())).unwrap(), "0.8.5");
        assert_eq!(pgvector_usable(Some("1.0".into())).unwrap(), "1.0");
    }

    #[test]
    fn missing_pgvector_message_says_what_to_do() {
        let message = DbError::PgvectorMissing.to_string();
        assert!(message.contains("pgvector >= 0.5"), "{message}");
        assert!(message.contains("DATABASE_URL"), "{message}");
    }
}
