//! The command line: `server [serve]`, `server migrate`, `server db status|start|stop|url`.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::{
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
    /// Manage the embedded PostgreSQL (used when DATABASE_URL is not set).
    Db {
        #[command(subcommand)]
        action: DbAction,
    },
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
        Command::Db { action } => db_command(&config, action).await,
    }
}

async fn serve(config: Config) -> Result<()> {
    let pool = db::connect(&db::database_url(&config).await?).await?;
    db::migrate(&pool).await?;
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
