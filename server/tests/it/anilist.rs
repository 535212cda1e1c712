//! The AniList client against the fake AniList (real HTTP on loopback) and the real PostgreSQL.

use crate::common::{MODEL, shared_catalog};
use std::{path::PathBuf, time::Duration};

use fakes::anilist::{Failure, FailureRule, FakeAniList, FakeAniListConfig};
use server::catalog::{
    Media,
    anilist::{self, AniListOptions, CrawlReport},
    import,
};
use sqlx::PgPool;

fn media(id: i32, year: Option<i32>, season: Option<&str>, format: &str) -> Media {
    serde_json::from_value(serde_json::json!({
        "id": id, "type": "ANIME", "format": format,
        "title": {"romaji": format!("Anime {id}")},
        "seasonYear": year, "season": season,
        "description": format!("The story of anime number {id}."),
    }))
    .unwrap()
}

/// `n` entries aired in FALL 2005, formats taken in turn from `formats`.
fn fall_2005(n: i32, formats: &[&str]) -> Vec<Media> {
    (1..=n)
        .map(|id| {
            media(
                id,
                Some(2005),
                Some("FALL"),
                formats[id as usize % formats.len()],
            )
        })
        .collect()
}

async fn start_fake(config: FakeAniListConfig) -> FakeAniList {
    FakeAniList::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Fast settings for tests: no spacing between requests, short timeouts and backoff.
fn options(
    fake: &FakeAniList,
    raw_dir: PathBuf,
    first_year: i32,
    last_year: i32,
) -> AniListOptions {
    let mut options = AniListOptions::new(raw_dir);
    options.endpoint = fake.url();
    options.requests_per_minute = 600_000;
    options.request_timeout = Duration::from_millis(500);
    options.retry_min_delay = Duration::from_millis(10);
    options.max_retries = 3;
    options.first_year = first_year;
    options.last_year = last_year;
    options.progress = false;
    options
}

fn fake_config(media: Vec<Media>) -> FakeAniListConfig {
    let mut config = FakeAniListConfig::new(media);
    config.requests_per_window = 100_000;
    config
}

async fn crawl(pool: &PgPool, options: AniListOptions) -> CrawlReport {
    anilist::crawl(pool, options, false, MODEL, None)
        .await
        .unwrap()
        .0
}

async fn catalog_ids(pool: &PgPool) -> Vec<i32> {
    sqlx::query_scalar("SELECT id FROM anime ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Number of saved page files under `dir`.
fn walk_pages(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|slice| {
            std::fs::read_dir(slice.path())
                .unwrap()
                .flatten()
                .filter(|f| f.file_name().to_string_lossy().ends_with(".json"))
                .count()
        })
        .sum()
}

/// Pages of the FALL 2005 slice the fake was asked for since request number `before`.
fn fall_pages_requested_since(fake: &FakeAniList, before: usize) -> Vec<u32> {
    fake.requests()[before..]
        .iter()
        .filter(|r| r.season.as_deref() == Some("FALL"))
        .map(|r| r.page)
        .collect()
}

fn rule(page: u32, failure: Failure, times: usize) -> FailureRule {
    FailureRule {
        season_year: Some(2005),
        season: Some("FALL".into()),
        format: None,
        page,
        failure,
        times,
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn every_anime_of_the_reference_catalog_arrives_exactly_once(pool: PgPool) {
    let reference = import::read_media_file(&shared_catalog()).unwrap();
    let expected: Vec<i32> = {
        let mut ids: Vec<i32> = reference
            .iter()
            .filter(|m| !m.is_adult())
            .map(|m| m.id)
            .collect();
        ids.sort();
        ids
    };
    let fake = start_fake(fake_config(reference)).await;
    let raw = tempfile::tempdir().unwrap();
    let report = crawl(&pool, options(&fake, raw.path().into(), 1917, 2026)).await;
    assert!(report.failures.is_empty(), "{report}");
    assert_eq!(report.duplicates, 0, "{report}");
    assert_eq!(report.anime, expected.len());
    assert_eq!(catalog_ids(&pool).await, expected);
    // Undated slices stop at the first dated entry instead of paging whole formats: about one
    // request per slice plus one per 50 entries.
    assert!(
        report.requests <= report.slices + expected.len() / 50 + 16,
        "{report}"
    );
    // Every request asked for full pages and none was refused.
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.per_page == 50 && r.status == 200)
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_slice_at_the_result_cap_is_split_by_format(pool: PgPool) {
    // 27 entries in one season, 9 per format, and one without a format; the fake (like
    // AniList) shows at most 10 per query.
    let mut catalog = fall_2005(27, &["TV", "MOVIE", "OVA"]);
    let mut formatless = media(28, Some(2005), Some("FALL"), "TV");
    formatless.format = None;
    catalog.push(formatless);
    let mut config = fake_config(catalog);
    config.result_cap = 10;
    let fake = start_fake(config).await;
    let raw = tempfile::tempdir().unwrap();
    let mut options = options(&fake, raw.path().into(), 2005, 2005);
    options.result_cap = 10;
    let report = crawl(&pool, options).await;
    assert_eq!(report.slices_split, 1, "{report}");
    assert!(report.slices_capped.is_empty(), "{report}");
    assert_eq!(catalog_ids(&pool).await, (1..=28).collect::<Vec<_>>());
    let formats: Vec<Option<String>> = fake
        .requests()
        .iter()
        .filter(|r| r.season.as_deref() == Some("FALL"))
        .map(|r| r.format.clone())
        .collect();
    assert!(formats.contains(&Some("TV".into())) && formats.contains(&Some("MOVIE".into())));
    assert!(raw.path().join("2005-FALL/split").exists());
    assert!(raw.path().join("2005-FALL-TV/page-0001.json").exists());
}

#[sqlx::test(migrations = "../migrations")]
async fn a_429_waits_for_retry_after_and_resumes(pool: PgPool) {
    let mut config = fake_config(fall_2005(120, &["TV"]));
    config.requests_per_window = 3;
    config.window = Duration::from_secs(1);
    config.rate_limit_headers = false; // so the client runs into the 429s
    let fake = start_fake(config).await;
    let raw = tempfile::tempdir().unwrap();
    let report = crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    assert!(report.failures.is_empty(), "{report}");
    assert!(report.rate_limited >= 1, "{report}");
    assert!(report.rate_limit_wait >= Duration::from_secs(1), "{report}");
    assert_eq!(catalog_ids(&pool).await.len(), 120);
    assert!(fake.requests().iter().any(|r| r.status == 429));
}

#[sqlx::test(migrations = "../migrations")]
async fn remaining_zero_waits_for_the_reset_without_a_429(pool: PgPool) {
    let mut config = fake_config(fall_2005(120, &["TV"]));
    config.requests_per_window = 3;
    config.window = Duration::from_secs(1);
    let fake = start_fake(config).await;
    let raw = tempfile::tempdir().unwrap();
    let report = crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    assert!(report.failures.is_empty(), "{report}");
    assert!(report.rate_limit_wait > Duration::ZERO, "{report}");
    assert!(
        fake.requests().iter().all(|r| r.status != 429),
        "{:?}",
        fake.requests()
    );
    assert_eq!(catalog_ids(&pool).await.len(), 120);
}

#[sqlx::test(migrations = "../migrations")]
async fn server_errors_timeouts_and_cut_off_bodies_are_retried(pool: PgPool) {
    let fake = start_fake(fake_config(fall_2005(120, &["TV"]))).await;
    fake.fail(rule(1, Failure::Status(500), 2));
    fake.fail(rule(2, Failure::Hang(Duration::from_secs(2)), 1));
    fake.fail(rule(3, Failure::StopEarly, 1));
    let raw = tempfile::tempdir().unwrap();
    let report = crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    assert!(report.failures.is_empty(), "{report}");
    assert!(report.retries >= 4, "{report}");
    assert_eq!(catalog_ids(&pool).await, (1..=120).collect::<Vec<_>>());
}

#[sqlx::test(migrations = "../migrations")]
async fn a_malformed_page_is_reported_and_imports_nothing(pool: PgPool) {
    let fake = start_fake(fake_config(fall_2005(120, &["TV"]))).await;
    fake.fail(rule(2, Failure::MalformedJson, usize::MAX));
    let raw = tempfile::tempdir().unwrap();
    let report = crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    assert_eq!(report.failures.len(), 1, "{report}");
    let failure = &report.failures[0];
    assert_eq!((failure.slice.as_str(), failure.page), ("2005-FALL", 2));
    assert!(failure.error.contains("malformed"), "{}", failure.error);
    // Pages 1 and 3 landed; page 2 (ids 51..=100) did not, and nothing of it was saved.
    let ids = catalog_ids(&pool).await;
    assert_eq!(ids, (1..=50).chain(101..=120).collect::<Vec<_>>());
    assert!(!raw.path().join("2005-FALL/page-0002.json").exists());
    assert!(!raw.path().join("2005-FALL/complete").exists());

    // --skip-fetch over these pages reports the gap and still reads the page after it.
    sqlx::query("TRUNCATE anime CASCADE")
        .execute(&pool)
        .await
        .unwrap();
    let (offline, _) = anilist::crawl(
        &pool,
        options(&fake, raw.path().into(), 2005, 2005),
        true,
        MODEL,
        None,
    )
    .await
    .unwrap();
    assert_eq!(offline.requests, 0);
    assert_eq!(offline.failures.len(), 1, "{offline}");
    assert_eq!(offline.failures[0].page, 2);
    assert!(offline.failures[0].error.contains("missing"), "{offline}");
    assert_eq!(catalog_ids(&pool).await.len(), 70);

    // A page with one invalid item is rejected whole as well.
    sqlx::query("TRUNCATE anime CASCADE")
        .execute(&pool)
        .await
        .unwrap();
    fake.clear_failures();
    fake.fail(rule(2, Failure::InvalidItem, usize::MAX));
    let raw = tempfile::tempdir().unwrap();
    let report = crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    assert_eq!(report.failures.len(), 1, "{report}");
    assert_eq!(
        catalog_ids(&pool).await,
        (1..=50).chain(101..=120).collect::<Vec<_>>()
    );

    // Once the source is healthy again, a rerun fetches only the missing page.
    fake.clear_failures();
    let before = fake.requests().len();
    let report = crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    assert!(report.failures.is_empty(), "{report}");
    let fetched = fall_pages_requested_since(&fake, before);
    assert_eq!(fetched, vec![2]);
    assert_eq!(catalog_ids(&pool).await.len(), 120);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_crash_mid_run_resumes_without_refetching_saved_pages(pool: PgPool) {
    let fake = start_fake(fake_config(fall_2005(200, &["TV"]))).await;
    // Page 3 hangs far longer than the client waits: the run is killed while it hangs.
    fake.fail(rule(3, Failure::Hang(Duration::from_secs(600)), usize::MAX));
    let raw = tempfile::tempdir().unwrap();
    let mut slow = options(&fake, raw.path().into(), 2005, 2005);
    slow.request_timeout = Duration::from_secs(600);
    let run = tokio::spawn({
        let pool = pool.clone();
        async move {
            anilist::crawl(&pool, slow, false, MODEL, None)
                .await
                .map(|_| ())
        }
    });
    while !fake.requests().iter().any(|r| r.page == 3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.abort(); // the crash
    assert!(run.await.unwrap_err().is_cancelled());
    assert!(raw.path().join("2005-FALL/page-0002.json").exists());
    assert!(!raw.path().join("2005-FALL/page-0003.json").exists());
    let saved = walk_pages(raw.path());

    fake.clear_failures();
    let before = fake.requests().len();
    let report = crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    assert!(report.failures.is_empty(), "{report}");
    assert_eq!(report.pages_from_disk, saved, "{report}");
    let fetched = fall_pages_requested_since(&fake, before);
    assert_eq!(fetched, vec![3, 4]);
    assert_eq!(catalog_ids(&pool).await.len(), 200);

    // A third run fetches nothing from completed slices.
    let before = fake.requests().len();
    crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    assert!(
        fake.requests()[before..]
            .iter()
            .all(|r| r.season.as_deref() != Some("FALL"))
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn skip_fetch_rebuilds_from_saved_pages_with_no_network(pool: PgPool) {
    let raw = tempfile::tempdir().unwrap();
    let endpoint = {
        let fake = start_fake(fake_config(fall_2005(60, &["TV", "OVA"]))).await;
        crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
        fake.url()
    }; // the fake is gone now
    sqlx::query("TRUNCATE anime CASCADE")
        .execute(&pool)
        .await
        .unwrap();
    let mut offline = AniListOptions::new(raw.path().into());
    offline.endpoint = endpoint;
    offline.first_year = 2005;
    offline.last_year = 2005;
    offline.progress = false;
    let (report, documents) = anilist::crawl(&pool, offline, true, MODEL, None)
        .await
        .unwrap();
    assert_eq!(report.requests, 0);
    let saved = walk_pages(raw.path());
    assert!(saved >= 2);
    assert_eq!(report.pages_from_disk, saved);
    assert_eq!(catalog_ids(&pool).await.len(), 60);
    assert_eq!(documents.documents_written, 60);
}

#[sqlx::test(migrations = "../migrations")]
async fn adult_and_undated_entries_are_handled(pool: PgPool) {
    let mut catalog = fall_2005(3, &["TV"]);
    catalog.push(media(10, None, None, "OVA")); // no season or year: an undated slice finds it
    let mut adult = media(11, Some(2005), Some("FALL"), "TV");
    adult.is_adult = Some(true);
    catalog.push(adult);
    let fake = start_fake(fake_config(catalog)).await;
    let raw = tempfile::tempdir().unwrap();
    let report = crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    assert_eq!(report.load.skipped_adult, 1, "{report}");
    assert_eq!(catalog_ids(&pool).await, vec![1, 2, 3, 10]);
}

#[tokio::test]
async fn the_fake_refuses_pages_larger_than_fifty() {
    let fake = start_fake(fake_config(fall_2005(3, &["TV"]))).await;
    let response = reqwest::Client::new()
        .post(fake.url())
        .json(&serde_json::json!({"query": "...", "variables": {"page": 1, "perPage": 51}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("perPage")
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_corrupted_saved_page_is_set_aside_and_fetched_again(pool: PgPool) {
    let fake = start_fake(fake_config(fall_2005(60, &["TV"]))).await;
    let raw = tempfile::tempdir().unwrap();
    crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    let page = raw.path().join("2005-FALL/page-0001.json");
    std::fs::write(&page, "{\"data\": {\"Pa").unwrap();
    let before = fake.requests().len();
    let report = crawl(&pool, options(&fake, raw.path().into(), 2005, 2005)).await;
    assert!(report.failures.is_empty(), "{report}");
    let fetched = fall_pages_requested_since(&fake, before);
    assert_eq!(fetched, vec![1]);
    assert!(
        raw.path()
            .join("2005-FALL/page-0001.json.rejected")
            .exists()
    );
    assert!(import_ok(&page));
}

fn import_ok(page: &std::path::Path) -> bool {
    let body = std::fs::read_to_string(page).unwrap();
    serde_json::from_str::<serde_json::Value>(&body).is_ok()
}

#[sqlx::test(migrations = "../migrations")]
async fn an_unsplittable_slice_at_the_cap_is_reported_on_every_run(pool: PgPool) {
    // 15 undated TV entries and a cap of 10: an undated slice cannot be narrowed.
    let catalog: Vec<Media> = (1..=15).map(|id| media(id, None, None, "TV")).collect();
    let mut config = fake_config(catalog);
    config.result_cap = 10;
    let fake = start_fake(config).await;
    let raw = tempfile::tempdir().unwrap();
    let mut capped = options(&fake, raw.path().into(), 2005, 2005);
    capped.result_cap = 10;
    let report = crawl(&pool, capped.clone()).await;
    assert_eq!(
        report.slices_capped,
        vec!["undated-TV".to_string()],
        "{report}"
    );
    assert_eq!(catalog_ids(&pool).await.len(), 10);
    let again = crawl(&pool, capped).await;
    assert_eq!(
        again.slices_capped,
        vec!["undated-TV".to_string()],
        "{again}"
    );
}

/// `server ingest --refresh-images`: a catalog crawled before the crawler asked for posters
/// gets them, asked for by id fifty at a time; nothing else of an anime changes, and a second
/// run changes nothing.
#[sqlx::test(migrations = "../migrations")]
async fn refreshing_images_fills_in_posters_and_nothing_else(pool: PgPool) {
    let catalog = fall_2005(120, &["TV", "MOVIE"]);
    let plain = start_fake(fake_config(catalog.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    crawl(&pool, options(&plain, dir.path().to_path_buf(), 2005, 2005)).await;
    let before: Vec<(i32, String)> =
        sqlx::query_as("SELECT id, source_hash FROM anime ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    let without: i64 = sqlx::query_scalar("SELECT count(*) FROM anime WHERE cover_url IS NOT NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(without, 0);

    let mut config = fake_config(catalog);
    config.posters = true;
    let posters = start_fake(config).await;
    let asked = || options(&posters, dir.path().to_path_buf(), 2005, 2005);
    let report = anilist::refresh_images(&pool, asked()).await.unwrap();
    assert_eq!(
        (report.asked, report.updated, report.missing),
        (120, 120, 0)
    );
    assert_eq!(posters.requests().len(), 3, "fifty at a time");
    let (url, color, banner): (String, String, String) =
        sqlx::query_as("SELECT cover_url, cover_color, banner_url FROM anime WHERE id = 7")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(url, posters.poster_url("large", 7));
    assert!(color.starts_with('#') && color.len() == 7, "{color}");
    assert!(banner.ends_with("/img/banner/7.png"), "{banner}");
    let after: Vec<(i32, String)> = sqlx::query_as("SELECT id, source_hash FROM anime ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(before, after);
    let again = anilist::refresh_images(&pool, asked()).await.unwrap();
    assert_eq!(again.updated, 0);
}
