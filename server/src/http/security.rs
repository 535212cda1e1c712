//! Headers every response gets: no MIME sniffing, no framing, a conservative referrer policy,
//! and a Content Security Policy for responses that did not set their own (pages set theirs,
//! with the nonce of their hydration script: `app::security`). Over https, HSTS. And who may
//! keep a copy ([`cache_control`]): pages and JSON are the visitor's own.

use axum::{
    extract::{Request, State},
    http::{HeaderMap, HeaderName, HeaderValue, header},
    middleware::Next,
    response::Response,
};

/// The policy of anything that is not a page (JSON, files, redirects): nothing may run.
const DEFAULT_POLICY: &str = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'";

/// What the headers depend on: whether the site is served over https.
#[derive(Clone, Copy)]
pub struct Transport {
    pub https: bool,
}

/// HSTS, once a browser has seen the site over https: a year, this host only (subdomains may
/// not all be https).
const HSTS: &str = "max-age=31536000";

pub async fn headers(State(transport): State<Transport>, request: Request, next: Next) -> Response {
    let private = carries_secrets(&request);
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if transport.https && !headers.contains_key(header::STRICT_TRANSPORT_SECURITY) {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(HSTS),
        );
    }
    if !headers.contains_key(header::CACHE_CONTROL)
        && let Some(policy) = cache_control(headers, private)
    {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(policy));
    }
    let defaults: [(HeaderName, &str); 4] = [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "strict-origin-when-cross-origin"),
        (header::CONTENT_SECURITY_POLICY, DEFAULT_POLICY),
    ];
    for (name, value) in defaults {
        if !headers.contains_key(&name) {
            headers.insert(name, HeaderValue::from_static(value));
        }
    }
    response
}

/// Whether a page for this request may hold a form token or an email address: the request
/// comes with a session (every page then shows the address and a log-out form), or it is one of
/// the account pages (their forms carry a token).
fn carries_secrets(request: &Request) -> bool {
    let path = request.uri().path();
    let account_page = [
        "/login",
        "/register",
        "/password",
        "/account",
        "/premium",
        "/billing",
    ]
    .iter()
    .any(|prefix| path == *prefix || path.starts_with(&format!("{prefix}/")));
    let session = request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|cookies| {
            cookies.split(';').any(|pair| {
                let name = pair.trim().split('=').next().unwrap_or_default();
                name == crate::accounts::SESSION_COOKIE
                    || name == crate::accounts::SECURE_SESSION_COOKIE
            })
        });
    account_page || session
}

/// Who may keep a copy of a response that did not say: none of a page or JSON that may hold a
/// form token or an email (`private, no-store`: not on disk, not shared); other pages and JSON
/// are the visitor's own (their allowance is on them), kept by their browser only and checked
/// again before reuse (`private, no-cache`, so going back to results does not run, or charge,
/// the search again); files say nothing here.
fn cache_control(response: &HeaderMap, carries_secrets: bool) -> Option<&'static str> {
    let kind = response
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let dynamic = kind.starts_with("text/html") || kind.starts_with("application/json");
    match (dynamic, carries_secrets) {
        (false, _) => None,
        (true, true) => Some("private, no-store"),
        (true, false) => Some("private, no-cache"),
    }
}

/// Whether the browser says this request was started by another site (`Sec-Fetch-Site:
/// cross-site`; every current browser sends it). SameSite=Lax cookies still come with a
/// top-level navigation from another site, so a link elsewhere could spend a visitor's
/// searches: metered requests check this first. Requests without the header (scripts, older
/// browsers) are taken as they come.
pub fn from_another_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"cross-site"))
}

/// Whether nobody asked for this request's search yet: a `HEAD` (a link checker, a preview bot:
/// axum answers it with the GET handler and drops the body) or a prefetch a browser made ahead
/// of a click that may never come (`Sec-Purpose: prefetch`, and the older `Purpose: prefetch`
/// and `X-Moz: prefetch`). Metered requests refuse these before anything is charged.
pub fn not_requested(request: &axum::http::request::Parts) -> bool {
    let says_prefetch = |name: &str| {
        request.headers.get(name).is_some_and(|value| {
            value
                .to_str()
                .is_ok_and(|value| value.to_ascii_lowercase().contains("prefetch"))
        })
    };
    request.method == axum::http::Method::HEAD
        || says_prefetch("sec-purpose")
        || says_prefetch("purpose")
        || says_prefetch("x-moz")
}
