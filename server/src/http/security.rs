//! Headers every response gets: no MIME sniffing, no framing, a conservative referrer policy,
//! and a Content Security Policy for responses that did not set their own (pages set theirs,
//! with the nonce of their hydration script: `app::security`).

use axum::{
    extract::Request,
    http::{HeaderMap, HeaderName, HeaderValue, header},
    middleware::Next,
    response::Response,
};

/// The policy of anything that is not a page (JSON, files, redirects): nothing may run.
const DEFAULT_POLICY: &str = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'";

pub async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
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
