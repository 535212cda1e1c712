//! The AniList GraphQL client behind `server ingest --source anilist`.
//!
//! AniList answers at most 5,000 results for one filter combination, so the crawl is cut into
//! slices: one per `seasonYear` + `season`, split further by `format` when a slice reports the
//! cap, plus one "undated" slice per format for entries AniList has no season or year for. An
//! undated slice is sorted by start date, entries without one first, and stops at the first
//! page that reaches a dated entry. (An entry with a start date but no season would be missed:
//! AniList derives the season from the start date, and in the reference data the three are
//! always all present or all missing.)
//!
//! Every page's raw JSON is written to `raw_dir/<slice>/page-NNNN.json` before it is processed;
//! a slice whose pages are all saved gets a `complete` marker. A rerun reads saved pages from disk
//! and fetches only the missing ones, so a crash costs nothing already fetched, and
//! `--skip-fetch` rebuilds the catalog from the saved pages with no network at all.
//!
//! Politeness: a governor rate limiter spaces requests (30 a minute by default, AniList's
//! degraded-mode limit); a 429 waits for `Retry-After`; `X-RateLimit-Remaining: 0` waits for
//! `X-RateLimit-Reset` before the next request; 5xx answers, timeouts, cut-off and malformed
//! bodies are retried with exponential backoff. A page that is still malformed after the retries
//! is reported with its slice and page and none of it is imported.

use std::{
    collections::HashSet,
    fs,
    num::NonZeroU32,
    path::{Path, PathBuf},
    sync::Mutex,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use backon::{ExponentialBuilder, Retryable};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use indicatif::{ProgressBar, ProgressStyle};
use reqwest::{StatusCode, header::HeaderMap};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::{media::Media, store};

pub const DEFAULT_ENDPOINT: &str = "https://graphql.anilist.co";
pub const SEASONS: [&str; 4] = ["WINTER", "SPRING", "SUMMER", "FALL"];
pub const FORMATS: [&str; 7] = ["TV", "TV_SHORT", "MOVIE", "SPECIAL", "OVA", "ONA", "MUSIC"];
/// The "format" of the undated slice for entries with no format either: it asks for
/// `format_not_in` every known format.
pub const NO_FORMAT: &str = "NONE";
/// The most a page may hold on AniList.
pub const MAX_PER_PAGE: u32 = 50;

const QUERY: &str = r#"query ($page: Int, $perPage: Int, $seasonYear: Int, $season: MediaSeason, $format: MediaFormat, $formatNotIn: [MediaFormat], $sort: [MediaSort]) {
  Page(page: $page, perPage: $perPage) {
    pageInfo { total perPage currentPage lastPage hasNextPage }
    media(type: ANIME, seasonYear: $seasonYear, season: $season, format: $format, format_not_in: $formatNotIn, sort: $sort) {
      id idMal title { romaji english native } type format synonyms season seasonYear
      startDate { year month day } description(asHtml: false) genres
      tags { name rank category isGeneralSpoiler isMediaSpoiler }
      averageScore popularity isAdult
      coverImage { extraLarge large medium color } bannerImage
      relations { edges { relationType node { id type format } } }
    }
  }
}"#;

/// The posters of chosen anime (`server ingest --refresh-images`).
const IMAGES_QUERY: &str = r#"query ($idIn: [Int], $perPage: Int) {
  Page(page: 1, perPage: $perPage) {
    media(id_in: $idIn, type: ANIME) { id coverImage { extraLarge large medium color } bannerImage }
  }
}"#;

/// One anime's posters, as [`IMAGES_QUERY`] answers.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Images {
    id: i32,
    #[serde(default)]
    cover_image: Option<super::media::CoverImage>,
    #[serde(default)]
    banner_image: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
struct ImagesResponse {
    data: Option<ImagesData>,
    errors: Option<Vec<GraphQlError>>,
}

#[derive(Debug, serde::Deserialize)]
struct ImagesData {
    #[serde(rename = "Page")]
    page: ImagesPage,
}

#[derive(Debug, serde::Deserialize)]
struct ImagesPage {
    #[serde(default)]
    media: Vec<Images>,
}

/// What [`refresh_images`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImagesReport {
    /// Anime asked about.
    pub asked: usize,
    /// Anime whose posters changed.
    pub updated: usize,
    /// Anime AniList did not answer for (removed there, or adult).
    pub missing: usize,
}

impl std::fmt::Display for ImagesReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "posters: {} anime asked about, {} updated, {} not found on AniList",
            self.asked, self.updated, self.missing
        )
    }
}

/// Fills in (or brings up to date) the posters of every anime in the catalog, asking AniList
/// for them by id, fifty at a time within the rate limit; nothing else of an anime changes.
pub async fn refresh_images(
    pool: &PgPool,
    options: AniListOptions,
) -> Result<ImagesReport, CrawlError> {
    let client = AniListClient::new(options)?;
    let ids: Vec<i32> = sqlx::query_scalar("SELECT id FROM anime ORDER BY id")
        .fetch_all(pool)
        .await?;
    let mut report = ImagesReport::default();
    for chunk in ids.chunks(MAX_PER_PAGE as usize) {
        let found = client.fetch_images(chunk).await?;
        report.asked += chunk.len();
        report.missing += chunk.len() - found.iter().filter(|i| chunk.contains(&i.id)).count();
        for images in found {
            let cover = images
                .cover_image
                .map(|cover| serde_json::to_value(cover).expect("serialises"));
            let updated = sqlx::query(
                "UPDATE anime
                    SET raw = raw || jsonb_strip_nulls(jsonb_build_object(
                                  'coverImage', $2::jsonb, 'bannerImage', $3::text))
                  WHERE id = $1
                    AND (raw -> 'coverImage' IS DISTINCT FROM jsonb_strip_nulls($2::jsonb)
                         OR raw ->> 'bannerImage' IS DISTINCT FROM $3::text)",
            )
            .bind(images.id)
            .bind(cover)
            .bind(images.banner_image)
            .execute(pool)
            .await?;
            report.updated += updated.rows_affected() as usize;
        }
    }
    Ok(report)
}

#[derive(Debug, Clone)]
pub struct AniListOptions {
    pub endpoint: String,
    pub requests_per_minute: u32,
    pub per_page: u32,
    /// Results AniList returns at most for one filter combination.
    pub result_cap: u64,
    pub request_timeout: Duration,
    /// Retries of one request after a 5xx, a timeout or a malformed body.
    pub max_retries: usize,
    pub retry_min_delay: Duration,
    /// How many 429 answers in a row one request may meet before it gives up.
    pub max_rate_limit_waits: usize,
    pub first_year: i32,
    pub last_year: i32,
    pub raw_dir: PathBuf,
    pub include_adult: bool,
    /// Draw a progress bar (hidden anyway when stderr is not a terminal).
    pub progress: bool,
}

impl AniListOptions {
    pub fn new(raw_dir: PathBuf) -> Self {
        Self {
            endpoint: DEFAULT_ENDPOINT.into(),
            requests_per_minute: 30,
            per_page: MAX_PER_PAGE,
            result_cap: 5_000,
            request_timeout: Duration::from_secs(30),
            max_retries: 5,
            retry_min_delay: Duration::from_secs(2),
            max_rate_limit_waits: 20,
            first_year: 1907,
            last_year: current_year() + 1,
            raw_dir,
            include_adult: false,
            progress: true,
        }
    }
}

/// One filter combination: a season of a year, optionally one format; or, for entries without
/// a season or year, one format alone ("undated").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Slice {
    pub season_year: Option<i32>,
    pub season: Option<&'static str>,
    pub format: Option<&'static str>,
}

impl Slice {
    pub fn key(&self) -> String {
        match (self.season_year, self.season, self.format) {
            (Some(year), Some(season), None) => format!("{year}-{season}"),
            (Some(year), Some(season), Some(format)) => format!("{year}-{season}-{format}"),
            (_, _, Some(format)) => format!("undated-{format}"),
            _ => "all".into(),
        }
    }

    fn is_undated(&self) -> bool {
        self.season_year.is_none()
    }

    /// Seasonal slices keep the entries with a season and a year; undated slices keep the others
    /// (which the seasonal slices cannot see), so every entry belongs to exactly one slice.
    fn owns(&self, media: &Media) -> bool {
        let dated = media.season.is_some() && media.season_year.is_some();
        dated != self.is_undated()
    }

    fn split_by_format(&self) -> Option<Vec<Slice>> {
        if self.format.is_some() || self.is_undated() {
            return None;
        }
        // NO_FORMAT too, or a split season would lose its entries without a format.
        let formats = FORMATS.iter().chain([&NO_FORMAT]);
        Some(
            formats
                .map(|format| Slice {
                    format: Some(format),
                    ..self.clone()
                })
                .collect(),
        )
    }
}

/// Every slice of a full crawl, in order: seasons of each year, then the undated formats.
pub fn plan(first_year: i32, last_year: i32) -> Vec<Slice> {
    let seasonal = (first_year..=last_year).flat_map(|year| {
        SEASONS.iter().map(move |season| Slice {
            season_year: Some(year),
            season: Some(season),
            format: None,
        })
    });
    let undated = FORMATS.iter().chain([&NO_FORMAT]).map(|format| Slice {
        season_year: None,
        season: None,
        format: Some(format),
    });
    seasonal.chain(undated).collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct PageFailure {
    pub slice: String,
    pub page: u32,
    pub error: String,
}

/// What a crawl did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CrawlReport {
    pub slices: usize,
    pub slices_split: usize,
    /// Slices that reached the result cap and could not be narrowed further.
    pub slices_capped: Vec<String>,
    pub pages_fetched: usize,
    pub pages_from_disk: usize,
    pub requests: usize,
    pub retries: usize,
    pub rate_limited: usize,
    pub rate_limit_wait: Duration,
    pub anime: usize,
    pub duplicates: usize,
    pub failures: Vec<PageFailure>,
    pub elapsed: Duration,
    pub load: store::LoadCounts,
}

impl CrawlReport {
    pub fn requests_per_minute(&self) -> f64 {
        self.requests as f64 / (self.elapsed.as_secs_f64() / 60.0).max(1e-9)
    }
}

impl std::fmt::Display for CrawlReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "slices               {:>6} ({} split by format)",
            self.slices, self.slices_split
        )?;
        writeln!(f, "pages fetched        {:>6}", self.pages_fetched)?;
        writeln!(f, "pages from disk      {:>6}", self.pages_from_disk)?;
        writeln!(
            f,
            "requests             {:>6} ({:.1}/min observed)",
            self.requests,
            self.requests_per_minute()
        )?;
        writeln!(f, "retries              {:>6}", self.retries)?;
        writeln!(f, "429 answers          {:>6}", self.rate_limited)?;
        writeln!(
            f,
            "waiting on limits    {:>6.1} s",
            self.rate_limit_wait.as_secs_f64()
        )?;
        writeln!(
            f,
            "anime                {:>6} ({} duplicates)",
            self.anime, self.duplicates
        )?;
        for slice in &self.slices_capped {
            writeln!(
                f,
                "INCOMPLETE: slice {slice} reached the result cap and cannot be split further"
            )?;
        }
        for failure in &self.failures {
            writeln!(
                f,
                "FAILED: slice {} page {}: {}",
                failure.slice, failure.page, failure.error
            )?;
        }
        write!(
            f,
            "crawl time           {:>6.1} s",
            self.elapsed.as_secs_f64()
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("HTTP {0}")]
    Server(StatusCode),
    #[error("request failed: {0}")]
    Transport(String),
    #[error("malformed response: {0}")]
    Malformed(String),
    #[error("rejected: {0}")]
    Rejected(String),
    #[error("still rate limited after {0} waits")]
    RateLimited(usize),
}

impl FetchError {
    fn is_transient(&self) -> bool {
        matches!(
            self,
            FetchError::Server(_) | FetchError::Transport(_) | FetchError::Malformed(_)
        )
    }
}

#[derive(Debug, Deserialize)]
struct GraphQlResponse {
    data: Option<PageData>,
    #[serde(default)]
    errors: Option<Vec<GraphQlError>>,
}

#[derive(Debug, Deserialize)]
struct GraphQlError {
    message: String,
}

#[derive(Debug, Deserialize)]
struct PageData {
    #[serde(rename = "Page")]
    page: Page,
}

#[derive(Debug, Deserialize)]
struct Page {
    #[serde(rename = "pageInfo")]
    page_info: PageInfo,
    media: Vec<Media>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageInfo {
    total: u64,
    #[serde(default)]
    last_page: Option<u32>,
    has_next_page: bool,
}

/// Parses a saved or fetched page; any media item that does not read as a Media fails the whole
/// page, so a bad page never lands half-imported.
fn parse_page(body: &str) -> Result<Page, FetchError> {
    let response: GraphQlResponse =
        serde_json::from_str(body).map_err(|e| FetchError::Malformed(e.to_string()))?;
    if let Some(errors) = response.errors.filter(|errors| !errors.is_empty()) {
        let messages: Vec<String> = errors.into_iter().map(|e| e.message).collect();
        return Err(FetchError::Rejected(messages.join("; ")));
    }
    response
        .data
        .map(|data| data.page)
        .ok_or_else(|| FetchError::Malformed("no data in the response".into()))
}

#[derive(Debug, Default)]
struct Counters {
    requests: usize,
    retries: usize,
    rate_limited: usize,
    rate_limit_wait: Duration,
}

pub struct AniListClient {
    http: reqwest::Client,
    limiter: DefaultDirectRateLimiter,
    options: AniListOptions,
    counters: Mutex<Counters>,
}

impl AniListClient {
    pub fn new(options: AniListOptions) -> Result<Self, FetchError> {
        let per_minute = NonZeroU32::new(options.requests_per_minute.max(1)).expect("max(1)");
        // Burst of one: requests are spaced evenly instead of 30 at once then a long pause.
        let quota = Quota::per_minute(per_minute).allow_burst(NonZeroU32::MIN);
        let http = reqwest::Client::builder()
            .user_agent(concat!("zenbu/", env!("CARGO_PKG_VERSION")))
            .timeout(options.request_timeout)
            .build()
            .map_err(|e| FetchError::Transport(e.to_string()))?;
        Ok(Self {
            http,
            limiter: RateLimiter::direct(quota),
            options,
            counters: Mutex::default(),
        })
    }

    /// Fetches one page (raw body and parsed), retrying transient failures with backoff.
    async fn fetch(&self, slice: &Slice, page: u32) -> Result<(String, Page), FetchError> {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.options.retry_min_delay)
            .with_max_delay(Duration::from_secs(60))
            .with_max_times(self.options.max_retries)
            .with_jitter();
        (|| self.fetch_once(slice, page))
            .retry(backoff)
            .when(FetchError::is_transient)
            .notify(|error, delay| {
                self.counters.lock().unwrap().retries += 1;
                tracing::warn!(slice = %slice.key(), page, %error, ?delay, "retrying AniList request");
            })
            .await
    }

    async fn fetch_once(&self, slice: &Slice, page: u32) -> Result<(String, Page), FetchError> {
        let no_format = slice.format == Some(NO_FORMAT);
        let variables = serde_json::json!({
            "page": page,
            "perPage": self.options.per_page,
            "seasonYear": slice.season_year,
            "season": slice.season,
            "format": slice.format.filter(|_| !no_format),
            "formatNotIn": no_format.then_some(FORMATS),
            // Undated slices sort by start date: AniList puts entries without one first, so the
            // crawl can stop at the first dated entry instead of paging the whole format.
            "sort": if slice.is_undated() { vec!["START_DATE", "ID"] } else { vec!["ID"] },
        });
        let body = serde_json::json!({ "query": QUERY, "variables": variables });
        let text = self
            .post(&body, &format!("{} page {page}", slice.key()))
            .await?;
        let page = parse_page(&text)?;
        Ok((text, page))
    }

    /// Sends one GraphQL request within the rate limit, waiting out 429s; the body of a 2xx.
    async fn post(&self, body: &serde_json::Value, what: &str) -> Result<String, FetchError> {
        let mut waits = 0;
        loop {
            self.limiter.until_ready().await;
            self.counters.lock().unwrap().requests += 1;
            let response = self
                .http
                .post(&self.options.endpoint)
                .header("Accept", "application/json")
                .json(body)
                .send()
                .await
                .map_err(|e| FetchError::Transport(error_chain(&e)))?;
            let status = response.status();
            let headers = response.headers().clone();
            if status == StatusCode::TOO_MANY_REQUESTS {
                waits += 1;
                if waits > self.options.max_rate_limit_waits {
                    return Err(FetchError::RateLimited(waits - 1));
                }
                let wait = retry_after(&headers).unwrap_or(Duration::from_secs(60));
                tracing::info!(what, ?wait, "AniList says 429: waiting");
                self.wait_for_limit(wait, true).await;
                continue;
            }
            if status.is_server_error() {
                return Err(FetchError::Server(status));
            }
            let text = response
                .text()
                .await
                .map_err(|e| FetchError::Transport(error_chain(&e)))?;
            if !status.is_success() {
                let excerpt: String = text.chars().take(200).collect();
                return Err(FetchError::Rejected(format!("HTTP {status}: {excerpt}")));
            }
            // Out of budget for this window: wait for the reset before the next request.
            if header_number(&headers, "x-ratelimit-remaining") == Some(0) {
                let wait = reset_wait(&headers)
                    .or_else(|| retry_after(&headers))
                    .unwrap_or(Duration::from_secs(60));
                self.wait_for_limit(wait, false).await;
            }
            return Ok(text);
        }
    }

    /// The posters of `ids` (at most [`MAX_PER_PAGE`]), retrying transient failures.
    async fn fetch_images(&self, ids: &[i32]) -> Result<Vec<Images>, FetchError> {
        let body = serde_json::json!({
            "query": IMAGES_QUERY,
            "variables": { "idIn": ids, "perPage": MAX_PER_PAGE },
        });
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.options.retry_min_delay)
            .with_max_delay(Duration::from_secs(60))
            .with_max_times(self.options.max_retries)
            .with_jitter();
        let text = (|| self.post(&body, "images"))
            .retry(backoff)
            .when(FetchError::is_transient)
            .await?;
        let response: ImagesResponse =
            serde_json::from_str(&text).map_err(|e| FetchError::Malformed(e.to_string()))?;
        if let Some(errors) = response.errors.filter(|errors| !errors.is_empty()) {
            let messages: Vec<String> = errors.into_iter().map(|e| e.message).collect();
            return Err(FetchError::Rejected(messages.join("; ")));
        }
        Ok(response
            .data
            .map(|data| data.page.media)
            .unwrap_or_default())
    }

    async fn wait_for_limit(&self, wait: Duration, was_429: bool) {
        {
            let mut counters = self.counters.lock().unwrap();
            counters.rate_limited += usize::from(was_429);
            counters.rate_limit_wait += wait;
        }
        tokio::time::sleep(wait).await;
    }
}

/// Crawls AniList (or only the saved pages, with `skip_fetch`) into the catalog, then rebuilds
/// franchises and documents.
pub async fn crawl(
    pool: &PgPool,
    options: AniListOptions,
    skip_fetch: bool,
    model: &str,
    premiser: Option<&super::LlmPremiser>,
) -> Result<(CrawlReport, store::DocumentCounts), CrawlError> {
    let started = Instant::now();
    let client = AniListClient::new(options.clone())?;
    let slices = plan(options.first_year, options.last_year);
    let mut run = Run {
        client: &client,
        pool,
        options: &options,
        skip_fetch,
        seen: HashSet::new(),
        report: CrawlReport::default(),
        progress: progress_bar(&options, slices.len()),
    };
    fs::create_dir_all(&options.raw_dir).map_err(|e| CrawlError::Io(options.raw_dir.clone(), e))?;
    for slice in slices {
        run.slice(slice).await?;
        run.progress.inc(1);
    }
    run.progress.finish_and_clear();
    let mut report = run.report;
    let counters = client.counters.into_inner().unwrap();
    report.requests = counters.requests;
    report.retries = counters.retries;
    report.rate_limited = counters.rate_limited;
    report.rate_limit_wait = counters.rate_limit_wait;
    report.elapsed = started.elapsed();
    let documents = store::rebuild_documents(pool, model, premiser).await?;
    Ok((report, documents))
}

#[derive(Debug, thiserror::Error)]
pub enum CrawlError {
    #[error("AniList client: {0}")]
    Client(#[from] FetchError),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// What fetching one page of a slice came to.
enum Fetched {
    Page(Page),
    /// Failed; recorded in the report.
    Failed,
    /// The slice is too big to crawl whole and is crawled as its parts instead.
    Split,
}

struct Run<'a> {
    client: &'a AniListClient,
    pool: &'a PgPool,
    options: &'a AniListOptions,
    skip_fetch: bool,
    seen: HashSet<i32>,
    report: CrawlReport,
    progress: ProgressBar,
}

impl Run<'_> {
    async fn slice(&mut self, slice: Slice) -> Result<(), CrawlError> {
        self.report.slices += 1;
        let dir = self.options.raw_dir.join(slice.key());
        if dir.join("split").exists() {
            return self.split(&slice).await;
        }
        if dir.join("capped").exists() {
            self.report.slices_capped.push(slice.key());
        }
        let last_saved = last_saved_page(&dir);
        let mut page = 1u32;
        let mut last_page: Option<u32> = None;
        loop {
            let file = dir.join(format!("page-{page:04}.json"));
            let saved = if file.exists() {
                self.read_saved(&slice, page, &file)?
            } else {
                None
            };
            let parsed = if saved.is_some() {
                saved
            } else if self.skip_fetch || dir.join("complete").exists() {
                // Nothing more on disk: the slice ends here, unless later pages were saved
                // after a page that never arrived, which is reported.
                if last_saved.is_some_and(|last| page < last) {
                    if !self
                        .report
                        .failures
                        .iter()
                        .any(|f| f.slice == slice.key() && f.page == page)
                    {
                        self.fail(&slice, page, "missing from the saved pages".into());
                    }
                    page += 1;
                    continue;
                }
                break;
            } else {
                match self.fetch_page(&slice, page, &dir, &file).await? {
                    Fetched::Page(parsed) => Some(parsed),
                    Fetched::Failed => None,
                    Fetched::Split => return self.split(&slice).await,
                }
            };
            if !self.take_page(&slice, page, parsed, &mut last_page).await? {
                break;
            }
            page += 1;
        }
        let failed = self.report.failures.iter().any(|f| f.slice == slice.key());
        if !self.skip_fetch && !failed && dir.exists() {
            mark(&dir, "complete")?;
        }
        Ok(())
    }

    /// Fetches and saves a page. The first page of a slice that reaches the result cap splits
    /// the slice when it can be (and the page is not kept), else marks it capped.
    async fn fetch_page(
        &mut self,
        slice: &Slice,
        page: u32,
        dir: &Path,
        file: &Path,
    ) -> Result<Fetched, CrawlError> {
        match self.client.fetch(slice, page).await {
            Ok((body, parsed)) => {
                if page == 1 && parsed.page_info.total >= self.options.result_cap {
                    if slice.split_by_format().is_some() {
                        mark(dir, "split")?;
                        return Ok(Fetched::Split);
                    }
                    tracing::warn!(slice = %slice.key(), "slice reaches the result cap and cannot be split: entries beyond it are missing");
                    mark(dir, "capped")?;
                    self.report.slices_capped.push(slice.key());
                }
                save_atomically(dir, file, &body)?;
                self.report.pages_fetched += 1;
                Ok(Fetched::Page(parsed))
            }
            Err(error) => {
                self.fail(slice, page, error.to_string());
                Ok(Fetched::Failed)
            }
        }
    }

    /// Imports a page's anime (`None`: the page failed); whether the slice has a page after it.
    /// A slice of undated entries (sorted by start date, undated first) ends at its first dated
    /// one.
    async fn take_page(
        &mut self,
        slice: &Slice,
        page: u32,
        parsed: Option<Page>,
        last_page: &mut Option<u32>,
    ) -> Result<bool, CrawlError> {
        match parsed {
            Some(parsed) => {
                *last_page = last_page.or(parsed.page_info.last_page);
                let reached_dated = slice.is_undated()
                    && parsed
                        .media
                        .iter()
                        .any(|m| m.start_date.and_then(|d| d.year).is_some());
                let has_next = parsed.page_info.has_next_page && !reached_dated;
                self.process(slice, parsed.media).await?;
                Ok(has_next)
            }
            // A failed page: carry on with the next one if the slice has more.
            None => Ok(last_page.is_some_and(|last| page < last)),
        }
    }

    /// A saved page, parsed. One that no longer reads is moved aside (`.rejected`) so that the
    /// caller fetches it again; with `--skip-fetch` it is reported instead.
    fn read_saved(
        &mut self,
        slice: &Slice,
        page: u32,
        file: &Path,
    ) -> Result<Option<Page>, CrawlError> {
        let body = fs::read_to_string(file).map_err(|e| CrawlError::Io(file.to_path_buf(), e))?;
        match parse_page(&body) {
            Ok(parsed) => {
                self.report.pages_from_disk += 1;
                Ok(Some(parsed))
            }
            Err(error) if self.skip_fetch => {
                self.fail(slice, page, format!("saved page unreadable: {error}"));
                Ok(None)
            }
            Err(error) => {
                tracing::warn!(slice = %slice.key(), page, %error, "saved page unreadable: fetching it again");
                let aside = file.with_extension("json.rejected");
                fs::rename(file, &aside).map_err(|e| CrawlError::Io(file.to_path_buf(), e))?;
                if let Some(dir) = file.parent() {
                    let _ = fs::remove_file(dir.join("complete"));
                }
                Ok(None)
            }
        }
    }

    fn split<'s>(
        &'s mut self,
        slice: &'s Slice,
    ) -> futures_util::future::BoxFuture<'s, Result<(), CrawlError>> {
        Box::pin(async move {
            self.report.slices_split += 1;
            for sub in slice.split_by_format().unwrap_or_default() {
                self.slice(sub).await?;
            }
            Ok(())
        })
    }

    async fn process(&mut self, slice: &Slice, media: Vec<Media>) -> Result<(), CrawlError> {
        let owned: Vec<Media> = media.into_iter().filter(|m| slice.owns(m)).collect();
        let mut fresh = Vec::with_capacity(owned.len());
        for media in owned {
            if self.seen.insert(media.id) {
                fresh.push(media);
            } else {
                self.report.duplicates += 1;
            }
        }
        self.report.anime += fresh.len();
        let counts = store::upsert_media(self.pool, &fresh, self.options.include_adult).await?;
        self.report.load += counts;
        self.progress.set_message(format!(
            "{} pages, {} anime, {:.0}s waiting on limits",
            self.report.pages_fetched + self.report.pages_from_disk,
            self.report.anime,
            self.client
                .counters
                .lock()
                .unwrap()
                .rate_limit_wait
                .as_secs_f64()
        ));
        Ok(())
    }

    fn fail(&mut self, slice: &Slice, page: u32, error: String) {
        tracing::error!(slice = %slice.key(), page, %error, "AniList page not imported");
        self.report.failures.push(PageFailure {
            slice: slice.key(),
            page,
            error,
        });
    }
}

/// Highest page number saved in `dir`, if any.
fn last_saved_page(dir: &Path) -> Option<u32> {
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            name.strip_prefix("page-")?
                .strip_suffix(".json")?
                .parse()
                .ok()
        })
        .max()
}

/// Leaves a marker file (`split`, `capped`, `complete`) in a slice folder.
fn mark(dir: &Path, marker: &str) -> Result<(), CrawlError> {
    fs::create_dir_all(dir).map_err(|e| CrawlError::Io(dir.to_path_buf(), e))?;
    fs::write(dir.join(marker), b"").map_err(|e| CrawlError::Io(dir.to_path_buf(), e))
}

/// Saves a page whole (temporary file, sync, rename): a crash never leaves half a page.
fn save_atomically(dir: &Path, file: &Path, body: &str) -> Result<(), CrawlError> {
    fs::create_dir_all(dir).map_err(|e| CrawlError::Io(dir.to_path_buf(), e))?;
    crate::files::write_atomic(file, body.as_bytes(), 0o644)
        .map_err(|e| CrawlError::Io(file.to_path_buf(), e))
}

fn progress_bar(options: &AniListOptions, slices: usize) -> ProgressBar {
    if !options.progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(slices as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} slices · {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}

fn header_number(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    header_number(headers, "retry-after").map(Duration::from_secs)
}

/// Time until `X-RateLimit-Reset` (a Unix time in seconds), at most a minute.
fn reset_wait(headers: &HeaderMap) -> Option<Duration> {
    let reset = header_number(headers, "x-ratelimit-reset")?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()?
        .as_secs_f64();
    Some(Duration::from_secs_f64(
        (reset as f64 - now).clamp(0.0, 60.0),
    ))
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn current_year() -> i32 {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    1970 + (seconds / 31_556_952) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_every_season_then_undated_formats() {
        let plan = plan(2000, 2001);
        assert_eq!(plan.len(), 8 + FORMATS.len() + 1);
        assert_eq!(plan[0].key(), "2000-WINTER");
        assert_eq!(plan[7].key(), "2001-FALL");
        assert_eq!(plan[8].key(), "undated-TV");
        assert_eq!(plan.last().unwrap().key(), "undated-NONE");
    }

    #[test]
    fn every_entry_belongs_to_exactly_one_kind_of_slice() {
        let dated: Media =
            serde_json::from_str(r#"{"id": 1, "season": "FALL", "seasonYear": 2005}"#).unwrap();
        let no_season: Media = serde_json::from_str(r#"{"id": 2, "seasonYear": 2005}"#).unwrap();
        let undated: Media = serde_json::from_str(r#"{"id": 3}"#).unwrap();
        let seasonal = Slice {
            season_year: Some(2005),
            season: Some("FALL"),
            format: None,
        };
        let undated_tv = Slice {
            season_year: None,
            season: None,
            format: Some("TV"),
        };
        assert!(seasonal.owns(&dated) && !undated_tv.owns(&dated));
        assert!(!seasonal.owns(&no_season) && undated_tv.owns(&no_season));
        assert!(!seasonal.owns(&undated) && undated_tv.owns(&undated));
    }

    #[test]
    fn only_seasonal_slices_split_and_only_once() {
        let seasonal = Slice {
            season_year: Some(2005),
            season: Some("FALL"),
            format: None,
        };
        let split = seasonal.split_by_format().unwrap();
        assert_eq!(split.len(), FORMATS.len() + 1);
        assert_eq!(split.last().unwrap().key(), "2005-FALL-NONE");
        assert_eq!(split[0].key(), "2005-FALL-TV");
        assert!(split[0].split_by_format().is_none());
        assert!(
            Slice {
                season_year: None,
                season: None,
                format: Some("TV")
            }
            .split_by_format()
            .is_none()
        );
    }

    #[test]
    fn a_page_with_one_bad_item_is_rejected_whole() {
        let good = r#"{"data": {"Page": {"pageInfo": {"total": 2, "hasNextPage": false}, "media": [{"id": 1}, {"id": 2}]}}}"#;
        assert_eq!(parse_page(good).unwrap().media.len(), 2);
        let bad = r#"{"data": {"Page": {"pageInfo": {"total": 2, "hasNextPage": false}, "media": [{"id": 1}, {"title": {}}]}}}"#;
        assert!(matches!(parse_page(bad), Err(FetchError::Malformed(_))));
        let errors = r#"{"data": null, "errors": [{"message": "perPage too large"}]}"#;
        assert!(
            matches!(parse_page(errors), Err(FetchError::Rejected(m)) if m.contains("perPage"))
        );
        assert!(matches!(
            parse_page(r#"{"data": {"Pa"#),
            Err(FetchError::Malformed(_))
        ));
    }
}
