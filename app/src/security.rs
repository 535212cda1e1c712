//! The Content Security Policy of the pages. Leptos puts a fresh nonce on its inline hydration
//! script for every response (leptos_axum's `nonce` feature); the policy allows scripts from
//! this site and with that nonce only, plus wasm compilation for the hydrated app.

#[cfg(feature = "ssr")]
use leptos::prelude::*;

/// Origins besides this site that a form may lead to (Stripe's Checkout and billing portal:
/// their forms post here and are answered with a redirect there, which `form-action` covers).
/// Provided by the server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FormTargets(pub Vec<String>);

/// The site's public origin (`https://zenbu.example`), for the absolute URLs Open Graph needs
/// (a shared link's preview image). Provided by the server; absent in the browser, where the
/// tags are not read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteOrigin(pub String);

/// `path` made absolute against the site's origin when the server provided it.
pub fn absolute(path: &str) -> String {
    match leptos::prelude::use_context::<SiteOrigin>() {
        Some(SiteOrigin(origin)) => format!("{}{path}", origin.trim_end_matches('/')),
        None => path.to_string(),
    }
}

/// The policy for a page whose inline scripts carry `nonce`.
pub fn policy(nonce: &str, form_targets: &FormTargets) -> String {
    let forms = std::iter::once("'self'".to_string())
        .chain(form_targets.0.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
         base-uri 'none'; frame-ancestors 'none'; form-action {forms}"
    )
}

/// Sets the page's policy on the response being rendered (server only).
pub fn set_page_policy() {
    #[cfg(feature = "ssr")]
    if let (Some(nonce), Some(response)) = (
        leptos::nonce::use_nonce(),
        use_context::<leptos_axum::ResponseOptions>(),
    ) && let Ok(value) = http::HeaderValue::from_str(&policy(
        &nonce,
        &use_context::<FormTargets>().unwrap_or_default(),
    )) {
        response.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_the_nonce_and_the_form_targets() {
        let policy = policy(
            "abc",
            &FormTargets(vec!["https://checkout.stripe.com".into()]),
        );
        assert!(policy.contains("script-src 'self' 'nonce-abc' 'wasm-unsafe-eval'"));
        assert!(policy.contains("form-action 'self' https://checkout.stripe.com"));
        assert!(policy.contains("frame-ancestors 'none'"));
        assert!(!policy.contains("unsafe-inline"));
    }
}
