//! Evaluation: the cases in `server/data/eval_cases.json` (descriptions, pasted synopses, typos,
//! Spanish titles, sequel-specific queries, similar-to) run against whatever catalog the
//! database holds, scoring each retrieval method from the same run side by side:
//!
//! - `lexical`: the lexical branch alone;
//! - `vector`: the vector branch alone;
//! - `rrf`: both fused by reciprocal rank fusion;
//! - `seed-001`: the seed system's method, the lexical top 50 re-scored 50/50 by lexical score
//!   (divided by the best) and cosine similarity;
//! - `rrf+local`: the rerank stage's candidates ([`crate::search::rerank::candidate_pool`]) reordered by
//!   the local reranker, always;
//! - `served`: the page search serves, read off [`SearchEngine::search_traced`] (the same call
//!   a visitor's search makes, its caches aside): without a key `rrf+local` within the rerank
//!   budget (the local reranker never skips; the LLM reranker skips when the fused top result
//!   leads by [`CONFIDENT_MARGIN`], and the report counts the cases that skip would keep and
//!   whether their fused #1 was right), with the parts of the leading works placed after the
//!   first ten ([`crate::search::parts`]). Every other method is derived from the same trace;
//! - `rrf+llm`: with `--llm-rerank`, the LLM reranker at the configured endpoint
//!   (`scripts/eval-llm-fake` points it at `fakes openai`: that measures the plumbing, not a
//!   model);
//! - `ceiling`: not a method but a bound: every expected anime either branch returned, first
//!   ([`ceiling`]). No reranker of the two branches' lists scores above it, so recall it lacks
//!   can only come from retrieval.
//!
//! Metrics per method: hit@5 (an expected anime in the top 5), MRR (1 / rank of the first
//! expected anime, 0 when absent) and recall@20 and @25 (share of the expected anime in the top
//! 20 or 25). More case files (`--cases`, JSONL or this JSON shape) are scored apart, one report
//! each.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::search::{
    BRANCH_LIMIT, CONFIDENT_MARGIN, SearchEngine, fused_margin,
    lexical::LexicalHit,
    parts,
    rerank::{self, Candidate, LocalReranker, Reranker},
    vector,
};
use app::search::Filters;

/// The evaluation set kept in the repository.
pub const CASES: &str = include_str!("../../data/eval_cases.json");

/// Results of each case the report lists: the depth recall@20 looks at.
const REPORTED_TOP: usize = 20;

pub const METHODS: [&str; 9] = [
    "lexical",
    "vector",
    "second",
    "rrf",
    "seed-001",
    "rrf+local",
    "served",
    "rrf+llm",
    "ceiling",
];

#[derive(Debug, Clone, Deserialize)]
pub struct EvalSet {
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    pub id: String,
    pub kind: String,
    pub lang: String,
    #[serde(default)]
    pub query: Option<String>,
    /// For `similar` cases: the anime whose neighbours are scored.
    #[serde(default)]
    pub source: Option<i32>,
    pub expected: Vec<i32>,
}

impl EvalSet {
    pub fn bundled() -> Result<Self> {
        Self::parse(CASES).context("reading the bundled evaluation set")
    }

    /// A case file: the bundled JSON shape (`{"cases": [...]}`) or JSON lines, one case each.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("reading the cases in {}", path.display()))
    }

    fn parse(text: &str) -> Result<Self> {
        // One JSON document with a `cases` array, or else one case per line.
        let set = if let Ok(set) = serde_json::from_str::<EvalSet>(text) {
            set
        } else {
            let cases = text
                .lines()
                .enumerate()
                .filter(|(_, line)| !line.trim().is_empty())
                .map(|(i, line)| {
                    serde_json::from_str(line).with_context(|| format!("line {}", i + 1))
                })
                .collect::<Result<Vec<Case>>>()?;
            EvalSet { cases }
        };
        set.check()?;
        Ok(set)
    }

    /// Every case asks something (a query or a source) and names an answer, and ids are unique.
    fn check(&self) -> Result<()> {
        let mut ids = std::collections::BTreeSet::new();
        for case in &self.cases {
            anyhow::ensure!(ids.insert(&case.id), "case id {:?} appears twice", case.id);
            anyhow::ensure!(
                case.query.is_some() != case.source.is_some(),
                "case {} needs exactly one of query and source",
                case.id
            );
            anyhow::ensure!(
                !case.expected.is_empty(),
                "case {} expects nothing",
                case.id
            );
        }
        anyhow::ensure!(!self.cases.is_empty(), "no cases");
        Ok(())
    }

    /// The text cases' queries, in order.
    pub fn queries(&self) -> Vec<&str> {
        self.cases
            .iter()
            .filter_map(|c| c.query.as_deref())
            .collect()
    }

    /// Every anime id the set refers to (expected answers and similar-to sources).
    pub fn ids(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .cases
            .iter()
            .flat_map(|c| c.expected.iter().copied().chain(c.source))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// Averages over a group of cases.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Metrics {
    pub cases: usize,
    pub hit_at_5: f64,
    pub mrr: f64,
    #[serde(default)]
    pub recall_at_20: f64,
    pub recall_at_25: f64,
}

/// One method's sums: every case, the Spanish ones, the English ones, and per kind of case.
type MethodSums = (Sums, Sums, Sums, BTreeMap<String, Sums>);

#[derive(Debug, Clone, Default)]
struct Sums {
    cases: usize,
    hits: f64,
    reciprocal: f64,
    recall_20: f64,
    recall: f64,
}

impl Sums {
    fn add(&mut self, ranking: &[i32], expected: &[i32]) {
        self.cases += 1;
        let first = ranking.iter().position(|id| expected.contains(id));
        if first.is_some_and(|rank| rank < 5) {
            self.hits += 1.0;
        }
        self.reciprocal += first.map_or(0.0, |rank| 1.0 / (rank + 1) as f64);
        let found = |depth: usize| {
            let found = expected
                .iter()
                .filter(|id| ranking.iter().take(depth).any(|r| r == *id))
                .count();
            found as f64 / expected.len().max(1) as f64
        };
        self.recall_20 += found(20);
        self.recall += found(25);
    }

    fn metrics(&self) -> Metrics {
        let n = self.cases.max(1) as f64;
        Metrics {
            cases: self.cases,
            hit_at_5: self.hits / n,
            mrr: self.reciprocal / n,
            recall_at_20: self.recall_20 / n,
            recall_at_25: self.recall / n,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MethodReport {
    pub method: String,
    pub all: Metrics,
    pub spanish: Metrics,
    pub english: Metrics,
    pub by_kind: BTreeMap<String, Metrics>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    pub id: String,
    /// 1-based rank of the first expected anime per method; absent when not found.
    pub first_rank: BTreeMap<String, Option<usize>>,
    /// The served (or similar-to) top [`REPORTED_TOP`], to see what stood in front of a miss
    /// and which of the expected entries the page left out.
    #[serde(default)]
    pub top: Vec<i32>,
    /// The English reading a Spanish query was also searched by (absent for other queries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub english: Option<String>,
    /// The local reranker's evidence per rerank candidate, in fused order (`[id, features…]`,
    /// see [`LocalReranker::features`]): what a weighting would have to beat to reorder them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rerank_features: Vec<(i32, Vec<f64>)>,
}

/// Cases where the fused order was confident enough to skip the rerank.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConfidentReport {
    pub margin: f64,
    pub skipped: usize,
    /// Of the skipped cases, how many had an expected anime first in the fused order…
    pub fused_top_right: usize,
    /// …and how many would have had one first after reranking.
    pub reranked_top_right: usize,
    /// LLM rerank: failed calls and total time spent.
    pub llm_failures: usize,
    pub llm_seconds: f64,
    /// Per text case: the fused margin, and whether the fused and the reranked #1 were right
    /// (the data the margin was chosen from).
    pub per_case: Vec<(f64, bool, bool)>,
}

impl ConfidentReport {
    /// (threshold, cases skipped, fused #1 right among them, reranked #1 right among them).
    pub fn sweep(&self) -> Vec<(f64, usize, usize, usize)> {
        [0.1, 0.2, 0.3, 0.4, 0.5]
            .into_iter()
            .map(|threshold| {
                let skipped: Vec<_> = self
                    .per_case
                    .iter()
                    .filter(|(margin, _, _)| *margin >= threshold)
                    .collect();
                (
                    threshold,
                    skipped.len(),
                    skipped.iter().filter(|c| c.1).count(),
                    skipped.iter().filter(|c| c.2).count(),
                )
            })
            .collect()
    }
}

/// One text case as the reranker fit reads it: its candidates and the ids it expects.
pub type FitCase = (Vec<Candidate>, Vec<i32>);

/// The local reranker fitted on the text cases of every set at once, and what the fit is worth
/// on cases it did not see: each case is scored with weights fitted on the folds without it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FitReport {
    /// Each feature's fitted weight ([`rerank::FEATURES`]).
    pub weights: Vec<(String, f64)>,
    /// MRR on all cases with the weights fitted on all of them (optimistic).
    pub fitted_mrr: f64,
    /// Per set: (name, cases, cross-validated hit@5, cross-validated MRR, same with the shipped
    /// weights).
    pub sets: Vec<(String, usize, f64, f64, f64, f64)>,
}

/// Fits the local reranker on every set's cases together, with `folds`-fold cross-validation
/// (case i is in fold i mod `folds`, counted over the pooled cases).
pub fn fit_pooled(sets: &[(String, &[FitCase])], folds: usize) -> FitReport {
    let pooled: Vec<(usize, &FitCase)> = sets
        .iter()
        .enumerate()
        .flat_map(|(s, (_, cases))| cases.iter().map(move |c| (s, c)))
        .collect();
    let all: Vec<FitCase> = pooled.iter().map(|(_, c)| (*c).clone()).collect();
    let (weights, fitted_mrr) = rerank::fit(&all);
    let weights = rerank::named(rerank::FEATURES, &weights);
    // Out-of-fold rank of each case's first expected anime, and its rank with today's weights.
    let mut ranks: Vec<(Option<usize>, Option<usize>)> = vec![(None, None); pooled.len()];
    let current = LocalReranker::default();
    for fold in 0..folds {
        let train: Vec<FitCase> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| i % folds != fold)
            .map(|(_, c)| c.clone())
            .collect();
        let reranker = LocalReranker::weighted(rerank::FEATURES, rerank::fit(&train).0);
        for (i, (candidates, expected)) in all.iter().enumerate() {
            if i % folds == fold {
                ranks[i] = (
                    rank_of_first(&reranker.order(candidates), expected),
                    rank_of_first(&current.order(candidates), expected),
                );
            }
        }
    }
    let sets = sets
        .iter()
        .enumerate()
        .map(|(s, (name, _))| {
            let mine: Vec<&(Option<usize>, Option<usize>)> = pooled
                .iter()
                .zip(&ranks)
                .filter(|((set, _), _)| *set == s)
                .map(|(_, r)| r)
                .collect();
            let n = mine.len().max(1) as f64;
            let hit = |r: &Option<usize>| f64::from(u8::from(r.is_some_and(|r| r <= 5)));
            let rr = |r: &Option<usize>| r.map_or(0.0, |r| 1.0 / r as f64);
            (
                name.clone(),
                mine.len(),
                mine.iter().map(|r| hit(&r.0)).sum::<f64>() / n,
                mine.iter().map(|r| rr(&r.0)).sum::<f64>() / n,
                mine.iter().map(|r| hit(&r.1)).sum::<f64>() / n,
                mine.iter().map(|r| rr(&r.1)).sum::<f64>() / n,
            )
        })
        .collect();
    FitReport {
        weights,
        fitted_mrr,
        sets,
    }
}

impl std::fmt::Display for FitReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "local reranker fitted on every set's text cases: {:?}\n  MRR on the cases it was fitted on: {:.3} (optimistic)",
            self.weights, self.fitted_mrr
        )?;
        writeln!(
            f,
            "| set | cases | cross-validated hit@5 | cross-validated MRR | shipped weights hit@5 | shipped MRR |\n|---|---|---|---|---|---|"
        )?;
        for (name, n, hit, mrr, shipped_hit, shipped_mrr) in &self.sets {
            writeln!(
                f,
                "| {name} | {n} | {hit:.3} | {mrr:.3} | {shipped_hit:.3} | {shipped_mrr:.3} |"
            )?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub embedding_model: String,
    pub catalog_size: i64,
    pub text_cases: usize,
    /// Cases skipped because an expected anime is not in the catalog.
    pub skipped: Vec<String>,
    pub methods: Vec<MethodReport>,
    /// Similar-to cases (franchise excluded), scored like the text cases.
    pub similar: Metrics,
    /// Each text case's rerank candidates and expected ids, for `--fit` (which pools the sets).
    #[serde(skip)]
    pub fit_cases: Vec<FitCase>,
    pub confident: ConfidentReport,
    pub cases: Vec<CaseResult>,
}

impl Report {
    pub fn method(&self, name: &str) -> Option<&MethodReport> {
        self.methods.iter().find(|m| m.method == name)
    }
}

/// Runs every case; cases whose expected anime are all missing from the catalog are skipped
/// and listed (so a partial catalog is visible in the report, not silently easier).
pub async fn run(
    engine: &SearchEngine,
    set: &EvalSet,
    llm: Option<&dyn Reranker>,
) -> Result<Report> {
    let mut confident = ConfidentReport::default();
    let mut fit_cases: Vec<FitCase> = Vec::new();
    // The pool the pipeline reads (the replica when one is configured), as the trace does.
    let pool = &engine.db().reads;
    let catalog_size: i64 = sqlx::query_scalar("SELECT count(*) FROM anime")
        .fetch_one(pool)
        .await?;
    let present: Vec<i32> = sqlx::query_scalar("SELECT id FROM anime WHERE id = ANY($1)")
        .bind(set.ids())
        .fetch_all(pool)
        .await?;
    let model = engine.embedder().model().to_string();
    let mut sums: BTreeMap<&str, MethodSums> = BTreeMap::new();
    let mut similar = Sums::default();
    let mut skipped = Vec::new();
    let mut cases = Vec::new();
    let mut text_cases = 0;
    for case in &set.cases {
        let expected: Vec<i32> = case
            .expected
            .iter()
            .copied()
            .filter(|id| present.contains(id))
            .collect();
        if expected.is_empty() || case.source.is_some_and(|s| !present.contains(&s)) {
            skipped.push(case.id.clone());
            continue;
        }
        if let Some(source) = case.source {
            let ranking: Vec<i32> = vector::similar(pool, &model, source, true, 25)
                .await?
                .into_iter()
                .map(|hit| hit.anime_id)
                .collect();
            similar.add(&ranking, &expected);
            cases.push(CaseResult {
                id: case.id.clone(),
                first_rank: BTreeMap::from([(
                    "similar".to_string(),
                    rank_of_first(&ranking, &expected),
                )]),
                top: ranking.iter().take(REPORTED_TOP).copied().collect(),
                english: None,
                rerank_features: Vec::new(),
            });
            continue;
        }
        let query = case
            .query
            .as_deref()
            .with_context(|| format!("case {} has neither query nor source", case.id))?;
        text_cases += 1;
        let (rankings, candidates) =
            rank_text_case(engine, &model, query, &expected, llm, &mut confident).await?;
        let rerank_features = candidates
            .iter()
            .map(|c| c.anime_id)
            .zip(LocalReranker::features(&candidates))
            .collect();
        fit_cases.push((candidates, expected.clone()));
        cases.push(CaseResult {
            id: case.id.clone(),
            first_rank: tally(&mut sums, case, &rankings, &expected),
            top: rankings.served.iter().take(REPORTED_TOP).copied().collect(),
            english: rankings.english.clone(),
            rerank_features,
        });
    }
    let methods = method_reports(&sums);
    confident.margin = CONFIDENT_MARGIN;
    Ok(Report {
        fit_cases,
        confident,
        embedding_model: model,
        catalog_size,
        text_cases,
        skipped,
        methods,
        similar: similar.metrics(),
        cases,
    })
}

/// Adds one text case's rankings to each method's sums (overall, by language, by kind) and
/// returns the rank of its first expected anime per method.
fn tally(
    sums: &mut BTreeMap<&'static str, MethodSums>,
    case: &Case,
    rankings: &CaseRankings,
    expected: &[i32],
) -> BTreeMap<String, Option<usize>> {
    let mut first_rank = BTreeMap::new();
    for (method, ranking) in METHODS
        .iter()
        .zip(rankings.by_method())
        .filter_map(|(m, r)| Some((*m, r?)))
    {
        let entry = sums.entry(method).or_default();
        entry.0.add(ranking, expected);
        if case.lang == "es" {
            entry.1.add(ranking, expected);
        } else {
            entry.2.add(ranking, expected);
        }
        entry
            .3
            .entry(case.kind.clone())
            .or_default()
            .add(ranking, expected);
        first_rank.insert(method.to_string(), rank_of_first(ranking, expected));
    }
    first_rank
}

/// What each method ranked for one text case, in [`METHODS`] order.
struct CaseRankings {
    lexical: Vec<i32>,
    vector: Vec<i32>,
    /// The second view's list, when the engine has one.
    second: Option<Vec<i32>>,
    fused: Vec<i32>,
    seed: Vec<i32>,
    reranked: Vec<i32>,
    served: Vec<i32>,
    /// With `--llm-rerank` only.
    llm: Option<Vec<i32>>,
    ceiling: Vec<i32>,
    /// The query's English reading, when it was read as Spanish.
    english: Option<String>,
}

impl CaseRankings {
    fn by_method(&self) -> [Option<&Vec<i32>>; 9] {
        [
            Some(&self.lexical),
            Some(&self.vector),
            self.second.as_ref(),
            Some(&self.fused),
            Some(&self.seed),
            Some(&self.reranked),
            Some(&self.served),
            self.llm.as_ref(),
            Some(&self.ceiling),
        ]
    }
}

/// What a perfect reranker of the branches' lists would serve: the expected anime any branch
/// (the second view's too, when it runs) returned, first, then the rest of the fused order. Its scores bound every reranking of
/// today's retrieval (measured in session 12: with the dev set's answers, both branches' top 50
/// hold 0.928 of them; their top 100 would hold 0.955).
fn ceiling(lists: &[&[i32]], fused: &[i32], expected: &[i32]) -> Vec<i32> {
    let retrieved = |id: &i32| lists.iter().any(|list| list.contains(id));
    let found = expected.iter().copied().filter(retrieved);
    let rest = fused.iter().copied().filter(|id| !expected.contains(id));
    found.chain(rest).collect()
}

/// Runs one text case through the served path ([`SearchEngine::search_traced`]) and derives
/// every method from its trace (and records what the confident skip would keep); also returns
/// the rerank candidates, for `--fit`.
async fn rank_text_case(
    engine: &SearchEngine,
    model: &str,
    query: &str,
    expected: &[i32],
    llm: Option<&dyn Reranker>,
    confident: &mut ConfidentReport,
) -> Result<(CaseRankings, Vec<Candidate>)> {
    let reranker = LocalReranker::default();
    let trace = engine
        .search_traced(query, &Filters::default())
        .await?
        .trace;
    let retrieval = &trace.retrieval;
    let lexical: Vec<i32> = retrieval.lexical.iter().map(|hit| hit.anime_id).collect();
    let vector_ids: Vec<i32> = retrieval.vector.iter().map(|hit| hit.anime_id).collect();
    let second: Vec<i32> = retrieval.second.iter().map(|hit| hit.anime_id).collect();
    let fused: Vec<i32> = retrieval.fused.iter().map(|f| f.anime_id).collect();
    let seed = match &retrieval.query_vector {
        Some(v) => seed_001(engine, model, v, &retrieval.lexical).await?,
        None => lexical.clone(),
    };
    let complete = |order: Vec<i32>| -> Vec<i32> {
        rerank::served_order(&order, &retrieval.fused)
            .iter()
            .map(|f| f.anime_id)
            .collect()
    };
    // The local reranker's order always (`rrf+local`), whatever the served reranker did.
    let reranked = complete(reranker.order(&trace.candidates.pool));
    let margin = fused_margin(&retrieval.fused);
    let fused_right = fused.first().is_some_and(|id| expected.contains(id));
    let reranked_right = reranked.first().is_some_and(|id| expected.contains(id));
    confident
        .per_case
        .push((margin, fused_right, reranked_right));
    // The served local reranker always reorders (see `Reranker::skips_when_confident`); the
    // report still shows what the skip would keep, as it applies to the LLM reranker.
    if margin >= CONFIDENT_MARGIN {
        confident.skipped += 1;
        confident.fused_top_right += usize::from(fused_right);
        confident.reranked_top_right += usize::from(reranked_right);
    }
    let llm = match llm {
        Some(llm) => {
            let began = std::time::Instant::now();
            let order = match llm.rerank(query, &trace.candidates.pool).await {
                Ok(order) => order,
                Err(error) => {
                    tracing::warn!(%error, "LLM rerank failed: fused order");
                    confident.llm_failures += 1;
                    Vec::new()
                }
            };
            confident.llm_seconds += began.elapsed().as_secs_f64();
            let (served, _) =
                parts::placed(&engine.db().reads, &complete(order), &Filters::default()).await?;
            Some(served)
        }
        None => None,
    };
    let rankings = CaseRankings {
        ceiling: ceiling(&[&lexical, &vector_ids, &second], &fused, expected),
        second: engine.has_second_view().then_some(second),
        lexical,
        vector: vector_ids,
        fused,
        seed,
        reranked,
        // The page's own order, parts placed, before it is cut.
        served: trace.served.clone(),
        llm,
        english: retrieval.translation.clone(),
    };
    Ok((rankings, trace.candidates.pool))
}

/// Each method's metrics over all cases, per language and per kind.
fn method_reports(sums: &BTreeMap<&str, MethodSums>) -> Vec<MethodReport> {
    METHODS
        .iter()
        .filter_map(|method| {
            let (all, es, en, kinds) = sums.get(method)?;
            Some(MethodReport {
                method: method.to_string(),
                all: all.metrics(),
                spanish: es.metrics(),
                english: en.metrics(),
                by_kind: kinds
                    .iter()
                    .map(|(k, s)| (k.clone(), s.metrics()))
                    .collect(),
            })
        })
        .collect()
}

/// Minimum scores per method (`similar` for the similar-to cases), as in
/// `server/data/eval_floors_ci.json`.
pub type Floors = BTreeMap<String, Metrics>;

/// The floors in the JSON file at `path`.
pub fn read_floors(path: &std::path::Path) -> Result<Floors> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Every score of `report` below its floor, described (empty: all met). recall@20 is checked
/// only where a floor sets it.
pub fn below_floors(report: &Report, floors: &Floors) -> Vec<String> {
    let mut failures = Vec::new();
    for (method, floor) in floors {
        let got = if method == "similar" {
            Some(report.similar)
        } else {
            report.method(method).map(|m| m.all)
        };
        let Some(got) = got else {
            failures.push(format!("{method}: not measured"));
            continue;
        };
        for (name, value, min) in [
            ("hit@5", got.hit_at_5, floor.hit_at_5),
            ("MRR", got.mrr, floor.mrr),
            ("recall@20", got.recall_at_20, floor.recall_at_20),
            ("recall@25", got.recall_at_25, floor.recall_at_25),
        ] {
            if value + 1e-9 < min {
                failures.push(format!("{method} {name} {value:.3} < floor {min:.3}"));
            }
        }
    }
    failures
}

/// 1-based rank of the first expected anime in `ranking`.
fn rank_of_first(ranking: &[i32], expected: &[i32]) -> Option<usize> {
    ranking
        .iter()
        .position(|id| expected.contains(id))
        .map(|r| r + 1)
}

/// The seed system's ranking: lexical top 50, each scored 0.5 × (lexical score / best lexical
/// score) + 0.5 × cosine similarity to the query.
async fn seed_001(
    engine: &SearchEngine,
    model: &str,
    query_vector: &[f32],
    lexical: &[LexicalHit],
) -> Result<Vec<i32>> {
    let ids: Vec<i32> = lexical.iter().map(|hit| hit.anime_id).collect();
    let distances: BTreeMap<i32, f64> =
        vector::distances(&engine.db().reads, model, query_vector, &ids)
            .await?
            .into_iter()
            .collect();
    let best = lexical
        .iter()
        .map(|hit| hit.score as f64)
        .fold(0.0, f64::max)
        .max(f64::EPSILON);
    let mut scored: Vec<(i32, f64)> = lexical
        .iter()
        .map(|hit| {
            let cosine = distances.get(&hit.anime_id).map_or(0.0, |d| 1.0 - d);
            (hit.anime_id, 0.5 * hit.score as f64 / best + 0.5 * cosine)
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(scored.into_iter().map(|(id, _)| id).collect())
}

/// The table `server eval` prints.
impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "catalog {} anime, model {}, {} text cases, {} similar-to cases{}",
            self.catalog_size,
            self.embedding_model,
            self.text_cases,
            self.similar.cases,
            if self.skipped.is_empty() {
                String::new()
            } else {
                format!(", skipped {}", self.skipped.len())
            }
        )?;
        writeln!(
            f,
            "| method | hit@5 | MRR | recall@20 | recall@25 | Spanish hit@5 | Spanish MRR | English hit@5 |"
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|---|")?;
        for m in &self.methods {
            writeln!(
                f,
                "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                m.method,
                m.all.hit_at_5,
                m.all.mrr,
                m.all.recall_at_20,
                m.all.recall_at_25,
                m.spanish.hit_at_5,
                m.spanish.mrr,
                m.english.hit_at_5
            )?;
        }
        writeln!(
            f,
            "| similar-to (franchise excluded) | {:.2} | {:.2} | {:.2} | {:.2} | | | |",
            self.similar.hit_at_5,
            self.similar.mrr,
            self.similar.recall_at_20,
            self.similar.recall_at_25
        )?;
        writeln!(
            f,
            "(ceiling: every expected anime any branch returned, first; what a perfect reranker of the branches' top {BRANCH_LIMIT} would score, a bound and not a method)"
        )?;
        let c = &self.confident;
        writeln!(
            f,
            "\nconfident skip (LLM reranker only) when the fused top leads by >= {:.0}%: {} of {} text cases; fused #1 right in {}, locally reranked #1 in {}",
            c.margin * 100.0,
            c.skipped,
            self.text_cases,
            c.fused_top_right,
            c.reranked_top_right
        )?;
        for (threshold, skipped, fused_right, reranked_right) in c.sweep() {
            writeln!(
                f,
                "  margin >= {:.0}%: {skipped} skipped, fused #1 right in {fused_right}, reranked #1 in {reranked_right}",
                threshold * 100.0
            )?;
        }
        if self.method("rrf+llm").is_some() {
            writeln!(
                f,
                "LLM rerank: {} failed calls, {:.1} s in total",
                c.llm_failures, c.llm_seconds
            )?;
        }
        if let Some(rrf) = self.method("rrf") {
            writeln!(f, "\nrrf by kind:")?;
            for (kind, m) in &rrf.by_kind {
                writeln!(
                    f,
                    "  {kind:<14} n={:<3} hit@5 {:.2}  MRR {:.2}  recall@25 {:.2}",
                    m.cases, m.hit_at_5, m.mrr, m.recall_at_25
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_puts_every_retrieved_answer_first_and_nothing_else() {
        // 7 is the lexical branch's last, 9 the vector branch's; 5 is expected but retrieved by
        // neither, so no reranking can serve it.
        let fused = [1, 2, 3, 7, 9];
        let order = ceiling(&[&[1, 3, 7], &[2, 9]], &fused, &[9, 5, 7]);
        assert_eq!(order, vec![9, 7, 1, 2, 3]);
        let mut sums = Sums::default();
        sums.add(&order, &[9, 5, 7]);
        let m = sums.metrics();
        assert_eq!((m.hit_at_5, m.mrr), (1.0, 1.0));
        assert!((m.recall_at_20 - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn metrics_count_ranks_from_one() {
        let mut sums = Sums::default();
        sums.add(&[9, 8, 7], &[8]); // rank 2
        sums.add(&[1, 2, 3, 4, 5, 6], &[6]); // rank 6: no hit@5
        sums.add(&[1], &[2, 3]); // absent
        let m = sums.metrics();
        assert_eq!(m.cases, 3);
        assert!((m.hit_at_5 - 1.0 / 3.0).abs() < 1e-12);
        assert!((m.mrr - (0.5 + 1.0 / 6.0) / 3.0).abs() < 1e-12);
        assert!((m.recall_at_25 - 2.0 / 3.0).abs() < 1e-12);
        let mut deep = Sums::default();
        let ranking: Vec<i32> = (1..=30).collect();
        deep.add(&ranking, &[3, 22]); // one in the top 20, both in the top 25
        assert_eq!(deep.metrics().recall_at_20, 0.5);
        assert_eq!(deep.metrics().recall_at_25, 1.0);
    }

    #[test]
    fn case_files_are_read_as_json_lines_or_the_bundled_shape() {
        let lines = r#"{"id": "a", "kind": "description", "lang": "es", "query": "robots", "expected": [1]}

{"id": "b", "kind": "similar", "lang": "-", "source": 5, "expected": [2, 3]}
"#;
        let set = EvalSet::parse(lines).unwrap();
        assert_eq!(set.cases.len(), 2);
        assert_eq!(set.cases[1].source, Some(5));
        let bundled = EvalSet::parse(
            r#"{"cases": [{"id": "a", "kind": "k", "lang": "en", "query": "q", "expected": [1]}]}"#,
        )
        .unwrap();
        assert_eq!(bundled.cases[0].query.as_deref(), Some("q"));

        let error = EvalSet::parse("{\"id\": \"a\", \"kind\": \"k\", \"lang\": \"en\", \"query\": \"q\", \"expected\": []}").unwrap_err();
        assert!(
            format!("{error:#}").contains("expects nothing"),
            "{error:#}"
        );
        let twice = format!(
            "{0}\n{0}",
            r#"{"id": "a", "kind": "k", "lang": "en", "query": "q", "expected": [1]}"#
        );
        assert!(format!("{:#}", EvalSet::parse(&twice).unwrap_err()).contains("twice"));
        let broken = format!(
            "{}\n{{\"id\": ",
            r#"{"id": "a", "kind": "k", "lang": "en", "query": "q", "expected": [1]}"#
        );
        assert!(format!("{:#}", EvalSet::parse(&broken).unwrap_err()).contains("line 2"));
    }

    #[test]
    fn floors_name_every_score_below_them() {
        let metrics = |hit: f64| Metrics {
            cases: 10,
            hit_at_5: hit,
            mrr: 0.5,
            recall_at_20: 0.9,
            recall_at_25: 0.9,
        };
        let report = Report {
            embedding_model: "m".into(),
            catalog_size: 1,
            text_cases: 10,
            skipped: vec![],
            methods: vec![MethodReport {
                method: "served".into(),
                all: metrics(0.8),
                spanish: metrics(0.8),
                english: metrics(0.8),
                by_kind: BTreeMap::new(),
            }],
            similar: metrics(0.4),
            fit_cases: vec![],
            confident: ConfidentReport::default(),
            cases: vec![],
        };
        let floors: Floors = [
            ("served".to_string(), metrics(0.8)),
            ("similar".to_string(), metrics(0.5)),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            below_floors(&report, &floors),
            vec!["similar hit@5 0.400 < floor 0.500"]
        );
        let missing: Floors = [("rrf".to_string(), metrics(0.1))].into_iter().collect();
        assert_eq!(below_floors(&report, &missing), vec!["rrf: not measured"]);
    }

    #[test]
    fn the_bundled_set_is_large_and_half_spanish() {
        let set = EvalSet::bundled().unwrap();
        let text: Vec<&Case> = set.cases.iter().filter(|c| c.query.is_some()).collect();
        assert!(text.len() >= 40, "{} text cases", text.len());
        let spanish = text.iter().filter(|c| c.lang == "es").count();
        assert!(
            spanish * 2 >= text.len(),
            "{spanish} of {} Spanish",
            text.len()
        );
        assert!(set.cases.iter().any(|c| c.source.is_some()));
        assert!(set.cases.iter().all(|c| !c.expected.is_empty()));
    }
}
