//! The limits every request meets (`server::http::limits`), against the real server: a flood
//! from one network is slowed without slowing the others, a full server turns requests away
//! at once instead of queueing them, and a request stuck on a stalled database is answered.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use server::search::rerank::{Candidate, LocalReranker, RerankError, Reranker};
use sqlx::PgPool;

use crate::common::{self, Browser};

/// Mushishi, in the demo catalog.
const MUSHISHI: i32 = 457;

#[sqlx::test(migrations = "../migrations")]
async fn a_flooding_network_gets_429_and_other_networks_do_not_notice(pool: PgPool) {
    let app = common::spawn_app_with(pool.clone(), |config| {
        config.http.behind_proxy = true;
        config.http.requests_per_network_per_second = 1;
        config.http.request_burst_per_network = 5;
    })
    .await;
    let flood = Browser::from_network(&app, "203.0.113.9");
    let path = format!("/api/anime/{MUSHISHI}/similar");
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(flood.get(&path).await.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);
    let limited = flood.get("/healthz").await;
    assert_eq!(limited.status(), 429);
    let wait: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&wait), "{wait}");
    // The site's files are not counted.
    assert_eq!(flood.get("/pkg/zenbu.css").await.status(), 404);
    // Another network, meanwhile: served.
    let other = Browser::from_network(&app, "198.51.100.2");
    assert_eq!(other.get(&path).await.status(), 200);
    // A second later, one more request from the flooding network.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(flood.get(&path).await.status(), 200);
}

/// The local reranker, slowed down, counting how many run at once at most.
struct SlowReranker {
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Reranker for SlowReranker {
    fn name(&self) -> String {
        "slow-local".into()
    }

    async fn rerank(&self, query: &str, candidates: &[Candidate]) -> Result<Vec<i32>, RerankError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(800)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        LocalReranker::default().rerank(query, candidates).await
    }

    fn skips_when_confident(&self) -> bool {
        false
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn past_the_concurrency_cap_requests_are_turned_away_at_once(pool: PgPool) {
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let engine = common::demo_engine(&pool)
        .await
        .with_reranker(Arc::new(SlowReranker {
            running: running.clone(),
            most: most.clone(),
        }));
    let app = common::spawn_app_on(pool.clone(), engine, |config| {
        config.http.max_requests_in_flight = 2;
    })
    .await;
    let browser = Arc::new(Browser::new(&app));
    browser.get("/").await;
    let searches: Vec<_> = [
        "piratas",
        "robots gigantes",
        "un viaje en tren",
        "cocina",
        "ninjas",
        "detectives",
    ]
    .into_iter()
    .map(|query| {
        let browser = browser.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let response = browser.get(&format!("/api/search?q={query}")).await;
            let retry = response.headers().get("retry-after").cloned();
            (response.status().as_u16(), started.elapsed(), retry)
        })
    })
    .collect();
    let mut outcomes = Vec::new();
    for search in searches {
        outcomes.push(search.await.unwrap());
    }
    let served = outcomes
        .iter()
        .filter(|(status, ..)| *status == 200)
        .count();
    let shed: Vec<_> = outcomes
        .iter()
        .filter(|(status, ..)| *status == 503)
        .collect();
    assert_eq!(served + shed.len(), outcomes.len(), "{outcomes:?}");
    assert!((1..=2).contains(&served), "{outcomes:?}");
    assert!(most.load(Ordering::SeqCst) <= 2);
    for (_, took, retry) in &shed {
        assert!(
            *took < Duration::from_millis(500),
            "turned away at once: {took:?}"
        );
        assert!(retry.is_some());
    }
    // Only the served searches were paid for.
    let used: i64 =
        sqlx::query_scalar("SELECT count(*) FROM search_usage WHERE refunded_at IS NULL")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(used as usize, served);
}

/// A transaction holding the `anime` table, as a migration or a long transaction would: every
/// statement that reads it waits until this one ends.
async fn stall_anime(pool: &PgPool) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut stall = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE anime IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *stall)
        .await
        .unwrap();
    stall
}

/// A route that is not metered stuck on a stalled database (a table locked by a migration or
/// a long transaction) is answered 503 at the request's time limit, not held open forever.
#[sqlx::test(migrations = "../migrations")]
async fn a_request_stuck_on_a_stalled_database_is_answered_at_its_time_limit(pool: PgPool) {
    let app = common::spawn_app_with(pool.clone(), |config| {
        config.search.search_deadline_ms = 100;
        config.http.request_timeout_ms = 5_200;
    })
    .await;
    let browser = Browser::new(&app);
    let path = format!("/api/anime/{MUSHISHI}/similar");
    assert_eq!(browser.get(&path).await.status(), 200);
    let stall = stall_anime(&pool).await;
    let started = Instant::now();
    let stuck = tokio::time::timeout(Duration::from_secs(15), browser.get(&path))
        .await
        .expect("answered, not held open");
    assert_eq!(stuck.status(), 503);
    assert!(stuck.headers().contains_key("retry-after"));
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
    stall.rollback().await.unwrap();
    assert_eq!(browser.get(&path).await.status(), 200);
}

/// A request must outlive the search inside it: a time limit shorter than the search's
/// deadline (plus its bookkeeping) is refused at start, with the reason.
#[sqlx::test(migrations = "../migrations")]
async fn a_time_limit_shorter_than_the_search_deadline_is_refused(pool: PgPool) {
    let mut config = server::config::Config::from_args(&[]).unwrap();
    config.search.search_deadline_ms = 20_000;
    config.http.request_timeout_ms = 10_000;
    config.addr = "127.0.0.1:0".parse().unwrap();
    let engine = common::demo_engine(&pool).await;
    let error = server::startup::Application::build_with(&config, pool, engine)
        .await
        .err()
        .expect("refused");
    assert!(
        error.to_string().contains("ZENBU_REQUEST_TIMEOUT_MS"),
        "{error}"
    );
}

/// The serving pool cancels a statement past its timeout (`ZENBU_STATEMENT_TIMEOUT_MS`): a
/// request stuck on a locked table is answered 503 at once, and nothing keeps running on the
/// server for a request that gave up.
#[sqlx::test(migrations = "../migrations")]
async fn a_statement_past_the_serving_pools_timeout_is_cancelled(pool: PgPool) {
    common::demo_engine(&pool).await;
    let serving = server::db::with_statement_timeout(&pool, Duration::from_millis(300))
        .await
        .unwrap();
    let engine = common::demo_engine(&serving).await;
    let app = common::spawn_app_on(serving.clone(), engine, |_| {}).await;
    let browser = Browser::new(&app);
    let path = format!("/api/anime/{MUSHISHI}/similar");
    assert_eq!(browser.get(&path).await.status(), 200);
    let mut stall = stall_anime(&pool).await;
    let started = Instant::now();
    let stuck = browser.get(&path).await;
    assert_eq!(stuck.status(), 503);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // PostgreSQL holds no statement of that request any more: only the lock's holder is left.
    let waiting: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .fetch_one(&mut *stall)
    .await
    .unwrap();
    assert_eq!(waiting, 0);
    stall.rollback().await.unwrap();
    assert_eq!(browser.get(&path).await.status(), 200);
}
