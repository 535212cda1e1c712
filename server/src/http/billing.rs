//! Premium: the "Go Premium" and "Manage billing" forms (signed-in users only; each redirects
//! to a page Stripe hosts) and Stripe's webhook.

use axum::{
    Extension, Form, Json,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use serde_json::json;
use tower_sessions::Session;

use super::{ApiError, AppState, auth::signed_in_user};
use crate::{
    accounts::visitor::Visitor,
    billing::webhook::{self, Handled},
    quota::Plan,
};

#[derive(Deserialize)]
pub struct BillingForm {
    #[serde(default)]
    csrf: String,
    /// Which of the user's Stripe customers the portal is for (`billing::customers`).
    #[serde(default)]
    account: usize,
}

/// `POST /premium/checkout`: a Checkout Session for the signed-in user, then 303 to Stripe.
pub async fn checkout(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    session: Session,
    Form(form): Form<BillingForm>,
) -> Result<Redirect, ApiError> {
    let user = match signed_in_user(&state, &visitor, &session, &form.csrf, "/premium").await? {
        Ok(user) => user,
        Err(redirect) => return Ok(redirect),
    };
    let Some(billing) = &state.billing else {
        return Ok(Redirect::to("/premium?error=billing-off"));
    };
    if user.plan() == Plan::Premium {
        return Ok(Redirect::to("/account"));
    }
    // A subscription that is not over (say, past due): fix it in the portal rather than start
    // a second one.
    if crate::billing::status(&state.db.primary, user.id)
        .await?
        .has_live_subscription
    {
        return match billing.portal_url(&state.db.primary, &user, 0).await {
            Ok(Some(url)) => Ok(Redirect::to(&url)),
            Ok(None) => Ok(Redirect::to("/account")),
            Err(error) => {
                tracing::error!(%error, user = user.id, "creating a portal session failed");
                Ok(Redirect::to("/premium?error=stripe"))
            }
        };
    }
    match billing.checkout_url(&state.db.primary, &user).await {
        Ok(url) => Ok(Redirect::to(&url)),
        Err(error) => {
            tracing::error!(%error, user = user.id, "creating a Checkout Session failed");
            Ok(Redirect::to("/premium?error=stripe"))
        }
    }
}

/// `POST /billing/portal`: Stripe's billing portal for the signed-in user's customer.
pub async fn portal(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    session: Session,
    Form(form): Form<BillingForm>,
) -> Result<Redirect, ApiError> {
    let user = match signed_in_user(&state, &visitor, &session, &form.csrf, "/account").await? {
        Ok(user) => user,
        Err(redirect) => return Ok(redirect),
    };
    let Some(billing) = &state.billing else {
        return Ok(Redirect::to("/account?error=billing-off"));
    };
    match billing
        .portal_url(&state.db.primary, &user, form.account)
        .await
    {
        Ok(Some(url)) => Ok(Redirect::to(&url)),
        Ok(None) => Ok(Redirect::to("/premium")),
        Err(error) => {
            tracing::error!(%error, user = user.id, "creating a portal session failed");
            Ok(Redirect::to("/account?error=stripe"))
        }
    }
}

/// `POST /stripe/webhook`: 200 once an event is handled (or was before), 400 for a bad
/// signature or an event that cannot be read (nothing changes), 503 without billing.
pub async fn stripe_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Some(billing) = &state.billing else {
        return Ok((
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": "billing is not configured" })),
        )
            .into_response());
    };
    let bad = |message: String| {
        tracing::warn!(?message, "Stripe webhook refused");
        (StatusCode::BAD_REQUEST, Json(json!({ "error": message }))).into_response()
    };
    let Some(signature) = headers
        .get("stripe-signature")
        .and_then(|value| value.to_str().ok())
    else {
        return Ok(bad("missing Stripe-Signature header".into()));
    };
    let Ok(payload) = std::str::from_utf8(&body) else {
        return Ok(bad("the body is not UTF-8".into()));
    };
    match webhook::handle(
        &state.db.primary,
        &billing.endpoint(),
        payload,
        signature,
        None,
    )
    .await?
    {
        Ok(handled) => {
            let outcome = match handled {
                Handled::Applied(kind) => format!("applied {kind}"),
                Handled::Replay => "already handled".to_string(),
                Handled::Ignored(kind) => format!("ignored {kind}"),
            };
            Ok(Json(json!({ "received": true, "outcome": outcome })).into_response())
        }
        Err(rejected) => Ok(bad(rejected.to_string())),
    }
}
