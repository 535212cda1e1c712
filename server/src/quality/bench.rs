//! `server bench`: latency per search stage over the evaluation queries, "similar to" through
//! the HNSW index next to an exact scan of the same query, document embedding throughput, and a
//! no-change re-ingest. The embedder against its previous (candle) forward pass is `server bench
//! embed` ([`super::bench_embed`]), in a build with the `baselines` feature: candle is not part of
//! the product. Each baseline is measured in the same run on the same data, so the numbers
//! compare like with like.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use app::search::Filters;
use serde::Serialize;
use sqlx::PgPool;

use super::eval::EvalSet;
use crate::search::{
    SearchEngine, StageTimes,
    e5::{self, Kind},
    embedder, vector,
};
use crate::{catalog, config::Config};

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[cfg(feature = "baselines")]
    #[command(subcommand)]
    pub only: Option<BenchOnly>,
    /// Timed passes over the evaluation queries (after one warm-up pass).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Documents embedded for the throughput measurement (0: skip it).
    #[arg(long, default_value_t = 24)]
    pub embed_sample: usize,
    /// Re-ingest this catalog file (already loaded) and time the no-change path.
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Write the numbers as JSON here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

#[cfg(feature = "baselines")]
#[derive(Debug, clap::Subcommand)]
pub enum BenchOnly {
    /// Only the local embedder, against its previous implementation (under a minute, no
    /// database); ends with one JSON line of the headline numbers.
    Embed(super::bench_embed::EmbedBenchArgs),
}

/// p50 and p95 of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Percentiles {
    pub samples: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

pub fn percentiles(samples: &[Duration]) -> Percentiles {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| {
        if ms.is_empty() {
            return f64::NAN;
        }
        let rank = ((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len());
        ms[rank - 1]
    };
    Percentiles {
        samples: ms.len(),
        p50_ms: at(0.50),
        p95_ms: at(0.95),
    }
}

#[derive(Debug, Serialize)]
struct Report {
    catalog_size: i64,
    model: String,
    stages: Vec<(String, Percentiles)>,
    cache_hits: Percentiles,
    similar_hnsw: Percentiles,
    similar_exact_scan: Percentiles,
    /// Share of the exact scan's candidates that the indexes returned (approximate recall).
    similar_index_recall: f64,
    embed_docs_per_second: Option<f64>,
    reingest_seconds: Option<f64>,
}

pub async fn run(config: &Config, pool: PgPool, args: BenchArgs) -> Result<()> {
    let embedder = embedder::from_config(config)?;
    let catalog_size: i64 = sqlx::query_scalar("SELECT count(*) FROM anime")
        .fetch_one(&pool)
        .await?;
    let mut engine = SearchEngine::new(pool.clone(), embedder.clone())
        .with_second_view(crate::search::second_view::from_config(config)?)
        .with_translator(crate::search::translate::Translator::from_config(
            &config.search,
        ))
        .with_thesaurus(crate::search::thesaurus::Thesaurus::from_config(
            &config.search,
        ));
    if config.search.vectors_in_memory {
        engine = engine.holding_vectors_in_memory().await?;
    }
    let (stages, cache_hits) =
        text_search(&engine, embedder.model(), catalog_size, args.rounds).await?;
    let similar = similar_to(&pool, embedder.model()).await?;
    let mut served_rate = None;
    if args.embed_sample > 0 && e5::is_local(embedder.model()) {
        served_rate = Some(document_embedding(config, &pool, args.embed_sample).await?);
    }
    let reingest = match &args.catalog {
        Some(path) => Some(
            reingest(
                &pool,
                embedder.as_ref(),
                crate::catalog::DocumentTranslator::from_config(&config.search).as_ref(),
                path,
            )
            .await?,
        ),
        None => None,
    };
    if let Some(path) = &args.report {
        let report = Report {
            catalog_size,
            model: embedder.model().to_string(),
            stages,
            cache_hits,
            similar_hnsw: similar.hnsw,
            similar_exact_scan: similar.exact,
            similar_index_recall: similar.index_recall,
            embed_docs_per_second: served_rate,
            reingest_seconds: reingest,
        };
        crate::files::write_json(path, &report)?;
        println!("report written to {}", path.display());
    }
    Ok(())
}

/// Text search stage by stage over the bundled evaluation queries with the caches off (one
/// warm-up pass, then `rounds`), and the same queries served from the results cache.
async fn text_search(
    engine: &SearchEngine,
    model: &str,
    catalog_size: i64,
    rounds: usize,
) -> Result<(Vec<(String, Percentiles)>, Percentiles)> {
    let set = EvalSet::bundled()?;
    let queries = set.queries();
    println!(
        "catalog {catalog_size} anime, model {model}, {} queries x {rounds} rounds (+1 warm-up)",
        queries.len(),
    );
    let uncached = engine.clone().without_caches();
    // With a second view or vectors in memory, the baseline is the same pages with two lists
    // and PostgreSQL's HNSW indexes (the engine before either), each query timed right after
    // its served page (so both see the same machine).
    let baseline = (engine.has_second_view() || engine.holds_vectors_in_memory()).then(|| {
        uncached
            .clone()
            .without_second_view()
            .without_vectors_in_memory()
    });
    let filters = Filters::default();
    for query in &queries {
        uncached.search_timed(query, &filters).await?;
        if let Some(baseline) = &baseline {
            baseline.search_timed(query, &filters).await?;
        }
    }
    let mut times: Vec<StageTimes> = Vec::new();
    let mut baseline_times: Vec<StageTimes> = Vec::new();
    for _ in 0..rounds {
        for query in &queries {
            times.push(uncached.search_timed(query, &filters).await?.1);
            if let Some(baseline) = &baseline {
                baseline_times.push(baseline.search_timed(query, &filters).await?.1);
            }
        }
    }
    // Through the caches: a first pass fills them, the second is served from them.
    for query in &queries {
        engine.search_timed(query, &filters).await?;
    }
    let mut cached = Vec::new();
    for query in &queries {
        let (results, times) = engine.search_timed(query, &filters).await?;
        anyhow::ensure!(results.cached, "{query:?} was not served from the cache");
        cached.push(times.total);
    }
    let cache_hits = percentiles(&cached);
    let stage = |times: &[StageTimes], pick: fn(&StageTimes) -> Duration| {
        percentiles(&times.iter().map(pick).collect::<Vec<_>>())
    };
    /// A stage's name and how to read its time.
    type Stage = (&'static str, fn(&StageTimes) -> Duration);
    let picks: [Stage; 8] = [
        ("translate (Spanish)", |t| t.translate),
        ("embed query", |t| t.embed),
        ("lexical", |t| t.lexical),
        ("vector", |t| t.vector),
        ("second view (embed + search)", |t| t.second),
        ("fuse", |t| t.fuse),
        ("rerank (local)", |t| t.rerank),
        ("total (page)", |t| t.total),
    ];
    let stages: Vec<(String, Percentiles)> = picks
        .iter()
        .map(|(name, pick)| (name.to_string(), stage(&times, *pick)))
        .collect();
    if baseline.is_some() {
        // Side by side: which stages the change moves (both columns from the same run).
        println!(
            "\n| text search stage | p50 ms | p95 ms | two lists through HNSW (baseline): p50 ms | p95 ms |\n|---|---|---|---|---|"
        );
        for (name, pick) in &picks {
            let (with, without) = (stage(&times, *pick), stage(&baseline_times, *pick));
            println!(
                "| {name} | {:.2} | {:.2} | {:.2} | {:.2} |",
                with.p50_ms, with.p95_ms, without.p50_ms, without.p95_ms
            );
        }
    } else {
        println!("\n| text search stage | p50 ms | p95 ms |\n|---|---|---|");
        for (name, p) in &stages {
            println!("| {name} | {:.2} | {:.2} |", p.p50_ms, p.p95_ms);
        }
    }
    println!(
        "| total, served from the results cache | {:.2} | {:.2} |",
        cache_hits.p50_ms, cache_hits.p95_ms
    );
    Ok((stages, cache_hits))
}

/// "Similar to" timings, and its candidates through the indexes against an exact scan.
struct SimilarBench {
    hnsw: Percentiles,
    exact: Percentiles,
    /// Share of the exact scan's candidates that the indexes returned (approximate recall).
    index_recall: f64,
}

/// "Similar to" for 100 sources spread over the catalog (after one warm-up): served, and its
/// candidate query as an exact scan (the baseline).
async fn similar_to(pool: &PgPool, model: &str) -> Result<SimilarBench> {
    let sources: Vec<i32> =
        sqlx::query_scalar("SELECT anime_id FROM embeddings WHERE model = $1 ORDER BY anime_id")
            .bind(model)
            .fetch_all(pool)
            .await?;
    anyhow::ensure!(!sources.is_empty(), "no anime has a vector for {model}");
    let step = (sources.len() / 100).max(1);
    let sources: Vec<i32> = sources.into_iter().step_by(step).take(100).collect();
    let candidates = |id, scan| async move {
        let rows = vector::similar_candidates(pool, model, id, true, scan).await?;
        anyhow::Ok(rows.into_iter().map(|r| r.anime_id).collect::<Vec<i32>>())
    };
    let (mut hnsw, mut exact) = (Vec::new(), Vec::new());
    let (mut overlap, mut expected) = (0usize, 0usize);
    for (round, &id) in std::iter::once(&sources[0])
        .chain(sources.iter())
        .enumerate()
    {
        let began = Instant::now();
        vector::similar(pool, model, id, true, crate::search::SIMILAR_COUNT).await?;
        let fast_time = began.elapsed();
        let fast = candidates(id, vector::Scan::Indexes).await?;
        let began = Instant::now();
        let slow = candidates(id, vector::Scan::Exact).await?;
        let slow_time = began.elapsed();
        if round == 0 {
            continue; // warm-up
        }
        hnsw.push(fast_time);
        exact.push(slow_time);
        expected += slow.len();
        overlap += slow.iter().filter(|s| fast.contains(s)).count();
    }
    let bench = SimilarBench {
        hnsw: percentiles(&hnsw),
        exact: percentiles(&exact),
        index_recall: overlap as f64 / expected.max(1) as f64,
    };
    println!(
        "\n| similar-to ({} sources, top {}) | p50 ms | p95 ms |\n|---|---|---|",
        hnsw.len(),
        crate::search::SIMILAR_COUNT
    );
    println!(
        "| served (HNSW candidates + scoring) | {:.2} | {:.2} |",
        bench.hnsw.p50_ms, bench.hnsw.p95_ms
    );
    println!(
        "| candidates by exact scan (baseline) | {:.2} | {:.2} |",
        bench.exact.p50_ms, bench.exact.p95_ms
    );
    println!(
        "candidate recall of the indexes against the exact scan: {:.3}",
        bench.index_recall
    );
    Ok(bench)
}

/// Documents per second the served encoder embeds, on a sample of `sample` stored documents.
async fn document_embedding(config: &Config, pool: &PgPool, sample: usize) -> Result<f64> {
    let texts: Vec<String> =
        sqlx::query_scalar("SELECT body FROM documents ORDER BY md5(anime_id::text) LIMIT $1")
            .bind(sample as i64)
            .fetch_all(pool)
            .await?;
    let workers = config.embed_workers();
    let served = e5::load(&config.db.embedded.cache_dir(), config.search.e5_kernel)?;
    let cut = embedder::LOCAL_PASSAGE_TOKENS;
    let began = Instant::now();
    tokio::task::block_in_place(|| {
        embedder::in_parallel(&texts, workers, |text| {
            served.embed(text, Kind::Passage, cut).map_err(Into::into)
        })
    })?;
    let rate = texts.len() as f64 / began.elapsed().as_secs_f64();
    println!(
        "\ndocument embedding ({} documents, {workers} workers, cut at {cut} tokens): \
         served ({} kernel) {rate:.2} docs/s (against its candle baseline: `server bench embed`, \
         built with `--features baselines`)",
        texts.len(),
        served.kernel(),
    );
    Ok(rate)
}

/// Seconds a no-change re-ingest of `path` (already loaded) takes, vectors included. With the
/// configured translator, as `server ingest` runs it: without, every document's Spanish word
/// index would be rebuilt from its English text.
async fn reingest(
    pool: &PgPool,
    embedder: &dyn embedder::Embedder,
    translator: Option<&crate::catalog::DocumentTranslator>,
    path: &std::path::Path,
) -> Result<f64> {
    let media = catalog::import::read_media_file(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let began = Instant::now();
    let report = catalog::ingest(pool, &media, false, embedder.model(), None, translator).await?;
    let vectors = crate::search::vectors::embed_missing(pool, embedder, None, false).await?;
    let seconds = began.elapsed().as_secs_f64();
    println!(
        "\nre-ingest of {} ({} anime): {seconds:.2} s; documents written {}, vectors computed {}",
        path.display(),
        media.len(),
        report.documents.documents_written,
        vectors.embedded
    );
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let samples: Vec<Duration> = (1..=20).map(Duration::from_millis).collect();
        let p = percentiles(&samples);
        assert_eq!(p.samples, 20);
        assert_eq!(p.p50_ms, 10.0);
        assert_eq!(p.p95_ms, 19.0);
        assert!(percentiles(&[]).p50_ms.is_nan());
    }
}
