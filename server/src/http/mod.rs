//! The axum application: Leptos pages (server-rendered, hydrated in the browser), the static
//! site files, and the routes that are not pages (`/healthz`).

mod auth;
mod backend;
mod billing;
mod error;
mod language;
pub mod limits;
mod security;

use std::path::Path;

use std::sync::{Arc, OnceLock};

use app::{
    App, BUNDLE_NAME,
    api::backend::SharedBackend,
    search::{AnimeCard, Filters, SearchResults},
    shell,
};
use axum::{
    Json, Router,
    extract::{DefaultBodyLimit, FromRef, Path as UrlPath, Query, State},
    routing::{get, post},
};
use leptos::config::LeptosOptions;
use leptos::prelude::provide_context;
use leptos_axum::{AxumRouteListing, LeptosRoutes, generate_route_list};
use serde::{Deserialize, Serialize};
use tower_http::{
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    trace::TraceLayer,
};

use crate::{
    accounts::visitor::{self, VisitorConfig},
    quota::Rules,
    search::SearchEngine,
};

pub use error::ApiError;

/// Settings of the site that are not the search engine's.
#[derive(Clone)]
pub struct SiteConfig {
    pub visitors: VisitorConfig,
    /// Where the site is reached (no trailing slash): links in mail, the trusted CSRF origin.
    pub public_url: String,
    pub rules: Rules,
    /// Serve `/dev/mail` (local runs and browser tests only).
    pub dev_mailbox: bool,
    /// Bearer token `/metrics` requires, if any.
    pub metrics_token: Option<secrecy::SecretString>,
    /// Origins besides this site that forms may lead to (Stripe's pages), for the pages'
    /// Content Security Policy.
    pub form_targets: Vec<String>,
    /// Time, concurrency and per-network rate limits on every request.
    pub limits: limits::Limits,
    /// Posters, fetched once and served from this site.
    pub images: crate::images::Images,
}

/// Everything a request handler may need; cheap to clone.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    /// The database's pools (primary and reads), as every service gets them.
    pub db: crate::db::Db,
    pub search: SearchEngine,
    /// Charges text searches (one task and one unit per payer and query in flight).
    pub meter: crate::quota::Meter,
    pub site: SiteConfig,
    /// Stripe, when configured.
    pub billing: Option<crate::billing::Billing>,
}

impl AppState {
    pub fn new(
        db: crate::db::Db,
        search: SearchEngine,
        site: SiteConfig,
        site_root: &Path,
    ) -> Self {
        let leptos_options = LeptosOptions::builder()
            .output_name(BUNDLE_NAME)
            .site_root(site_root.to_string_lossy().as_ref())
            .site_pkg_dir("pkg")
            .build();
        Self {
            leptos_options,
            db,
            search,
            meter: crate::quota::Meter::default(),
            site,
            billing: None,
        }
    }

    pub fn with_billing(mut self, billing: Option<crate::billing::Billing>) -> Self {
        self.billing = billing;
        self
    }
}

/// Largest request body accepted (forms and JSON are a few hundred bytes); Stripe's events get
/// more.
const BODY_LIMIT: usize = 64 * 1024;
const WEBHOOK_BODY_LIMIT: usize = 512 * 1024;

/// The site. Every request passes, outermost first: a request id (`x-request-id`, kept from a
/// proxy or made here, and sent back); tracing, one span per request with that id; security
/// headers; the concurrency cap, the per-network rate and the time limit (`limits`); CSRF
/// (cross-origin POSTs refused from their Fetch Metadata and Origin headers); the session (a
/// cookie naming a row in PostgreSQL, created only at log-in); a body limit; the visitor (signed
/// cookie, client network).
pub fn router(state: AppState) -> Router {
    crate::metrics::handle();
    let routes = page_routes();
    let options = state.leptos_options.clone();
    let pages_backend: SharedBackend = Arc::new(backend::PagesBackend {
        db: state.db.clone(),
        search: state.search.clone(),
        meter: state.meter.clone(),
        site: state.site.clone(),
        billing: state.billing.is_some(),
    });
    let csrf = csrf_layer(&state.site.public_url);
    let sessions = session_layer(&state);
    let form_targets = app::security::FormTargets(state.site.form_targets.clone());
    let origin = app::security::SiteOrigin(state.site.public_url.clone());
    plain_routes(state.site.dev_mailbox)
        .leptos_routes_with_context(
            &state,
            routes,
            move || {
                provide_context(pages_backend.clone());
                provide_context(form_targets.clone());
                provide_context(origin.clone());
            },
            move || shell(options.clone()),
        )
        // Files under the site root (`/pkg/zenbu.js`, ...) or the app's 404 page.
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(axum::middleware::from_fn_with_state(
            state.site.visitors.clone(),
            visitor::middleware,
        ))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(sessions)
        .layer(csrf)
        .layer(axum::middleware::from_fn_with_state(
            state.site.limits.request_timeout,
            limits::time_limit,
        ))
        // Before anything that costs (cookies, sessions): a flood's 429s are cheap.
        .layer(axum::middleware::from_fn_with_state(
            limits::NetworkRate::new(&state.site.limits, &state.site.visitors),
            limits::per_network,
        ))
        .layer(
            tower::ServiceBuilder::new()
                .layer(axum::error_handling::HandleErrorLayer::new(
                    limits::overloaded,
                ))
                .load_shed()
                .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
                    state.site.limits.max_in_flight,
                )),
        )
        .layer(axum::middleware::from_fn_with_state(
            security::Transport {
                https: state.site.visitors.secure,
            },
            security::headers,
        ))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &axum::http::Request<_>| request_span(request)),
        )
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .with_state(state)
}

/// Every request's span. A client may send its own `x-request-id` (it is kept and echoed), so
/// the id is logged with `Debug`: quoted and escaped, a forged `id user=1 status=200` stays one
/// field's value instead of reading as fields of its own. The method and path need no quoting:
/// hyper refuses spaces and control bytes in both.
fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id = ?id)
}

/// The pages' routes, generated once per process. Generating them renders the app with every
/// resource's loading suppressed through a flag that is global to the process
/// (`leptos::server::SuppressResourceLoad`), so a page rendering on another thread at that
/// moment waits forever for its data (leptos-rs/leptos#4773). The server builds one router
/// before it serves; the integration tests build one per test while other tests' pages render,
/// and hung that way about once in ten runs of the account tests.
fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// Cross-origin POSTs refused (Fetch Metadata and Origin headers); the public URL, when it is
/// an http(s) URL, is a trusted origin.
fn csrf_layer(public_url: &str) -> tower_http::csrf::CsrfLayer {
    let csrf = tower_http::csrf::CsrfLayer::new();
    if !public_url.starts_with("http") {
        return csrf;
    }
    csrf.add_trusted_origin(public_url).unwrap_or_else(|error| {
        tracing::warn!(%error, url = %public_url, "public URL is not an origin");
        tower_http::csrf::CsrfLayer::new()
    })
}

/// Sessions in PostgreSQL behind an HTTP-only, SameSite=Lax cookie (Secure when the site is
/// https), ended after 30 days without a request.
fn session_layer(
    state: &AppState,
) -> tower_sessions::SessionManagerLayer<tower_sessions_sqlx_store::PostgresStore> {
    tower_sessions::SessionManagerLayer::new(tower_sessions_sqlx_store::PostgresStore::new(
        state.db.primary.clone(),
    ))
    .with_name(crate::accounts::session_cookie_name(
        state.site.visitors.secure,
    ))
    .with_secure(state.site.visitors.secure)
    .with_http_only(true)
    .with_same_site(tower_sessions::cookie::SameSite::Lax)
    .with_expiry(tower_sessions::Expiry::OnInactivity(
        tower_sessions::cookie::time::Duration::days(crate::accounts::SESSION_DAYS),
    ))
}

/// The routes that are not Leptos pages: the JSON API, the form posts, the webhook, and the
/// mail outbox when it is on.
fn plain_routes(dev_mailbox: bool) -> Router<AppState> {
    let router = Router::new()
        .route("/healthz", get(healthz))
        .route("/api/search", get(api_search))
        .route("/api/anime/{id}/similar", get(api_similar))
        .route("/img/anime/{id}/cover", get(cover))
        .route("/register", post(auth::sign_up))
        .route("/register/confirm", post(auth::confirm))
        .route("/login", post(auth::log_in))
        .route("/logout", post(auth::log_out))
        .route("/password/forgot", post(auth::forgot_password))
        .route("/password/reset", post(auth::reset_password))
        .route("/account/password", post(auth::change_password))
        .route(
            "/account/sessions/end-others",
            post(auth::end_other_sessions),
        )
        .route("/account/delete", post(auth::delete_account))
        .route("/account/email", post(auth::change_email))
        .route("/account/email/confirm", post(auth::confirm_email))
        .route("/premium/checkout", post(billing::checkout))
        .route("/billing/portal", post(billing::portal))
        .route(
            "/stripe/webhook",
            post(billing::stripe_webhook).layer(DefaultBodyLimit::max(WEBHOOK_BODY_LIMIT)),
        )
        .route("/lang", get(language::switch))
        .route("/metrics", get(metrics));
    if dev_mailbox {
        return router.route("/dev/mail", get(auth::dev_mailbox));
    }
    router
}

/// `/img/anime/{id}/cover`: the poster (kept a day by browsers), or its placeholder (ten
/// minutes: the poster may be there next time); 404 for an unknown anime.
async fn cover(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<i32>,
) -> Result<axum::response::Response, ApiError> {
    use axum::{http::header, response::IntoResponse};
    match state.site.images.cover(&state.db.reads, id).await? {
        crate::images::Poster::Image {
            bytes,
            content_type,
        } => Ok((
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "public, max-age=86400"),
            ],
            bytes.to_vec(),
        )
            .into_response()),
        crate::images::Poster::Placeholder(svg) => Ok((
            [
                (header::CONTENT_TYPE, "image/svg+xml"),
                (header::CACHE_CONTROL, "public, max-age=600"),
            ],
            svg,
        )
            .into_response()),
        crate::images::Poster::Unknown => Err(ApiError::NotFound(format!("no anime {id}"))),
    }
}

/// `/metrics`: Prometheus' text format (see [`crate::metrics`]). With `ZENBU_METRICS_TOKEN`,
/// only for `Authorization: Bearer <token>`; without it, block it at the load balancer in a
/// public deployment.
async fn metrics(
    State(site): State<SiteConfig>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::{http::header, response::IntoResponse};
    if let Some(token) = &site.metrics_token {
        let sent = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .unwrap_or_default();
        // Digests compared, so the time taken says nothing about the token's characters.
        use secrecy::ExposeSecret;
        use sha2::{Digest, Sha256};
        if Sha256::digest(sent.as_bytes()) != Sha256::digest(token.expose_secret().as_bytes()) {
            return (
                axum::http::StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "metrics need a bearer token\n",
            )
                .into_response();
        }
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::metrics::handle().render(),
    )
        .into_response()
}

#[derive(Debug, Serialize)]
struct Health {
    status: &'static str,
    postgres: String,
    pgvector: Option<String>,
    /// Only with a read replica configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    replica: Option<crate::db::ReplicaHealth>,
}

/// Liveness and versions: 200 with the PostgreSQL and pgvector versions, 503 when the primary
/// cannot be reached. A read replica is reported (reachable, in recovery, replay lag) but does
/// not fail the check: every app server shares it, and pages and accounts work without it.
async fn healthz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    let versions = crate::db::versions(&state.db.primary).await?;
    let replica = match state.db.has_replica() {
        true => Some(crate::db::replica_health(&state.db.reads).await),
        false => None,
    };
    Ok(Json(Health {
        status: "ok",
        postgres: versions.postgres,
        pgvector: versions.pgvector,
        replica,
    }))
}

/// Query string of `GET /api/search`: the same names as the search page's URL.
#[derive(Debug, Deserialize)]
struct SearchParams {
    q: String,
    format: Option<String>,
    from: Option<i32>,
    to: Option<i32>,
    genre: Option<String>,
}

/// Search as JSON (for scripts and load tests), metered like the page: 400 for an empty or too
/// long query, 429 when the allowance is used up.
async fn api_search(
    State(state): State<AppState>,
    request: axum::http::request::Parts,
    Query(params): Query<SearchParams>,
) -> Result<Json<SearchResults>, ApiError> {
    let filters = Filters {
        formats: params
            .format
            .into_iter()
            .filter(|f| !f.is_empty())
            .collect(),
        year_from: params.from,
        year_to: params.to,
        genres: params.genre.into_iter().filter(|g| !g.is_empty()).collect(),
    };
    if security::from_another_site(&request.headers) {
        return Err(ApiError::CrossSite);
    }
    if security::not_requested(&request) {
        return Err(ApiError::NotRequested);
    }
    let (payer, _) = crate::accounts::payer(&state.db.primary, &request).await?;
    let results = state
        .meter
        .search(
            &state.db,
            &state.search,
            &payer,
            &state.site.rules,
            &params.q,
            &filters,
        )
        .await?;
    Ok(Json(results))
}

#[derive(Debug, Deserialize)]
struct SimilarParams {
    /// Also leave out the anime's own franchise (default: yes).
    exclude_franchise: Option<bool>,
}

/// "Similar to" as JSON; 404 for an unknown anime.
async fn api_similar(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<i32>,
    Query(params): Query<SimilarParams>,
) -> Result<Json<Vec<AnimeCard>>, ApiError> {
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM anime WHERE id = $1)")
        .bind(id)
        .fetch_one(&state.db.primary)
        .await?;
    if !exists {
        return Err(ApiError::NotFound(format!("no anime {id}")));
    }
    let exclude = params.exclude_franchise.unwrap_or(true);
    Ok(Json(
        state
            .search
            .similar(id, exclude, crate::search::SIMILAR_COUNT)
            .await?,
    ))
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::Mutex;

    use super::*;

    /// What a subscriber printed, shared with the test that reads it.
    #[derive(Clone, Default)]
    struct Printed(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Printed {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The log line of one event inside the span of a request carrying `request_id`.
    fn logged_under(request_id: &str) -> String {
        let printed = Printed::default();
        let writer = printed.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let request = axum::http::Request::get("/anime/1")
            .header("x-request-id", request_id)
            .body(())
            .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            request_span(&request).in_scope(|| tracing::info!("served"));
        });
        String::from_utf8(printed.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn a_request_id_sent_by_the_client_cannot_forge_log_fields() {
        let line = logged_under("forged user=1 status=200");
        assert!(
            line.contains(r#"request_id="forged user=1 status=200""#),
            "the client's id is one quoted value: {line}"
        );
        assert!(!line.contains("request_id=forged"), "{line}");
        let line = logged_under(r#"a" user="1"#);
        assert!(line.contains(r#"request_id="a\" user=\"1""#), "{line}");
        // Our own ids (a UUID when the client sent none) read as before, only quoted.
        let line = logged_under("4f1c2a9e-0000-4000-8000-000000000000");
        assert!(
            line.contains(r#"request_id="4f1c2a9e-0000-4000-8000-000000000000""#),
            "{line}"
        );
    }
}
