//! The pages' [`Backend`]: the search engine and accounts behind the server functions of
//! `app::api`.

use app::{
    account::{SessionSummary, UserSummary, Viewer},
    api::{PageError, backend::Backend},
    search::{AnimeDetails, Filters, Refusal, SearchResults},
};

use super::SiteConfig;
use crate::{
    accounts::{self, AccountError, csrf, visitor::Visitor},
    quota::{self, Metered},
    search::{SearchEngine, SearchError},
};

pub struct PagesBackend {
    pub db: crate::db::Db,
    pub search: SearchEngine,
    pub meter: quota::Meter,
    pub site: SiteConfig,
    /// Stripe is configured.
    pub billing: bool,
}

impl From<SearchError> for PageError {
    fn from(error: SearchError) -> Self {
        match error {
            SearchError::EmptyQuery => PageError::Refused(Refusal::EmptyQuery),
            SearchError::QueryTooLong(_) => PageError::Refused(Refusal::QueryTooLong {
                max: app::search::MAX_QUERY_CHARS,
            }),
            // Only a hand-made request or a hand-edited link has one: the form offers valid
            // values only.
            SearchError::BadFilter(problem) => {
                tracing::warn!(%problem, "search with a bad filter refused");
                PageError::Refused(Refusal::BadFilter(problem))
            }
            error if error.is_unavailable() => {
                tracing::warn!(%error, "search: the database is unavailable");
                PageError::Unavailable
            }
            other => {
                tracing::error!(error = ?other, "search failed");
                PageError::Failed("search failed".into())
            }
        }
    }
}

impl From<AccountError> for PageError {
    fn from(error: AccountError) -> Self {
        match error {
            AccountError::Database(error) if crate::db::is_unavailable(&error) => {
                tracing::warn!(%error, "accounts: the database is unavailable");
                PageError::Unavailable
            }
            other => {
                tracing::error!(error = ?other, "reading the account failed");
                PageError::Failed("account unavailable".into())
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
    ) -> Result<SearchResults, PageError> {
        // A search link followed from another site shows the form filled in; it runs when
        // submitted here.
        if super::security::from_another_site(&request.headers) {
            return Err(PageError::Refused(Refusal::FromAnotherSite));
        }
        if super::security::not_requested(request) {
            return Err(PageError::Refused(Refusal::NotRequested));
        }
        let (payer, _) = accounts::payer(&self.db.primary, request).await?;
        self.meter
            .search(
                &self.db,
                &self.search,
                &payer,
                &self.site.rules,
                query,
                filters,
            )
            .await
            .map_err(|error| match error {
                Metered::Exhausted(quota) => PageError::Refused(Refusal::QuotaExhausted(quota)),
                Metered::NetworkCapped { per_day } => {
                    PageError::Refused(Refusal::TooManyNewVisitors { per_day })
                }
                Metered::NetworkBusy { per_day } => {
                    PageError::Refused(Refusal::TooManyFromNetwork { per_day })
                }
                Metered::Search(error) => error.into(),
            })
    }

    async fn anime(&self, id: i32) -> Result<Option<AnimeDetails>, PageError> {
        Ok(self.search.anime(id).await?)
    }

    async fn viewer(&self, request: &axum::http::request::Parts) -> Result<Viewer, PageError> {
        let visitor = request
            .extensions
            .get::<Visitor>()
            .ok_or_else(|| PageError::Failed("no visitor on the request".into()))?;
        let pool = &self.db.primary;
        let (payer, user) = accounts::payer(pool, request).await?;
        let usage = quota::usage(pool, &payer.subject, payer.plan, None)
            .await
            .map_err(AccountError::from)?;
        let user = match user {
            Some(user) => {
                let billing = crate::billing::status(pool, user.id)
                    .await
                    .map_err(AccountError::from)?;
                let sessions = match request.extensions.get::<tower_sessions::Session>() {
                    Some(session) => accounts::sessions(pool, user.id, session).await?,
                    None => Vec::new(),
                };
                Some(UserSummary {
                    plan: user.plan(),
                    email: user.email,
                    billing_accounts: usize::try_from(billing.customers).unwrap_or(0),
                    payment_failed_on: billing.payment_failed_on,
                    sessions: sessions
                        .into_iter()
                        .map(|row| SessionSummary {
                            created: row.created,
                            last_seen: row.last_seen,
                            network: row.network,
                            current: row.current,
                        })
                        .collect(),
                })
            }
            None => None,
        };
        Ok(Viewer {
            csrf: csrf::token(&self.site.visitors.key, &visitor.id),
            user,
            quota: quota::info(payer.plan, &usage),
            billing: self.billing,
        })
    }
}
