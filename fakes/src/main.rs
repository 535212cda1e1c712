//! `fakes anilist|openai|stripe|smtp`: one fake on a fixed port until Ctrl-C or SIGTERM, for the
//! browser suite, fault-injection runs and trying the clients by hand.

use std::{
    io::{BufRead, BufReader, Read},
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use fakes::{
    anilist::{FakeAniList, FakeAniListConfig},
    openai::FakeOpenAi,
    smtp::SmtpServer,
    stripe::{FakeStripe, FakeStripeConfig},
};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(
    name = "fakes",
    about = "Local fakes of the APIs Zenbu calls, speaking their wire formats"
)]
struct Cli {
    #[command(subcommand)]
    fake: Fake,
}

#[derive(Debug, Subcommand)]
enum Fake {
    /// The AniList GraphQL endpoint (for trying the crawler by hand).
    Anilist(AniListArgs),
    /// OpenAI's embeddings and chat completions (fault-injection runs, an LLM-rerank run of
    /// `server eval`); its behaviour is switched with `POST /_fake/behaviour`.
    Openai {
        #[arg(long, default_value = "127.0.0.1:12112")]
        listen: SocketAddr,
        #[arg(long, default_value = "sk-fake")]
        api_key: String,
    },
    /// Stripe's API, hosted Checkout and portal pages and signed webhooks (local runs and the
    /// browser tests); the app is pointed at it with STRIPE_API_BASE.
    Stripe(StripeArgs),
    /// An SMTP server that keeps what it receives (the browser suite's mail), readable as JSON
    /// at `GET http://<http>/messages?to=<address>` (newest first).
    Smtp {
        #[arg(long, default_value = "127.0.0.1:2525")]
        listen: SocketAddr,
        #[arg(long, default_value = "127.0.0.1:2526")]
        http: SocketAddr,
    },
}

#[derive(Debug, clap::Args)]
struct AniListArgs {
    /// AniList Media JSONL (plain or gzip) to serve.
    #[arg(long, value_name = "FILE")]
    from: PathBuf,
    #[arg(long, default_value = "127.0.0.1:4100")]
    listen: SocketAddr,
    #[arg(long, default_value_t = 30)]
    requests_per_minute: usize,
    #[arg(long, default_value_t = 5000)]
    result_cap: usize,
    /// Leave out X-RateLimit-Remaining/-Reset, so a fast client runs into 429s.
    #[arg(long)]
    no_rate_limit_headers: bool,
    /// Give items without a poster one served by this fake (small generated PNGs).
    #[arg(long)]
    posters: bool,
    /// With --posters: anime whose id this divides get no poster.
    #[arg(long, requires = "posters")]
    posters_missing_every: Option<i64>,
    /// With --posters: the posters of ids this divides answer 500.
    #[arg(long, requires = "posters")]
    posters_broken_every: Option<i64>,
}

#[derive(Debug, clap::Args)]
struct StripeArgs {
    #[arg(long, default_value = "127.0.0.1:12111")]
    listen: SocketAddr,
    /// The secret key clients must send.
    #[arg(long, default_value = "sk_test_fake")]
    api_key: String,
    /// The one price that exists.
    #[arg(long, default_value = "price_test_premium")]
    price_id: String,
    /// Where events are delivered (the app's /stripe/webhook).
    #[arg(long)]
    webhook_url: String,
    #[arg(long, default_value = "whsec_test_fake")]
    webhook_secret: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match serve(cli.fake).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(fake: Fake) -> Result<()> {
    match fake {
        Fake::Anilist(args) => {
            let mut config = FakeAniListConfig::new(read_jsonl(&args.from)?);
            config.requests_per_window = args.requests_per_minute;
            config.result_cap = args.result_cap;
            config.rate_limit_headers = !args.no_rate_limit_headers;
            config.posters = args.posters;
            config.posters_missing_every = args.posters_missing_every;
            config.posters_broken_every = args.posters_broken_every;
            let fake = FakeAniList::start(config, args.listen).await?;
            println!("fake AniList on {} (Ctrl-C to stop)", fake.url());
            shutdown_signal().await;
        }
        Fake::Openai { listen, api_key } => {
            let fake = FakeOpenAi::start_on(&api_key, listen).await?;
            println!("fake OpenAI on {} (Ctrl-C to stop)", fake.base_url());
            shutdown_signal().await;
        }
        Fake::Stripe(args) => {
            let config = FakeStripeConfig {
                api_key: args.api_key,
                price_id: args.price_id,
                webhook_url: Some(args.webhook_url),
                webhook_secret: args.webhook_secret,
            };
            let fake = FakeStripe::start(config, args.listen).await?;
            println!("fake Stripe on {} (Ctrl-C to stop)", fake.base_url());
            shutdown_signal().await;
        }
        Fake::Smtp { listen, http } => {
            let smtp = std::sync::Arc::new(SmtpServer::start(listen)?);
            let app = axum::Router::new().route(
                "/messages",
                axum::routing::get(
                    move |axum::extract::Query(query): axum::extract::Query<
                        std::collections::HashMap<String, String>,
                    >| {
                        let smtp = smtp.clone();
                        async move {
                            let to = query.get("to").cloned().unwrap_or_default();
                            axum::Json(smtp.delivered_to(&to))
                        }
                    },
                ),
            );
            let served = fakes::serve(app, http).await?;
            println!(
                "SMTP on {listen}, its messages on http://{} (Ctrl-C to stop)",
                served.addr
            );
            shutdown_signal().await;
        }
    }
    Ok(())
}

/// The JSON objects of a JSON-lines file, plain or gzip (told by its first two bytes).
fn read_jsonl(path: &Path) -> Result<Vec<serde_json::Value>> {
    let shown = path.display();
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut file| file.read_to_end(&mut bytes))
        .with_context(|| format!("reading {shown}"))?;
    let reader: Box<dyn BufRead> = if bytes.starts_with(&[0x1f, 0x8b]) {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(
            &bytes[..],
        )))
    } else {
        Box::new(&bytes[..])
    };
    let mut items = Vec::new();
    for (index, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading {shown}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let item =
            serde_json::from_str(&line).with_context(|| format!("{shown}, line {}", index + 1))?;
        items.push(item);
    }
    Ok(items)
}

/// Resolves on Ctrl-C or SIGTERM (how Playwright stops its web servers).
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = terminate => {},
    }
}
