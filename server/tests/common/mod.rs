//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;

use sqlx::PgPool;

/// Embedding model name used for content hashes in tests.
pub const MODEL: &str = "multilingual-e5-small";
/// AniList id of Mob Psycho 100 III: a sequel whose own synopsis says little.
pub const MOB_PSYCHO_III: i32 = 140439;

/// The stored document of anime `id`.
pub async fn document(pool: &PgPool, id: i32) -> String {
    sqlx::query_scalar("SELECT body FROM documents WHERE anime_id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// `../shared/catalog/media.jsonl.gz` beside the checkout (CI has it there too).
pub fn shared_catalog() -> PathBuf {
    let path = std::env::var_os("ZENBU_SHARED_CATALOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/catalog/media.jsonl.gz")
        });
    assert!(
        path.exists(),
        "reference catalog missing at {}",
        path.display()
    );
    path
}

/// The download cache the scripts use (`ZENBU_CACHE_DIR`), else the server's default.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("ZENBU_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(server::config::default_cache_dir)
}
