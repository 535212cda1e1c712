//! The pages' [`Backend`]: the search engine behind the server functions of `app::api`.

use app::{
    api::backend::{Backend, BackendError},
    search::{AnimeDetails, Filters, SearchResults},
};

use crate::search::{SearchEngine, SearchError};

pub struct PagesBackend {
    pub search: SearchEngine,
}

impl From<SearchError> for BackendError {
    fn from(error: SearchError) -> Self {
        match error {
            SearchError::EmptyQuery | SearchError::QueryTooLong(_) => {
                BackendError::BadRequest(error.to_string())
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
    async fn search(&self, query: &str, filters: &Filters) -> Result<SearchResults, BackendError> {
        Ok(self.search.search(query, filters).await?)
    }

    async fn anime(&self, id: i32) -> Result<Option<AnimeDetails>, BackendError> {
        Ok(self.search.anime(id).await?)
    }
}
