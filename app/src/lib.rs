//! What the user sees: the HTML shell, the router and the pages.
//!
//! This crate is compiled twice: with `ssr` into the server (renders HTML) and with `hydrate`
//! into the browser's wasm (takes over the rendered HTML). Nothing here touches a database or a
//! model; server functions ([`api`]) fetch a backend handle from Leptos context.

pub mod account;
pub mod api;
pub mod i18n;
pub mod pages;
pub mod plans;
pub mod search;
pub mod security;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::{
    ParamSegment, SsrMode, StaticSegment,
    components::{Route, Router, Routes},
};

/// The name the build gives the wasm/JS/CSS bundle (`/pkg/zenbu.js`, `/pkg/zenbu_bg.wasm`,
/// `/pkg/zenbu.css`); the server passes it to Leptos so the hydration script finds them.
pub const BUNDLE_NAME: &str = "zenbu";

/// The HTML document around the app, rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    let lang = i18n::detect();
    provide_context(lang);
    security::set_page_policy();
    view! {
        <!DOCTYPE html>
        <html lang=lang.code()>
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <link rel="icon" href="/favicon.svg" type="image/svg+xml" />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    mark_hydrated();
    // The server's shell provided it; in the browser it is read from `<html lang>`.
    let lang = use_context::<i18n::Lang>().unwrap_or_else(i18n::detect);
    provide_context(lang);

    view! {
        <Stylesheet id="zenbu-css" href=format!("/pkg/{BUNDLE_NAME}.css") />
        <Title text=lang.texts().site_title />
        <Router>
            <pages::SiteNav />
            <Routes fallback=pages::NotFound>
                // Rendered completely before sending, so results show without JavaScript.
                <Route path=StaticSegment("") view=pages::HomePage ssr=SsrMode::Async />
                <Route path=StaticSegment("login") view=pages::LoginPage ssr=SsrMode::Async />
                <Route path=StaticSegment("register") view=pages::RegisterPage ssr=SsrMode::Async />
                <Route
                    path=(StaticSegment("register"), StaticSegment("sent"))
                    view=pages::RegisterSentPage
                />
                <Route
                    path=(StaticSegment("register"), StaticSegment("confirm"))
                    view=pages::ConfirmPage
                    ssr=SsrMode::Async
                />
                <Route
                    path=(StaticSegment("password"), StaticSegment("forgot"))
                    view=pages::ForgotPasswordPage
                    ssr=SsrMode::Async
                />
                <Route
                    path=(StaticSegment("password"), StaticSegment("sent"))
                    view=pages::ForgotSentPage
                />
                <Route
                    path=(StaticSegment("password"), StaticSegment("reset"))
                    view=pages::ResetPasswordPage
                    ssr=SsrMode::Async
                />
                <Route path=StaticSegment("account") view=pages::AccountPage ssr=SsrMode::Async />
                <Route
                    path=(StaticSegment("account"), StaticSegment("email"), StaticSegment("confirm"))
                    view=pages::ConfirmEmailPage
                    ssr=SsrMode::Async
                />
                <Route path=StaticSegment("premium") view=pages::PremiumPage ssr=SsrMode::Async />
                <Route
                    path=(StaticSegment("premium"), StaticSegment("success"))
                    view=pages::PremiumSuccessPage
                />
                <Route
                    path=(StaticSegment("premium"), StaticSegment("cancelled"))
                    view=pages::PremiumCancelledPage
                />
                <Route
                    path=(StaticSegment("anime"), ParamSegment("id"))
                    view=pages::AnimePage
                    ssr=SsrMode::Async
                />
            </Routes>
        </Router>
    }
}

/// Sets `data-hydrated="true"` on `<body>` once the wasm has taken over the page. Effects never
/// run on the server, so the attribute is a true signal that hydration finished (the Playwright
/// suite waits for it before it clicks anything).
fn mark_hydrated() {
    Effect::new(move |_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
}
