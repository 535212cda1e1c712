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
    pub plan: crate::plans::Plan,
    /// Stripe customers, each with its billing portal (one, or none, for nearly everyone).
    pub billing_accounts: usize,
    /// The day of a failed payment not yet followed by a successful one.
    pub payment_failed_on: Option<String>,
    /// The account's signed-in sessions, newest first.
    pub sessions: Vec<SessionSummary>,
}

/// One signed-in session, as the account page lists it (times in UTC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub created: String,
    pub last_seen: String,
    pub network: String,
    /// The session the page is shown in.
    pub current: bool,
}
