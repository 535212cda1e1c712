//! The rerank stage: the fused candidates in, the final order out. Two implementations of
//! [`Reranker`]: [`LocalReranker`] (the default) and [`LlmReranker`] (with `OPENAI_API_KEY`).
//!
//! [`LocalReranker`] (the default, no key) scores each candidate by a weighted sum of evidence
//! the retrieval already has or can read in one query: cosine similarity to the query (also for
//! candidates only the lexical branch found), title similarity, the share of the query's words
//! the document holds, the fused (RRF) score, a popularity prior, whether the candidate is from
//! the era and of the format the query names, and how many of the genres it names the candidate
//! has ([`super::cues`]). The weights were fitted on
//! the evaluation sets (`server eval --fit`); the eval report shows what it gains over plain RRF.

use std::collections::HashMap;

use sqlx::PgPool;

use super::{Retrieval, cues::QueryCues, fusion::Fused, lexical::LexicalHit, vector};

/// [`SearchParams`](super::params::SearchParams)`::rerank.candidates`.
pub const CANDIDATES: usize = super::params::PARAMS.rerank.candidates;
/// [`SearchParams`](super::params::SearchParams)`::rerank.branch_heads`.
pub const BRANCH_HEADS: usize = super::params::PARAMS.rerank.branch_heads;
/// [`SearchParams`](super::params::SearchParams)`::rerank.summary_chars`.
const SUMMARY_CHARS: usize = super::params::PARAMS.rerank.summary_chars;

/// Everything a reranker may weigh about one candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub anime_id: i32,
    /// 1-based position in the fused order.
    pub fused_rank: usize,
    pub rrf: f64,
    /// Cosine similarity between the query and the document vector.
    pub cosine: Option<f64>,
    /// Cosine similarity between the query and the anime's nearest passage.
    pub passage_cosine: Option<f64>,
    pub lexical: Option<LexicalHit>,
    pub popularity: i32,
    /// The candidate is from an era the query names ("de los 80", "a 1979 series").
    pub era_match: bool,
    /// The candidate is of the format the query names ("la película donde…").
    pub format_match: bool,
    /// Share of the genres the query names that the candidate has ("de terror": Horror).
    pub genre_match: f64,
    /// Compact text for a language model: title, year, format, the start of the synopsis, tags.
    pub summary: String,
}

/// The pipeline's third hand-off, from [`Retrieval`] to the rerank stage: the fused results it
/// may reorder ([`candidate_pool`], in fused order), each with all the evidence any reranker
/// weighs, read once ([`candidates`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidates {
    pub pool: Vec<Candidate>,
}

#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    #[error("rerank request failed: {0}")]
    Api(#[from] async_openai::error::OpenAIError),
    #[error("rerank timed out after {0:?}")]
    Timeout(std::time::Duration),
    #[error("the reranker answered with something unusable: {0}")]
    Garbage(String),
}

/// Reorders the fused candidates. Implementations return candidate ids only, each once; the
/// caller falls back to the fused order when one fails.
#[async_trait::async_trait]
pub trait Reranker: Send + Sync {
    /// Name recorded with each response ("local", "openai:gpt-5.4-mini").
    fn name(&self) -> String;
    async fn rerank(&self, query: &str, candidates: &[Candidate]) -> Result<Vec<i32>, RerankError>;

    /// Whether a fused order whose leader is far ahead ([`super::CONFIDENT_MARGIN`]) is served
    /// as it is, without this reranker: worth it for a model call that costs time and money.
    fn skips_when_confident(&self) -> bool {
        true
    }
}

/// Turns a model's answer into a complete order: unknown ids dropped, repeats removed, the
/// candidates it left out appended in fused order. An answer with no usable id is garbage.
pub fn complete_order(answer: &[i64], candidates: &[Candidate]) -> Result<Vec<i32>, RerankError> {
    let mut order: Vec<i32> = Vec::with_capacity(candidates.len());
    for &id in answer {
        let Ok(id) = i32::try_from(id) else { continue };
        if candidates.iter().any(|c| c.anime_id == id) && !order.contains(&id) {
            order.push(id);
        }
    }
    if order.is_empty() && !candidates.is_empty() {
        return Err(RerankError::Garbage("no candidate id in the answer".into()));
    }
    for candidate in candidates {
        if !order.contains(&candidate.anime_id) {
            order.push(candidate.anime_id);
        }
    }
    Ok(order)
}

/// What a candidate's row says: its popularity and the summary a language model reads.
#[derive(sqlx::FromRow)]
struct CandidateFacts {
    id: i32,
    popularity: Option<i32>,
    year: Option<i32>,
    format: Option<String>,
    genres: Vec<String>,
    summary: String,
}

/// Which fused results the rerank stage sees, each with its 0-based fused position: the fused
/// top [`CANDIDATES`], then any of any list's top [`BRANCH_HEADS`] fused lower, in fused order.
pub fn candidate_pool(fused: &[Fused]) -> Vec<(usize, &Fused)> {
    let heads = |rank: Option<usize>| rank.is_some_and(|r| r <= BRANCH_HEADS);
    fused
        .iter()
        .enumerate()
        .filter(|(i, f)| {
            *i < CANDIDATES || heads(f.lexical_rank) || heads(f.vector_rank) || heads(f.second_rank)
        })
        .collect()
}

/// What is served after the rerank stage: the fused results in `order` (the reranker's order of
/// the pool; empty when it was skipped or failed), then the other fused results in fused order.
pub fn served_order<'a>(order: &[i32], fused: &'a [Fused]) -> Vec<&'a Fused> {
    let by_id: HashMap<i32, &Fused> = fused.iter().map(|f| (f.anime_id, f)).collect();
    order
        .iter()
        .filter_map(|id| by_id.get(id).copied())
        .chain(fused.iter().filter(|f| !order.contains(&f.anime_id)))
        .collect()
}

/// The evidence for the rerank stage's [`candidate_pool`]: the vector branch's for those it
/// found, the same evidence read in one query for those only the lexical branch found, and every
/// candidate's popularity, summary, and whether it has the era and format `query` names.
pub async fn candidates(
    pool: &PgPool,
    model: &str,
    query: &str,
    retrieval: &Retrieval,
) -> Result<Candidates, vector::VectorError> {
    let top = candidate_pool(&retrieval.fused);
    let vector_hits = &retrieval.vector;
    let ids: Vec<i32> = top.iter().map(|(_, f)| f.anime_id).collect();
    let mut evidence: HashMap<i32, vector::VectorHit> = vector_hits
        .iter()
        .filter(|hit| ids.contains(&hit.anime_id))
        .map(|hit| (hit.anime_id, *hit))
        .collect();
    if let Some(query_vector) = retrieval.query_vector.as_deref() {
        let missing: Vec<i32> = ids
            .iter()
            .copied()
            .filter(|id| !evidence.contains_key(id))
            .collect();
        if !missing.is_empty() {
            for hit in vector::evidence(pool, model, query_vector, &missing).await? {
                evidence.insert(hit.anime_id, hit);
            }
        }
    }
    let facts: HashMap<i32, CandidateFacts> = sqlx::query_as::<_, CandidateFacts>(
        "SELECT a.id, a.members AS popularity, coalesce(a.season_year, a.start_year) AS year, a.format,
                a.genres,
                concat_ws('. ',
                    concat_ws(' / ', coalesce(a.title_romaji, a.title_native), a.title_english),
                    concat_ws(', ', a.format, coalesce(a.season_year, a.start_year)::text),
                    'Series premise: ' || left(premise.text, $2),
                    left(coalesce(a.description, ''), $2),
                    'Tags: ' || array_to_string(a.genres, ', ')) AS summary
         FROM anime a
         -- A sequel's own synopsis often assumes the story so far: its franchise's premise
         -- goes first (a model-written one before the local one, the newest of each).
         LEFT JOIN LATERAL (
             SELECT p.premise AS text FROM franchise_premises p
             WHERE p.root_id = a.franchise_root_id AND a.id <> a.franchise_root_id
             ORDER BY p.generator = $3, p.created_at DESC LIMIT 1
         ) premise ON true
         WHERE a.id = ANY($1)",
    )
    .bind(&ids)
    .bind(SUMMARY_CHARS as i32)
    .bind(crate::catalog::franchise::LOCAL_GENERATOR)
    .fetch_all(pool)
    .await
    .map_err(vector::VectorError::from)?
    .into_iter()
    .map(|row| (row.id, row))
    .collect();
    let cues = QueryCues::read(query);
    let lexical: HashMap<i32, &LexicalHit> =
        retrieval.lexical.iter().map(|h| (h.anime_id, h)).collect();
    let with_evidence = top
        .iter()
        .map(|&(i, f)| {
            let fact = facts.get(&f.anime_id);
            Candidate {
                anime_id: f.anime_id,
                fused_rank: i + 1,
                rrf: f.score,
                cosine: evidence.get(&f.anime_id).map(|e| e.document),
                passage_cosine: evidence.get(&f.anime_id).and_then(|e| e.passage),
                lexical: lexical.get(&f.anime_id).map(|&hit| hit.clone()),
                popularity: fact.and_then(|f| f.popularity).unwrap_or(0),
                era_match: fact.is_some_and(|f| cues.era_matches(f.year)),
                format_match: fact.is_some_and(|f| cues.format_matches(f.format.as_deref())),
                genre_match: fact.map_or(0.0, |f| cues.genre_share(&f.genres)),
                summary: fact.map(|f| f.summary.clone()).unwrap_or_default(),
            }
        })
        .collect();
    Ok(Candidates {
        pool: with_evidence,
    })
}

/// How a feature reads its value from a candidate, on a scale that compares across queries.
#[derive(Clone, Copy)]
pub enum Scale {
    /// Minus the best among the candidates, in hundredths (≤ 0): cosines crowd within a few
    /// hundredths (e5's between 0.75 and 0.9). A candidate without one gets -10.
    BelowBest(fn(&Candidate) -> Option<f64>),
    /// Over the best among the candidates (0–1).
    OverBest(fn(&Candidate) -> f64),
    /// As it is.
    Plain(fn(&Candidate) -> f64),
}

impl Scale {
    /// The value of each candidate, in order.
    fn values(self, candidates: &[Candidate]) -> Vec<f64> {
        match self {
            Scale::BelowBest(pick) => {
                let best = candidates
                    .iter()
                    .filter_map(pick)
                    .fold(f64::NEG_INFINITY, f64::max);
                candidates
                    .iter()
                    .map(|c| match pick(c) {
                        Some(value) if best.is_finite() => (value - best) * 100.0,
                        _ => -10.0,
                    })
                    .collect()
            }
            Scale::OverBest(pick) => {
                let best = candidates.iter().map(pick).fold(0.0, f64::max).max(1e-12);
                candidates.iter().map(|c| pick(c) / best).collect()
            }
            Scale::Plain(pick) => candidates.iter().map(pick).collect(),
        }
    }
}

/// Which pass of [`fit`] searches a feature's weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Held at its shipped weight: scores only compare within a query, so one weight can be
    /// fixed.
    Fixed,
    /// Searched together, first.
    Retrieval,
    /// Searched together after the retrieval weights are chosen (one grid over every weight
    /// would be 8^8 = 17 million weightings per fold): the query's cues.
    Refinement,
}

/// One piece of evidence the local reranker weighs: scoring, fitting, the eval report and the
/// results cache's fingerprint all iterate over [`FEATURES`], so a new feature is one entry.
#[derive(Clone, Copy)]
pub struct Feature {
    /// Its name in reports and in the cache fingerprint.
    pub name: &'static str,
    pub scale: Scale,
    /// The weight it ships with.
    pub fitted: f64,
    pub pass: Pass,
}

impl std::fmt::Debug for Feature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}({:?})", self.name, self.fitted, self.pass)
    }
}

/// The local reranker's evidence and shipped weights. Fitted on both evaluation sets together
/// (`server/data/eval_cases.json` and `../shared/eval/dev_cases.jsonl`, 163 text cases) over the
/// full shared catalog with `server eval --fit`, which also prints each set's 5-fold
/// cross-validated scores. Popularity weighs heavily: of two anime that fit a description,
/// people mostly mean the well-known one. The era and format weights were fitted afterwards
/// with the others held (in 5-fold cross-validation on both sets every fold chose 8 for the
/// era, four of five 4 for the format; `docs/measurements.md`), then the genre weight with those
/// held (four folds of five chose 2). The RRF weight was refit (0.5 → 2) after the passage walk
/// deepened: the fused order now holds more of the right answers, and `--fit` on every case
/// picks 2.
pub const FEATURES: &[Feature] = &[
    // Cosine of the query and the document vector; candidates only the lexical branch found
    // get theirs read too (`candidates`).
    Feature {
        name: "cosine",
        scale: Scale::BelowBest(|c| c.cosine),
        fitted: 1.0,
        pass: Pass::Fixed,
    },
    // Cosine of the query and the anime's nearest passage.
    Feature {
        name: "passage",
        scale: Scale::BelowBest(|c| c.passage_cosine),
        fitted: 2.0,
        pass: Pass::Retrieval,
    },
    // Trigram similarity of the query and the nearest title (0–1).
    Feature {
        name: "title",
        scale: Scale::Plain(|c| {
            c.lexical
                .as_ref()
                .map_or(0.0, |l| l.title_similarity as f64)
        }),
        fitted: 32.0,
        pass: Pass::Retrieval,
    },
    // Share of the query's words the document holds (0–1).
    Feature {
        name: "coverage",
        scale: Scale::Plain(|c| c.lexical.as_ref().map_or(0.0, |l| l.coverage as f64)),
        fitted: 16.0,
        pass: Pass::Retrieval,
    },
    // The fused score.
    Feature {
        name: "rrf",
        scale: Scale::OverBest(|c| c.rrf),
        fitted: 2.0,
        pass: Pass::Retrieval,
    },
    // log10 of AniList members over 6 (estimated for a record without them,
    // [`crate::catalog::popularity`]).
    Feature {
        name: "popularity",
        scale: Scale::Plain(|c| super::popularity_prior(c.popularity)),
        fitted: 16.0,
        pass: Pass::Retrieval,
    },
    // 1 when the candidate is from the era the query names ([`super::cues`]).
    Feature {
        name: "era",
        scale: Scale::Plain(|c| f64::from(u8::from(c.era_match))),
        fitted: 8.0,
        pass: Pass::Refinement,
    },
    // 1 when it is of the format the query names.
    Feature {
        name: "format",
        scale: Scale::Plain(|c| f64::from(u8::from(c.format_match))),
        fitted: 4.0,
        pass: Pass::Refinement,
    },
    // Share of the genres the query names that it has (0–1).
    Feature {
        name: "genre",
        scale: Scale::Plain(|c| c.genre_match),
        fitted: 2.0,
        pass: Pass::Refinement,
    },
];

/// Weights the fit tries for each searched feature.
const GRID: [f64; 8] = [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];

/// The features and their shipped weights, for the results cache's fingerprint: a new feature
/// or weight changes pages, so it changes the key.
pub fn fingerprint(features: &[Feature]) -> String {
    features
        .iter()
        .map(|f| format!("{}={}", f.name, f.fitted))
        .collect::<Vec<_>>()
        .join(",")
}

/// `weights` named by `features`, for reports.
pub fn named(features: &[Feature], weights: &[f64]) -> Vec<(String, f64)> {
    features
        .iter()
        .zip(weights)
        .map(|(f, &w)| (f.name.to_string(), w))
        .collect()
}

/// Reorders candidates by a weighted sum of their evidence; no model call, microseconds.
#[derive(Debug, Clone)]
pub struct LocalReranker {
    features: &'static [Feature],
    /// One per feature, in order.
    weights: Vec<f64>,
}

impl Default for LocalReranker {
    fn default() -> Self {
        Self::shipped(FEATURES)
    }
}

impl LocalReranker {
    /// `features` with their shipped weights.
    pub fn shipped(features: &'static [Feature]) -> Self {
        Self {
            features,
            weights: features.iter().map(|f| f.fitted).collect(),
        }
    }

    /// `features` with `weights` (one per feature, in order).
    pub fn weighted(features: &'static [Feature], weights: Vec<f64>) -> Self {
        assert_eq!(features.len(), weights.len(), "one weight per feature");
        Self { features, weights }
    }

    /// The evidence of each candidate, one value per feature of [`FEATURES`] (see each
    /// feature's comment and [`Scale`]).
    pub fn features(candidates: &[Candidate]) -> Vec<Vec<f64>> {
        feature_rows(FEATURES, candidates)
    }

    fn score(&self, features: &[f64]) -> f64 {
        self.weights.iter().zip(features).map(|(w, f)| w * f).sum()
    }

    /// Candidate ids in the new order (ties keep the fused order).
    pub fn order(&self, candidates: &[Candidate]) -> Vec<i32> {
        let features = feature_rows(self.features, candidates);
        let mut order: Vec<(usize, f64)> = features
            .iter()
            .enumerate()
            .map(|(i, f)| (i, self.score(f)))
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        order
            .into_iter()
            .map(|(i, _)| candidates[i].anime_id)
            .collect()
    }
}

/// Each candidate's value of each of `features`: a row per candidate.
fn feature_rows(features: &[Feature], candidates: &[Candidate]) -> Vec<Vec<f64>> {
    let columns: Vec<Vec<f64>> = features
        .iter()
        .map(|f| f.scale.values(candidates))
        .collect();
    (0..candidates.len())
        .map(|i| columns.iter().map(|column| column[i]).collect())
        .collect()
}

/// [`fit_features`] over [`FEATURES`].
pub fn fit(cases: &[(Vec<Candidate>, Vec<i32>)]) -> (Vec<f64>, f64) {
    fit_features(FEATURES, cases)
}

/// Grid search for the weights of `features` that maximise mean reciprocal rank over `cases`
/// (each: the candidates and the expected ids): every weighting of [`GRID`] over the
/// [`Pass::Retrieval`] features, then over the [`Pass::Refinement`] features with the first held;
/// [`Pass::Fixed`] weights stay as shipped. Weightings are tried with the first feature of a
/// pass varying slowest, and a later one must beat the best so far to replace it.
pub fn fit_features(
    features: &'static [Feature],
    cases: &[(Vec<Candidate>, Vec<i32>)],
) -> (Vec<f64>, f64) {
    let prepared: Vec<(Vec<Vec<f64>>, Vec<bool>)> = cases
        .iter()
        .map(|(candidates, expected)| {
            (
                feature_rows(features, candidates),
                candidates
                    .iter()
                    .map(|c| expected.contains(&c.anime_id))
                    .collect(),
            )
        })
        .collect();
    let mut best = (
        features.iter().map(|f| f.fitted).collect::<Vec<f64>>(),
        f64::NEG_INFINITY,
    );
    for pass in [Pass::Retrieval, Pass::Refinement] {
        let searched: Vec<usize> = (0..features.len())
            .filter(|&i| features[i].pass == pass)
            .collect();
        let held = best.0.clone();
        for n in 0..GRID.len().pow(searched.len() as u32) {
            let mut weights = held.clone();
            let mut digits = n;
            for &i in searched.iter().rev() {
                weights[i] = GRID[digits % GRID.len()];
                digits /= GRID.len();
            }
            let reranker = LocalReranker { features, weights };
            let mrr = mean_reciprocal_rank(&reranker, &prepared);
            if mrr > best.1 + 1e-12 {
                best = (reranker.weights, mrr);
            }
        }
    }
    best
}

fn mean_reciprocal_rank(reranker: &LocalReranker, cases: &[(Vec<Vec<f64>>, Vec<bool>)]) -> f64 {
    let mut total = 0.0;
    for (features, relevant) in cases {
        // The rank of the first relevant candidate: how many score above it (ties by position).
        let Some(first) = relevant.iter().position(|&r| r) else {
            continue;
        };
        let scores: Vec<f64> = features.iter().map(|f| reranker.score(f)).collect();
        let best_relevant = (0..scores.len())
            .filter(|&i| relevant[i])
            .max_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(b.cmp(&a)))
            .unwrap_or(first);
        let above = (0..scores.len())
            .filter(|&i| {
                scores[i] > scores[best_relevant]
                    || (scores[i] == scores[best_relevant] && i < best_relevant)
            })
            .count();
        total += 1.0 / (above + 1) as f64;
    }
    total / cases.len().max(1) as f64
}

#[async_trait::async_trait]
impl Reranker for LocalReranker {
    fn name(&self) -> String {
        "local".into()
    }

    /// Never: it costs microseconds, and on both evaluation sets the skipped cases' reranked #1
    /// was right more often than the fused #1 (`server eval` prints the sweep).
    fn skips_when_confident(&self) -> bool {
        false
    }

    async fn rerank(
        &self,
        _query: &str,
        candidates: &[Candidate],
    ) -> Result<Vec<i32>, RerankError> {
        Ok(self.order(candidates))
    }
}

const RERANK_INSTRUCTIONS: &str = "You rank anime for a search engine. The user describes an \
anime (in Spanish or English); you get candidate anime, one per line as `id: summary`. Answer \
with the ids of the candidates ordered from the best match to the worst. Judge by what the \
description says: plot, characters, setting, mood, era. Use only the given ids.";

/// Reranks through an OpenAI chat model with structured output: the answer must be a JSON
/// object `{"ids": [..]}` (the schema is sent, strict); the request shape (low reasoning
/// effort, no temperature) is [`crate::openai::chat_request`]'s.
pub struct LlmReranker {
    client: async_openai::Client<async_openai::config::OpenAIConfig>,
    model: String,
    timeout: std::time::Duration,
}

impl LlmReranker {
    pub fn new(
        api_key: &str,
        base_url: Option<&str>,
        model: &str,
        timeout: std::time::Duration,
    ) -> Self {
        Self {
            client: crate::openai::client(api_key, base_url, timeout),
            model: model.into(),
            timeout,
        }
    }

    /// The JSON schema the answer must follow.
    pub fn schema() -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": { "ids": { "type": "array", "items": { "type": "integer" } } },
            "required": ["ids"],
            "additionalProperties": false
        })
    }
}

#[async_trait::async_trait]
impl Reranker for LlmReranker {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }

    async fn rerank(&self, query: &str, candidates: &[Candidate]) -> Result<Vec<i32>, RerankError> {
        use async_openai::types::chat::{ResponseFormat, ResponseFormatJsonSchema};
        let mut prompt = format!("Description: {query}\n\nCandidates:\n");
        for candidate in candidates {
            let summary = candidate.summary.replace('\n', " ");
            prompt.push_str(&format!("{}: {summary}\n", candidate.anime_id));
        }
        let format = ResponseFormat::JsonSchema {
            json_schema: ResponseFormatJsonSchema {
                description: Some("Candidate ids, best match first".into()),
                name: "ranking".into(),
                schema: Self::schema(),
                strict: Some(true),
            },
        };
        let request = crate::openai::chat_request(
            &self.model,
            RERANK_INSTRUCTIONS,
            prompt,
            2_000,
            Some(format),
        )?;
        let response = tokio::time::timeout(self.timeout, self.client.chat().create(request))
            .await
            .map_err(|_| RerankError::Timeout(self.timeout))??;
        let text = crate::openai::first_text(response)
            .ok_or_else(|| RerankError::Garbage("no content".into()))?;
        #[derive(serde::Deserialize)]
        struct Answer {
            ids: Vec<i64>,
        }
        let answer: Answer = serde_json::from_str(&text)
            .map_err(|e| RerankError::Garbage(format!("not the schema: {e}")))?;
        complete_order(&answer.ids, candidates)
    }
}

/// The reranker the configuration asks for: the LLM with a key, else the local one.
pub fn from_config(config: &crate::config::Config) -> std::sync::Arc<dyn Reranker> {
    match config.openai_key() {
        Some(key) => std::sync::Arc::new(LlmReranker::new(
            key,
            config.openai.openai_base_url.as_deref(),
            &config.search.rerank_model,
            std::time::Duration::from_millis(config.search.rerank_timeout_ms),
        )),
        None => std::sync::Arc::new(LocalReranker::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_key_the_reranker_is_local() {
        let local = crate::config::Config::from_args(&["--openai-api-key", " "]).unwrap();
        assert_eq!(from_config(&local).name(), "local");
        let keyed = crate::config::Config::from_args(&[
            "--openai-api-key",
            "sk-x",
            "--rerank-model",
            "gpt-5.4-mini",
        ])
        .unwrap();
        assert_eq!(from_config(&keyed).name(), "openai:gpt-5.4-mini");
    }

    fn candidate(id: i32) -> Candidate {
        Candidate {
            anime_id: id,
            fused_rank: 0,
            rrf: 0.0,
            cosine: None,
            passage_cosine: None,
            lexical: None,
            popularity: 0,
            era_match: false,
            format_match: false,
            genre_match: 0.0,
            summary: String::new(),
        }
    }

    /// Adding a feature is one entry: the list below is the shipped one plus a dummy (an earlier
    /// fused position scores higher), and scoring, fitting, reports and the cache fingerprint
    /// all take it up with no other change.
    #[test]
    fn a_new_feature_is_one_entry_in_the_list() {
        let dummy = Feature {
            name: "dummy_fused_position",
            scale: Scale::Plain(|c| 1.0 / c.fused_rank.max(1) as f64),
            fitted: 4.0,
            pass: Pass::Refinement,
        };
        let with_dummy: &'static [Feature] = Box::leak(
            FEATURES
                .iter()
                .copied()
                .chain([dummy])
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        );
        // Candidates alike in every shipped feature, given out of fused order.
        let candidates: Vec<Candidate> = [3, 1, 2]
            .into_iter()
            .map(|rank| Candidate {
                fused_rank: rank,
                ..candidate(rank as i32)
            })
            .collect();
        assert_eq!(LocalReranker::default().order(&candidates), [3, 1, 2]);
        assert_eq!(
            LocalReranker::shipped(with_dummy).order(&candidates),
            [1, 2, 3]
        );
        assert_eq!(
            feature_rows(with_dummy, &candidates)[0].len(),
            FEATURES.len() + 1
        );

        // The fit finds the dummy's weight when it is what separates the answers.
        let cases: Vec<(Vec<Candidate>, Vec<i32>)> =
            (0..3).map(|_| (candidates.clone(), vec![1])).collect();
        let (weights, mrr) = fit_features(with_dummy, &cases);
        assert_eq!(mrr, 1.0);
        assert!(weights[FEATURES.len()] > 0.0, "{weights:?}");
        assert_eq!(fit(&cases).1, 1.0 / 2.0, "without it the answer stays 2nd");
        assert_eq!(
            named(with_dummy, &weights)
                .last()
                .map(|(name, _)| name.as_str()),
            Some("dummy_fused_position")
        );
        assert!(fingerprint(with_dummy).starts_with(&fingerprint(FEATURES)));
        assert_ne!(fingerprint(with_dummy), fingerprint(FEATURES));
    }

    #[test]
    fn the_pool_is_the_fused_top_and_each_branchs_head_wherever_it_fell() {
        // Fused positions 1..=60: the first 30 found by both branches at ranks 31 and up, then
        // the lexical branch's 13th at 40th, the vector branch's 16th at 45th and its 15th at 50th.
        let fused: Vec<Fused> = (1..=60)
            .map(|position| {
                let (lexical_rank, vector_rank) = match position {
                    40 => (Some(13), None),
                    45 => (None, Some(16)),
                    50 => (None, Some(15)),
                    p if p <= 30 => (Some(30 + p as usize), Some(30 + p as usize)),
                    _ => (Some(100), None),
                };
                Fused {
                    anime_id: position,
                    score: 1.0 / f64::from(position),
                    branch: app::search::Branch::Both,
                    lexical_rank,
                    vector_rank,
                    second_rank: None,
                }
            })
            .collect();
        let picked: Vec<(usize, i32)> = candidate_pool(&fused)
            .iter()
            .map(|(i, f)| (*i, f.anime_id))
            .collect();
        let mut expected: Vec<(usize, i32)> = (0..CANDIDATES).map(|i| (i, i as i32 + 1)).collect();
        expected.extend([(39, 40), (49, 50)]);
        assert_eq!(picked, expected);
        // A short fused list is taken whole.
        assert_eq!(candidate_pool(&fused[..3]).len(), 3);
    }

    #[test]
    fn the_reranked_order_leads_and_the_other_fused_results_follow_in_fused_order() {
        let fused: Vec<Fused> = (1..=5)
            .map(|id| Fused {
                anime_id: id,
                score: 1.0 / f64::from(id),
                branch: app::search::Branch::Both,
                lexical_rank: None,
                vector_rank: None,
                second_rank: None,
            })
            .collect();
        let ids = |order: &[i32]| -> Vec<i32> {
            served_order(order, &fused)
                .iter()
                .map(|f| f.anime_id)
                .collect()
        };
        assert_eq!(ids(&[4, 2]), [4, 2, 1, 3, 5]);
        // Skipped or failed: the fused order as it is; an id fusion never held is not served.
        assert_eq!(ids(&[]), [1, 2, 3, 4, 5]);
        assert_eq!(ids(&[9, 3]), [3, 1, 2, 4, 5]);
    }

    #[test]
    fn a_model_answer_becomes_a_complete_order() {
        let candidates: Vec<Candidate> = [10, 20, 30, 40].into_iter().map(candidate).collect();
        // Unknown ids (99, a negative, one past i32) dropped, 30 once, 10 and 40 appended.
        let order = complete_order(&[30, 99, 20, 30, -5, 1 << 40], &candidates).unwrap();
        assert_eq!(order, [30, 20, 10, 40]);
        assert!(matches!(
            complete_order(&[1, 2], &candidates),
            Err(RerankError::Garbage(_))
        ));
        assert_eq!(complete_order(&[], &[]).unwrap(), Vec::<i32>::new());
    }

    #[test]
    fn the_local_reranker_prefers_closer_and_better_known_anime() {
        let mut near = candidate(1);
        near.cosine = Some(0.85);
        let mut far = candidate(2);
        far.cosine = Some(0.80);
        far.rrf = 0.03;
        let reranker = LocalReranker::default();
        assert_eq!(reranker.order(&[far.clone(), near.clone()]), [1, 2]);
        // Popularity can outweigh a small cosine gap.
        far.cosine = Some(0.848);
        far.popularity = 1_000_000;
        assert_eq!(reranker.order(&[near, far]), [2, 1]);
    }

    #[test]
    fn the_era_and_format_a_query_names_lift_a_candidate() {
        let mut closer = candidate(1);
        closer.cosine = Some(0.85);
        let mut named = candidate(2);
        named.cosine = Some(0.82);
        let reranker = LocalReranker::default();
        assert_eq!(reranker.order(&[closer.clone(), named.clone()]), [1, 2]);
        // "una película de los 80": a movie from the 1980s beats a closer match that is neither.
        named.era_match = true;
        named.format_match = true;
        assert_eq!(reranker.order(&[closer.clone(), named.clone()]), [2, 1]);
        // Either alone is a smaller bonus than a large gap in meaning.
        named.format_match = false;
        named.cosine = Some(0.70);
        assert_eq!(reranker.order(&[closer, named]), [1, 2]);
    }
}
