//! The friendly error pages: 404 for an unknown address, 500 when a page fails on our side.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::i18n::use_lang;

/// Shown for any path no route matches; answers with HTTP 404.
#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    crate::api::backend::set_status(http::StatusCode::NOT_FOUND);
    let t = use_lang().texts();
    view! {
        <Title text=format!("{} — Zenbu", t.not_found_title) />
        <main class="not-found">
            <h1>{t.not_found_title}</h1>
            <p>{t.not_found_text} <a href="/">{t.back_to_search}</a></p>
        </main>
    }
}

/// A page whose data could not be loaded because of a failure on our side; answers with HTTP
/// 500 when rendered on the server.
#[component]
pub fn ServerError(
    /// What failed, when more can be said than "this page".
    #[prop(optional)]
    message: Option<&'static str>,
) -> impl IntoView {
    #[cfg(feature = "ssr")]
    crate::api::backend::set_status(http::StatusCode::INTERNAL_SERVER_ERROR);
    let t = use_lang().texts();
    view! {
        <section class="server-error notice error" role="alert">
            <h2>{t.error_title}</h2>
            <p>{message.unwrap_or(t.error_text)} " " <a href="/">{t.back_to_search}</a></p>
        </section>
    }
}

/// A dependency (the database) is down: HTTP 503, and the page says to try again shortly.
#[component]
pub fn Unavailable() -> impl IntoView {
    #[cfg(feature = "ssr")]
    crate::api::backend::set_status(http::StatusCode::SERVICE_UNAVAILABLE);
    let t = use_lang().texts();
    view! {
        <section class="server-error notice error" role="alert">
            <h2>{t.unavailable_title}</h2>
            <p>{t.unavailable_text}</p>
        </section>
    }
}

/// The page for a failed server function: 503 when a dependency is down, else 500.
pub fn failure_view(error: &crate::api::PageError, message: Option<&'static str>) -> AnyView {
    match (error, message) {
        (crate::api::PageError::Unavailable, _) => view! { <Unavailable /> }.into_any(),
        (_, Some(message)) => view! { <ServerError message /> }.into_any(),
        (_, None) => view! { <ServerError /> }.into_any(),
    }
}
