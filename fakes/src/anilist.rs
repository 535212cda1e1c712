//! A fake AniList GraphQL endpoint serving an AniList-shaped catalog: the `Page { pageInfo,
//! media(...) }` query with `seasonYear`, `season`, `format` and `format_not_in` filters, sorted
//! by id or by start date (entries without one first); perPage at
//! most 50 (a GraphQL error above); at most `result_cap` results per filter combination (AniList's
//! 5,000); a request budget per window answered with 429 + `Retry-After` and the
//! `X-RateLimit-*` headers; and failures on demand for chosen pages.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use axum::{
    Json, Router,
    body::Body,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
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
        });
        let app = Router::new()
            .route("/", post(graphql))
            .with_state(state.clone());
        let server = super::serve(app, addr).await?;
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
            .map(|&item| item.clone())
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
