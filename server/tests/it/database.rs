//! Migrations and the pgvector check against the real PostgreSQL.

use sqlx::PgPool;

#[sqlx::test(migrations = "../migrations")]
async fn first_migration_creates_the_vector_extension(pool: PgPool) {
    let version: String =
        sqlx::query_scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(version.starts_with("0.8"), "{version}");
    // And it works: cosine distance between two vectors.
    let distance: f64 = sqlx::query_scalar("SELECT '[1,0,0]'::vector <=> '[0,1,0]'::vector")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!((distance - 1.0).abs() < 1e-9, "{distance}");
}

#[sqlx::test(migrations = false)]
async fn migrate_applies_every_step_and_is_idempotent(pool: PgPool) {
    server::db::migrate(&pool).await.unwrap();
    server::db::migrate(&pool).await.unwrap();
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(applied as usize, server::db::MIGRATOR.iter().count());
}

#[sqlx::test(migrations = false)]
async fn extension_check_accepts_the_embedded_server(pool: PgPool) {
    let version = server::db::check_extensions(&pool).await.unwrap();
    assert!(version.starts_with("0.8"), "{version}");
}

#[sqlx::test(migrations = "../migrations")]
async fn trigram_matching_finds_titles_despite_spacing_and_typos(pool: PgPool) {
    let (spaced, typo): (f32, bool) =
        sqlx::query_as("SELECT similarity('Mushishi', 'mushi shi'), 'Mushishi' % 'mushisi'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(spaced > 0.5, "{spaced}");
    assert!(typo);
    // And a trigram index serves it.
    sqlx::raw_sql(
        "CREATE TABLE titles (t text); INSERT INTO titles VALUES ('Mushishi'), ('Monster');
         CREATE INDEX ON titles USING gin (t gin_trgm_ops);",
    )
    .execute(&pool)
    .await
    .unwrap();
    let found: Vec<String> = sqlx::query_scalar("SELECT t FROM titles WHERE t % 'mushisi'")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(found, vec!["Mushishi".to_string()]);
}
