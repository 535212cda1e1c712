//! The pages' [`Backend`]: the search engine behind the server functions of `app::api`.

use app::{
    api::backend::{Backend, BackendError},
    search::{AnimeDetails, Filters, Refusal, SearchResults},
};

use crate::{
    accounts::visitor::Visitor,
    quota::{self, Metered, Plan},
    search::{SearchEngine, SearchError},
};

pub struct PagesBackend {
    pub search: SearchEngine,
}

impl From<SearchError> for BackendError {
    fn from(error: SearchError) -> Self {
        match error {
            SearchError::EmptyQuery | SearchError::QueryTooLong(_) => {
                BackendError::Refused(Refusal::BadQuery(error.to_string()))
            }
            other => {
                tracing::error!(error = ?other, "search failed");
                BackendError::Failed("search failed".into())
            }
        }
    }
}

#[async_trait::async_trait]
impl Backend for PagesBackend {
    async fn search(
        &self,
        request: &axum::http::request::Parts,
        query: &str,
        filters: &Filters,
    ) -> Result<SearchResults, BackendError> {
        let visitor = request
            .extensions
            .get::<Visitor>()
            .ok_or_else(|| BackendError::Failed("no visitor on the request".into()))?;
        quota::metered_search(
            &self.search,
            &visitor.subject(),
            Plan::Anonymous,
            query,
            filters,
        )
        .await
        .map_err(|error| match error {
            Metered::Exhausted(quota) => BackendError::Refused(Refusal::QuotaExhausted(quota)),
            Metered::Search(error) => error.into(),
        })
    }

    async fn anime(&self, id: i32) -> Result<Option<AnimeDetails>, BackendError> {
        Ok(self.search.anime(id).await?)
    }
}
