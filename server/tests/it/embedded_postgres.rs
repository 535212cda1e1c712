//! The embedded PostgreSQL lifecycle on a throwaway cluster: initialise, start, reuse, stop.
//! As root (CI) this also proves the switch to the unprivileged database user.

use crate::common::{DestroyOnDrop, free_port};
use server::{
    config::EmbeddedConfig,
    db::embedded::{EmbeddedPostgres, Status},
};
use sqlx::{Connection, PgConnection};

#[tokio::test]
async fn cluster_is_initialised_once_started_reused_and_stopped() {
    let data = tempfile::tempdir().unwrap();
    let config = EmbeddedConfig {
        cache_dir: None, // the shared download cache: the binaries are reused, not refetched
        data_dir: data.path().to_path_buf(),
        pg_port: free_port(),
        pg_database: "postgres".into(),
        pg_os_user: "zenbu-pg".into(),
    };
    let pg = EmbeddedPostgres::from_config(&config).unwrap();
    let guard = DestroyOnDrop(pg.clone());

    assert!(matches!(
        pg.status().unwrap(),
        Status::NotInitialised | Status::NotInstalled
    ));
    tokio::task::spawn_blocking({
        let pg = pg.clone();
        move || pg.start()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(matches!(
        pg.status().unwrap(),
        Status::Running { pid: Some(_) }
    ));

    let mut conn = PgConnection::connect(&pg.url().unwrap()).await.unwrap();
    sqlx::raw_sql("CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();

    // A wrong password is refused: the cluster is not open to anyone on localhost.
    let wrong = format!("postgres://zenbu:wrong@127.0.0.1:{}/postgres", pg.port());
    assert!(PgConnection::connect(&wrong).await.is_err());

    pg.stop().unwrap();
    assert_eq!(pg.status().unwrap(), Status::Stopped);

    // Starting again reuses the cluster: the data is still there.
    tokio::task::spawn_blocking({
        let pg = pg.clone();
        move || pg.start()
    })
    .await
    .unwrap()
    .unwrap();
    let mut conn = PgConnection::connect(&pg.url().unwrap()).await.unwrap();
    let kept: i32 = sqlx::query_scalar("SELECT n FROM kept")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(kept, 42);
    conn.close().await.unwrap();

    let cluster = pg.cluster_dir();
    drop(guard);
    assert!(
        !cluster.exists(),
        "throwaway cluster left at {}",
        cluster.display()
    );
}
