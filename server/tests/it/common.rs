//! Helpers shared by the integration tests.

use std::{
    path::PathBuf,
    sync::{Arc, OnceLock},
};

use server::{
    catalog::{self, import},
    config::Config,
    search::{
        SearchEngine,
        e5::{self, Encoder},
        embedder::{Embedder, LocalEmbedder},
        thesaurus::{self, Thesaurus},
        translate::{DEBIAN_DATA_DIR, Translator},
        vectors::{VectorCache, embed_missing},
    },
    startup::Application,
};
use sqlx::PgPool;

/// Embedding model name used for content hashes in tests.
pub const MODEL: &str = "multilingual-e5-small";
/// AniList id of Mob Psycho 100 III: a sequel whose own synopsis says little.
pub const MOB_PSYCHO_III: i32 = 140439;

/// The stored document of anime `id`.
pub async fn document(pool: &PgPool, id: i32) -> String {
    sqlx::query_scalar("SELECT body FROM documents WHERE anime_id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// `../shared/catalog/media.jsonl.gz` beside the checkout (CI has it there too).
pub fn shared_catalog() -> PathBuf {
    let path = std::env::var_os("ZENBU_SHARED_CATALOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/catalog/media.jsonl.gz")
        });
    assert!(
        path.exists(),
        "reference catalog missing at {}",
        path.display()
    );
    path
}

/// The download cache the scripts use (`ZENBU_CACHE_DIR`), else the server's default.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("ZENBU_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(server::config::default_cache_dir)
}

/// The local model on this CPU's widest kernel, loaded once per test binary.
pub fn model() -> Arc<Encoder> {
    static MODEL: OnceLock<Arc<Encoder>> = OnceLock::new();
    MODEL
        .get_or_init(|| Arc::new(e5::load(&cache_dir(), None).unwrap()))
        .clone()
}

pub fn local_embedder() -> Arc<LocalEmbedder> {
    Arc::new(LocalEmbedder::new(model(), 2))
}

/// Apertium's Spanish-English translator, as the server runs it (the test command installs
/// Debian's `apertium-eng-spa` when it is missing).
pub fn translator() -> Arc<Translator> {
    Arc::new(
        Translator::new(std::path::Path::new(DEBIAN_DATA_DIR))
            .expect("apertium-eng-spa is installed (scripts/test installs it when missing)"),
    )
}

/// Apertium's English-Spanish document translator, one per test binary: it remembers what it
/// translated, so the demo catalog is translated once however many tests load it.
pub fn document_translator() -> &'static catalog::DocumentTranslator {
    static TRANSLATOR: OnceLock<catalog::DocumentTranslator> = OnceLock::new();
    TRANSLATOR.get_or_init(|| {
        catalog::DocumentTranslator::new(std::path::Path::new(DEBIAN_DATA_DIR))
            .expect("apertium-eng-spa is installed (scripts/test installs it when missing)")
    })
}

/// Debian's WordNet, which the tests need as the server does; read once per test binary (a
/// second in a debug build).
pub fn thesaurus() -> Arc<Thesaurus> {
    static THESAURUS: std::sync::OnceLock<Arc<Thesaurus>> = std::sync::OnceLock::new();
    THESAURUS
        .get_or_init(|| {
            Arc::new(
                Thesaurus::load(std::path::Path::new(thesaurus::DEBIAN_DATA_DIR))
                    .expect("wordnet-base is installed (scripts/test installs it when missing)"),
            )
        })
        .clone()
}

/// The demo catalog (257 anime) with its vectors, and a search engine over it configured as the
/// server runs it (Spanish queries translated). Vectors go through the disk cache one test at a
/// time, so only the first test on a fresh machine computes them.
pub async fn demo_engine(pool: &PgPool) -> SearchEngine {
    static EMBEDDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    catalog::ingest(
        pool,
        &import::demo_catalog(),
        false,
        MODEL,
        None,
        Some(document_translator()),
    )
    .await
    .unwrap();
    let embedder = local_embedder();
    {
        let _one_at_a_time = EMBEDDING.lock().await;
        let mut cache = VectorCache::open(
            &cache_dir().join("vectors"),
            &embedder.cache_version(),
            embedder.dimension(),
        )
        .unwrap();
        let report = embed_missing(pool, embedder.as_ref(), Some(&mut cache), false)
            .await
            .unwrap();
        // 0 when this database already has them (a second app in one test).
        assert!([0, 257].contains(&report.missing), "{}", report.missing);
    }
    // As `server serve` builds it: the vectors searched in memory.
    SearchEngine::new(pool.clone(), embedder)
        .with_translator(Some(translator()))
        .with_thesaurus(Some(thesaurus()))
        .holding_vectors_in_memory()
        .await
        .unwrap()
}

/// A running app on an ephemeral port (the demo catalog behind it), for HTTP tests.
pub struct TestApp {
    pub addr: std::net::SocketAddr,
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Serves the app over the demo catalog for the duration of the test, with default settings.
pub async fn spawn_app(pool: PgPool) -> TestApp {
    spawn_app_with(pool, |_| {}).await
}

/// [`spawn_app`] with the configuration changed by `configure` (the public URL is the app's
/// address unless it sets one).
pub async fn spawn_app_with(pool: PgPool, configure: impl FnOnce(&mut Config)) -> TestApp {
    let engine = demo_engine(&pool).await;
    spawn_app_on(pool, engine, configure).await
}

/// The app over `pool` and `engine` as `server serve` builds it (router, listener, background
/// tasks), not yet served, with the folder holding its site and cookie key (keep it as long as
/// the app runs).
pub async fn build_app_on(
    pool: impl Into<server::db::Db>,
    engine: SearchEngine,
    configure: impl FnOnce(&mut Config),
) -> (Application, tempfile::TempDir) {
    let folder = tempfile::tempdir().unwrap();
    let mut config = test_config(folder.path());
    configure(&mut config);
    let app = Application::build_with(&config, pool, engine)
        .await
        .unwrap();
    (app, folder)
}

/// The configuration test apps start from: the defaults, an ephemeral port, and a fresh folder
/// for the site and the generated cookie key. Settings a developer's environment could have
/// changed and that tests rely on are set here; a test changes the rest through `configure`.
fn test_config(folder: &std::path::Path) -> Config {
    let mut config = Config::from_args(&[]).unwrap();
    config.addr = "127.0.0.1:0".parse().unwrap();
    config.site_root = folder.to_path_buf();
    config.db.embedded.data_dir = folder.to_path_buf();
    config.public_url = None;
    config.accounts.cookie_key = None;
    config.http.behind_proxy = false;
    config.http.trusted_proxies = Vec::new();
    config.http.proxy_hops = 1;
    // Tests send requests from one address much faster than a person: the per-network rate is
    // tested on its own (`http::limits`).
    config.http.requests_per_network_per_second = 1_000_000;
    config.http.request_burst_per_network = 1_000_000;
    config.accounts.dev_mailbox = false;
    config.accounts.smtp_url = None;
    config.accounts.mail_from = None;
    config.http.metrics_token = None;
    config.billing.stripe_secret_key = None;
    config.billing.stripe_price_id = None;
    config.billing.stripe_webhook_secret = None;
    config.billing.stripe_api_base = None;
    config
}

/// The server's warnings and errors (or what `RUST_LOG` asks for), written through libtest's
/// capture: shown under a failing test, next to its panic, and nowhere else. Without them a
/// request that hangs says only that it timed out.
fn capture_server_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}

/// The app as `server serve` builds it (`startup::Application::build_with`), over `pool` and
/// `engine`, serving until the test ends.
pub async fn spawn_app_on(
    pool: impl Into<server::db::Db>,
    engine: SearchEngine,
    configure: impl FnOnce(&mut Config),
) -> TestApp {
    capture_server_logs();
    let (app, folder) = build_app_on(pool, engine, configure).await;
    let addr = app.address();
    tokio::spawn(async move {
        let _folder = folder; // kept as long as the server runs
        app.run_until_stopped(std::future::pending()).await.unwrap();
    });
    TestApp { addr }
}

/// A browser's part in a conversation with the app: keeps cookies, does not follow redirects,
/// and sends an `Origin` of the app with its form posts, as a browser does.
pub struct Browser {
    client: reqwest::Client,
    base: String,
    cookies: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
    /// Sent as `X-Forwarded-For` (an app with `behind_proxy` then sees this network).
    forwarded_for: Option<String>,
}

impl Browser {
    pub fn new(app: &TestApp) -> Self {
        Self {
            client: client_without_redirects(),
            base: app.url(""),
            cookies: Default::default(),
            forwarded_for: None,
        }
    }

    /// A browser on another network, as a trusted proxy reports it.
    pub fn from_network(app: &TestApp, ip: &str) -> Self {
        Self {
            forwarded_for: Some(ip.to_string()),
            ..Self::new(app)
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("cookie", self.cookie_header());
        match &self.forwarded_for {
            Some(ip) => request.header("x-forwarded-for", ip),
            None => request,
        }
    }

    fn cookie_header(&self) -> String {
        let cookies = self.cookies.lock().unwrap();
        cookies
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Keeps the response's cookies (a removal deletes one) and returns the response.
    fn remember(&self, response: reqwest::Response) -> reqwest::Response {
        let mut cookies = self.cookies.lock().unwrap();
        for value in response.headers().get_all("set-cookie") {
            let cookie = cookie::Cookie::parse(value.to_str().unwrap().to_string()).unwrap();
            let removed = cookie.max_age().is_some_and(|age| age.is_zero());
            if removed {
                cookies.remove(cookie.name());
            } else {
                cookies.insert(cookie.name().to_string(), cookie.value().to_string());
            }
        }
        response
    }

    pub fn cookie(&self, name: &str) -> Option<String> {
        self.cookies.lock().unwrap().get(name).cloned()
    }

    pub fn set_cookie(&self, name: &str, value: &str) {
        self.cookies
            .lock()
            .unwrap()
            .insert(name.to_string(), value.to_string());
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        let response = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        self.remember(response)
    }

    /// The page's HTML (asserting it answered 200).
    pub async fn page(&self, path: &str) -> String {
        let response = self.get(path).await;
        assert_eq!(response.status(), 200, "GET {path}");
        response.text().await.unwrap()
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        let response = self
            .request(reqwest::Method::POST, path)
            .header("origin", self.base.trim_end_matches('/'))
            .form(form)
            .send()
            .await
            .unwrap();
        self.remember(response)
    }

    /// The CSRF token the app's forms carry for this browser (read from the log-in page).
    pub async fn csrf(&self) -> String {
        let html = self.page("/login").await;
        let pattern = regex::Regex::new(r#"name="csrf" value="([0-9a-f]{64})""#).unwrap();
        pattern
            .captures(&html)
            .unwrap_or_else(|| panic!("no CSRF field in {html}"))[1]
            .to_string()
    }
}

/// Where a redirect points.
pub fn location(response: &reqwest::Response) -> String {
    assert_eq!(response.status(), 303, "expected a redirect");
    response.headers()["location"].to_str().unwrap().to_string()
}

/// Creates a user straight in the database (as a confirmed sign-up would); their id.
pub async fn insert_user(pool: &PgPool, email: &str, password: &str) -> i64 {
    sqlx::query_scalar("INSERT INTO users (email, password_hash) VALUES ($1, $2) RETURNING id")
        .bind(email)
        .bind(server::accounts::password::hash(password).await.unwrap())
        .fetch_one(pool)
        .await
        .unwrap()
}

/// An HTTP client that shows redirects instead of following them. Requests give up after a
/// minute: a request that never gets an answer is a failing test with a message, not a CI run
/// that hangs.
pub fn client_without_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .unwrap()
}

/// A port nobody listens on now (for throwaway clusters).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Stops and deletes a throwaway cluster even when an assertion fails.
pub struct DestroyOnDrop(pub server::db::embedded::EmbeddedPostgres);
impl Drop for DestroyOnDrop {
    fn drop(&mut self) {
        let _ = self.0.destroy();
    }
}
