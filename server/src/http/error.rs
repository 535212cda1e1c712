//! The one error type of the HTTP boundary and how each case becomes a response.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::json;

/// What a 503 asks the client to wait before retrying.
pub const RETRY_AFTER_SECONDS: &str = "5";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The database could not be reached or did not answer in time: the request may succeed
    /// later, so 503 rather than 500.
    #[error("the database is unavailable")]
    DatabaseUnavailable(#[source] sqlx::Error),
    /// The server is too busy, or a request did not finish in time: retry shortly (503 with
    /// Retry-After).
    #[error("{0}")]
    Busy(String),
    /// The request cannot succeed as sent; the message says why.
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    /// The search allowance is used up; the body says until when.
    #[error("search allowance used up: {} of {} this {}, resets on {}", .0.used, .0.limit, .0.period, .0.resets_on)]
    QuotaExhausted(app::search::QuotaInfo),
    /// A new anonymous visitor from a network over its daily cap of new visitors.
    #[error(
        "too many new visitors from your network today (at most {0} a day): sign up for a free account"
    )]
    TooManyNewVisitors(i64),
    /// Anonymous searches from the client's network over their daily cap.
    #[error(
        "too many searches without an account from your network today (at most {0} a day): sign up for a free account"
    )]
    TooManyFromNetwork(i64),
    /// Too many requests from the client's network this second; retry after this many seconds.
    #[error("too many requests from your network: slow down")]
    RateLimited(u64),
    /// A metered request that came from another site (a link or a form elsewhere): it would
    /// spend the visitor's allowance without them asking.
    #[error("searches are not run for requests from another site")]
    CrossSite,
    /// A `HEAD` or a prefetch of a metered request: nobody asked for the search yet.
    #[error("searches are not run for HEAD requests or prefetches")]
    NotRequested,
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl From<crate::quota::Metered> for ApiError {
    fn from(error: crate::quota::Metered) -> Self {
        match error {
            crate::quota::Metered::Exhausted(quota) => ApiError::QuotaExhausted(quota),
            crate::quota::Metered::NetworkCapped { per_day } => {
                ApiError::TooManyNewVisitors(per_day)
            }
            crate::quota::Metered::NetworkBusy { per_day } => ApiError::TooManyFromNetwork(per_day),
            crate::quota::Metered::Search(error) => error.into(),
        }
    }
}

impl From<crate::search::SearchError> for ApiError {
    fn from(error: crate::search::SearchError) -> Self {
        use crate::search::SearchError;
        match error {
            SearchError::EmptyQuery | SearchError::QueryTooLong(_) | SearchError::BadFilter(_) => {
                ApiError::BadRequest(error.to_string())
            }
            SearchError::Database(error) => error.into(),
            SearchError::Vector(crate::search::vector::VectorError::Database(error)) => {
                error.into()
            }
            SearchError::TimedOut(_) => {
                ApiError::Busy("the search took too long and was given up: try again".into())
            }
            other => ApiError::Internal(other.into()),
        }
    }
}

impl From<crate::accounts::AccountError> for ApiError {
    fn from(error: crate::accounts::AccountError) -> Self {
        use crate::accounts::AccountError;
        match error {
            AccountError::Database(error) => error.into(),
            other => ApiError::Internal(other.into()),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        if crate::db::is_unavailable(&error) {
            ApiError::DatabaseUnavailable(error)
        } else {
            ApiError::Internal(error.into())
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::DatabaseUnavailable(_) | ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::QuotaExhausted(_)
            | ApiError::TooManyNewVisitors(_)
            | ApiError::TooManyFromNetwork(_)
            | ApiError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::CrossSite | ApiError::NotRequested => StatusCode::FORBIDDEN,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        // The cause goes to the log, never to the client.
        if status.is_server_error() {
            tracing::error!(error = ?self, "request failed");
        }
        let retry_after = match &self {
            ApiError::RateLimited(seconds) => Some(seconds.to_string()),
            _ if status == StatusCode::SERVICE_UNAVAILABLE => Some(RETRY_AFTER_SECONDS.to_string()),
            _ => None,
        };
        let mut response = (
            status,
            Json(json!({ "status": "error", "error": self.to_string() })),
        )
            .into_response();
        if let Some(seconds) = retry_after
            && let Ok(value) = axum::http::HeaderValue::from_str(&seconds)
        {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, value);
        }
        response
    }
}
