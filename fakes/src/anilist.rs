//! A fake AniList GraphQL endpoint serving an AniList-shaped catalog: the `Page { pageInfo,
//! media(...) }` query with `seasonYear`, `season`, `format` and `format_not_in` filters, sorted
//! by id or by start date (entries without one first); perPage at
//! most 50 (a GraphQL error above); at most `result_cap` results per filter combination (AniList's
//! 5,000); a request budget per window answered with 429 + `Retry-After` and the
//! `X-RateLimit-*` headers; and failures on demand for chosen pages. With `posters`, items
//! without a `coverImage` get one in AniList's shape (and a `bannerImage`), pointing at small
//! PNGs this fake serves (`/img/{size}/{id}.png`), which can be made to fail. `id_in` picks
//! items by id (`server ingest --refresh-images` asks for images that way).

use std::{
    collections::VecDeque,
    io::Write,
    net::SocketAddr,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use axum::{
    Json, Router,
    body::Body,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub struct FakeAniListConfig {
    /// The catalog served: AniList Media objects as JSON.
    pub media: Vec<Value>,
    pub result_cap: usize,
    pub max_per_page: u32,
    /// Requests allowed per `window`; AniList allows 90 a minute, 30 in its degraded mode.
    pub requests_per_window: usize,
    pub window: Duration,
    /// Send `X-RateLimit-Remaining`/`-Reset` on successful answers (AniList does).
    pub rate_limit_headers: bool,
    /// Give items without one a `coverImage` and `bannerImage` served by this fake.
    pub posters: bool,
    /// With `posters`: items whose id this divides get none (as on AniList, rarely).
    pub posters_missing_every: Option<i64>,
    /// With `posters`: the images of ids this divides answer 500 (a broken upstream).
    pub posters_broken_every: Option<i64>,
}

impl FakeAniListConfig {
    /// A catalog of anything that serialises as AniList's Media objects (the server's `Media`, or
    /// the lines of a JSONL file).
    pub fn new<M: Serialize>(media: impl IntoIterator<Item = M>) -> Self {
        Self {
            media: media
                .into_iter()
                .map(|m| serde_json::to_value(m).expect("Media serialises"))
                .collect(),
            result_cap: 5_000,
            max_per_page: 50,
            requests_per_window: 30,
            window: Duration::from_secs(60),
            rate_limit_headers: true,
            posters: false,
            posters_missing_every: None,
            posters_broken_every: None,
        }
    }
}

/// What to do to a matching request instead of answering it properly.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Answer with this HTTP status and an AniList-style error body.
    Status(u16),
    /// Wait this long before answering (the client should time out first).
    Hang(Duration),
    /// A body that is not JSON.
    MalformedJson,
    /// Valid JSON whose media list holds an item without an id.
    InvalidItem,
    /// Send half of the body, then drop the connection.
    StopEarly,
}

/// Applies `failure` to requests for `page` of the slice with these filters, `times` times.
#[derive(Debug, Clone)]
pub struct FailureRule {
    pub season_year: Option<i32>,
    pub season: Option<String>,
    pub format: Option<String>,
    pub page: u32,
    pub failure: Failure,
    pub times: usize,
}

/// One request as the fake saw it; `status` is 0 while its answer is still pending (a hang).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    pub season_year: Option<i32>,
    pub season: Option<String>,
    pub format: Option<String>,
    pub page: u32,
    pub per_page: u32,
    pub status: u16,
}

/// The fields of a Media object the fake filters and sorts by.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listing {
    id: i64,
    #[serde(default, rename = "type")]
    media_type: Option<String>,
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    season: Option<String>,
    #[serde(default)]
    season_year: Option<i32>,
    #[serde(default)]
    start_date: Option<FuzzyDate>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct FuzzyDate {
    #[serde(default)]
    year: Option<i32>,
    #[serde(default)]
    month: Option<i32>,
    #[serde(default)]
    day: Option<i32>,
}

struct FakeState {
    config: FakeAniListConfig,
    /// What to filter `config.media` by, item by item.
    listings: Vec<Listing>,
    recent: Mutex<VecDeque<Instant>>,
    rules: Mutex<Vec<FailureRule>>,
    log: Mutex<Vec<RequestRecord>>,
    /// `http://addr`, once serving.
    base: OnceLock<String>,
    /// Image requests answer 500 while set.
    images_fail: AtomicBool,
    /// Image requests answered so far.
    images_served: AtomicUsize,
}

pub struct FakeAniList {
    pub addr: SocketAddr,
    state: Arc<FakeState>,
    _server: super::Served,
}

impl FakeAniList {
    /// Starts the fake on `addr` (port 0 for any free port); fails on an item that is not a Media
    /// object with an id.
    pub async fn start(config: FakeAniListConfig, addr: SocketAddr) -> std::io::Result<Self> {
        let listings = config
            .media
            .iter()
            .map(Listing::deserialize)
            .collect::<Result<_, _>>()
            .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error))?;
        let state = Arc::new(FakeState {
            config,
            listings,
            recent: Mutex::default(),
            rules: Mutex::default(),
            log: Mutex::default(),
            base: OnceLock::new(),
            images_fail: AtomicBool::new(false),
            images_served: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/", post(graphql))
            .route("/img/{size}/{file}", get(image))
            .with_state(state.clone());
        let server = super::serve(app, addr).await?;
        let _ = state.base.set(format!("http://{}", server.addr));
        Ok(Self {
            addr: server.addr,
            state,
            _server: server,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn fail(&self, rule: FailureRule) {
        self.state.rules.lock().unwrap().push(rule);
    }

    pub fn clear_failures(&self) {
        self.state.rules.lock().unwrap().clear();
    }

    pub fn requests(&self) -> Vec<RequestRecord> {
        self.state.log.lock().unwrap().clone()
    }

    /// Image requests answer 500 (true) or the image again (false).
    pub fn fail_images(&self, fail: bool) {
        self.state.images_fail.store(fail, Ordering::SeqCst);
    }

    /// Image requests answered with an image so far.
    pub fn images_served(&self) -> usize {
        self.state.images_served.load(Ordering::SeqCst)
    }

    /// The URL of a poster this fake serves, as its `coverImage` gives it.
    pub fn poster_url(&self, size: &str, id: i64) -> String {
        format!("http://{}/img/{size}/{id}.png", self.addr)
    }
}

/// The colour of anime `id`'s fake poster.
fn poster_color(id: i64) -> [u8; 3] {
    let n = id.unsigned_abs();
    [
        (n * 47 % 200 + 30) as u8,
        (n * 89 % 200 + 30) as u8,
        (n * 131 % 200 + 30) as u8,
    ]
}

/// `GET /img/{size}/{id}.png`: a small PNG of the anime's colour, at AniList's poster ratio.
async fn image(
    State(state): State<Arc<FakeState>>,
    axum::extract::Path((size, file)): axum::extract::Path<(String, String)>,
) -> Response {
    let Some(id) = file
        .strip_suffix(".png")
        .and_then(|id| id.parse::<i64>().ok())
    else {
        return (StatusCode::NOT_FOUND, "no such image").into_response();
    };
    let broken = state
        .config
        .posters_broken_every
        .is_some_and(|every| every > 0 && id % every == 0);
    if broken || state.images_fail.load(Ordering::SeqCst) {
        return (StatusCode::INTERNAL_SERVER_ERROR, "image host down").into_response();
    }
    let (width, height) = match size.as_str() {
        "extraLarge" => (46, 65),
        "medium" => (10, 14),
        "banner" => (190, 40),
        _ => (23, 33),
    };
    state.images_served.fetch_add(1, Ordering::SeqCst);
    (
        [(axum::http::header::CONTENT_TYPE, "image/png")],
        solid_png(width, height, poster_color(id)),
    )
        .into_response()
}

/// A `width` × `height` PNG of one colour (8-bit RGB, no interlace).
pub fn solid_png(width: u32, height: u32, rgb: [u8; 3]) -> Vec<u8> {
    // Each row: its filter byte (0, none), then the pixels.
    let row: Vec<u8> = std::iter::once(0)
        .chain((0..width).flat_map(|_| rgb))
        .collect();
    let rows = row.repeat(height as usize);
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    zlib.write_all(&rows).expect("writing to memory");
    let pixels = zlib.finish().expect("writing to memory");
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    header.extend_from_slice(&[8, 2, 0, 0, 0]); // 8 bits, RGB, deflate, no filter set, no interlace
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in [
        (&b"IHDR"[..], &header[..]),
        (b"IDAT", &pixels),
        (b"IEND", &[]),
    ] {
        png.extend_from_slice(&(data.len() as u32).to_be_bytes());
        png.extend_from_slice(kind);
        png.extend_from_slice(data);
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        png.extend_from_slice(&crc.sum().to_be_bytes());
    }
    png
}

#[derive(Debug, Deserialize)]
struct GraphQlRequest {
    #[serde(default)]
    variables: Variables,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Variables {
    page: Option<u32>,
    per_page: Option<u32>,
    season_year: Option<i32>,
    season: Option<String>,
    format: Option<String>,
    format_not_in: Option<Vec<String>>,
    sort: Option<Vec<String>>,
    id_in: Option<Vec<i64>>,
}

fn error_body(status: StatusCode, message: &str) -> Response {
    (
        status,
        Json(
            json!({ "data": null, "errors": [{ "message": message, "status": status.as_u16() }] }),
        ),
    )
        .into_response()
}

/// What is left of the window's request budget after a request.
struct Budget {
    remaining: usize,
    /// When the oldest request of the window leaves it, freeing a slot.
    frees_in: Duration,
}

impl FakeState {
    /// Counts a request against the current window's budget; when it is spent, the whole
    /// seconds until a slot frees up instead.
    fn spend_budget(&self) -> Result<Budget, u64> {
        let config = &self.config;
        let mut recent = self.recent.lock().unwrap();
        let now = Instant::now();
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= config.window)
        {
            recent.pop_front();
        }
        if recent.len() >= config.requests_per_window {
            let wait = config.window.saturating_sub(now.duration_since(recent[0]));
            return Err(wait.as_secs_f64().ceil().max(1.0) as u64);
        }
        recent.push_back(now);
        Ok(Budget {
            remaining: config.requests_per_window - recent.len(),
            frees_in: config.window.saturating_sub(now.duration_since(recent[0])),
        })
    }

    /// The failure a rule holds for this request, using up one of the rule's times.
    fn take_failure(&self, vars: &Variables, page: u32) -> Option<Failure> {
        let mut rules = self.rules.lock().unwrap();
        rules
            .iter_mut()
            .find(|rule| {
                rule.times > 0
                    && rule.page == page
                    && rule.season_year == vars.season_year
                    && rule.season == vars.season
                    && rule.format == vars.format
            })
            .map(|rule| {
                rule.times -= 1;
                rule.failure.clone()
            })
    }

    /// Logs a request; its index in the log, to set its status later.
    fn log(&self, record: RequestRecord) -> usize {
        let mut log = self.log.lock().unwrap();
        log.push(record);
        log.len() - 1
    }

    /// The catalog's items that pass the filters, in the order asked for.
    fn matching(&self, vars: &Variables) -> Vec<&Value> {
        let mut matching: Vec<(&Listing, &Value)> = self
            .listings
            .iter()
            .zip(&self.config.media)
            .filter(|(m, _)| m.media_type.as_deref().unwrap_or("ANIME") == "ANIME")
            .filter(|(m, _)| vars.id_in.as_ref().is_none_or(|ids| ids.contains(&m.id)))
            .filter(|(m, _)| vars.season_year.is_none() || m.season_year == vars.season_year)
            .filter(|(m, _)| vars.season.is_none() || m.season == vars.season)
            .filter(|(m, _)| vars.format.is_none() || m.format == vars.format)
            .filter(|(m, _)| match (&vars.format_not_in, &m.format) {
                (Some(excluded), Some(format)) => !excluded.contains(format),
                _ => true,
            })
            .collect();
        if vars
            .sort
            .as_ref()
            .is_some_and(|sort| sort.first().is_some_and(|s| s == "START_DATE"))
        {
            // Like AniList (MySQL ordering): entries without a start date first.
            matching.sort_by_key(|(m, _)| {
                let date = m.start_date.unwrap_or_default();
                (date.year.is_some(), date.year, date.month, date.day, m.id)
            });
        } else {
            matching.sort_by_key(|(m, _)| m.id);
        }
        matching.into_iter().map(|(_, item)| item).collect()
    }

    /// `item`, with a `coverImage` and `bannerImage` served here when `posters` is on and it
    /// has none.
    fn with_posters(&self, mut item: Value) -> Value {
        let (true, Some(base)) = (self.config.posters, self.base.get()) else {
            return item;
        };
        let Some(id) = item.get("id").and_then(Value::as_i64) else {
            return item;
        };
        if self
            .config
            .posters_missing_every
            .is_some_and(|every| every > 0 && id % every == 0)
        {
            return item;
        }
        if let Some(object) = item.as_object_mut()
            && object.get("coverImage").is_none_or(Value::is_null)
        {
            let [r, g, b] = poster_color(id);
            object.insert(
                "coverImage".into(),
                json!({
                    "extraLarge": format!("{base}/img/extraLarge/{id}.png"),
                    "large": format!("{base}/img/large/{id}.png"),
                    "medium": format!("{base}/img/medium/{id}.png"),
                    "color": format!("#{r:02x}{g:02x}{b:02x}"),
                }),
            );
            object.insert(
                "bannerImage".into(),
                json!(format!("{base}/img/banner/{id}.png")),
            );
        }
        item
    }

    /// The JSON body of one page of the matching items (the first `result_cap` of them).
    fn page_body(&self, vars: &Variables, page: u32, per_page: u32, invalid_item: bool) -> String {
        let matching = self.matching(vars);
        let visible = matching.len().min(self.config.result_cap);
        let last_page = visible.div_ceil(per_page.max(1) as usize).max(1) as u32;
        let start = ((page - 1) * per_page) as usize;
        let mut items: Vec<Value> = matching[..visible]
            .iter()
            .skip(start)
            .take(per_page as usize)
            .map(|&item| self.with_posters(item.clone()))
            .collect();
        if invalid_item {
            items.push(json!({ "title": { "romaji": "no id" } }));
        }
        json!({ "data": { "Page": {
            "pageInfo": {
                "total": visible, "perPage": per_page, "currentPage": page,
                "lastPage": last_page, "hasNextPage": page < last_page
            },
            "media": items
        }}})
        .to_string()
    }
}

async fn graphql(
    State(state): State<Arc<FakeState>>,
    Json(request): Json<GraphQlRequest>,
) -> Response {
    let vars = request.variables;
    let page = vars.page.unwrap_or(1).max(1);
    let per_page = vars.per_page.unwrap_or(10);
    let record = |status: u16| RequestRecord {
        season_year: vars.season_year,
        season: vars.season.clone(),
        format: vars.format.clone(),
        page,
        per_page,
        status,
    };
    let budget = match state.spend_budget() {
        Ok(budget) => budget,
        Err(retry_after) => {
            state.log(record(429));
            return too_many_requests(&state.config, retry_after);
        }
    };
    if per_page > state.config.max_per_page {
        state.log(record(400));
        return error_body(StatusCode::BAD_REQUEST, "perPage must be at most 50");
    }
    let failure = state.take_failure(&vars, page);
    // Logged on arrival, so a test can see a request that is still hanging.
    let entry = state.log(record(0));
    if let Some(Failure::Hang(duration)) = &failure {
        tokio::time::sleep(*duration).await;
    }
    let invalid_item = failure == Some(Failure::InvalidItem);
    let body = state.page_body(&vars, page, per_page, invalid_item);
    state.log.lock().unwrap()[entry].status = match &failure {
        Some(Failure::Status(code)) => *code,
        _ => 200,
    };
    let headers = page_headers(&state.config, &budget);
    answer(failure, headers, body)
}

/// AniList's 429: the error body, `Retry-After` and the spent budget.
fn too_many_requests(config: &FakeAniListConfig, retry_after: u64) -> Response {
    let mut response = error_body(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests.");
    let headers = response.headers_mut();
    headers.insert("retry-after", HeaderValue::from(retry_after));
    headers.insert(
        "x-ratelimit-limit",
        HeaderValue::from(config.requests_per_window),
    );
    headers.insert("x-ratelimit-remaining", HeaderValue::from(0));
    headers.insert(
        "x-ratelimit-reset",
        HeaderValue::from(unix_now() + retry_after),
    );
    response
}

/// The headers of a page: JSON, and the budget left when the fake sends rate-limit headers.
fn page_headers(config: &FakeAniListConfig, budget: &Budget) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    if config.rate_limit_headers {
        headers.insert(
            "x-ratelimit-limit",
            HeaderValue::from(config.requests_per_window),
        );
        headers.insert("x-ratelimit-remaining", HeaderValue::from(budget.remaining));
        if budget.remaining == 0 {
            let reset = (unix_now_f64() + budget.frees_in.as_secs_f64()).ceil() as u64;
            headers.insert("x-ratelimit-reset", HeaderValue::from(reset));
        }
    }
    headers
}

/// The page as it is sent: whole, or spoilt the way `failure` says.
fn answer(failure: Option<Failure>, mut headers: HeaderMap, body: String) -> Response {
    match failure {
        Some(Failure::Status(code)) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            error_body(status, "Internal Server Error")
        }
        Some(Failure::MalformedJson) => {
            (headers, "<html><body>502 Bad Gateway</body></html>").into_response()
        }
        Some(Failure::StopEarly) => {
            let half = body.as_bytes()[..body.len() / 2].to_vec();
            let length = body.len();
            let stream = futures_util::stream::iter(vec![
                Ok::<_, std::io::Error>(half),
                Err(std::io::Error::other("connection cut")),
            ]);
            headers.insert("content-length", HeaderValue::from(length));
            (headers, Body::from_stream(stream)).into_response()
        }
        _ => (headers, body).into_response(),
    }
}

fn unix_now() -> u64 {
    unix_now_f64() as u64
}

fn unix_now_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
