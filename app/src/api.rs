//! Server functions: the only way pages reach the server. Each is thin: it takes the
//! [`Backend`](backend::Backend) the server put in Leptos context and calls it, so no SQL or
//! model code lives in this crate.

use leptos::{
    prelude::*,
    server_fn::codec::{Json, JsonEncoding},
};
use serde::{Deserialize, Serialize};

use crate::{
    account::Viewer,
    search::{AnimeDetails, Filters, Refusal, SearchResults},
};

/// Why a server function did not give a page its data, decided once on the server (the
/// `server` crate's backend maps its errors into these) and read by the pages by variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PageError {
    /// The search did not run, for a reason the page explains (HTTP 400 or 429 when rendered
    /// on the server).
    Refused(Refusal),
    /// The database (or another dependency) cannot be reached right now: HTTP 503, and the page
    /// asks to try again shortly.
    Unavailable,
    /// Anything else: a generic error page; the cause is logged on the server.
    Failed(String),
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageError::Refused(refusal) => write!(f, "the search did not run: {refusal:?}"),
            PageError::Unavailable => f.write_str("Zenbu is briefly unavailable"),
            PageError::Failed(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for PageError {}

impl FromServerFnError for PageError {
    type Encoder = JsonEncoding;

    /// A failure of the call itself (the network, a body that does not decode).
    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        PageError::Failed(value.to_string())
    }
}

#[cfg(feature = "ssr")]
pub mod backend {
    use std::sync::Arc;

    use super::PageError;
    use crate::{
        account::Viewer,
        search::{AnimeDetails, Filters, SearchResults},
    };

    /// What the server offers the pages; implemented in the `server` crate.
    #[async_trait::async_trait]
    pub trait Backend: Send + Sync + 'static {
        /// A metered text search for whoever sent `request` (its extensions say who).
        async fn search(
            &self,
            request: &http::request::Parts,
            query: &str,
            filters: &Filters,
        ) -> Result<SearchResults, PageError>;
        async fn anime(&self, id: i32) -> Result<Option<AnimeDetails>, PageError>;
        /// Who sent `request`: form token, account, allowance.
        async fn viewer(&self, request: &http::request::Parts) -> Result<Viewer, PageError>;
    }

    pub type SharedBackend = Arc<dyn Backend>;

    pub fn current() -> Result<SharedBackend, PageError> {
        leptos::prelude::use_context::<SharedBackend>()
            .ok_or_else(|| PageError::Failed("no backend in context".into()))
    }

    /// The request being answered (the server puts it in context for server functions).
    pub fn request() -> Result<http::request::Parts, PageError> {
        leptos::prelude::use_context()
            .ok_or_else(|| PageError::Failed("no request in context".into()))
    }

    /// Sets the HTTP status of the response being built (call it while rendering a page; in a
    /// server function it would change that function's response).
    pub fn set_status(status: http::StatusCode) {
        if let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(status);
        }
    }
}

/// Searches the catalog for a description. A search that did not run answers
/// `PageError::Refused` with the reason, which the page shows.
#[server(input = Json)]
pub async fn search(query: String, filters: Filters) -> Result<SearchResults, PageError> {
    backend::current()?
        .search(&backend::request()?, &query, &filters)
        .await
}

/// One anime with its franchise and "similar to this"; `None` when the id is unknown.
#[server(input = Json)]
pub async fn load_anime(id: i32) -> Result<Option<AnimeDetails>, PageError> {
    backend::current()?.anime(id).await
}

/// Who is looking at the page: the form token, the account (if logged in) and the allowance.
#[server(input = Json)]
pub async fn load_viewer() -> Result<Viewer, PageError> {
    backend::current()?.viewer(&backend::request()?).await
}
