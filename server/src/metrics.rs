//! Prometheus metrics, served at `/metrics`: per-stage search latency histograms, results-cache
//! hits and misses, fallbacks, and quota refusals. The `metrics` crate's macros record into a
//! process-wide recorder installed on first use of [`handle`]; before that (command-line tools)
//! they cost nothing.

use std::{sync::OnceLock, time::Duration};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Latency buckets (seconds): a cache hit is ~1 ms, an uncached page ~100 ms, budgets are 2–4 s.
const BUCKETS: [f64; 13] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// The recorder's handle (installing the recorder the first time).
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &BUCKETS)
            .expect("buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        // Fails only if another recorder was installed first; this one then stays empty.
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed");
        }
        handle
    })
}

/// One search that ran the pipeline: the time of each stage, by the stage's metric label.
pub fn search_ran(stages: &[(&'static str, Duration)], semantic: bool, rerank_fell_back: bool) {
    for &(stage, took) in stages {
        metrics::histogram!("zenbu_search_stage_seconds", "stage" => stage)
            .record(took.as_secs_f64());
    }
    metrics::counter!("zenbu_search_cache_total", "result" => "miss").increment(1);
    if !semantic {
        metrics::counter!("zenbu_search_fallbacks_total", "kind" => "lexical_only").increment(1);
    }
    if rerank_fell_back {
        metrics::counter!("zenbu_search_fallbacks_total", "kind" => "fused_order").increment(1);
    }
}

/// One search answered from the results cache.
pub fn search_cache_hit(took: Duration) {
    metrics::counter!("zenbu_search_cache_total", "result" => "hit").increment(1);
    metrics::histogram!("zenbu_search_stage_seconds", "stage" => "cache_hit")
        .record(took.as_secs_f64());
}

/// A search refused for its allowance (`exhausted`) or its network's cap (`network_cap`).
pub fn quota_refused(reason: &'static str) {
    metrics::counter!("zenbu_quota_refusals_total", "reason" => reason).increment(1);
}

/// A query searched as typed because its translation failed: `busy` (no pipeline free within
/// the budget), `timeout` or `error`.
pub fn translation_failed(reason: &'static str) {
    metrics::counter!("zenbu_translation_failures_total", "reason" => reason).increment(1);
}

/// A request turned away before or while it ran: `network_rate` (429), `overloaded` (503 at
/// the concurrency cap) or `timeout` (503 past the time limit).
pub fn request_refused(reason: &'static str) {
    metrics::counter!("zenbu_requests_refused_total", "reason" => reason).increment(1);
}

/// A metered search given up at its deadline (its unit refunded).
pub fn search_deadline_passed() {
    metrics::counter!("zenbu_search_deadline_passed_total").increment(1);
}

/// A search that joined an identical one of the same payer already running (one run, one unit).
pub fn search_joined() {
    metrics::counter!("zenbu_search_joined_total").increment(1);
}
