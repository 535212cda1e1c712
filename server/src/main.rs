use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    // A local `.env` is a convenience for development; real deployments set the environment.
    let _ = dotenvy::dotenv();
    let cli = server::cli::Cli::parse();
    // candle (the `baselines` feature) and rayon read their thread counts from the environment
    // once; set them before any thread exists (the runtime is built below, after this).
    let threads = cli.config.search.inference_threads.max(1).to_string();
    for variable in ["CANDLE_NUM_THREADS", "RAYON_NUM_THREADS"] {
        if std::env::var_os(variable).is_none() {
            // SAFETY: single-threaded here: nothing else reads or writes the environment yet.
            unsafe { std::env::set_var(variable, &threads) };
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: starting the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli))
}

async fn run(cli: server::cli::Cli) -> ExitCode {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.config.log_format {
        server::config::LogFormat::Text => logs.init(),
        server::config::LogFormat::Json => logs.json().init(),
    }

    match server::cli::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
