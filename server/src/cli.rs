//! The command line: `server [serve]`, `migrate`, `ingest`, `document`, `embed`,
//! `embed-documents`, `eval`, `bench` and `db status|start|stop|url|psql|drop` (`server --help`
//! describes each). The fakes of AniList, OpenAI and Stripe are the `fakes` crate's binary.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::{
    catalog,
    config::{Config, DbConfig},
    db::{self, embedded::EmbeddedPostgres},
};

#[derive(Debug, Parser)]
#[command(
    name = "server",
    version,
    about = "Zenbu: find anime from a description"
)]
pub struct Cli {
    #[command(flatten)]
    pub config: Config,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the web app (the default): starts the embedded database when needed and applies
    /// migrations first.
    Serve,
    /// Apply pending migrations and exit.
    Migrate,
    /// Load anime into the catalog and rebuild franchises, premises and documents.
    Ingest(IngestArgs),
    /// Print an anime's stored document, and for a franchise member also the document it would
    /// have without the franchise premise.
    Document {
        /// AniList id.
        id: i32,
    },
    /// Print the local embedding of a text as JSON (for checks against other implementations).
    Embed {
        text: String,
        /// Embed as a passage (`passage: ` prefix) instead of a query.
        #[arg(long)]
        passage: bool,
    },
    /// Compute the vectors documents are missing (ingest does this too).
    EmbedDocuments,
    /// Download the local models' pinned files into the cache and print where they are (the
    /// server otherwise fetches them on first use): e5-small and the second view.
    Models,
    /// Run the evaluation set against the catalog in the database and print hit@5, MRR and
    /// recall@25 per method; with --floors, fail when the served method scores below them.
    Eval(EvalArgs),
    /// Measure search latency per stage, similar-to and ingest throughput on the catalog in the
    /// database.
    Bench(crate::quality::bench::BenchArgs),
    /// Manage the embedded PostgreSQL (used when DATABASE_URL is not set).
    Db {
        #[command(subcommand)]
        action: DbAction,
    },
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["from", "demo", "source", "refresh_images"])))]
pub struct IngestArgs {
    /// An AniList Media JSONL file, plain or gzip (e.g. ../shared/catalog/media.jsonl.gz).
    #[arg(long, value_name = "FILE")]
    pub from: Option<std::path::PathBuf>,
    /// The bundled demo catalog.
    #[arg(long)]
    pub demo: bool,
    /// Crawl an AniList GraphQL endpoint.
    #[arg(long, value_enum)]
    pub source: Option<Source>,
    /// Fill in the posters of the catalog already loaded, asking AniList (`--anilist-url`) for
    /// them by id; nothing else changes.
    #[arg(long)]
    pub refresh_images: bool,
    /// Keep entries AniList marks as adult (skipped by default).
    #[arg(long)]
    pub include_adult: bool,
    /// Load only about N anime of the file: every anime the evaluation set names, with their
    /// franchises, plus a stable sample of other franchises (CI's evaluation catalog).
    #[arg(long, value_name = "N", requires = "from")]
    pub subset: Option<usize>,
    /// With --subset: also keep every anime these case files name (repeatable; see `eval`).
    #[arg(long, value_name = "FILE", requires = "subset")]
    pub subset_cases: Vec<std::path::PathBuf>,
    /// AniList endpoint (a fake one in tests).
    #[arg(long, env = "ANILIST_URL", default_value = catalog::anilist::DEFAULT_ENDPOINT)]
    pub anilist_url: String,
    /// Where raw AniList pages are saved (default: <data dir>/anilist).
    #[arg(long)]
    pub raw_dir: Option<std::path::PathBuf>,
    /// Rebuild from the saved pages only; no network.
    #[arg(long, conflicts_with_all = ["from", "demo"])]
    pub skip_fetch: bool,
    #[arg(long, env = "ANILIST_REQUESTS_PER_MINUTE", default_value_t = 30)]
    pub requests_per_minute: u32,
    /// First seasonYear to crawl.
    #[arg(long)]
    pub first_year: Option<i32>,
    /// Last seasonYear to crawl (default: next year).
    #[arg(long)]
    pub last_year: Option<i32>,
}

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// A case file to score: the bundled JSON shape or JSON lines (repeatable; one report block
    /// per file). Default: the bundled set, server/data/eval_cases.json.
    #[arg(long = "cases", value_name = "FILE")]
    pub cases: Vec<std::path::PathBuf>,
    /// Write the full report (every method, kind and case) as JSON here; with several case
    /// files, an object keyed by file.
    #[arg(long, value_name = "FILE")]
    pub report: Option<std::path::PathBuf>,
    /// Minimum scores (JSON: {"rrf": {"hit_at_5": …, "mrr": …, "recall_at_25": …}, …}) for the
    /// case files in the order given (repeatable: the n-th floors file is for the n-th set).
    #[arg(long, value_name = "FILE")]
    pub floors: Vec<std::path::PathBuf>,
    /// Also fit the local reranker's weights on the text cases of every set together, and print
    /// each set's 5-fold cross-validated scores beside the shipped weights'.
    #[arg(long)]
    pub fit: bool,
    /// Also score the LLM reranker: the configured model at OPENAI_BASE_URL with OPENAI_API_KEY.
    /// `scripts/eval-llm-fake` runs it against `fakes openai` (the plumbing, not a model).
    #[arg(long)]
    pub llm_rerank: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Source {
    Anilist,
}

#[derive(Debug, Subcommand)]
pub enum DbAction {
    /// Say whether the embedded server is installed, initialised and running.
    Status,
    /// Install (first time), initialise (first time) and start the embedded server.
    Start,
    /// Stop the embedded server.
    Stop,
    /// Print the connection URL of the app's database in the embedded server (starting it).
    Url,
    /// Run the embedded server's psql on the app's database (arguments after `--` go to psql).
    Psql {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Back up the app's database to a file (pg_dump's custom format, compressed).
    Dump {
        /// Where the backup goes.
        file: std::path::PathBuf,
    },
    /// Restore the app's database from a `db dump` file: its tables are replaced by the
    /// backup's (a database that does not exist yet is created first).
    Restore { file: std::path::PathBuf },
    /// Drop a database of the embedded server, e.g. the browser suite's before a run.
    Drop {
        /// The database's name (`zenbu_e2e`).
        name: String,
    },
}

pub async fn run(cli: Cli) -> Result<()> {
    let config = cli.config;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config).await,
        Command::Migrate => {
            let pool = db::open(&config).await?;
            db::migrate(&pool).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Ingest(args) => ingest(&config, args).await,
        Command::Models => {
            let cache = config.db.embedded.cache_dir();
            let (weights, tokenizer) = crate::search::e5::ensure_files(&cache)?;
            println!("{}\n{}", weights.display(), tokenizer.display());
            println!("{}", crate::search::second_view::install(&cache)?.display());
            Ok(())
        }
        Command::Embed { text, passage } => {
            use crate::search::e5::{self, Kind};
            let model = e5::load(&config.db.embedded.cache_dir(), config.search.e5_kernel)?;
            let kind = if passage { Kind::Passage } else { Kind::Query };
            let vector = model.embed(&text, kind, model.max_tokens())?;
            println!("{}", serde_json::to_string(&vector)?);
            Ok(())
        }
        Command::EmbedDocuments => {
            let pool = db::open(&config).await?;
            db::migrate(&pool).await?;
            let embedder = crate::search::embedder::from_config(&config)?;
            let report =
                crate::search::vectors::embed_documents(&config, &pool, embedder.as_ref()).await?;
            println!("{report}");
            if let Some(view) = crate::search::second_view::from_config(&config)? {
                println!(
                    "{}",
                    crate::search::vectors::embed_documents(&config, &pool, view.as_ref()).await?
                );
            }
            Ok(())
        }
        Command::Eval(args) => eval(&config, args).await,
        Command::Bench(args) => {
            #[cfg(feature = "baselines")]
            if let Some(crate::quality::bench::BenchOnly::Embed(embed_args)) = args.only {
                return crate::quality::bench_embed::run(&config, embed_args).await;
            }
            let pool = db::open(&config).await?;
            db::migrate(&pool).await?;
            crate::quality::bench::run(&config, pool, args).await
        }
        Command::Document { id } => {
            let pool = db::open(&config).await?;
            let (stored, plain) = catalog::store::document_with_and_without_premise(&pool, id)
                .await?
                .with_context(|| format!("no anime {id} in the catalog"))?;
            println!("stored document:\n{stored}");
            if stored != plain {
                println!("\nwithout the franchise premise:\n{plain}");
            }
            Ok(())
        }
        Command::Db { action } => db_command(&config, action).await,
    }
}

async fn ingest(config: &Config, args: IngestArgs) -> Result<()> {
    let pool = db::open(config).await?;
    db::migrate(&pool).await?;
    // The AniList client as the arguments set it up (endpoint, pace, where pages are saved).
    let mut options = catalog::anilist::AniListOptions::new(
        args.raw_dir
            .clone()
            .unwrap_or_else(|| config.db.embedded.data_dir.join("anilist")),
    );
    options.endpoint = args.anilist_url.clone();
    options.requests_per_minute = args.requests_per_minute;
    if args.refresh_images {
        println!(
            "{}",
            catalog::anilist::refresh_images(&pool, options).await?
        );
        return Ok(());
    }
    if args.source.is_some() {
        options.include_adult = args.include_adult;
        options.first_year = args.first_year.unwrap_or(options.first_year);
        options.last_year = args.last_year.unwrap_or(options.last_year);
        let (report, documents) = catalog::anilist::crawl(
            &pool,
            options,
            args.skip_fetch,
            config.embedding_model(),
            premiser(config).as_ref(),
        )
        .await?;
        println!("{report}");
        println!(
            "documents written {}, unchanged {}, franchises {} ({} with a premise)",
            documents.documents_written,
            documents.documents_unchanged,
            documents.franchises,
            documents.franchises_with_premise
        );
        println!(
            "{}",
            catalog::spanish::index(
                &pool,
                crate::catalog::DocumentTranslator::from_config(&config.search).as_ref()
            )
            .await?
        );
        if !report.failures.is_empty() {
            anyhow::bail!(
                "{} page(s) could not be imported; run again to retry them",
                report.failures.len()
            );
        }
        if !report.slices_capped.is_empty() {
            anyhow::bail!(
                "incomplete: {} slice(s) reached the result cap and could not be split",
                report.slices_capped.len()
            );
        }
        return Ok(());
    }
    let mut media = match &args.from {
        Some(path) => catalog::import::read_media_file(path)?,
        None => catalog::import::demo_catalog(),
    };
    if let Some(target) = args.subset {
        let mut keep = crate::quality::eval::EvalSet::bundled()?.ids();
        for path in &args.subset_cases {
            keep.extend(crate::quality::eval::EvalSet::from_file(path)?.ids());
        }
        media = catalog::franchise::subset(&media, &keep, target);
        println!("subset: {} anime", media.len());
    }
    let report = catalog::ingest(
        &pool,
        &media,
        args.include_adult,
        config.embedding_model(),
        premiser(config).as_ref(),
        crate::catalog::DocumentTranslator::from_config(&config.search).as_ref(),
    )
    .await?;
    println!("{report}");
    let embedder = crate::search::embedder::from_config(config)?;
    println!(
        "{}",
        crate::search::vectors::embed_documents(config, &pool, embedder.as_ref()).await?
    );
    if let Some(view) = crate::search::second_view::from_config(config)? {
        println!(
            "{}",
            crate::search::vectors::embed_documents(config, &pool, view.as_ref()).await?
        );
    }
    Ok(())
}

async fn eval(config: &Config, args: EvalArgs) -> Result<()> {
    use crate::{
        quality::eval,
        search::{SearchEngine, embedder},
    };
    let pool = db::open(config).await?;
    db::migrate(&pool).await?;
    let second_view = crate::search::second_view::from_config(config)?;
    if let Some(view) = &second_view {
        println!(
            "{}",
            crate::search::vectors::embed_documents(config, &pool, view.as_ref()).await?
        );
    }
    let mut engine = SearchEngine::new(pool, embedder::from_config(config)?)
        .with_second_view(second_view)
        .with_translator(crate::search::translate::Translator::from_config(
            &config.search,
        ))
        .with_thesaurus(crate::search::thesaurus::Thesaurus::from_config(
            &config.search,
        ));
    if config.search.vectors_in_memory {
        engine = engine.holding_vectors_in_memory().await?;
    }
    let sets = eval_sets(&args.cases)?;
    anyhow::ensure!(
        args.floors.len() <= sets.len(),
        "{} floors files for {} case files",
        args.floors.len(),
        sets.len()
    );
    let llm = eval_llm_reranker(config, args.llm_rerank)?;
    let mut reports = serde_json::Map::new();
    let mut failures = Vec::new();
    let mut fit_cases = Vec::new();
    for (i, (name, set)) in sets.iter().enumerate() {
        let mut report = eval::run(&engine, set, llm.as_deref()).await?;
        fit_cases.push((name.clone(), std::mem::take(&mut report.fit_cases)));
        println!("\n## {name}\n\n{report}");
        if let Some(path) = args.floors.get(i) {
            let below = eval::below_floors(&report, &eval::read_floors(path)?);
            if below.is_empty() {
                println!("all floors in {} met", path.display());
            }
            failures.extend(below.into_iter().map(|f| format!("{name}: {f}")));
        }
        reports.insert(name.clone(), serde_json::to_value(&report)?);
    }
    if args.fit {
        let sets: Vec<(String, &[eval::FitCase])> = fit_cases
            .iter()
            .map(|(name, cases)| (name.clone(), cases.as_slice()))
            .collect();
        println!("\n{}", eval::fit_pooled(&sets, 5));
    }
    if let Some(path) = &args.report {
        if reports.len() == 1 {
            let (_, only) = reports.into_iter().next().expect("one report");
            crate::files::write_json(path, &only)?;
        } else {
            crate::files::write_json(path, &reports)?;
        }
        println!("report written to {}", path.display());
    }
    anyhow::ensure!(
        failures.is_empty(),
        "below the floors: {}",
        failures.join("; ")
    );
    Ok(())
}

/// The case sets `server eval` scores, named by their file: the bundled set when none is given.
fn eval_sets(paths: &[std::path::PathBuf]) -> Result<Vec<(String, crate::quality::eval::EvalSet)>> {
    use crate::quality::eval::EvalSet;
    if paths.is_empty() {
        return Ok(vec![(
            "server/data/eval_cases.json".into(),
            EvalSet::bundled()?,
        )]);
    }
    paths
        .iter()
        .map(|path| Ok((path.display().to_string(), EvalSet::from_file(path)?)))
        .collect()
}

/// The LLM reranker `--llm-rerank` evaluates, at the configured endpoint.
fn eval_llm_reranker(
    config: &Config,
    asked: bool,
) -> Result<Option<Box<dyn crate::search::rerank::Reranker>>> {
    if !asked {
        return Ok(None);
    }
    let key = config.openai_key().context(
        "--llm-rerank needs OPENAI_API_KEY (with OPENAI_BASE_URL for another endpoint, such as \
         `fakes openai`)",
    )?;
    Ok(Some(Box::new(crate::search::rerank::LlmReranker::new(
        key,
        config.openai.openai_base_url.as_deref(),
        &config.search.rerank_model,
        std::time::Duration::from_millis(config.search.rerank_timeout_ms),
    ))))
}

async fn serve(config: Config) -> Result<()> {
    crate::startup::Application::build(&config)
        .await?
        .run_until_stopped(shutdown_signal())
        .await
}

/// The LLM premise writer when an OpenAI key is configured.
fn premiser(config: &Config) -> Option<catalog::LlmPremiser> {
    let key = config.openai_key()?;
    Some(catalog::LlmPremiser::new(
        key,
        config.openai.openai_base_url.as_deref(),
        &config.openai.premise_model,
        std::time::Duration::from_secs(60),
    ))
}

async fn db_command(config: &Config, action: DbAction) -> Result<()> {
    if config.db.database_url.is_some() {
        tracing::warn!("DATABASE_URL is set: the app does not use the embedded server");
    }
    let embedded = EmbeddedPostgres::from_config(&config.db.embedded)?;
    match action {
        DbAction::Status => println!(
            "embedded PostgreSQL: {} (cluster {})",
            embedded.status()?,
            embedded.cluster_dir().display()
        ),
        DbAction::Start => {
            db::database_url(&DbConfig {
                database_url: None,
                ..config.db.clone()
            })
            .await?;
            println!(
                "embedded PostgreSQL: {} on 127.0.0.1:{}",
                embedded.status()?,
                embedded.port()
            );
        }
        DbAction::Stop => {
            embedded.stop()?;
            println!("embedded PostgreSQL: {}", embedded.status()?);
        }
        DbAction::Psql { args } => {
            embedded.start()?;
            let status = std::process::Command::new(embedded.bin_path("psql"))
                .arg(embedded.url()?)
                .args(args)
                .status()
                .context("running psql")?;
            anyhow::ensure!(status.success(), "psql failed ({status})");
        }
        DbAction::Dump { file } => {
            embedded.start()?;
            let status = std::process::Command::new(embedded.bin_path("pg_dump"))
                .args(["--format=custom", "--no-owner", "--file"])
                .arg(&file)
                .arg(embedded.url()?)
                .status()
                .context("running pg_dump")?;
            anyhow::ensure!(status.success(), "pg_dump failed ({status})");
            println!("backed up {} to {}", embedded.database(), file.display());
        }
        DbAction::Restore { file } => {
            anyhow::ensure!(file.is_file(), "no backup at {}", file.display());
            embedded.start()?;
            // Creates the database when missing: a restore onto a new machine.
            db::database_url(&DbConfig {
                database_url: None,
                ..config.db.clone()
            })
            .await?;
            let status = std::process::Command::new(embedded.bin_path("pg_restore"))
                .args([
                    "--clean",
                    "--if-exists",
                    "--no-owner",
                    "--single-transaction",
                    "--dbname",
                ])
                .arg(embedded.url()?)
                .arg(&file)
                .status()
                .context("running pg_restore")?;
            anyhow::ensure!(status.success(), "pg_restore failed ({status})");
            println!("restored {} from {}", embedded.database(), file.display());
        }
        DbAction::Drop { name } => {
            anyhow::ensure!(
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "not a database name: {name:?}"
            );
            embedded.start()?;
            let pool = db::connect(&embedded.url_for("postgres")?).await?;
            sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .execute(&pool)
                .await?;
            println!("dropped database {name} (if it existed)");
        }
        // Always the embedded server's: scripts/test relies on it even when a .env names another.
        DbAction::Url => {
            let embedded_only = DbConfig {
                database_url: None,
                ..config.db.clone()
            };
            println!("{}", db::database_url(&embedded_only).await?)
        }
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM so in-flight requests can finish.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("server").chain(args.iter().copied()))
    }

    #[test]
    fn ingest_takes_exactly_one_input_and_its_options() {
        let cli = parse(&[
            "ingest",
            "--source",
            "anilist",
            "--raw-dir",
            "/tmp/raw",
            "--first-year",
            "2000",
            "--requests-per-minute",
            "90",
            "--skip-fetch",
        ])
        .unwrap();
        let Some(Command::Ingest(args)) = cli.command else {
            panic!("not ingest")
        };
        assert!(args.source.is_some() && args.skip_fetch);
        assert_eq!(
            (args.first_year, args.requests_per_minute),
            (Some(2000), 90)
        );

        assert!(parse(&["ingest", "--from", "media.jsonl.gz"]).is_ok());
        assert!(parse(&["ingest", "--demo"]).is_ok());
        assert!(parse(&["ingest"]).is_err(), "an input is required");
        assert!(
            parse(&["ingest", "--demo", "--from", "x"]).is_err(),
            "one input only"
        );
        assert!(
            parse(&["ingest", "--from", "x", "--skip-fetch"]).is_err(),
            "--skip-fetch is for AniList"
        );
    }

    #[test]
    fn serve_is_the_default_and_settings_come_before_or_after_the_command() {
        assert!(parse(&[]).unwrap().command.is_none());
        let cli = parse(&["db", "status", "--pg-port", "6000"]).unwrap();
        assert_eq!(cli.config.db.embedded.pg_port, 6000);
    }
}
