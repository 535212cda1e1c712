//! Limits every request meets, so that one client or one burst cannot take the site from
//! everyone else (the allowance meters searches; these bound everything, metered or not):
//! - a time limit per request ([`Limits::request_timeout`]): past it, 503;
//! - a cap on requests in progress ([`Limits::max_in_flight`]): past it, a request is turned
//!   away at once with 503 and `Retry-After` rather than queued behind the others (a queue
//!   only makes every answer late);
//! - a rate per client network ([`Limits::per_network_per_second`], with a burst), through
//!   `governor`'s keyed limiter: past it, 429 and `Retry-After`. The site's static files and
//!   Stripe's signed webhooks are not counted.
//!
//! The rate is kept per process (in memory): behind a load balancer each app server allows it,
//! which bounds a flood per server, where it does its harm.

use std::{num::NonZeroU32, sync::Arc, time::Duration};

use axum::{
    extract::{Request, State},
    middleware::Next,
    response::{IntoResponse, Response},
};
use governor::{Quota, RateLimiter, clock::Clock};

use super::ApiError;
use crate::accounts::network::ClientNetwork;

/// The limits, from configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub request_timeout: Duration,
    pub max_in_flight: usize,
    pub per_network_per_second: u32,
    pub per_network_burst: u32,
}

impl Limits {
    pub fn from_config(config: &crate::config::Config) -> Self {
        Self {
            request_timeout: Duration::from_millis(config.http.request_timeout_ms),
            max_in_flight: config.http.max_requests_in_flight as usize,
            per_network_per_second: config.http.requests_per_network_per_second,
            per_network_burst: config.http.request_burst_per_network,
        }
    }
}

type KeyedLimiter = RateLimiter<
    String,
    governor::state::keyed::HashMapStateStore<String>,
    governor::clock::DefaultClock,
>;

/// Requests per client network (see the module documentation).
#[derive(Clone)]
pub struct NetworkRate {
    limiter: Arc<KeyedLimiter>,
    /// How a request's network is found (the proxies trusted, the IPv6 grouping).
    visitors: crate::accounts::visitor::VisitorConfig,
}

impl NetworkRate {
    pub fn new(limits: &Limits, visitors: &crate::accounts::visitor::VisitorConfig) -> Self {
        let per_second = NonZeroU32::new(limits.per_network_per_second).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(limits.per_network_burst).unwrap_or(per_second);
        let limiter = Arc::new(RateLimiter::hashmap(
            Quota::per_second(per_second).allow_burst(burst),
        ));
        // Networks that went quiet are forgotten now and then, so the map stays the size of
        // the recent clients.
        let weak = Arc::downgrade(&limiter);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(60));
            loop {
                every.tick().await;
                let Some(limiter) = weak.upgrade() else { break };
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
        });
        Self {
            limiter,
            visitors: visitors.clone(),
        }
    }
}

/// Whether a request is outside the per-network rate: the site's files (a page load fetches
/// several, and they are served from memory or disk), posters, and Stripe's signed webhooks.
fn uncounted(path: &str) -> bool {
    // Posters too: one results page asks for twenty at once, and a person paging through
    // results would run into the rate with broken images (each is a lookup by key and a file).
    path.starts_with("/pkg/")
        || path.starts_with("/img/")
        || path == "/favicon.ico"
        || path == "/stripe/webhook"
}

/// The per-network rate. It runs before the visitor middleware (so a refusal costs no cookie
/// work), and finds the network the same way.
pub async fn per_network(
    State(rate): State<NetworkRate>,
    request: Request,
    next: Next,
) -> Response {
    if uncounted(request.uri().path()) {
        return next.run(request).await;
    }
    let network = ClientNetwork::from_request(
        request.headers(),
        request.extensions(),
        &rate.visitors.proxies,
        rate.visitors.ipv6_prefix,
    );
    match rate.limiter.check_key(&network.0) {
        Ok(()) => next.run(request).await,
        Err(not_until) => {
            let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
            crate::metrics::request_refused("network_rate");
            ApiError::RateLimited(wait.as_secs().max(1)).into_response()
        }
    }
}

/// The time limit per request: past it, 503 and `Retry-After` (a metered search inside goes on
/// in its own task and is paid for only if it answered; see `quota::Meter`).
pub async fn time_limit(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            crate::metrics::request_refused("timeout");
            ApiError::Busy("the request took too long: try again".into()).into_response()
        }
    }
}

/// What a request turned away by the concurrency cap gets.
pub async fn overloaded(error: tower::BoxError) -> Response {
    if error.is::<tower::load_shed::error::Overloaded>() {
        crate::metrics::request_refused("overloaded");
        ApiError::Busy("the server is busy: try again in a few seconds".into()).into_response()
    } else {
        ApiError::Internal(anyhow::anyhow!(error)).into_response()
    }
}
