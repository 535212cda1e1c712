//! `server bench embed`: the local embedder alone, the served encoder against the previous
//! candle forward pass (the baseline), measured in the same run on the same texts, with their
//! agreement. Needs no database: queries come from the evaluation set, documents are built from
//! a catalog file. Ends with one JSON line of the headline numbers.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, ensure};
use serde::Serialize;

use super::{
    bench::{Percentiles, percentiles},
    eval::EvalSet,
};
use crate::search::{
    e5::{self, Kind, candle::CandleE5},
    embedder::LOCAL_PASSAGE_TOKENS,
};
use crate::{catalog, config::Config};

#[derive(Debug, Clone, clap::Args)]
pub struct EmbedBenchArgs {
    /// AniList Media JSON lines (plain or gzip) the documents are built from.
    #[arg(
        long,
        value_name = "FILE",
        env = "ZENBU_SHARED_CATALOG",
        default_value = "../shared/catalog/media.jsonl.gz"
    )]
    pub catalog: PathBuf,
    /// Documents embedded by the served encoder per measurement.
    #[arg(long, default_value_t = 48)]
    pub documents: usize,
    /// Documents embedded by the baseline (about two seconds each per core).
    #[arg(long, default_value_t = 8)]
    pub baseline_documents: usize,
    /// Timed passes over the evaluation queries, after one warm-up pass.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Write the full report as JSON here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

/// The JSON line the run ends with.
#[derive(Debug, Serialize)]
struct Headline {
    query_p50_ms: f64,
    query_p95_ms: f64,
    docs_per_s: f64,
    baseline_query_p50_ms: f64,
    baseline_docs_per_s: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    build: &'static str,
    kernel: String,
    workers: usize,
    queries: usize,
    query: Percentiles,
    baseline_query: Percentiles,
    /// Documents per second on `workers` threads, cut at the served length.
    docs_per_s: f64,
    /// The same at 512 tokens (the model's limit).
    docs_per_s_512: f64,
    baseline_docs_per_s: f64,
    /// Smallest cosine between the served vector and the baseline's, over every text both
    /// embedded.
    min_cosine_to_baseline: f64,
    /// Mean tokens per document at the served cut and at 512.
    mean_tokens: f64,
    mean_tokens_512: f64,
}

pub async fn run(config: &Config, args: EmbedBenchArgs) -> Result<()> {
    let config = config.clone();
    tokio::task::spawn_blocking(move || run_blocking(&config, &args)).await?
}

fn run_blocking(config: &Config, args: &EmbedBenchArgs) -> Result<()> {
    let cache = config.db.embedded.cache_dir();
    let (weights, tokenizer) = e5::ensure_files(&cache)?;
    let served = Arc::new(e5::load(&cache, config.search.e5_kernel)?);
    let baseline = Arc::new(CandleE5::load(&weights, &tokenizer)?);
    let workers = config.embed_workers();
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };

    let set = EvalSet::bundled()?;
    let queries = set.queries();
    let documents = sample_documents(&args.catalog, args.documents.max(args.baseline_documents))?;
    println!(
        "{build} build; served kernel {}; {} queries x {} rounds (+1 warm-up) on one thread; \
         documents from {} on {workers} threads",
        served.kernel(),
        queries.len(),
        args.rounds,
        args.catalog.display()
    );

    let (query, baseline_query, mut agreement) =
        query_latencies(&served, &baseline, &queries, args.rounds)?;

    let served_docs = &documents[..args.documents.min(documents.len())];
    let baseline_docs = &documents[..args.baseline_documents.min(documents.len())];
    let embed_served = |cut: usize| {
        let served = served.clone();
        move |text: &str| served.embed(text, Kind::Passage, cut).map_err(Into::into)
    };
    let (docs_per_s, vectors) =
        throughput(served_docs, workers, embed_served(LOCAL_PASSAGE_TOKENS))?;
    let (docs_per_s_512, _) = throughput(served_docs, workers, embed_served(512))?;
    let baseline_embed = {
        let baseline = baseline.clone();
        move |text: &str| baseline.embed(text, Kind::Passage, LOCAL_PASSAGE_TOKENS)
    };
    let (baseline_docs_per_s, baseline_vectors) =
        throughput(baseline_docs, workers, baseline_embed)?;
    for (a, b) in vectors.iter().zip(&baseline_vectors) {
        agreement = agreement.min(cosine(a, b));
    }
    let report = Report {
        build,
        kernel: served.kernel().to_string(),
        workers,
        queries: queries.len(),
        query,
        baseline_query,
        docs_per_s,
        docs_per_s_512,
        baseline_docs_per_s,
        min_cosine_to_baseline: agreement,
        mean_tokens: mean_tokens(&served, served_docs, LOCAL_PASSAGE_TOKENS)?,
        mean_tokens_512: mean_tokens(&served, served_docs, 512)?,
    };
    print_table(&report, served_docs.len(), baseline_docs.len());
    write_outputs(&report, args.report.as_deref())
}

/// Query latency of the served encoder and of the baseline (one warm-up round, then `rounds`),
/// and the lowest cosine between their vectors of the same query.
fn query_latencies(
    served: &e5::Encoder,
    baseline: &CandleE5,
    queries: &[&str],
    rounds: usize,
) -> Result<(Percentiles, Percentiles, f64)> {
    let times = |embed: &dyn Fn(&str) -> Result<Vec<f32>>| -> Result<Vec<Duration>> {
        let mut times = Vec::new();
        for round in 0..=rounds {
            for query in queries {
                let began = Instant::now();
                embed(query)?;
                if round > 0 {
                    times.push(began.elapsed());
                }
            }
        }
        Ok(times)
    };
    let query = percentiles(&times(&|q| {
        served
            .embed(q, Kind::Query, served.max_tokens())
            .map_err(Into::into)
    })?);
    let baseline_query = percentiles(&times(&|q| baseline.embed(q, Kind::Query, 512))?);
    let mut agreement = f64::INFINITY;
    for q in queries {
        let a = served.embed(q, Kind::Query, served.max_tokens())?;
        let b = baseline.embed(q, Kind::Query, 512)?;
        agreement = agreement.min(cosine(&a, &b));
    }
    Ok((query, baseline_query, agreement))
}

/// Mean tokens per document when cut at `cut`.
fn mean_tokens(served: &e5::Encoder, documents: &[String], cut: usize) -> Result<f64> {
    let mut total = 0usize;
    for text in documents {
        total += served.tokenizer().ids(text, Kind::Passage, cut)?.len();
    }
    Ok(total as f64 / documents.len().max(1) as f64)
}

/// The JSON report (when asked for) and the one-line headline that ends the output.
fn write_outputs(report: &Report, path: Option<&std::path::Path>) -> Result<()> {
    if let Some(path) = path {
        crate::files::write_json(path, report)?;
        println!("report written to {}", path.display());
    }
    let headline = Headline {
        query_p50_ms: round2(report.query.p50_ms),
        query_p95_ms: round2(report.query.p95_ms),
        docs_per_s: round2(report.docs_per_s),
        baseline_query_p50_ms: round2(report.baseline_query.p50_ms),
        baseline_docs_per_s: round2(report.baseline_docs_per_s),
    };
    println!("{}", serde_json::to_string(&headline)?);
    Ok(())
}

fn print_table(r: &Report, served_docs: usize, baseline_docs: usize) {
    println!(
        "\n| embedder ({} build) | served: e5 crate, {} | baseline: candle f32 |",
        r.build, r.kernel
    );
    println!("|---|---|---|");
    println!(
        "| query p50 / p95 ms (1 thread, {} queries) | {:.2} / {:.2} | {:.2} / {:.2} |",
        r.queries, r.query.p50_ms, r.query.p95_ms, r.baseline_query.p50_ms, r.baseline_query.p95_ms
    );
    println!(
        "| documents/s at {LOCAL_PASSAGE_TOKENS} tokens ({} threads; {served_docs} / {baseline_docs} documents, mean {:.0} tokens) | {:.2} | {:.2} |",
        r.workers, r.mean_tokens, r.docs_per_s, r.baseline_docs_per_s
    );
    println!(
        "| documents/s at 512 tokens (mean {:.0} tokens) | {:.2} | |",
        r.mean_tokens_512, r.docs_per_s_512
    );
    println!(
        "smallest cosine between served and baseline vectors: {:.6}",
        r.min_cosine_to_baseline
    );
}

/// Every n-th anime with a description, as the document ingest would build it (without
/// franchise premises, which need the database).
fn sample_documents(catalog: &Path, count: usize) -> Result<Vec<String>> {
    let media = catalog::import::read_media_file(catalog)
        .with_context(|| format!("reading {} (set --catalog)", catalog.display()))?;
    let with_text: Vec<_> = media.iter().filter(|m| m.description.is_some()).collect();
    ensure!(
        !with_text.is_empty(),
        "{} has no described anime",
        catalog.display()
    );
    let step = (with_text.len() / count.max(1)).max(1);
    Ok(with_text
        .into_iter()
        .step_by(step)
        .take(count)
        .map(|m| catalog::document::build_document(m, None))
        .collect())
}

/// Documents per second over `workers` threads each taking the next text, and the vectors.
fn throughput(
    texts: &[String],
    workers: usize,
    embed: impl Fn(&str) -> Result<Vec<f32>> + Sync,
) -> Result<(f64, Vec<Vec<f32>>)> {
    let began = Instant::now();
    let vectors = crate::search::embedder::in_parallel(texts, workers, |text| embed(text))?;
    Ok((texts.len() as f64 / began.elapsed().as_secs_f64(), vectors))
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
