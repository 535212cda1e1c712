//! Search: a description in, anime out. The pipeline is a chain of typed hand-offs, each stage
//! reading the previous one's output ([`SearchEngine::search_traced`]):
//!
//! 1. [`Query`]: the text cleaned, checked (non-empty, at most [`MAX_QUERY_CHARS`]) and
//!    normalised once, with its results-cache key;
//! 2. [`Retrieval`] ([`SearchEngine::retrieve`]): in parallel the lexical branch ([`lexical`])
//!    and the query embedding ([`embedder`]) followed by the vector branch ([`vector`]), both
//!    filtered ([`filters`]), top 50 each, and when configured the same over a second model's
//!    vectors ([`second_view`]); then reciprocal rank fusion ([`fusion`], k = 60);
//! 3. [`rerank::Candidates`]: the fused top 25, and each list's top 15 wherever fusion put them
//!    ([`rerank::candidate_pool`]), with all their evidence;
//! 4. [`Ranked`]: the reranker's order of them within its budget, or the fused order;
//! 5. [`Page`]: the parts of the leading works placed and the page's hits read ([`page`]), with
//!    a [`Trace`] of every hand-off (what `server eval` scores).
//!
//! [`SearchEngine::search`] serves the same behind the results cache; "similar to" reads an
//! anime's stored vector ([`vector::similar`]). Every stage is timed under the names `bench`
//! and `eval` print.

pub mod cache;
pub mod cues;
pub mod e5;
pub mod embedder;
pub mod filters;
pub mod fusion;
pub mod in_memory;
pub mod lexical;
#[cfg(feature = "baselines")]
pub mod minilm;
pub mod page;
pub mod params;
pub mod parts;
pub mod query;
pub mod rerank;
pub mod second_view;
pub mod thesaurus;
pub mod translate;
pub mod vector;
pub mod vectors;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

pub use app::search::MAX_QUERY_CHARS;
use app::search::{AnimeCard, AnimeDetails, Filters, Ranking, SearchResults};
use sqlx::PgPool;
use tracing::Instrument;

use embedder::Embedder;
use fusion::Fused;
pub use query::Query;

/// [`SearchParams`](params::SearchParams)`::fusion.branch_limit`.
pub const BRANCH_LIMIT: usize = params::PARAMS.fusion.branch_limit;
/// [`SearchParams`](params::SearchParams)`::page.size`.
pub const PAGE_SIZE: usize = params::PARAMS.page.size;
/// Entries in an anime page's "similar to this".
pub const SIMILAR_COUNT: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("type a description to search for")]
    EmptyQuery,
    #[error("descriptions are limited to {MAX_QUERY_CHARS} characters (this one has {0})")]
    QueryTooLong(usize),
    #[error("{0}")]
    BadFilter(app::search::FilterProblem),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Vector(#[from] vector::VectorError),
    #[error(transparent)]
    InMemory(#[from] in_memory::InMemoryError),
    /// The search (or its bookkeeping) did not finish within its deadline: most likely a
    /// stalled database; worth a 503 and a retry.
    #[error("the search did not finish within {0:?}")]
    TimedOut(std::time::Duration),
}

impl SearchError {
    /// The database cannot be reached: worth a 503 and a retry.
    pub fn is_unavailable(&self) -> bool {
        match self {
            SearchError::Database(error)
            | SearchError::Vector(vector::VectorError::Database(error))
            | SearchError::InMemory(in_memory::InMemoryError::Database(error)) => {
                crate::db::is_unavailable(error)
            }
            SearchError::TimedOut(_) => true,
            _ => false,
        }
    }
}

/// How long each stage took (the names are the ones `bench` prints).
#[derive(Debug, Clone, Copy, Default)]
pub struct StageTimes {
    pub translate: Duration,
    pub embed: Duration,
    pub lexical: Duration,
    pub vector: Duration,
    /// The second view's embedding and search, beside the other branches.
    pub second: Duration,
    pub fuse: Duration,
    pub rerank: Duration,
    pub total: Duration,
}

impl StageTimes {
    /// Each stage's time by its metric label (`zenbu_search_stage_seconds{stage=...}`).
    pub fn stages(&self) -> [(&'static str, Duration); 8] {
        [
            ("translate", self.translate),
            ("embed", self.embed),
            ("lexical", self.lexical),
            ("vector", self.vector),
            ("second_view", self.second),
            ("fuse", self.fuse),
            ("rerank", self.rerank),
            ("total", self.total),
        ]
    }
}

/// Both branches' ranked lists and their fusion: what evaluation compares. The pipeline's
/// second hand-off, from [`Query`] to the rerank stage's [`rerank::candidates`].
#[derive(Debug, Clone, Default)]
pub struct Retrieval {
    /// Lexical matches, best first.
    pub lexical: Vec<lexical::LexicalHit>,
    /// What the vector branch found, best first; empty when the query had no vector.
    pub vector: Vec<vector::VectorHit>,
    /// What the second view found, best first; empty without one, or when it failed.
    pub second: Vec<vector::VectorHit>,
    pub fused: Vec<Fused>,
    /// The query's vector, when embedding worked.
    pub query_vector: Option<Vec<f32>>,
    /// The English reading of a Spanish query, when it was translated.
    pub translation: Option<String>,
    /// The translator was there but failed or ran out of time (a degraded page: not cached).
    pub translation_failed: bool,
    pub times: StageTimes,
}

/// The pipeline's fourth hand-off, from the rerank stage to the page: the served order.
/// (Not named `Ranking`: that is how the order was made, which the page tells the browser.)
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    pub ranking: Ranking,
    /// The reranker's order of the candidates; empty when the fused order stood (a confident
    /// leader, a failure or the budget).
    pub reranked: Vec<i32>,
    /// Every fused result in served order: the reranked candidates, then the rest of the fused
    /// order ([`rerank::served_order`]).
    pub order: Vec<i32>,
}

/// One search's stages as served ([`SearchEngine::search_traced`]): what `server eval` scores,
/// so its numbers are those of the page users get.
pub struct Trace {
    pub retrieval: Retrieval,
    pub candidates: rerank::Candidates,
    pub ranked: Ranked,
    /// The served order as the page lays it out before cutting it: [`Ranked::order`] with the
    /// parts of the leading works placed after the first ten ([`page::Layout`]).
    pub served: Vec<i32>,
    pub times: StageTimes,
}

/// The pipeline's last hand-off: the page, and every stage that made it.
pub struct Page {
    pub results: SearchResults,
    pub trace: Trace,
}

/// What the vector branch found (hits and the query vector used), and how long embedding and
/// searching took.
struct VectorBranch {
    outcome: Result<VectorHits, SearchError>,
    embed: Duration,
    search: Duration,
}

/// The vector branch's hits, best first, and the query vector that found them.
type VectorHits = (Vec<vector::VectorHit>, Option<Vec<f32>>);

/// Time each fallible stage may take before the pipeline goes on without it.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    /// Query embedding; past it, the lexical branch answers alone.
    pub embed: Duration,
    /// Rerank; past it, the fused order is served.
    pub rerank: Duration,
}

impl Budgets {
    pub fn from_config(config: &crate::config::Config) -> Self {
        Self {
            embed: Duration::from_millis(config.search.embed_timeout_ms),
            rerank: Duration::from_millis(config.search.rerank_timeout_ms),
        }
    }
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            embed: Duration::from_secs(2),
            rerank: Duration::from_secs(4),
        }
    }
}

/// [`SearchParams`](params::SearchParams)`::fusion.confident_margin`.
pub const CONFIDENT_MARGIN: f64 = params::PARAMS.fusion.confident_margin;

/// How well known an anime is, from its AniList members: log10(members + 1) / 6, so 0 to about
/// 1 (the most popular titles have a few million). The prior every ranking stage weighs.
pub fn popularity_prior(members: i32) -> f64 {
    (1.0 + members.max(0) as f64).log10() / 6.0
}

/// The unit vector halfway between two unit vectors (the first when they are opposite).
pub fn mean_direction(a: &[f32], b: &[f32]) -> Vec<f32> {
    let sum: Vec<f32> = a.iter().zip(b).map(|(x, y)| x + y).collect();
    if sum.iter().map(|x| x * x).sum::<f32>().sqrt() < 1e-6 {
        return a.to_vec();
    }
    embedder::normalised(sum)
}

/// Relative lead of the first fused result over the second (1 when there is no second).
pub fn fused_margin(fused: &[Fused]) -> f64 {
    match fused {
        // Nothing or one thing to order: no rerank call can change it.
        [] | [_] => 1.0,
        [first, second, ..] => (first.score - second.score) / first.score.max(1e-12),
    }
}

#[derive(Clone)]
pub struct SearchEngine {
    /// The primary takes the caches' writes; the pipeline reads from `db.reads` (a lagging
    /// replica only delays what the caches and a re-ingested catalog show).
    db: crate::db::Db,
    embedder: Arc<dyn Embedder>,
    /// A second dense list beside the primary embedder's ([`second_view`]); `None`: two lists.
    second_view: Option<Arc<dyn Embedder>>,
    /// Models whose vectors are searched in this process rather than by PostgreSQL's HNSW
    /// indexes ([`in_memory`]).
    in_memory: Vec<Arc<in_memory::VectorsInMemory>>,
    /// Reads Spanish queries in English too; `None`: queries are searched as typed.
    translator: Option<Arc<translate::Translator>>,
    /// English synonyms for the lexical branch; `None`: words match only themselves.
    thesaurus: Option<Arc<thesaurus::Thesaurus>>,
    reranker: Arc<dyn rerank::Reranker>,
    budgets: Budgets,
    /// Read and write the query-vector and results caches (off: measure the pipeline itself).
    caches: bool,
}

/// Filters the pipeline accepts: known formats and genres, years in range and in order
/// ([`Filters::problem`]).
pub fn check_filters(filters: &Filters) -> Result<(), SearchError> {
    match filters.problem() {
        Some(problem) => Err(SearchError::BadFilter(problem)),
        None => Ok(()),
    }
}

impl SearchEngine {
    pub fn new(db: impl Into<crate::db::Db>, embedder: Arc<dyn Embedder>) -> Self {
        Self {
            db: db.into(),
            embedder,
            second_view: None,
            in_memory: Vec::new(),
            translator: None,
            thesaurus: None,
            reranker: Arc::new(rerank::LocalReranker::default()),
            budgets: Budgets::default(),
            caches: true,
        }
    }

    /// This engine without its caches: every search runs every stage (for `bench`).
    pub fn without_caches(mut self) -> Self {
        self.caches = false;
        self
    }

    pub fn with_reranker(mut self, reranker: Arc<dyn rerank::Reranker>) -> Self {
        self.reranker = reranker;
        self
    }

    /// `view` adds its own nearest neighbours as a third list to the fusion ([`second_view`]).
    pub fn with_second_view(mut self, view: Option<Arc<dyn Embedder>>) -> Self {
        self.second_view = view;
        self
    }

    /// This engine with two lists: the primary's and the lexical.
    pub fn without_second_view(mut self) -> Self {
        if let Some(view) = self.second_view.take() {
            self.in_memory.retain(|held| held.model() != view.model());
        }
        self
    }

    /// Reads the vectors of every model this engine searches (the primary's, the second
    /// view's) into memory and searches them there ([`in_memory`]) from now on.
    pub async fn holding_vectors_in_memory(mut self) -> Result<Self, SearchError> {
        let models: Vec<(String, usize)> = std::iter::once(&self.embedder)
            .chain(&self.second_view)
            .map(|embedder| (embedder.model().to_string(), embedder.dimension()))
            .collect();
        for (model, dimension) in models {
            let vectors =
                in_memory::VectorsInMemory::load(&self.db.reads, &model, dimension).await?;
            self = self.with_vectors_in_memory(Arc::new(vectors));
        }
        Ok(self)
    }

    /// Whether any model's vectors are searched in memory.
    pub fn holds_vectors_in_memory(&self) -> bool {
        !self.in_memory.is_empty()
    }

    /// This engine searching every model through PostgreSQL's HNSW indexes.
    pub fn without_vectors_in_memory(mut self) -> Self {
        self.in_memory.clear();
        self
    }

    /// Whether every model's vectors held in memory are of catalog version `version` or
    /// newer, each brought up to it when it may be ([`in_memory::VectorsInMemory::catch_up`]).
    async fn vectors_caught_up(&self, version: i64) -> bool {
        let mut current = true;
        for vectors in &self.in_memory {
            current &= vectors.catch_up(&self.db.reads, version).await;
        }
        current
    }

    /// Searches `vectors`' model in memory ([`in_memory`]) instead of through its HNSW indexes.
    pub fn with_vectors_in_memory(mut self, vectors: Arc<in_memory::VectorsInMemory>) -> Self {
        self.in_memory
            .retain(|held| held.model() != vectors.model());
        self.in_memory.push(vectors);
        self
    }

    /// Spanish queries are also searched in English through `translator`.
    pub fn with_translator(mut self, translator: Option<Arc<translate::Translator>>) -> Self {
        self.translator = translator;
        self
    }

    /// Starts the translator's pipeline in the background ([`translate::Translator::warm_up`]);
    /// a query that arrives meanwhile waits for it outside its own translation budget.
    pub fn warm_up_translator(&self) {
        if let Some(translator) = self.translator.clone() {
            tokio::spawn(async move { translator.warm_up().await });
        }
    }

    /// English query words also match their synonyms in `thesaurus`.
    pub fn with_thesaurus(mut self, thesaurus: Option<Arc<thesaurus::Thesaurus>>) -> Self {
        self.thesaurus = thesaurus;
        self
    }

    pub fn with_budgets(mut self, budgets: Budgets) -> Self {
        self.budgets = budgets;
        self
    }

    /// Reads of the pipeline go to `replica` from now on; writes stay on the primary.
    pub fn with_read_replica(mut self, replica: PgPool) -> Self {
        self.db = self.db.with_replica(replica);
        self
    }

    /// The pools this engine reads and writes (for evaluation, which measures the pipeline on
    /// them; services take theirs from the one [`crate::db::Db`] built at start).
    pub fn db(&self) -> &crate::db::Db {
        &self.db
    }

    pub fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    /// Whether a second view adds its list to the fusion ([`second_view`]).
    pub fn has_second_view(&self) -> bool {
        self.second_view.is_some()
    }

    /// Steps 1–3 of the pipeline. When the query cannot be embedded the lexical branch alone
    /// answers (`query_vector` is `None`).
    pub async fn retrieve(&self, raw: &str, filters: &Filters) -> Result<Retrieval, SearchError> {
        // Every stage reads the normalised text the results cache is keyed by, so two queries
        // that share a key always get the same page.
        self.retrieve_query(&Query::parse(raw)?, filters).await
    }

    /// The embedding of `text`: from the cache, else from the embedder within its budget.
    /// `Ok(None)` when the embedder failed or ran out of time (the search goes on without it);
    /// an error only when the database is gone.
    async fn query_vector(
        &self,
        embedder: &dyn Embedder,
        text: &str,
    ) -> Result<Option<Vec<f32>>, SearchError> {
        let model = embedder.model();
        if self.caches {
            match cache::get_embedding(&self.db.reads, model, text).await {
                Ok(Some(vector)) => return Ok(Some(vector)),
                Ok(None) => {}
                // The database is gone: the search cannot answer; stop here rather than wait
                // for it again at every later stage.
                Err(error) if crate::db::is_unavailable(&error) => return Err(error.into()),
                Err(error) => tracing::warn!(%error, "query embedding cache unreadable"),
            }
        }
        let fresh = tokio::time::timeout(
            self.budgets.embed,
            embedder
                .embed_query(text)
                .instrument(tracing::info_span!("embed")),
        )
        .await;
        match fresh {
            Ok(Ok(vector)) => {
                if self.caches
                    && let Err(error) =
                        cache::put_embedding(&self.db.primary, model, text, &vector).await
                {
                    tracing::warn!(%error, "query embedding not cached");
                }
                Ok(Some(vector))
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "query embedding failed: lexical results only");
                Ok(None)
            }
            Err(_) => {
                tracing::warn!(budget = ?self.budgets.embed, "query embedding timed out: lexical results only");
                Ok(None)
            }
        }
    }

    /// A Spanish query's English reading, and whether the translator failed (then the query is
    /// searched as typed and the page counts as degraded).
    async fn english_reading(&self, query: &str) -> (Option<String>, bool) {
        let Some(translator) = &self.translator else {
            return (None, false);
        };
        match translator
            .translate(query)
            .instrument(tracing::info_span!("translate"))
            .await
        {
            Some(reading) => (reading.is_spanish().then_some(reading.english), false),
            None => (None, true),
        }
    }

    /// The vector branch: the query as typed and, for a Spanish one, its English reading are
    /// embedded (each may come from the cache; either alone will do) and their mean direction
    /// walks the indexes. Returns the hits and the vector used (no hits and no vector when
    /// nothing could be embedded), the embedding time and the search time.
    async fn vector_branch(
        &self,
        embedder: &dyn Embedder,
        query: &str,
        english: Option<&str>,
        filters: &Filters,
    ) -> VectorBranch {
        let began = Instant::now();
        let (typed, translated) = tokio::join!(self.query_vector(embedder, query), async {
            match english {
                Some(english) => self.query_vector(embedder, english).await,
                None => Ok(None),
            }
        });
        let embed = began.elapsed();
        let unsearched = |outcome| VectorBranch {
            outcome,
            embed,
            search: Duration::ZERO,
        };
        let vector = match (typed, translated) {
            (Err(error), _) | (_, Err(error)) => return unsearched(Err(error)),
            (Ok(Some(typed)), Ok(Some(translated))) => mean_direction(&typed, &translated),
            (Ok(Some(one)), Ok(None)) | (Ok(None), Ok(Some(one))) => one,
            (Ok(None), Ok(None)) => return unsearched(Ok((Vec::new(), None))),
        };
        let began = Instant::now();
        let span = tracing::info_span!("vector", model = embedder.model());
        let hits = match self
            .in_memory
            .iter()
            .find(|v| v.model() == embedder.model())
        {
            Some(vectors) => vectors
                .search(&self.db.reads, &vector, filters, BRANCH_LIMIT)
                .instrument(span)
                .await
                .map_err(SearchError::from),
            None => vector::search(
                &self.db.reads,
                embedder.model(),
                &vector,
                filters,
                BRANCH_LIMIT,
            )
            .instrument(span)
            .await
            .map_err(SearchError::from),
        };
        VectorBranch {
            outcome: hits.map(|h| (h, Some(vector))),
            embed,
            search: began.elapsed(),
        }
    }

    /// [`retrieve`](Self::retrieve) for a parsed query: every branch reads its normalised text.
    async fn retrieve_query(
        &self,
        query: &Query,
        filters: &Filters,
    ) -> Result<Retrieval, SearchError> {
        let started = Instant::now();
        let query = query.normalised();
        let (translation, translation_failed) = self.english_reading(query).await;
        let translate_time = started.elapsed();
        let lexical = async {
            let began = Instant::now();
            let hits = lexical::search(
                &self.db.reads,
                query,
                translation.as_deref(),
                self.thesaurus.as_deref(),
                filters,
                BRANCH_LIMIT,
            )
            .await;
            (hits, began.elapsed())
        }
        .instrument(tracing::info_span!("lexical"));
        let semantic = self.vector_branch(
            self.embedder.as_ref(),
            query,
            translation.as_deref(),
            filters,
        );
        let second = async {
            let began = Instant::now();
            let Some(view) = &self.second_view else {
                return (Ok(Vec::new()), Duration::ZERO);
            };
            let branch = self
                .vector_branch(view.as_ref(), query, translation.as_deref(), filters)
                .await;
            (branch.outcome.map(|(hits, _)| hits), began.elapsed())
        };
        let ((lexical, lexical_time), semantic, (second, second_time)) =
            tokio::join!(lexical, semantic, second);
        let lexical = lexical?;
        let (embed_time, vector_time) = (semantic.embed, semantic.search);
        let (vector, query_vector) = semantic.outcome?;
        let second = second?;

        let began = Instant::now();
        let ids = |hits: &[vector::VectorHit]| hits.iter().map(|hit| hit.anime_id).collect();
        let lexical_ids: Vec<i32> = lexical.iter().map(|hit| hit.anime_id).collect();
        let (vector_ids, second_ids): (Vec<i32>, Vec<i32>) = (ids(&vector), ids(&second));
        let fused = fusion::rrf_with_second(&lexical_ids, &vector_ids, &second_ids, fusion::K);
        let fuse_time = began.elapsed();
        Ok(Retrieval {
            lexical,
            vector,
            second,
            fused,
            query_vector,
            translation,
            translation_failed,
            times: StageTimes {
                translate: translate_time,
                embed: embed_time,
                lexical: lexical_time,
                vector: vector_time,
                second: second_time,
                fuse: fuse_time,
                rerank: Duration::ZERO,
                total: started.elapsed(),
            },
        })
    }

    /// A page of results for `raw`.
    pub async fn search(&self, raw: &str, filters: &Filters) -> Result<SearchResults, SearchError> {
        Ok(self.search_timed(raw, filters).await?.0)
    }

    /// [`search`](Self::search) with the time of each stage; `total` covers the whole page.
    pub async fn search_timed(
        &self,
        raw: &str,
        filters: &Filters,
    ) -> Result<(SearchResults, StageTimes), SearchError> {
        let (results, times, _) = self.search_page(raw, filters).await?;
        Ok((results, times))
    }

    /// [`search`](Self::search), and whether the page is in the results cache (read from it,
    /// or kept): an identical search then finds it there, and a degraded page (not kept) would
    /// run the pipeline again.
    pub async fn search_kept(
        &self,
        raw: &str,
        filters: &Filters,
    ) -> Result<(SearchResults, bool), SearchError> {
        let (results, _, kept) = self.search_page(raw, filters).await?;
        Ok((results, kept))
    }

    /// The steps: the results cache, then the pipeline ([`search_traced`](Self::search_traced)),
    /// and the page kept unless it is degraded.
    async fn search_page(
        &self,
        raw: &str,
        filters: &Filters,
    ) -> Result<(SearchResults, StageTimes, bool), SearchError> {
        let started = Instant::now();
        let query = Query::parse(raw)?;
        check_filters(filters)?;
        let key = query.results_key(&self.pipeline_fingerprint(), filters);
        if let Some((results, times)) = self.cached_page(&key, query.typed(), started).await? {
            return Ok((results, times, true));
        }
        let version = cache::catalog_version(&self.db.reads).await?;
        let vectors_current = self.vectors_caught_up(version).await;
        let Page { results, trace } = self.run_pipeline(query, filters, started).await?;
        crate::metrics::search_ran(
            &trace.times.stages(),
            results.semantic,
            results.ranking == Ranking::Fallback,
        );
        // A degraded page is not kept: the next search should get the full pipeline again. Nor
        // is one searched in vectors older than the catalog version it would be kept under.
        let keep = self.caches
            && vectors_current
            && results.semantic
            && results.ranking != Ranking::Fallback
            && !trace.retrieval.translation_failed;
        let kept = keep
            && match cache::put_results(&self.db.primary, &key, version, &results).await {
                Ok(()) => true,
                Err(error) => {
                    tracing::warn!(%error, "results not cached");
                    false
                }
            };
        Ok((results, trace.times, kept))
    }

    /// The page for `raw` with every stage's output, computed afresh (the results cache is
    /// neither read nor written): the served path itself, which `server eval` scores.
    pub async fn search_traced(&self, raw: &str, filters: &Filters) -> Result<Page, SearchError> {
        let started = Instant::now();
        let query = Query::parse(raw)?;
        check_filters(filters)?;
        self.run_pipeline(query, filters, started).await
    }

    /// The stages, each handing its typed output to the next: [`Query`] → [`Retrieval`] →
    /// [`rerank::Candidates`] → [`Ranked`] → [`Page`].
    async fn run_pipeline(
        &self,
        query: Query,
        filters: &Filters,
        started: Instant,
    ) -> Result<Page, SearchError> {
        let retrieval = self.retrieve_query(&query, filters).await?;
        let began = Instant::now();
        let candidates = rerank::candidates(
            &self.db.reads,
            self.embedder.model(),
            query.normalised(),
            &retrieval,
        )
        .await?;
        let ranked = self.rank(&query, &retrieval, &candidates).await;
        let rerank_time = began.elapsed();
        let layout = page::lay_out(&self.db.reads, &retrieval, &ranked, filters).await?;
        let mut times = retrieval.times;
        times.rerank = rerank_time;
        times.total = started.elapsed();
        let results = SearchResults {
            query: query.typed().to_string(),
            hits: layout.hits,
            semantic: retrieval.query_vector.is_some(),
            ranking: ranked.ranking,
            reranker: self.reranker.name(),
            cached: false,
            quota: None,
            took_ms: times.total.as_secs_f64() * 1000.0,
        };
        let trace = Trace {
            retrieval,
            candidates,
            ranked,
            served: layout.served,
            times,
        };
        Ok(Page { results, trace })
    }

    /// What the results cache's key names besides the query: every model, constant and SQL text
    /// that shapes a page.
    fn pipeline_fingerprint(&self) -> String {
        let translator = self
            .translator
            .as_ref()
            .map_or_else(|| "typed".to_string(), |t| t.fingerprint());
        cache::pipeline_fingerprint(
            self.embedder.model(),
            self.second_view.as_ref().map(|view| view.model()),
            &self.reranker.name(),
            &translator,
            self.thesaurus.is_some(),
            &in_memory::fingerprint(&self.in_memory),
        )
    }

    /// The page stored under `key`, marked as cached, when the caches are on and hold it.
    async fn cached_page(
        &self,
        key: &str,
        query: &str,
        started: Instant,
    ) -> Result<Option<(SearchResults, StageTimes)>, SearchError> {
        if !self.caches {
            return Ok(None);
        }
        let Some(mut results) = cache::get_results(&self.db.reads, key).await? else {
            return Ok(None);
        };
        results.query = query.to_string();
        results.cached = true;
        results.quota = None;
        let times = StageTimes {
            total: started.elapsed(),
            ..StageTimes::default()
        };
        results.took_ms = times.total.as_secs_f64() * 1000.0;
        crate::metrics::search_cache_hit(times.total);
        Ok(Some((results, times)))
    }

    /// The rerank stage: the reranker's order of the candidates within its budget, or the
    /// fused order when it skips a confident leader, fails or runs out of time.
    async fn rank(
        &self,
        query: &Query,
        retrieval: &Retrieval,
        candidates: &rerank::Candidates,
    ) -> Ranked {
        let (reranked, ranking) = if self.reranker.skips_when_confident()
            && fused_margin(&retrieval.fused) >= CONFIDENT_MARGIN
        {
            (Vec::new(), Ranking::Confident)
        } else {
            self.rerank_within_budget(query.normalised(), candidates)
                .await
        };
        let order = rerank::served_order(&reranked, &retrieval.fused)
            .iter()
            .map(|f| f.anime_id)
            .collect();
        Ranked {
            ranking,
            reranked,
            order,
        }
    }

    /// The reranker's order within [`Budgets::rerank`]; empty (the fused order) on a failure.
    async fn rerank_within_budget(
        &self,
        query: &str,
        candidates: &rerank::Candidates,
    ) -> (Vec<i32>, Ranking) {
        let answer = tokio::time::timeout(
            self.budgets.rerank,
            self.reranker
                .rerank(query, &candidates.pool)
                .instrument(tracing::info_span!("rerank")),
        )
        .await;
        match answer {
            Ok(Ok(order)) => (order, Ranking::Reranked),
            Ok(Err(error)) => {
                tracing::warn!(%error, reranker = self.reranker.name(), "rerank failed: fused order");
                (Vec::new(), Ranking::Fallback)
            }
            Err(_) => {
                tracing::warn!(budget = ?self.budgets.rerank, reranker = self.reranker.name(), "rerank timed out: fused order");
                (Vec::new(), Ranking::Fallback)
            }
        }
    }

    /// Anime nearest to anime `id` by stored vector, as cards.
    pub async fn similar(
        &self,
        id: i32,
        exclude_franchise: bool,
        limit: usize,
    ) -> Result<Vec<AnimeCard>, SearchError> {
        let nearest = vector::similar(
            &self.db.reads,
            self.embedder.model(),
            id,
            exclude_franchise,
            limit,
        )
        .await?;
        let ids: Vec<i32> = nearest.iter().map(|hit| hit.anime_id).collect();
        let mut cards = crate::catalog::pages::cards(&self.db.reads, &ids).await?;
        Ok(ids.iter().filter_map(|id| cards.remove(id)).collect())
    }

    /// Everything the anime page shows, or `None` for an unknown id: the catalog's reads
    /// ([`crate::catalog::pages::anime`]) and the "similar to" list by stored vector.
    pub async fn anime(&self, id: i32) -> Result<Option<AnimeDetails>, SearchError> {
        let Some(mut details) = crate::catalog::pages::anime(&self.db.reads, id).await? else {
            return Ok(None);
        };
        details.similar = self.similar(id, true, SIMILAR_COUNT).await?;
        Ok(Some(details))
    }
}
