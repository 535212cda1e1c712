//! Account pages: sign up, the "check your mail" page, the sign-up link, log in, forgotten
//! passwords, the account, and the site header.
//!
//! The forms are plain HTML forms posting to the server's handlers (`server::http::auth`),
//! which answer with a redirect: they work the same with JavaScript on or off. A handler that
//! refuses a form sends the browser back with `?error=<code>`, shown by [`FormErrorNotice`].

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_location, use_query_map};

use super::premium::{ManageBillingAll, go_premium};
use crate::{
    account::Viewer,
    api::load_viewer,
    i18n::{Lang, use_lang},
};

/// Shows the message for `?error=` (if the code is known).
#[component]
pub(super) fn FormErrorNotice() -> impl IntoView {
    let lang = use_lang();
    let query = use_query_map();
    move || {
        query
            .read()
            .get("error")
            .and_then(|code| lang.form_error(&code))
            .map(|message| view! { <p class="notice error" role="alert">{message}</p> })
    }
}

/// Renders `form(viewer)` once the viewer is known, or the error notice.
pub(super) fn with_viewer<V: IntoView + 'static>(
    form: impl Fn(Viewer) -> V + Send + Sync + Clone + 'static,
) -> impl IntoView {
    let t = use_lang().texts();
    let resource = Resource::new(|| (), |_| load_viewer());
    view! {
        <Suspense fallback=move || view! { <p role="status">{t.loading}</p> }>
            {move || {
                let form = form.clone();
                Suspend::new(async move {
                    match resource.await {
                        Ok(viewer) => form(viewer).into_any(),
                        Err(error) => super::errors::failure_view(&error, None),
                    }
                })
            }}
        </Suspense>
    }
}

/// `/register`: email and password; the account is created from an emailed link.
#[component]
pub fn RegisterPage() -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <Title text=format!("{} — Zenbu", t.sign_up_title) />
        <main class="account-form">
            <h1>{t.sign_up_title}</h1>
            <p>{t.sign_up_intro}</p>
            <FormErrorNotice />
            {with_viewer(move |viewer| view! {
                <form method="post" action="/register">
                    <input type="hidden" name="csrf" value=viewer.csrf />
                    <label for="email">{t.email}</label>
                    <input id="email" name="email" type="email" autocomplete="email" required />
                    <button type="submit">{t.sign_up_button}</button>
                </form>
            })}
            <p>{t.have_account} <a href="/login">{t.nav_log_in}</a></p>
        </main>
    }
}

/// `/register/sent`: the same answer whether or not the address already had an account.
#[component]
pub fn RegisterSentPage() -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <Title text=format!("{} — Zenbu", t.check_mail_title) />
        <main class="account-form">
            <h1>{t.check_mail_title}</h1>
            <p>{t.check_mail_text}</p>
            <p><a href="/">{t.back_to_search}</a></p>
        </main>
    }
}

/// `/register/confirm?token=…`: the emailed link lands here. The password is chosen here, and
/// the form (a POST) creates the account, so a mail scanner that only follows links creates
/// nothing.
#[component]
pub fn ConfirmPage() -> impl IntoView {
    let t = use_lang().texts();
    let query = use_query_map();
    let token = move || query.read().get("token").unwrap_or_default();
    view! {
        <Title text=format!("{} — Zenbu", t.confirm_title) />
        <main class="account-form">
            <h1>{t.confirm_title}</h1>
            <FormErrorNotice />
            {move || {
                let token = token();
                with_viewer(move |viewer| {
                    let token = token.clone();
                    view! {
                        <form method="post" action="/register/confirm">
                            <input type="hidden" name="csrf" value=viewer.csrf />
                            <input type="hidden" name="token" value=token />
                            <label for="password">{t.choose_password}</label>
                            <input id="password" name="password" type="password"
                                autocomplete="new-password" minlength="8" maxlength="128" required
                                aria-describedby="password-rules" />
                            <p id="password-rules" class="hint">{t.password_rules}</p>
                            <button type="submit">{t.confirm_button}</button>
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
    let t = use_lang().texts();
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_default();
    view! {
        <Title text=format!("{} — Zenbu", t.log_in_title) />
        <main class="account-form">
            <h1>{t.log_in_title}</h1>
            <FormNotice />
            <FormErrorNotice />
            {move || {
                let next = next();
                with_viewer(move |viewer| {
                    let next = next.clone();
                    view! {
                        <form method="post" action="/login">
                            <input type="hidden" name="csrf" value=viewer.csrf />
                            <input type="hidden" name="next" value=next />
                            <label for="email">{t.email}</label>
                            <input id="email" name="email" type="email" autocomplete="email" required />
                            <label for="password">{t.password}</label>
                            <input id="password" name="password" type="password"
                                autocomplete="current-password" required />
                            <button type="submit">{t.log_in_button}</button>
                        </form>
                    }
                })
            }}
            <p><a href="/password/forgot">{t.forgot_password_link}</a></p>
            <p>{t.no_account} <a href="/register">{t.nav_sign_up}</a></p>
        </main>
    }
}

/// Shows the message for `?notice=` (if the code is known): what a form just did.
#[component]
fn FormNotice() -> impl IntoView {
    let lang = use_lang();
    let query = use_query_map();
    move || {
        query
            .read()
            .get("notice")
            .and_then(|code| lang.form_notice(&code))
            .map(|message| view! { <p class="notice" role="status">{message}</p> })
    }
}

/// `/password/forgot`: an address; a reset link is mailed if it has an account.
#[component]
pub fn ForgotPasswordPage() -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <Title text=format!("{} — Zenbu", t.forgot_title) />
        <main class="account-form">
            <h1>{t.forgot_title}</h1>
            <p>{t.forgot_intro}</p>
            <FormErrorNotice />
            {with_viewer(move |viewer| view! {
                <form method="post" action="/password/forgot">
                    <input type="hidden" name="csrf" value=viewer.csrf />
                    <label for="email">{t.email}</label>
                    <input id="email" name="email" type="email" autocomplete="email" required />
                    <button type="submit">{t.forgot_button}</button>
                </form>
            })}
            <p><a href="/login">{t.nav_log_in}</a></p>
        </main>
    }
}

/// `/password/sent`: the same answer whether or not the address has an account.
#[component]
pub fn ForgotSentPage() -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <Title text=format!("{} — Zenbu", t.check_mail_title) />
        <main class="account-form">
            <h1>{t.check_mail_title}</h1>
            <p>{t.reset_sent_text}</p>
            <p><a href="/">{t.back_to_search}</a></p>
        </main>
    }
}

/// `/password/reset?token=…`: the emailed reset link lands here; the form (a POST) sets the new
/// password, so a mail scanner that follows links changes nothing.
#[component]
pub fn ResetPasswordPage() -> impl IntoView {
    let t = use_lang().texts();
    let query = use_query_map();
    let token = move || query.read().get("token").unwrap_or_default();
    view! {
        <Title text=format!("{} — Zenbu", t.reset_title) />
        <main class="account-form">
            <h1>{t.reset_title}</h1>
            <FormErrorNotice />
            {move || {
                let token = token();
                with_viewer(move |viewer| {
                    let token = token.clone();
                    view! {
                        <form method="post" action="/password/reset">
                            <input type="hidden" name="csrf" value=viewer.csrf />
                            <input type="hidden" name="token" value=token />
                            <label for="password">{t.new_password}</label>
                            <input id="password" name="password" type="password"
                                autocomplete="new-password" minlength="8" maxlength="128" required
                                aria-describedby="password-rules" />
                            <p id="password-rules" class="hint">{t.password_rules}</p>
                            <button type="submit">{t.reset_button}</button>
                        </form>
                    }
                })
            }}
        </main>
    }
}

/// The account's signed-in sessions, and a button that ends all but this one.
#[component]
fn Sessions(sessions: Vec<crate::account::SessionSummary>, csrf: String) -> impl IntoView {
    let t = use_lang().texts();
    let others = sessions.iter().any(|s| !s.current);
    view! {
        <section class="sessions" aria-labelledby="sessions-title">
            <h2 id="sessions-title">{t.sessions_title}</h2>
            <table>
                <thead>
                    <tr><th scope="col">{t.session_started}</th><th scope="col">{t.session_seen}</th><th scope="col">{t.session_network}</th></tr>
                </thead>
                <tbody>
                    {sessions.into_iter().map(|s| view! {
                        <tr class:current=s.current>
                            <td>{s.created}</td>
                            <td>{s.last_seen}{s.current.then(|| format!(" ({})", t.session_this))}</td>
                            <td>{s.network}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            {others.then(|| view! {
                <form method="post" action="/account/sessions/end-others">
                    <input type="hidden" name="csrf" value=csrf />
                    <button type="submit" class="secondary">{t.end_other_sessions}</button>
                </form>
            })}
        </section>
    }
}

/// Change the password: the current one is asked again.
#[component]
fn ChangePassword(csrf: String) -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <section class="change-password" aria-labelledby="change-password-title">
            <h2 id="change-password-title">{t.change_password_title}</h2>
            <form method="post" action="/account/password">
                <input type="hidden" name="csrf" value=csrf />
                <label for="current-password">{t.current_password}</label>
                <input id="current-password" name="current" type="password"
                    autocomplete="current-password" required />
                <label for="new-password">{t.new_password}</label>
                <input id="new-password" name="password" type="password"
                    autocomplete="new-password" minlength="8" maxlength="128" required />
                <button type="submit">{t.change_password_button}</button>
            </form>
        </section>
    }
}

/// Change the address: a link goes to the new one; the password is asked again.
#[component]
fn ChangeEmail(csrf: String) -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <section class="change-email" aria-labelledby="change-email-title">
            <h2 id="change-email-title">{t.change_email_title}</h2>
            <form method="post" action="/account/email">
                <input type="hidden" name="csrf" value=csrf />
                <label for="new-email">{t.new_email}</label>
                <input id="new-email" name="email" type="email" autocomplete="email" required />
                <label for="email-password">{t.current_password}</label>
                <input id="email-password" name="password" type="password"
                    autocomplete="current-password" required />
                <button type="submit">{t.change_email_button}</button>
            </form>
        </section>
    }
}

/// `/account/email/confirm?token=…`: the link mailed to a new address lands here; the form (a
/// POST) makes the change, so a mail scanner that follows links changes nothing.
#[component]
pub fn ConfirmEmailPage() -> impl IntoView {
    let t = use_lang().texts();
    let query = use_query_map();
    let token = move || query.read().get("token").unwrap_or_default();
    view! {
        <Title text=format!("{} — Zenbu", t.confirm_email_title) />
        <main class="account-form">
            <h1>{t.confirm_email_title}</h1>
            {move || {
                let token = token();
                with_viewer(move |viewer| {
                    let token = token.clone();
                    view! {
                        <form method="post" action="/account/email/confirm">
                            <input type="hidden" name="csrf" value=viewer.csrf />
                            <input type="hidden" name="token" value=token />
                            <button type="submit">{t.confirm_email_button}</button>
                        </form>
                    }
                })
            }}
        </main>
    }
}

/// Delete the account: the password is asked again.
#[component]
fn DeleteAccount(csrf: String) -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <section class="delete-account" aria-labelledby="delete-account-title">
            <h2 id="delete-account-title">{t.delete_title}</h2>
            <p>{t.delete_text}</p>
            <form method="post" action="/account/delete">
                <input type="hidden" name="csrf" value=csrf />
                <label for="delete-password">{t.password}</label>
                <input id="delete-password" name="password" type="password"
                    autocomplete="current-password" required />
                <button type="submit" class="danger">{t.delete_button}</button>
            </form>
        </section>
    }
}

/// `/account`: email, plan, searches used this period and when they reset, Premium, log out.
#[component]
pub fn AccountPage() -> impl IntoView {
    let lang = use_lang();
    let t = lang.texts();
    view! {
        <Title text=format!("{} — Zenbu", t.account_title) />
        <main class="account">
            <h1>{t.account_title}</h1>
            <FormNotice />
            <FormErrorNotice />
            {with_viewer(move |viewer| {
                let quota = &viewer.quota;
                let usage = lang.usage(quota.used, quota.limit, &quota.period, &quota.resets_on);
                match viewer.user.clone() {
                    Some(user) => {
                        let premium = user.plan == crate::plans::Plan::Premium;
                        let plan = if premium { t.plan_premium } else { t.plan_free };
                        // The portal whenever there is a Stripe customer (a failed payment is
                        // fixed there); "Go Premium" while not Premium.
                        let manage = view! {
                            <ManageBillingAll csrf=viewer.csrf.clone() accounts=user.billing_accounts />
                        };
                        let upgrade = (!premium).then(|| go_premium(&viewer));
                        let billing = view! { {upgrade} {manage} };
                        view! {
                            {user.payment_failed_on.map(|day| view! {
                                <p class="notice error" role="alert">{lang.payment_failed(&day)}</p>
                            })}
                            <dl class="account-facts">
                                <dt>{t.email}</dt>
                                <dd class="email">{user.email}</dd>
                                <dt>{t.plan}</dt>
                                <dd class="plan">{plan}</dd>
                                <dt>{t.searches}</dt>
                                <dd class="usage">{usage}</dd>
                            </dl>
                            <section class="billing" aria-label="Premium">{billing}</section>
                            <form method="post" action="/logout">
                                <input type="hidden" name="csrf" value=viewer.csrf.clone() />
                                <button type="submit" class="secondary">{t.log_out}</button>
                            </form>
                            <Sessions sessions=user.sessions.clone() csrf=viewer.csrf.clone() />
                            <ChangePassword csrf=viewer.csrf.clone() />
                            <ChangeEmail csrf=viewer.csrf.clone() />
                            <DeleteAccount csrf=viewer.csrf.clone() />
                        }
                            .into_any()
                    }
                    None => view! {
                        <p>
                            {t.not_logged_in}
                            <a href="/login?next=/account">{t.nav_log_in}</a>
                            {t.or}
                            <a href="/register">{t.sign_up_lower}</a>
                            {t.for_30}
                        </p>
                        <p class="usage">{usage}</p>
                    }
                        .into_any(),
                }
            })}
        </main>
    }
}

/// The bar at the top of every page: search, log in and sign up (or the account), and the
/// language switch (a link the server answers by setting the `zenbu_lang` cookie; `rel=external`
/// keeps the client-side router from handling it).
#[component]
pub fn SiteNav() -> impl IntoView {
    let lang = use_lang();
    let t = lang.texts();
    let location = use_location();
    let resource = Resource::new(|| (), |_| load_viewer());
    let here = move || {
        let search = location.search.get();
        let path = location.pathname.get();
        if search.is_empty() {
            path
        } else {
            format!("{path}?{}", search.trim_start_matches('?'))
        }
    };
    view! {
        <nav class="site-nav" aria-label="Zenbu">
            <a href="/" class="home-link">{t.nav_search}</a>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    match resource.await {
                        Ok(Viewer { user: Some(user), .. }) => view! {
                            <a href="/account" class="account-link">{user.email}</a>
                        }
                            .into_any(),
                        _ => view! {
                            <a href="/login">{t.nav_log_in}</a>
                            <a href="/register">{t.nav_sign_up}</a>
                        }
                            .into_any(),
                    }
                })}
            </Suspense>
            <span class="languages" role="group" aria-label=t.nav_language>
                {Lang::ALL
                    .into_iter()
                    .map(|other| {
                        let href = move || {
                            format!("/lang?to={}&back={}", other.code(), leptos_router::location::Url::escape(&here()))
                        };
                        view! {
                            <a
                                href=href
                                rel="external"
                                hreflang=other.code()
                                lang=other.code()
                                aria-current=(other == lang).then_some("true")
                            >
                                {other.name()}
                            </a>
                        }
                    })
                    .collect_view()}
            </span>
        </nav>
    }
}
