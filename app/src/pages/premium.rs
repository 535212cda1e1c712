//! Premium: what it gives, "Go Premium" (to Stripe Checkout), and the pages Stripe sends the
//! buyer back to. The plan itself changes only when Stripe's webhook confirms the payment.

use leptos::prelude::*;
use leptos_meta::Title;

use super::account::{FormErrorNotice, with_viewer};
use crate::{account::Viewer, i18n::use_lang};

/// The "Go Premium" button (a form posting to the server, which redirects to Stripe), or why
/// there is none.
pub fn go_premium(viewer: &Viewer) -> AnyView {
    let t = use_lang().texts();
    match &viewer.user {
        _ if !viewer.billing => view! {
            <p class="notice" role="status">{t.billing_off}</p>
            <button type="button" disabled>{t.go_premium}</button>
        }
        .into_any(),
        None => view! {
            <p>
                <a href="/login?next=/premium">{t.nav_log_in}</a>
                {t.or}
                <a href="/register">{t.sign_up_lower}</a>
                {t.log_in_to_go_premium}
            </p>
        }
        .into_any(),
        Some(user) if user.plan == crate::plans::Plan::Premium => view! {
            <p class="notice" role="status">{t.you_are_premium}</p>
            <ManageBillingAll csrf=viewer.csrf.clone() accounts=user.billing_accounts />
        }
        .into_any(),
        Some(_) => view! {
            <form method="post" action="/premium/checkout">
                <input type="hidden" name="csrf" value=viewer.csrf.clone() />
                <button type="submit">{t.go_premium}</button>
            </form>
        }
        .into_any(),
    }
}

/// Opens Stripe's billing portal (change card, cancel).
#[component]
pub fn ManageBilling(csrf: String, account: usize, of: usize) -> impl IntoView {
    let lang = use_lang();
    let label = if of > 1 {
        lang.manage_billing_account(account + 1, of)
    } else {
        lang.texts().manage_billing.to_string()
    };
    view! {
        <form method="post" action="/billing/portal">
            <input type="hidden" name="csrf" value=csrf />
            <input type="hidden" name="account" value=account.to_string() />
            <button type="submit">{label}</button>
        </form>
    }
}

/// One [`ManageBilling`] per Stripe customer of the user (several only for someone who paid in
/// two Checkouts at once: each subscription is managed in its own customer's portal).
#[component]
pub fn ManageBillingAll(csrf: String, accounts: usize) -> impl IntoView {
    (0..accounts)
        .map(|account| view! { <ManageBilling csrf=csrf.clone() account=account of=accounts /> })
        .collect_view()
}

/// `/premium`.
#[component]
pub fn PremiumPage() -> impl IntoView {
    let lang = use_lang();
    let t = lang.texts();
    view! {
        <Title text=format!("{} — Zenbu", t.premium_title) />
        <main class="premium">
            <h1>{t.premium_title}</h1>
            <p>{t.premium_intro}</p>
            <FormErrorNotice />
            {with_viewer(move |viewer| {
                let quota = &viewer.quota;
                view! {
                    <p class="usage">
                        {lang.usage(quota.used, quota.limit, &quota.period, &quota.resets_on)}
                    </p>
                    {go_premium(&viewer)}
                }
            })}
        </main>
    }
}

/// `/premium/success`: Stripe sends the buyer here after paying. Visiting it changes nothing.
#[component]
pub fn PremiumSuccessPage() -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <Title text=format!("{} — Zenbu", t.thanks_title) />
        <main class="premium">
            <h1>{t.thanks_title}</h1>
            <p>{t.thanks_text}</p>
            <p><a href="/account">{t.see_account}</a></p>
        </main>
    }
}

/// `/premium/cancelled`: the buyer left Stripe Checkout without paying.
#[component]
pub fn PremiumCancelledPage() -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <Title text=format!("{} — Zenbu", t.cancelled_title) />
        <main class="premium">
            <h1>{t.cancelled_title}</h1>
            <p>{t.cancelled_text}</p>
            <p><a href="/premium">{t.back_to_premium}</a></p>
        </main>
    }
}
