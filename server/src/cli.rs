//! The command line: `server [serve]`, `server migrate`, `server db status|start|stop|url`.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::{
    catalog,
    config::Config,
    db::{self, embedded::EmbeddedPostgres},
    http,
};

#[derive(Debug, Parser)]
#[command(name = "server", version, about = "Zenbu: find anime from a description")]
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
    /// Manage the embedded PostgreSQL (used when DATABASE_URL is not set).
    Db {
        #[command(subcommand)]
        action: DbAction,
    },
}

#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false, id = "input")]
pub struct IngestArgs {
    /// An AniList Media JSONL file, plain or gzip (e.g. ../shared/catalog/media.jsonl.gz).
    #[arg(long, value_name = "FILE", group = "input")]
    pub from: Option<std::path::PathBuf>,
    /// The bundled demo catalog.
    #[arg(long, group = "input")]
    pub demo: bool,
    /// Keep entries AniList marks as adult (skipped by default).
    #[arg(long)]
    pub include_adult: bool,
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
}

pub async fn run(cli: Cli) -> Result<()> {
    let config = cli.config;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config).await,
        Command::Migrate => {
            let pool = db::connect(&db::database_url(&config).await?).await?;
            db::migrate(&pool).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Ingest(args) => ingest(&config, args).await,
        Command::Document { id } => {
            let pool = db::connect(&db::database_url(&config).await?).await?;
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
    let media = match &args.from {
        Some(path) => catalog::import::read_media_file(path)?,
        None => catalog::import::demo_catalog(),
    };
    let pool = db::connect(&db::database_url(config).await?).await?;
    db::migrate(&pool).await?;
    let report = catalog::ingest(&pool, &media, args.include_adult, &config.embedding_model).await?;
    println!("{report}");
    Ok(())
}

async fn serve(config: Config) -> Result<()> {
    let pool = db::connect(&db::database_url(&config).await?).await?;
    db::migrate(&pool).await?;
    if let Some(report) = catalog::load_demo_if_empty(&pool, &config.embedding_model).await? {
        tracing::info!(
            anime = report.documents.anime,
            franchises = report.documents.franchises,
            seconds = report.elapsed.as_secs_f64(),
            "empty catalog: loaded the bundled demo catalog"
        );
    }
    let state = http::AppState::new(pool, &config.site_root);
    if !config.site_root.join("pkg").join(format!("{}.js", app::BUNDLE_NAME)).exists() {
        tracing::warn!(site_root = %config.site_root.display(), "no built site found: pages will render but not hydrate (run scripts/build-site)");
    }
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .with_context(|| format!("binding {}", config.addr))?;
    tracing::info!("listening on http://{}", config.addr);
    axum::serve(listener, http::router(state))
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    Ok(())
}

async fn db_command(config: &Config, action: DbAction) -> Result<()> {
    if config.database_url.is_some() && !matches!(action, DbAction::Url) {
        tracing::warn!("DATABASE_URL is set: the app does not use the embedded server");
    }
    let embedded = EmbeddedPostgres::from_config(&config.embedded)?;
    match action {
        DbAction::Status => println!("embedded PostgreSQL: {}", embedded.status()?),
        DbAction::Start => {
            db::database_url(&Config { database_url: None, ..config.clone() }).await?;
            println!("embedded PostgreSQL: {} on 127.0.0.1:{}", embedded.status()?, embedded.port());
        }
        DbAction::Stop => {
            embedded.stop()?;
            println!("embedded PostgreSQL: {}", embedded.status()?);
        }
        DbAction::Url => println!("{}", db::database_url(config).await?),
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
