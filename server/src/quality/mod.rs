//! How well and how fast search works, measured on real data: `server eval` (hit@5, MRR and
//! recall per method on evaluation case sets, floors for CI, the reranker fit) and `server bench`
//! (latency per stage, similar-to, ingest, the embedder against its baseline). Behind the CLI
//! only: nothing here serves a request.

pub mod bench;
#[cfg(feature = "baselines")]
pub mod bench_embed;
pub mod eval;
