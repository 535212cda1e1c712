//! Premium: what it gives, "Go Premium" (to Stripe Checkout), and the pages Stripe sends the
//! buyer back to. The plan itself changes only when Stripe's webhook confirms the payment.

use leptos::prelude::*;
use leptos_meta::Title;

use super::account::{FormErrorNotice, usage_line, with_viewer};
use crate::account::Viewer;

/// The "Go Premium" button (a form posting to the server, which redirects to Stripe), or why
/// there is none.
pub fn go_premium(viewer: &Viewer) -> AnyView {
    match &viewer.user {
        _ if !viewer.billing => view! {
            <p class="notice" role="status">
                "Billing is not configured on this server, so Premium cannot be bought here."
            </p>
            <button type="button" disabled>"Go Premium"</button>
        }
        .into_any(),
        None => view! {
            <p>
                <a href="/login?next=/premium">"Log in"</a>
                " or "
                <a href="/register">"sign up"</a>
                " to go Premium."
            </p>
        }
        .into_any(),
        Some(user) if user.premium => view! {
            <p class="notice" role="status">"You are Premium. Thank you!"</p>
            <ManageBilling csrf=viewer.csrf.clone() />
        }
        .into_any(),
        Some(_) => view! {
            <form method="post" action="/premium/checkout">
                <input type="hidden" name="csrf" value=viewer.csrf.clone() />
                <button type="submit">"Go Premium"</button>
            </form>
        }
        .into_any(),
    }
}

/// Opens Stripe's billing portal (change card, cancel).
#[component]
pub fn ManageBilling(csrf: String) -> impl IntoView {
    view! {
        <form method="post" action="/billing/portal">
            <input type="hidden" name="csrf" value=csrf />
            <button type="submit">"Manage billing"</button>
        </form>
    }
}

/// `/premium`.
#[component]
pub fn PremiumPage() -> impl IntoView {
    view! {
        <Title text="Premium — Zenbu" />
        <main class="premium">
            <h1>"Zenbu Premium"</h1>
            <p>"200 searches a month instead of 30, for people who search a lot. Cancel any time."</p>
            <FormErrorNotice />
            {with_viewer(|viewer| view! {
                <p class="usage">{usage_line(&viewer.quota)}</p>
                {go_premium(&viewer)}
            })}
        </main>
    }
}

/// `/premium/success`: Stripe sends the buyer here after paying. Visiting it changes nothing.
#[component]
pub fn PremiumSuccessPage() -> impl IntoView {
    view! {
        <Title text="Thank you — Zenbu" />
        <main class="premium">
            <h1>"Thank you!"</h1>
            <p>
                "Your payment went to Stripe. Your plan becomes Premium as soon as Stripe confirms "
                "it to us, usually within seconds."
            </p>
            <p><a href="/account">"See your account"</a></p>
        </main>
    }
}

/// `/premium/cancelled`: the buyer left Stripe Checkout without paying.
#[component]
pub fn PremiumCancelledPage() -> impl IntoView {
    view! {
        <Title text="Checkout cancelled — Zenbu" />
        <main class="premium">
            <h1>"Checkout cancelled"</h1>
            <p>"Nothing was charged and your plan has not changed."</p>
            <p><a href="/premium">"Back to Premium"</a></p>
        </main>
    }
}
