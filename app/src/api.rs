//! Server functions: the only way pages reach the server. Each is thin: it takes the
//! [`Backend`](backend::Backend) the server put in Leptos context and calls it, so no SQL or
//! model code lives in this crate.

use leptos::{prelude::*, server_fn::codec::Json};

use crate::{
    account::Viewer,
    search::{AnimeDetails, Filters, Refusal, SearchResults},
};

/// What a search answers: results, or why it did not run (shown on the page; server failures
/// are the outer `ServerFnError`).
pub type SearchReply = Result<SearchResults, Refusal>;

#[cfg(feature = "ssr")]
pub mod backend {
    use std::sync::Arc;

    use leptos::prelude::ServerFnError;

    use crate::{
        account::Viewer,
        search::{AnimeDetails, Filters, Refusal, SearchResults},
    };

    /// Why a backend call failed, as the page must treat it.
    #[derive(Debug)]
    pub enum BackendError {
        /// The search did not run, for a reason the page explains.
        Refused(Refusal),
        /// The database (or another dependency) cannot be reached right now: the page answers
        /// 503 and asks to try again shortly.
        Unavailable,
        /// Anything else: the page shows a generic error and the cause is logged.
        Failed(String),
    }

    /// What the server offers the pages; implemented in the `server` crate.
    #[async_trait::async_trait]
    pub trait Backend: Send + Sync + 'static {
        /// A metered text search for whoever sent `request` (its extensions say who).
        async fn search(
            &self,
            request: &http::request::Parts,
            query: &str,
            filters: &Filters,
        ) -> Result<SearchResults, BackendError>;
        async fn anime(&self, id: i32) -> Result<Option<AnimeDetails>, BackendError>;
        /// Who sent `request`: form token, account, allowance.
        async fn viewer(&self, request: &http::request::Parts) -> Result<Viewer, BackendError>;
    }

    pub type SharedBackend = Arc<dyn Backend>;

    pub fn current() -> Result<SharedBackend, ServerFnError> {
        leptos::prelude::use_context::<SharedBackend>()
            .ok_or_else(|| ServerFnError::new("no backend in context"))
    }

    /// Sets the HTTP status of the response being built (call it while rendering a page; in a
    /// server function it would change that function's response).
    pub fn set_status(status: http::StatusCode) {
        if let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(status);
        }
    }
}

/// Searches the catalog for a description.
#[server(input = Json)]
pub async fn search(query: String, filters: Filters) -> Result<SearchReply, ServerFnError> {
    use backend::BackendError;
    let request: http::request::Parts =
        use_context().ok_or_else(|| ServerFnError::new("no request in context"))?;
    match backend::current()?.search(&request, &query, &filters).await {
        Ok(results) => Ok(Ok(results)),
        // The page sets HTTP 400 or 429 when it renders this on the server; a server-function
        // call from the browser gets 200 and the reason, which the page shows.
        Err(BackendError::Refused(refusal)) => Ok(Err(refusal)),
        Err(other) => Err(failure(other)),
    }
}

/// One anime with its franchise and "similar to this"; `None` when the id is unknown.
#[server(input = Json)]
pub async fn load_anime(id: i32) -> Result<Option<AnimeDetails>, ServerFnError> {
    backend::current()?.anime(id).await.map_err(failure)
}

/// Who is looking at the page: the form token, the account (if logged in) and the allowance.
#[server(input = Json)]
pub async fn load_viewer() -> Result<Viewer, ServerFnError> {
    let request: http::request::Parts =
        use_context().ok_or_else(|| ServerFnError::new("no request in context"))?;
    backend::current()?.viewer(&request).await.map_err(failure)
}

/// The message of a server function that failed because a dependency is down.
pub const UNAVAILABLE: &str = "Zenbu is briefly unavailable";

/// Whether a server function failed because a dependency is down (the page then answers 503).
pub fn is_unavailable(error: &ServerFnError) -> bool {
    error.to_string().contains(UNAVAILABLE)
}

#[cfg(feature = "ssr")]
fn failure(error: backend::BackendError) -> ServerFnError {
    match error {
        backend::BackendError::Unavailable => ServerFnError::new(UNAVAILABLE),
        backend::BackendError::Failed(message) => ServerFnError::new(message),
        backend::BackendError::Refused(refusal) => ServerFnError::new(format!("{refusal:?}")),
    }
}
