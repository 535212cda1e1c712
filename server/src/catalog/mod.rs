//! The catalog: getting anime in (AniList, JSONL files, the bundled demo) and turning each into
//! the one document search indexes.

pub mod anilist;
pub mod document;
pub mod franchise;
pub mod import;
pub mod media;
pub mod pages;
pub mod passages;
pub mod popularity;
pub mod premise;
pub mod spanish;
pub mod store;
pub mod titles;

use std::time::{Duration, Instant};

use sqlx::PgPool;

pub use store::{DocumentCounts, LoadCounts};

/// What one ingest did, printed by `server ingest` and logged at startup.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IngestReport {
    pub load: LoadCounts,
    pub documents: DocumentCounts,
    pub spanish: spanish::SpanishIndexReport,
    #[serde(with = "crate::files::seconds")]
    pub elapsed: Duration,
}

/// Loads `media` into the catalog and rebuilds franchises, premises, documents and their
/// Spanish word index (translated when there is a `translator`).
pub async fn ingest(
    pool: &PgPool,
    media: &[Media],
    include_adult: bool,
    model: &str,
    premiser: Option<&LlmPremiser>,
    translator: Option<&DocumentTranslator>,
) -> Result<IngestReport, sqlx::Error> {
    let started = Instant::now();
    let load = store::upsert_media(pool, media, include_adult).await?;
    let documents = store::rebuild_documents(pool, model, premiser).await?;
    let spanish = spanish::index(pool, translator).await?;
    let synopses = spanish::synopses(pool, translator).await?;
    if synopses.translated > 0 || synopses.translator_error.is_some() {
        tracing::info!(%synopses, "synopses translated for the Spanish interface");
    }
    Ok(IngestReport {
        load,
        documents,
        spanish,
        elapsed: started.elapsed(),
    })
}

/// Loads the bundled demo catalog when the catalog is empty (a fresh install); returns what it
/// did, or `None` when there was already a catalog.
pub async fn load_demo_if_empty(
    pool: &PgPool,
    model: &str,
    premiser: Option<&LlmPremiser>,
    translator: Option<&DocumentTranslator>,
) -> Result<Option<IngestReport>, sqlx::Error> {
    let empty: bool = sqlx::query_scalar("SELECT NOT EXISTS (SELECT 1 FROM anime)")
        .fetch_one(pool)
        .await?;
    if !empty {
        return Ok(None);
    }
    Ok(Some(
        ingest(
            pool,
            &import::demo_catalog(),
            false,
            model,
            premiser,
            translator,
        )
        .await?,
    ))
}

pub use media::Media;
pub use premise::LlmPremiser;
pub use spanish::DocumentTranslator;

impl std::fmt::Display for IngestReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (l, d) = (&self.load, &self.documents);
        writeln!(f, "anime received       {:>6}", l.received)?;
        writeln!(f, "  inserted           {:>6}", l.inserted)?;
        writeln!(f, "  updated            {:>6}", l.updated)?;
        writeln!(f, "  unchanged          {:>6}", l.unchanged)?;
        writeln!(f, "  skipped (adult)    {:>6}", l.skipped_adult)?;
        writeln!(f, "catalog size         {:>6}", d.anime)?;
        writeln!(f, "franchises           {:>6}", d.franchises)?;
        writeln!(f, "  with a premise     {:>6}", d.franchises_with_premise)?;
        writeln!(f, "  premises created   {:>6}", d.premises_created)?;
        if d.premise_fallbacks > 0 {
            writeln!(f, "  LLM failed, local  {:>6}", d.premise_fallbacks)?;
        }
        writeln!(f, "documents written    {:>6}", d.documents_written)?;
        writeln!(f, "documents unchanged  {:>6}", d.documents_unchanged)?;
        if d.popularity_estimates_changed > 0 {
            writeln!(
                f,
                "popularity estimated {:>6}",
                d.popularity_estimates_changed
            )?;
        }
        writeln!(f, "{}", self.spanish)?;
        write!(
            f,
            "elapsed              {:>6.2} s",
            self.elapsed.as_secs_f64()
        )
    }
}
