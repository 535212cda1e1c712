//! Search reads from a streaming replica while quota and cache writes go to the primary: a
//! throwaway primary, a standby made from it with `pg_basebackup -R`, and the app between them.
//! Pausing the standby's replay shows which server each statement reached.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::{Browser, DestroyOnDrop, free_port};
use server::{config::EmbeddedConfig, db, db::embedded::EmbeddedPostgres};
use sqlx::PgPool;

const DATABASE: &str = "zenbu";
const MUSHISHI: i32 = 457;

fn cluster(data: &std::path::Path) -> EmbeddedPostgres {
    EmbeddedPostgres::from_config(&EmbeddedConfig {
        cache_dir: None, // the shared download cache
        data_dir: data.to_path_buf(),
        pg_port: free_port(),
        pg_database: DATABASE.into(),
        pg_os_user: "zenbu-pg".into(),
    })
    .unwrap()
}

async fn blocking(run: impl FnOnce() -> anyhow::Result<()> + Send + 'static) {
    tokio::task::spawn_blocking(run).await.unwrap().unwrap();
}

/// Waits until the standby has replayed everything the primary has written so far.
async fn caught_up(primary: &PgPool, standby: &PgPool) {
    let target: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(primary)
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        let replayed: bool =
            sqlx::query_scalar("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn")
                .bind(&target)
                .fetch_one(standby)
                .await
                .unwrap();
        if replayed {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "standby still behind {target} after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn usage_rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM search_usage")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The top hit's id and title, and whether the page came from the cache.
async fn top_hit(browser: &Browser, query: &str) -> (i64, String, bool) {
    let response = browser
        .get(&format!("/api/search?q={}", query.replace(' ', "%20")))
        .await;
    assert_eq!(response.status(), 200, "{query}");
    let body: serde_json::Value = response.json().await.unwrap();
    let top = &body["hits"][0]["anime"];
    (
        top["id"].as_i64().unwrap(),
        top["title"].as_str().unwrap().to_string(),
        body["cached"].as_bool().unwrap(),
    )
}

#[tokio::test]
async fn searches_read_the_replica_and_write_the_primary() {
    let primary_data = tempfile::tempdir().unwrap();
    let standby_data = tempfile::tempdir().unwrap();
    let primary = cluster(primary_data.path());
    let standby = cluster(standby_data.path());
    // Dropped in reverse order: the standby goes first.
    let _primary_guard = DestroyOnDrop(primary.clone());
    let _standby_guard = DestroyOnDrop(standby.clone());

    blocking({
        let primary = primary.clone();
        move || primary.start()
    })
    .await;
    let admin = db::connect(&primary.url_for("postgres").unwrap())
        .await
        .unwrap();
    sqlx::query(&format!("CREATE DATABASE {DATABASE}"))
        .execute(&admin)
        .await
        .unwrap();
    let primary_pool = db::connect(&primary.url().unwrap()).await.unwrap();
    db::migrate(&primary_pool).await.unwrap();
    let engine = common::demo_engine(&primary_pool).await;

    blocking({
        let (standby, primary) = (standby.clone(), primary.clone());
        move || standby.start_standby_of(&primary)
    })
    .await;
    let standby_pool = db::connect(&standby.url().unwrap()).await.unwrap();
    let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&standby_pool)
        .await
        .unwrap();
    assert!(in_recovery, "the standby must be a read-only replica");
    // Opened as `serve` opens ZENBU_REPLICA_URL.
    let replica = db::open_replica(Some(&standby.url().unwrap()))
        .await
        .unwrap()
        .expect("a replica");

    // One `Db` for the app's services and the engine, as `serve` builds it.
    let pools = db::Db::new(primary_pool.clone()).with_replica(replica);
    let app = common::spawn_app_on(
        pools.clone(),
        engine.with_read_replica(pools.reads.clone()),
        |_| {},
    )
    .await;
    let browser = Browser::new(&app);
    let health: serde_json::Value = browser.get("/healthz").await.json().await.unwrap();
    assert_eq!(health["replica"]["status"], "ok", "{health}");
    assert_eq!(health["replica"]["in_recovery"], true, "{health}");

    // A first search: answered from the replica, metered and cached on the primary.
    let (id, title, cached) = top_hit(&browser, "Mushishi").await;
    assert_eq!(
        (id, title.as_str(), cached),
        (MUSHISHI as i64, "Mushishi", false)
    );
    assert_eq!(usage_rows(&primary_pool).await, 1);
    // Once replayed, the page the primary cached is read back from the replica.
    caught_up(&primary_pool, &standby_pool).await;
    assert!(
        top_hit(&browser, "Mushishi").await.2,
        "cache read through the replica"
    );

    // Replay paused: the primary changes a title the standby does not see yet.
    sqlx::query("SELECT pg_wal_replay_pause()")
        .execute(&standby_pool)
        .await
        .unwrap();
    sqlx::query("UPDATE anime SET title_romaji = 'Mushishi (renamed)' WHERE id = $1")
        .bind(MUSHISHI)
        .execute(&primary_pool)
        .await
        .unwrap();
    let query = "mushishi ginko";
    let (id, title, _) = top_hit(&browser, query).await;
    assert_eq!(id, MUSHISHI as i64, "{title}");
    assert_eq!(title, "Mushishi", "the search read the paused replica");
    // Still metered: the quota reservation went to the primary, not the read-only standby.
    assert_eq!(usage_rows(&primary_pool).await, 2);
    assert_eq!(usage_rows(&standby_pool).await, 1);

    // Replay resumed: the new title, and a fresh page (the catalog version moved with it).
    sqlx::query("SELECT pg_wal_replay_resume()")
        .execute(&standby_pool)
        .await
        .unwrap();
    caught_up(&primary_pool, &standby_pool).await;
    let (id, title, cached) = top_hit(&browser, query).await;
    assert_eq!(
        (id, title.as_str(), cached),
        (MUSHISHI as i64, "Mushishi (renamed)", false)
    );

    // The replica goes away: searches answer 503 and the primary takes the unit back.
    standby_pool.close().await;
    blocking({
        let standby = standby.clone();
        move || standby.stop()
    })
    .await;
    let response = browser.get("/api/search?q=bugs%20that%20heal").await;
    assert_eq!(response.status(), 503);
    let health = browser.get("/healthz").await;
    assert_eq!(health.status(), 200, "the primary is fine");
    let health: serde_json::Value = health.json().await.unwrap();
    assert_eq!(health["replica"]["status"], "unavailable", "{health}");
    let refunded: bool = sqlx::query_scalar(
        "SELECT refunded_at IS NOT NULL FROM search_usage ORDER BY id DESC LIMIT 1",
    )
    .fetch_one(&primary_pool)
    .await
    .unwrap();
    assert!(
        refunded,
        "the unit of a search the replica could not answer is refunded"
    );
    // An app starting while the replica is down still starts (searches 503 until it is back).
    let lazy = db::open_replica(Some(&standby.url().unwrap()))
        .await
        .unwrap()
        .expect("a replica pool");
    let error = sqlx::query("SELECT 1").execute(&lazy).await.unwrap_err();
    assert!(db::is_unavailable(&error), "{error}");

    primary_pool.close().await;
    admin.close().await;
}
