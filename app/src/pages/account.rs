//! Account pages: sign up, the "check your mail" page, the sign-up link, log in, the account.
//!
//! The forms are plain HTML forms posting to the server's handlers (`server::http::auth`),
//! which answer with a redirect: they work the same with JavaScript on or off. A handler that
//! refuses a form sends the browser back with `?error=<code>`, shown by [`FormErrorNotice`].

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use super::premium::{ManageBilling, go_premium};
use crate::{
    account::{Viewer, form_error_message},
    api::load_viewer,
    search::QuotaInfo,
};

/// Shows the message for `?error=` (if the code is known).
#[component]
pub(super) fn FormErrorNotice() -> impl IntoView {
    let query = use_query_map();
    move || {
        query
            .read()
            .get("error")
            .and_then(|code| form_error_message(&code))
            .map(|message| view! { <p class="notice error" role="alert">{message}</p> })
    }
}

/// Renders `form(viewer)` once the viewer is known, or an error notice.
pub(super) fn with_viewer<V: IntoView + 'static>(
    form: impl Fn(Viewer) -> V + Send + Sync + Clone + 'static,
) -> impl IntoView {
    let resource = Resource::new(|| (), |_| load_viewer());
    view! {
        <Suspense fallback=|| view! { <p role="status">"Loading…"</p> }>
            {move || {
                let form = form.clone();
                Suspend::new(async move {
                match resource.await {
                    Ok(viewer) => form(viewer).into_any(),
                    Err(_) => view! {
                        <p class="notice error" role="alert">
                            "This page could not be loaded. Please try again in a moment."
                        </p>
                    }
                        .into_any(),
                }
            })}}
        </Suspense>
    }
}

/// `/register`: email and password; the account is created from an emailed link.
#[component]
pub fn RegisterPage() -> impl IntoView {
    view! {
        <Title text="Sign up — Zenbu" />
        <main class="account-form">
            <h1>"Create a free account"</h1>
            <p>"30 searches a month, free. We send a link to your address to finish."</p>
            <FormErrorNotice />
            {with_viewer(|viewer| view! {
                <form method="post" action="/register">
                    <input type="hidden" name="csrf" value=viewer.csrf />
                    <label for="email">"Email"</label>
                    <input id="email" name="email" type="email" autocomplete="email" required />
                    <label for="password">"Password"</label>
                    <input id="password" name="password" type="password" autocomplete="new-password"
                        minlength="8" maxlength="128" required aria-describedby="password-rules" />
                    <p id="password-rules" class="hint">"8 to 128 characters."</p>
                    <button type="submit">"Sign up"</button>
                </form>
            })}
            <p>"Already have an account? " <a href="/login">"Log in"</a></p>
        </main>
    }
}

/// `/register/sent`: the same answer whether or not the address already had an account.
#[component]
pub fn RegisterSentPage() -> impl IntoView {
    view! {
        <Title text="Check your mail — Zenbu" />
        <main class="account-form">
            <h1>"Check your mail"</h1>
            <p>
                "We have sent a message to the address you gave. Open the link in it to finish. "
                "The link works for 24 hours."
            </p>
            <p><a href="/">"Back to search"</a></p>
        </main>
    }
}

/// `/register/confirm?token=…`: the emailed link lands here; a button (a POST) creates the
/// account, so a mail scanner that only follows links creates nothing.
#[component]
pub fn ConfirmPage() -> impl IntoView {
    let query = use_query_map();
    let token = move || query.read().get("token").unwrap_or_default();
    view! {
        <Title text="Finish signing up — Zenbu" />
        <main class="account-form">
            <h1>"Finish creating your account"</h1>
            <FormErrorNotice />
            {move || {
                let token = token();
                with_viewer(move |viewer| {
                    let token = token.clone();
                    view! {
                        <form method="post" action="/register/confirm">
                            <input type="hidden" name="csrf" value=viewer.csrf />
                            <input type="hidden" name="token" value=token />
                            <button type="submit">"Create my account"</button>
                        </form>
                    }
                })
            }}
        </main>
    }
}

/// `/login`.
#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_default();
    view! {
        <Title text="Log in — Zenbu" />
        <main class="account-form">
            <h1>"Log in"</h1>
            <FormErrorNotice />
            {move || {
                let next = next();
                with_viewer(move |viewer| {
                    let next = next.clone();
                    view! {
                        <form method="post" action="/login">
                            <input type="hidden" name="csrf" value=viewer.csrf />
                            <input type="hidden" name="next" value=next />
                            <label for="email">"Email"</label>
                            <input id="email" name="email" type="email" autocomplete="email" required />
                            <label for="password">"Password"</label>
                            <input id="password" name="password" type="password"
                                autocomplete="current-password" required />
                            <button type="submit">"Log in"</button>
                        </form>
                    }
                })
            }}
            <p>"No account yet? " <a href="/register">"Sign up"</a></p>
        </main>
    }
}

/// `/account`: email, plan, searches used this period and when they reset, log out.
#[component]
pub fn AccountPage() -> impl IntoView {
    view! {
        <Title text="Your account — Zenbu" />
        <main class="account">
            <h1>"Your account"</h1>
            <FormErrorNotice />
            {with_viewer(|viewer| match viewer.user.clone() {
                Some(user) => {
                    let plan = if user.premium { "Premium" } else { "Free" };
                    let billing = if user.premium && user.has_billing_account {
                        view! { <ManageBilling csrf=viewer.csrf.clone() /> }.into_any()
                    } else {
                        go_premium(&viewer)
                    };
                    view! {
                        {user.payment_failed_on.map(|day| view! {
                            <p class="notice error" role="alert">
                                {format!("Your payment of {day} failed. Update your card in the billing portal to keep Premium.")}
                            </p>
                        })}
                        <dl class="account-facts">
                            <dt>"Email"</dt>
                            <dd class="email">{user.email}</dd>
                            <dt>"Plan"</dt>
                            <dd class="plan">{plan}</dd>
                            <dt>"Searches"</dt>
                            <dd class="usage">{usage_line(&viewer.quota)}</dd>
                        </dl>
                        <section class="billing" aria-label="Premium">{billing}</section>
                        <form method="post" action="/logout">
                            <input type="hidden" name="csrf" value=viewer.csrf />
                            <button type="submit">"Log out"</button>
                        </form>
                    }
                        .into_any()
                }
                None => view! {
                    <p>
                        "You are not logged in. "
                        <a href="/login?next=/account">"Log in"</a>
                        " or "
                        <a href="/register">"sign up"</a>
                        " for 30 searches a month."
                    </p>
                    <p class="usage">{usage_line(&viewer.quota)}</p>
                }
                    .into_any(),
            })}
        </main>
    }
}

/// "Used 3 of 30 searches this month; they reset on 2026-12-01."
pub fn usage_line(quota: &QuotaInfo) -> String {
    let period = if quota.period == "year" {
        "this year"
    } else {
        "this month"
    };
    format!(
        "Used {} of {} searches {period}; {} left, resets on {}.",
        quota.used.min(quota.limit),
        quota.limit,
        quota.remaining(),
        quota.resets_on,
    )
}

/// The links at the top of every page: log in and sign up, or the account.
#[component]
pub fn SiteNav() -> impl IntoView {
    let resource = Resource::new(|| (), |_| load_viewer());
    view! {
        <nav class="site-nav" aria-label="Site">
            <a href="/">"Search"</a>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    match resource.await {
                        Ok(Viewer { user: Some(user), .. }) => view! {
                            <a href="/account" class="account-link">{user.email}</a>
                        }
                            .into_any(),
                        _ => view! {
                            <a href="/login">"Log in"</a>
                            <a href="/register">"Sign up"</a>
                        }
                            .into_any(),
                    }
                })}
            </Suspense>
        </nav>
    }
}
