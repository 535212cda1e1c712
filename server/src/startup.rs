//! One start-up path. [`Application::build`] wires what `server serve` runs: the database and
//! its migrations, the demo catalog on an empty database, missing document vectors, the search
//! engine, the periodic sweeper, visitor and site settings, Stripe, the router and the listener.
//! The integration tests call [`Application::build_with`] (their own database and search engine)
//! with a [`Config`] they change, so production wiring — Secure cookies from the public URL, the
//! page policy's Stripe origins, the sweeper — is what they run too.

use std::{future::Future, net::SocketAddr, time::Duration};

use anyhow::{Context, Result};
use secrecy::ExposeSecret;
use sqlx::PgPool;
use tokio::net::TcpListener;

use crate::{
    accounts::{
        self,
        visitor::{CookieKey, VisitorConfig},
    },
    billing::{Billing, BillingConfig},
    catalog,
    config::Config,
    db::{self, Db},
    http::{self, AppState, SiteConfig},
    mail::{self, delivery::Courier},
    quota::Rules,
    search::{Budgets, SearchEngine, cache, embedder, rerank, second_view},
};

/// How often expired cache rows, sessions, sign-up links and attempts are deleted.
const SWEEP_EVERY: Duration = Duration::from_secs(600);

/// A bound listener and the app that will answer on it.
pub struct Application {
    address: SocketAddr,
    listener: TcpListener,
    router: axum::Router,
}

impl Application {
    /// The whole server as `config` describes it.
    pub async fn build(config: &Config) -> Result<Self> {
        let pool = db::open(config).await?;
        db::migrate(&pool).await?;
        prepare_catalog(config, &pool).await?;
        let embedder = embedder::from_config(config)?;
        let report =
            crate::search::vectors::embed_documents(config, &pool, embedder.as_ref()).await?;
        if report.missing > 0 {
            tracing::info!(%report, "document vectors brought up to date");
        }
        let second_view = second_view::from_config(config)?;
        if let Some(view) = &second_view {
            let report =
                crate::search::vectors::embed_documents(config, &pool, view.as_ref()).await?;
            if report.missing > 0 {
                tracing::info!(%report, "second view's vectors brought up to date");
            }
        }
        // From here on the pool serves requests: statements past the timeout are cancelled.
        let statement_timeout = Duration::from_millis(config.db.statement_timeout_ms);
        let startup = pool;
        let pool = db::with_statement_timeout(&startup, statement_timeout).await?;
        startup.close().await;
        let mut database = Db::new(pool);
        if let Some(replica) = db::open_replica(config.db.replica_url.as_deref()).await? {
            database = database
                .with_replica(db::with_statement_timeout(&replica, statement_timeout).await?);
        }
        let mut engine = SearchEngine::new(database.clone(), embedder)
            .with_second_view(second_view)
            .with_reranker(rerank::from_config(config))
            .with_translator(crate::search::translate::Translator::from_config(
                &config.search,
            ))
            .with_thesaurus(crate::search::thesaurus::Thesaurus::from_config(
                &config.search,
            ))
            .with_budgets(Budgets::from_config(config));
        // After the replica: the vectors are read where searches read.
        if config.search.vectors_in_memory {
            engine = engine.holding_vectors_in_memory().await?;
        }
        Self::build_with(config, database, engine).await
    }

    /// The app over `db` and `engine` (already prepared, over the same pools), with everything
    /// else from `config`. With no public URL configured, the public URL is the bound address
    /// (which may have been port 0).
    pub async fn build_with(
        config: &Config,
        db: impl Into<Db>,
        engine: SearchEngine,
    ) -> Result<Self> {
        let db = db.into();
        let pool = db.primary.clone();
        let listener = TcpListener::bind(config.addr)
            .await
            .with_context(|| format!("binding {}", config.addr))?;
        let address = listener.local_addr()?;
        let public_url = config.public_url(address);
        let stripe = BillingConfig::from_config(config);
        let site = site_config(config, public_url, stripe.as_ref())?;
        let billing = match stripe {
            Some(stripe) => {
                let billing = Billing::new(&stripe, &site.public_url)?;
                if config.billing.stripe_reconcile_minutes > 0 {
                    crate::billing::reconcile::spawn(
                        pool.clone(),
                        billing.clone(),
                        Duration::from_secs(config.billing.stripe_reconcile_minutes * 60),
                    );
                }
                Some(billing)
            }
            None => {
                tracing::info!("Stripe is not configured: Premium cannot be bought on this server");
                None
            }
        };
        if !config
            .site_root
            .join("pkg")
            .join(format!("{}.js", app::BUNDLE_NAME))
            .exists()
        {
            tracing::warn!(site_root = %config.site_root.display(), "no built site found: pages will render but not hydrate (run scripts/build-site)");
        }
        spawn_sweeper(pool.clone());
        let courier = Courier::from_config(
            config.accounts.smtp_url.as_ref(),
            &config.mail_from(&site.public_url),
        )?;
        if matches!(courier, Courier::Log) {
            tracing::info!("ZENBU_SMTP_URL is not set: mail is written to the log, not sent");
        }
        mail::delivery::spawn(pool.clone(), courier);
        // The dummy hash for unknown addresses, computed now rather than at the first log-in,
        // and Apertium's pipeline started now rather than at the first Spanish query.
        tokio::spawn(accounts::password::prepare());
        engine.warm_up_translator();
        let state = AppState::new(db, engine, site, &config.site_root).with_billing(billing);
        Ok(Self {
            address,
            listener,
            router: http::router(state),
        })
    }

    /// Where the app listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Serves until `shutdown` completes. Peer addresses feed the per-network limits
    /// (`accounts::network`).
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        tracing::info!("listening on http://{}", self.address);
        axum::serve(
            self.listener,
            self.router
                .into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await?;
        Ok(())
    }
}

/// The bundled demo catalog on an empty database (local premises: a slow or unreachable LLM must
/// not keep the server from starting; `server ingest --demo` with a key writes LLM premises),
/// and a warning for documents older than the lexical index.
async fn prepare_catalog(config: &Config, pool: &PgPool) -> Result<()> {
    let translator = crate::catalog::DocumentTranslator::from_config(&config.search);
    if let Some(report) =
        catalog::load_demo_if_empty(pool, config.embedding_model(), None, translator.as_ref())
            .await?
    {
        tracing::info!(
            anime = report.documents.anime,
            franchises = report.documents.franchises,
            seconds = report.elapsed.as_secs_f64(),
            "empty catalog: loaded the bundled demo catalog"
        );
    }
    // Documents whose Spanish word index is missing or was built without the translator there
    // now (a database older than the index, or Apertium installed since): indexed here, once.
    let spanish = catalog::spanish::index(pool, translator.as_ref()).await?;
    // Synopses without their Spanish translation (a database older than it): made here, once.
    let synopses = catalog::spanish::synopses(pool, translator.as_ref()).await?;
    if synopses.translated > 0 {
        tracing::info!(%synopses, "translated the synopses that lacked a Spanish version");
    }
    if spanish.translated + spanish.untranslated > 0 {
        tracing::info!(
            translated = spanish.translated,
            untranslated = spanish.untranslated,
            "built the Spanish word index of documents that lacked one"
        );
    }
    let stale: i64 =
        sqlx::query_scalar("SELECT count(*) FROM documents WHERE lexical_hash IS NULL")
            .fetch_one(pool)
            .await?;
    if stale > 0 {
        tracing::warn!(
            stale,
            "documents predate the lexical index (migration 4): word search misses them until \
             `server ingest` runs again"
        );
    }
    Ok(())
}

/// What the HTTP layer needs to know from `config`: the cookie key (configured, else kept in
/// the data folder), Secure cookies when the public URL is https, the proxy and network
/// settings, the allowance rules, and the Stripe pages forms may post to.
pub fn site_config(
    config: &Config,
    public_url: String,
    stripe: Option<&BillingConfig>,
) -> Result<SiteConfig> {
    // A request must outlive the metered search inside it and its bookkeeping: cut short, its
    // client would get a 503 for a search that then answers and is paid for.
    let search_ends =
        Duration::from_millis(config.search.search_deadline_ms) + crate::quota::BOOKKEEPING_TIMEOUT;
    anyhow::ensure!(
        Duration::from_millis(config.http.request_timeout_ms) > search_ends,
        "ZENBU_REQUEST_TIMEOUT_MS ({}) must be longer than ZENBU_SEARCH_DEADLINE_MS ({}) plus {} ms",
        config.http.request_timeout_ms,
        config.search.search_deadline_ms,
        crate::quota::BOOKKEEPING_TIMEOUT.as_millis()
    );
    let site = SiteConfig {
        visitors: VisitorConfig {
            key: CookieKey::load(
                config
                    .accounts
                    .cookie_key
                    .as_ref()
                    .map(|key| key.expose_secret()),
                &config.db.embedded.data_dir,
            )?,
            secure: public_url.starts_with("https://"),
            proxies: crate::accounts::network::TrustedProxies::from_config(&config.http),
            ipv6_prefix: config.http.ipv6_network_prefix,
        },
        public_url,
        rules: Rules {
            new_visitors_per_network_per_day: config.accounts.new_visitors_per_network,
            anonymous_searches_per_network_per_day: config.accounts.anonymous_searches_per_network,
            deadline: Duration::from_millis(config.search.search_deadline_ms),
        },
        dev_mailbox: config.accounts.dev_mailbox,
        metrics_token: config
            .http
            .metrics_token
            .clone()
            .filter(|token| !token.expose_secret().trim().is_empty()),
        form_targets: stripe.map(BillingConfig::page_origins).unwrap_or_default(),
        limits: crate::http::limits::Limits::from_config(config),
        images: crate::images::Images::new(
            config.db.embedded.data_dir.join("images"),
            config.http.image_hosts.clone(),
        ),
    };
    if site.public_url.starts_with("https://") && site.visitors.proxies.is_empty() {
        tracing::warn!(
            "the public URL is https but no proxy is trusted (ZENBU_TRUSTED_PROXIES or \
             ZENBU_BEHIND_PROXY): if a proxy terminates TLS in front, every visitor counts as \
             its one network for the per-network limits"
        );
    }
    if site.dev_mailbox {
        tracing::warn!("ZENBU_DEV_MAILBOX is on: /dev/mail shows everyone's sign-up links");
    }
    Ok(site)
}

/// Expired cache rows are ignored when read; this deletes them, and expired sessions, sign-up
/// links and attempts, now and then.
fn spawn_sweeper(pool: PgPool) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(SWEEP_EVERY);
        loop {
            every.tick().await;
            match cache::sweep(&pool).await {
                Ok(0) => {}
                Ok(rows) => tracing::info!(rows, "expired cache rows deleted"),
                Err(error) => tracing::warn!(%error, "cache sweep failed"),
            }
            match accounts::sweep(&pool).await {
                Ok(0) => {}
                Ok(rows) => tracing::info!(rows, "expired sessions, links and attempts deleted"),
                Err(error) => tracing::warn!(%error, "account sweep failed"),
            }
            match crate::retention::sweep(&pool).await {
                Ok(0) => {}
                Ok(rows) => tracing::info!(rows, "data past its retention deleted"),
                Err(error) => tracing::warn!(%error, "retention sweep failed"),
            }
        }
    });
}
