//! What the pages know about the person looking at them.

use serde::{Deserialize, Serialize};

use crate::search::QuotaInfo;

/// The person behind a request: their form token, their account if they are logged in, and
/// their search allowance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Viewer {
    /// Goes in a hidden field of every state-changing form (the server checks it).
    pub csrf: String,
    pub user: Option<UserSummary>,
    pub quota: QuotaInfo,
    /// Premium can be bought on this server (Stripe is configured).
    pub billing: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserSummary {
    pub email: String,
    pub premium: bool,
    /// Has a Stripe customer (the billing portal can be opened).
    pub has_billing_account: bool,
    /// The day of a failed payment not yet followed by a successful one.
    pub payment_failed_on: Option<String>,
}

/// The reason codes the account forms' handlers put in `?error=` when they send the browser
/// back to the form, and what the form then says.
pub fn form_error_message(code: &str) -> Option<&'static str> {
    Some(match code {
        "email" => "Enter an email address like name@example.com.",
        "password-short" => "The password must have at least 8 characters.",
        "password-long" => "The password must have at most 128 characters.",
        "wrong" => "Email or password is wrong.",
        "throttled" => "Too many attempts. Please wait a few minutes and try again.",
        "form" => "The form expired. Please try again.",
        "link" => "This link is unknown, already used or expired. Sign up again to get a new one.",
        "registered" => "This address already has an account. Log in instead.",
        "billing-off" => {
            "Payments are not configured on this server, so Premium cannot be bought here."
        }
        "stripe" => {
            "The payment service did not answer. Nothing was charged; please try again in a moment."
        }
        _ => return None,
    })
}
