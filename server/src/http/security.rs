//! Headers every response gets: no MIME sniffing, no framing, a conservative referrer policy,
//! and a Content Security Policy for responses that did not set their own (pages set theirs,
//! with the nonce of their hydration script: `app::security`).

use axum::{
    extract::Request,
    http::{HeaderName, HeaderValue, header},
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
