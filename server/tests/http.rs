//! The HTTP app against a real PostgreSQL: each test gets its own database from `sqlx::test`.

use std::net::SocketAddr;

use server::http::{AppState, router};
use sqlx::PgPool;

/// Serves the app on an ephemeral port for the duration of the test.
async fn spawn_app(pool: PgPool) -> SocketAddr {
    let site = tempfile::tempdir().unwrap();
    let state = AppState::new(pool, site.path());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _site = site; // keep the folder alive as long as the server
        axum::serve(listener, router(state)).await.unwrap();
    });
    addr
}

#[sqlx::test(migrations = "../migrations")]
async fn healthz_reports_postgres_and_pgvector_versions(pool: PgPool) {
    let addr = spawn_app(pool).await;
    let response = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["status"], "ok");
    assert!(
        body["postgres"].as_str().unwrap().starts_with("18."),
        "{body}"
    );
    assert!(
        body["pgvector"].as_str().unwrap().starts_with("0.8."),
        "{body}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn healthz_is_503_when_the_database_is_gone(pool: PgPool) {
    let addr = spawn_app(pool.clone()).await;
    pool.close().await;
    let response = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"], "the database is unavailable");
}

#[sqlx::test(migrations = "../migrations")]
async fn home_page_is_server_rendered_with_the_hydration_script(pool: PgPool) {
    let addr = spawn_app(pool).await;
    let response = reqwest::get(format!("http://{addr}/")).await.unwrap();
    assert_eq!(response.status(), 200);
    let html = response.text().await.unwrap();
    assert!(
        html.contains(r#"<form method="get" action="/" role="search""#),
        "{html}"
    );
    assert!(html.contains(r#"name="q""#));
    assert!(html.contains("/pkg/zenbu.js"), "hydration script missing");
    assert!(html.contains("/pkg/zenbu.css"));
    assert!(!html.contains("Search is not available yet"));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_query_gets_an_honest_not_yet_notice(pool: PgPool) {
    let addr = spawn_app(pool).await;
    let html = reqwest::get(format!("http://{addr}/?q=piratas%20y%20tesoros"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("Search is not available yet"), "{html}");
    assert!(html.contains("<q>piratas y tesoros</q>"), "{html}");
    // Without JavaScript the search box keeps what was searched.
    assert!(html.contains(r#"value="piratas y tesoros""#), "{html}");
}

#[sqlx::test(migrations = "../migrations")]
async fn unknown_paths_are_404_pages(pool: PgPool) {
    let addr = spawn_app(pool).await;
    let response = reqwest::get(format!("http://{addr}/no/such/page"))
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    assert!(response.text().await.unwrap().contains("Page not found"));
}
