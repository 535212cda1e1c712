//! The allowance against a determined client, through the real server over HTTP: every served
//! search is paid for exactly once whatever the client does (drops the connection, sends copies
//! in parallel).

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use server::search::rerank::{Candidate, LocalReranker, RerankError, Reranker};
use sqlx::PgPool;

use crate::common::{self, Browser};

/// The local reranker, slowed down (so a search takes long enough to give up on) and counting
/// its calls (one per pipeline run that reaches the rerank stage).
struct SlowCountingReranker {
    delay: Duration,
    calls: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Reranker for SlowCountingReranker {
    fn name(&self) -> String {
        "slow-local".into()
    }

    async fn rerank(&self, query: &str, candidates: &[Candidate]) -> Result<Vec<i32>, RerankError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        LocalReranker::default().rerank(query, candidates).await
    }

    fn skips_when_confident(&self) -> bool {
        false
    }
}

async fn slow_app(pool: &PgPool, delay: Duration) -> (common::TestApp, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let engine = common::demo_engine(pool)
        .await
        .with_reranker(Arc::new(SlowCountingReranker {
            delay,
            calls: calls.clone(),
        }));
    let app = common::spawn_app_on(pool.clone(), engine, |_| {}).await;
    (app, calls)
}

/// The visitor's stored units: (confirmed, pending, refunded).
async fn units(pool: &PgPool) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT count(*) FILTER (WHERE confirmed_at IS NOT NULL AND refunded_at IS NULL),
                count(*) FILTER (WHERE confirmed_at IS NULL AND refunded_at IS NULL),
                count(*) FILTER (WHERE refunded_at IS NOT NULL)
         FROM search_usage WHERE subject LIKE 'visitor:%'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn used(browser: &Browser) -> i64 {
    let page = browser.get("/api/search?q=kino+viaja+por+paises").await;
    assert_eq!(page.status(), 200);
    let body: serde_json::Value = page.json().await.unwrap();
    body["quota"]["used"].as_i64().unwrap()
}

#[sqlx::test(migrations = "../migrations")]
async fn a_search_whose_client_hung_up_is_still_confirmed_and_paid_once(pool: PgPool) {
    let (app, _) = slow_app(&pool, Duration::from_millis(600)).await;
    let browser = Browser::new(&app);
    // A first request gives the visitor its cookie.
    browser.get("/").await;
    let cookie = browser.cookie(server::accounts::visitor::COOKIE).unwrap();
    let path = "/api/search?q=un+hombre+que+viaja+entre+bichos";
    // A client that gives up after 50 ms: the connection closes mid-search.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let gave_up = impatient
        .get(app.url(path))
        .header(
            "cookie",
            format!("{}={cookie}", server::accounts::visitor::COOKIE),
        )
        .send()
        .await;
    assert!(gave_up.is_err(), "the client was meant to give up");
    // The search goes on without its client and confirms its unit.
    let mut waited = Duration::ZERO;
    while units(&pool).await != (1, 0, 0) {
        assert!(
            waited < Duration::from_secs(10),
            "units (confirmed, pending, refunded): {:?}",
            units(&pool).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    // The same query again is a repeat of a paid search: served, not charged.
    let again = browser.get(path).await;
    assert_eq!(again.status(), 200);
    let body: serde_json::Value = again.json().await.unwrap();
    assert_eq!(body["quota"]["used"], 1, "{body}");
    assert_eq!(units(&pool).await, (1, 0, 0));
    // Another query costs its unit.
    assert_eq!(used(&browser).await, 2);
}

#[sqlx::test(migrations = "../migrations")]
async fn twenty_identical_searches_in_parallel_run_once_and_pay_once(pool: PgPool) {
    let (app, calls) = slow_app(&pool, Duration::from_millis(300)).await;
    let browser = Arc::new(Browser::new(&app));
    browser.get("/").await;
    let copies: Vec<_> = (0..20)
        .map(|_| {
            let browser = browser.clone();
            tokio::spawn(async move {
                let response = browser
                    .get("/api/search?q=piratas+buscando+un+tesoro")
                    .await;
                assert_eq!(response.status(), 200);
                let body: serde_json::Value = response.json().await.unwrap();
                (
                    body["quota"]["used"].as_i64().unwrap(),
                    body["hits"][0]["anime"]["id"].as_i64().unwrap(),
                )
            })
        })
        .collect();
    let mut answers = Vec::new();
    for copy in copies {
        answers.push(copy.await.unwrap());
    }
    assert!(
        answers.iter().all(|&a| a == answers[0]),
        "every copy got the same page: {answers:?}"
    );
    assert_eq!(answers[0].0, 1, "one unit");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one pipeline run");
    assert_eq!(units(&pool).await, (1, 0, 0));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_search_link_followed_from_another_site_spends_nothing(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let browser = Browser::new(&app);
    browser.get("/").await;
    let cookie = format!(
        "{}={}",
        server::accounts::visitor::COOKIE,
        browser.cookie(server::accounts::visitor::COOKIE).unwrap()
    );
    let follow = |path: &str, site: &str| {
        reqwest::Client::new()
            .get(app.url(path))
            .header("cookie", &cookie)
            .header("sec-fetch-site", site)
            .header("sec-fetch-mode", "navigate")
            .send()
    };
    // A link on another site to the search page: the form, filled in, and no search.
    let page = follow("/?q=piratas+buscando+un+tesoro", "cross-site")
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("opened from another site"), "{html}");
    assert!(
        html.contains(r#"value="piratas buscando un tesoro""#),
        "{html}"
    );
    assert!(!html.contains(r#"class="hit""#), "no results: {html}");
    // The JSON API answers 403 to another site.
    let api = follow("/api/search?q=piratas", "cross-site").await.unwrap();
    assert_eq!(api.status(), 403);
    assert_eq!(units(&pool).await, (0, 0, 0), "nothing charged");
    // Submitted from the page itself: searched and charged.
    let submitted = follow("/?q=piratas+buscando+un+tesoro", "same-origin")
        .await
        .unwrap();
    assert_eq!(submitted.status(), 200);
    assert!(submitted.text().await.unwrap().contains(r#"class="hit""#));
    assert_eq!(units(&pool).await, (1, 0, 0));
}

/// A metered search that stalls (here its rerank stage, as a stalled database would) is given
/// up at its deadline, well inside the minute its unit counts: the client gets a 503 with
/// Retry-After and the unit is given back, so no stall can outlive the unit that paid for it.
#[sqlx::test(migrations = "../migrations")]
async fn a_search_that_passes_its_deadline_is_refused_and_refunded(pool: PgPool) {
    let calls = Arc::new(AtomicUsize::new(0));
    let engine = common::demo_engine(&pool)
        .await
        .with_reranker(Arc::new(SlowCountingReranker {
            delay: Duration::from_secs(3),
            calls: calls.clone(),
        }));
    let app = common::spawn_app_on(pool.clone(), engine, |config| {
        config.search.search_deadline_ms = 500;
    })
    .await;
    let browser = Browser::new(&app);
    let started = std::time::Instant::now();
    let response = browser
        .get("/api/search?q=piratas+buscando+un+tesoro")
        .await;
    assert_eq!(response.status(), 503);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(response.headers()["retry-after"], "5");
    assert_eq!(units(&pool).await, (0, 0, 1));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// A page that is not cached (here its rerank stage ran out of time, so the fused order was
/// served) must not make each free repeat a fresh pipeline run: the repeat shows the page its
/// counted search served.
#[sqlx::test(migrations = "../migrations")]
async fn a_free_repeat_shows_the_page_it_paid_for_without_running_again(pool: PgPool) {
    let calls = Arc::new(AtomicUsize::new(0));
    let engine = common::demo_engine(&pool)
        .await
        .with_reranker(Arc::new(SlowCountingReranker {
            delay: Duration::from_millis(400),
            calls: calls.clone(),
        }))
        .with_budgets(server::search::Budgets {
            embed: Duration::from_secs(2),
            rerank: Duration::from_millis(50),
        });
    let app = common::spawn_app_on(pool.clone(), engine, |_| {}).await;
    let browser = Browser::new(&app);
    let path = "/api/search?q=piratas+buscando+un+tesoro";
    let first: serde_json::Value = browser.get(path).await.json().await.unwrap();
    assert_eq!(first["ranking"], "Fallback", "{first}");
    for _ in 0..3 {
        let again: serde_json::Value = browser.get(path).await.json().await.unwrap();
        assert_eq!(again["hits"], first["hits"]);
        assert_eq!(again["quota"]["used"], 1);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one pipeline run");
    assert_eq!(units(&pool).await, (1, 0, 0));
}

/// A `HEAD` (link checkers, preview bots) or a browser's prefetch of a search is not a search
/// anyone asked for: it spends nothing; the page shows the form filled in.
#[sqlx::test(migrations = "../migrations")]
async fn head_requests_and_prefetches_spend_nothing(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let browser = Browser::new(&app);
    browser.get("/").await;
    let cookie = format!(
        "{}={}",
        server::accounts::visitor::COOKIE,
        browser.cookie(server::accounts::visitor::COOKIE).unwrap()
    );
    let client = reqwest::Client::new();
    for path in ["/?q=piratas+buscando+un+tesoro", "/api/search?q=piratas"] {
        let head = client
            .head(app.url(path))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_ne!(head.status(), 500, "{path}");
        for (name, value) in [
            ("sec-purpose", "prefetch"),
            ("sec-purpose", "prefetch;prerender"),
            ("purpose", "prefetch"),
        ] {
            let prefetch = client
                .get(app.url(path))
                .header("cookie", &cookie)
                .header(name, value)
                .send()
                .await
                .unwrap();
            if path.starts_with("/api") {
                assert_eq!(prefetch.status(), 403, "{path} {name}");
            } else {
                assert_eq!(prefetch.status(), 200);
                let html = prefetch.text().await.unwrap();
                assert!(html.contains("loaded ahead of time"), "{html}");
                assert!(!html.contains(r#"class="hit""#), "no results: {html}");
            }
        }
    }
    assert_eq!(units(&pool).await, (0, 0, 0), "nothing charged");
    // Asked for: searched and charged.
    assert_eq!(used(&browser).await, 1);
}

/// The default per-network caps keep the anonymous tier near its intent: a script with many
/// cookie jars on one address gets a few new ids a day (it got 20, ~6,000 searches a month, 30
/// times Premium), then is asked to make an account.
#[sqlx::test(migrations = "../migrations")]
async fn one_network_starts_three_anonymous_visitors_a_day_by_default(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let mut statuses = Vec::new();
    for jar in 0..5 {
        let browser = Browser::new(&app);
        let response = browser.get(&format!("/api/search?q=piratas+{jar}")).await;
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    let config = server::config::Config::from_args(&[]).unwrap();
    assert_eq!(config.accounts.anonymous_searches_per_network, 3 * 10);
}
