//! Vectors searched in this process (`search::in_memory`) against the exact scoring of the same
//! vectors in PostgreSQL (`vector::evidence` over every anime), on the demo catalog with the
//! primary model's vectors: the same list, filters honoured, and a snapshot that follows the
//! catalog.

use app::search::Filters;
use server::search::{
    embedder::Embedder,
    in_memory::VectorsInMemory,
    vector::{self, VectorHit},
};
use sqlx::PgPool;

use crate::common::{MODEL, demo_engine, local_embedder};

const QUERIES: [&str; 4] = [
    "algo tranquilo, de alguien que viaja solo y ayuda a la gente",
    "a boy who can see spirits helps them pass on",
    "piratas que buscan un tesoro legendario",
    "giant humanoid robots and a reluctant teenage pilot",
];

/// Every anime scored exactly by PostgreSQL, best first, as the in-memory branch orders them,
/// among those `filters` allow (read the way the lexical branch filters).
async fn exact(pool: &PgPool, query: &[f32], filters: &Filters) -> Vec<VectorHit> {
    let sql = format!(
        "SELECT a.id FROM anime a WHERE true {}",
        server::search::filters::sql(1)
    );
    let ids: Vec<(i32,)> = server::search::filters::bind(sqlx::query_as(&sql), filters)
        .fetch_all(pool)
        .await
        .unwrap();
    let ids: Vec<i32> = ids.into_iter().map(|(id,)| id).collect();
    let mut hits = vector::evidence(pool, MODEL, query, &ids).await.unwrap();
    hits.sort_by(VectorHit::best_first);
    hits
}

/// The in-memory list is the exact one: the same anime in the same order with the same evidence
/// (cosines computed in `f64` here, from `f32` sums in pgvector: equal to a millionth).
fn assert_same_ranking(memory: &[VectorHit], exact: &[VectorHit], limit: usize) {
    assert_eq!(memory.len(), limit.min(exact.len()));
    for (m, e) in memory.iter().zip(exact) {
        assert_eq!(
            (m.anime_id, m.passage_index),
            (e.anime_id, e.passage_index),
            "{m:?} against {e:?}"
        );
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(
            close(m.score, e.score) && close(m.document, e.document),
            "{m:?} {e:?}"
        );
        assert!(
            close(m.passage.unwrap_or(0.0), e.passage.unwrap_or(0.0)),
            "{m:?} {e:?}"
        );
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn the_scan_in_memory_ranks_as_the_exact_scoring_in_the_database(pool: PgPool) {
    demo_engine(&pool).await;
    let embedder = local_embedder();
    let vectors = VectorsInMemory::load(&pool, MODEL, embedder.dimension())
        .await
        .unwrap();
    assert_eq!(vectors.len(), 257);
    let only_films = Filters {
        formats: vec!["MOVIE".into()],
        ..Filters::default()
    };
    for query in QUERIES {
        let vector = embedder.embed_query(query).await.unwrap();
        for filters in [Filters::default(), only_films.clone()] {
            let memory = vectors.search(&pool, &vector, &filters, 30).await.unwrap();
            let exact = exact(&pool, &vector, &filters).await;
            assert!(!exact.is_empty());
            assert_same_ranking(&memory, &exact, 30);
        }
    }
    // The filter was applied: only films, and fewer of them than the catalog's 30 best.
    let vector = embedder.embed_query(QUERIES[0]).await.unwrap();
    let films = vectors
        .search(&pool, &vector, &only_films, 300)
        .await
        .unwrap();
    let formats: Vec<String> = sqlx::query_scalar("SELECT format FROM anime WHERE id = ANY($1)")
        .bind(films.iter().map(|h| h.anime_id).collect::<Vec<_>>())
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(!formats.is_empty() && formats.len() < 257);
    assert!(formats.iter().all(|f| f == "MOVIE"), "{formats:?}");
}

/// A query vector of the wrong length is a clear error, not a panic or an empty list.
#[sqlx::test(migrations = "../migrations")]
async fn a_misfit_query_vector_is_refused(pool: PgPool) {
    demo_engine(&pool).await;
    let vectors = VectorsInMemory::load(&pool, MODEL, 384).await.unwrap();
    let error = vectors
        .search(&pool, &[0.5; 10], &Filters::default(), 10)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("10 dimensions"), "{error}");
}

/// The snapshot stays until the catalog changes, then a refresh reads the new one, and only
/// then.
#[sqlx::test(migrations = "../migrations")]
async fn a_refresh_follows_the_catalog_and_only_when_it_moved(pool: PgPool) {
    demo_engine(&pool).await;
    let embedder = local_embedder();
    let vectors = VectorsInMemory::load(&pool, MODEL, embedder.dimension())
        .await
        .unwrap();
    assert!(!vectors.refresh(&pool).await.unwrap(), "nothing changed");
    let vector = embedder.embed_query(QUERIES[1]).await.unwrap();
    let best = vectors
        .search(&pool, &vector, &Filters::default(), 1)
        .await
        .unwrap()[0]
        .anime_id;

    sqlx::query("DELETE FROM embeddings WHERE anime_id = $1 AND model = $2")
        .bind(best)
        .bind(MODEL)
        .execute(&pool)
        .await
        .unwrap();
    // Until the refresh, the snapshot it was read at.
    let before = vectors
        .search(&pool, &vector, &Filters::default(), 1)
        .await
        .unwrap();
    assert_eq!(before[0].anime_id, best);
    assert!(vectors.refresh(&pool).await.unwrap());
    assert_eq!(vectors.len(), 256);
    let after = vectors
        .search(&pool, &vector, &Filters::default(), 50)
        .await
        .unwrap();
    assert!(after.iter().all(|hit| hit.anime_id != best));
    assert!(!vectors.refresh(&pool).await.unwrap());
}

/// Through the engine: a search that reads a newer catalog version reloads the snapshot first
/// (its page is kept in the results cache), and within the reload gap a later one does not: it
/// is answered from the older snapshot, and its page is not kept.
#[sqlx::test(migrations = "../migrations")]
async fn a_search_catches_the_vectors_up_or_does_not_keep_its_page(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    let query = QUERIES[1];
    let retrieval = engine.retrieve(query, &Filters::default()).await.unwrap();
    let best = retrieval.vector[0].anime_id;
    for table in ["embeddings", "passage_embeddings"] {
        sqlx::query(&format!(
            "CREATE TABLE saved_{table} AS SELECT * FROM {table} WHERE anime_id = $1"
        ))
        .bind(best)
        .execute(&pool)
        .await
        .unwrap();
    }
    for table in ["embeddings", "passage_embeddings"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE anime_id = $1"))
            .bind(best)
            .execute(&pool)
            .await
            .unwrap();
    }
    let (_, kept) = engine
        .search_kept(query, &Filters::default())
        .await
        .unwrap();
    assert!(kept, "the snapshot was brought up to the catalog");

    // The vectors come back, but the snapshot was reloaded moments ago.
    for table in ["embeddings", "passage_embeddings"] {
        sqlx::query(&format!("INSERT INTO {table} SELECT * FROM saved_{table}"))
            .execute(&pool)
            .await
            .unwrap();
    }
    let again = format!("{query} again");
    let (_, kept) = engine
        .search_kept(&again, &Filters::default())
        .await
        .unwrap();
    assert!(!kept, "a page from an older snapshot is not kept");
    let retrieval = engine.retrieve(query, &Filters::default()).await.unwrap();
    assert!(retrieval.vector.iter().all(|hit| hit.anime_id != best));
}

/// Where the vectors are searched is part of the results cache's key: a page kept by the scan
/// in memory is not served to an engine walking PostgreSQL's indexes, whose list may differ.
#[sqlx::test(migrations = "../migrations")]
async fn the_results_cache_tells_the_scan_from_the_walks(pool: PgPool) {
    let engine = demo_engine(&pool).await;
    let query = QUERIES[3];
    let (_, kept) = engine
        .search_kept(query, &Filters::default())
        .await
        .unwrap();
    assert!(kept);
    let (again, _) = engine
        .search_kept(query, &Filters::default())
        .await
        .unwrap();
    assert!(again.cached);
    let walks = engine.without_vectors_in_memory();
    let (page, _) = walks.search_kept(query, &Filters::default()).await.unwrap();
    assert!(!page.cached);
}
