//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::{
    path::PathBuf,
    sync::{Arc, OnceLock},
};

use server::{
    catalog::{self, import},
    search::{
        SearchEngine,
        e5::E5Model,
        embedder::{Embedder, LocalEmbedder},
        vectors::{VectorCache, embed_missing},
    },
};
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

/// The local model, loaded once per test binary.
pub fn model() -> Arc<E5Model> {
    static MODEL: OnceLock<Arc<E5Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| Arc::new(E5Model::from_cache(&cache_dir()).unwrap()))
        .clone()
}

pub fn local_embedder() -> Arc<LocalEmbedder> {
    Arc::new(LocalEmbedder::new(model(), 2))
}

/// The demo catalog (257 anime) with its vectors, and a search engine over it. Vectors go
/// through the disk cache one test at a time, so only the first test on a fresh machine
/// computes them.
pub async fn demo_engine(pool: &PgPool) -> SearchEngine {
    static EMBEDDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    catalog::ingest(pool, &import::demo_catalog(), false, MODEL, None)
        .await
        .unwrap();
    let embedder = local_embedder();
    {
        let _one_at_a_time = EMBEDDING.lock().await;
        let mut cache = VectorCache::open(
            &cache_dir().join("vectors"),
            &embedder.cache_version(),
            embedder.dimension(),
        )
        .unwrap();
        let report = embed_missing(pool, embedder.as_ref(), Some(&mut cache), false)
            .await
            .unwrap();
        assert_eq!(report.missing, 257);
    }
    SearchEngine::new(pool.clone(), embedder)
}
