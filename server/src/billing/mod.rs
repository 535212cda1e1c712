//! Premium through Stripe: Checkout Sessions to subscribe, the billing portal to manage, and
//! webhooks that change plans. The plan changes only when Stripe says so by a signed webhook,
//! never because someone visited the success page.
//!
//! Plans follow the newest known state of the user's subscription (`stripe_subscriptions`,
//! written only by an event newer than the state it replaces), so replayed events (ids are
//! stored) and events delivered out of order leave the right plan.

pub mod reconcile;
pub mod webhook;

use secrecy::{ExposeSecret, SecretString};
use sqlx::PgPool;

use crate::accounts::User;

#[derive(Debug, thiserror::Error)]
pub enum BillingError {
    /// Stripe refused or failed: the page says "try again later"; the cause is logged.
    #[error("Stripe: {0}")]
    Stripe(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl From<stripe::StripeError> for BillingError {
    fn from(error: stripe::StripeError) -> Self {
        BillingError::Stripe(error.to_string())
    }
}

/// Stripe settings; billing is on only when all three are set.
#[derive(Debug, Clone)]
pub struct BillingConfig {
    pub secret_key: SecretString,
    pub price_id: String,
    pub webhook_secret: SecretString,
    /// Stripe's API (default) or a fake's address.
    pub api_base: Option<String>,
}

impl BillingConfig {
    pub fn from_config(config: &crate::config::Config) -> Option<Self> {
        let set = |value: &Option<String>| {
            value
                .as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let secret = |value: &Option<SecretString>| {
            value
                .as_ref()
                .map(|v| v.expose_secret().trim())
                .filter(|v| !v.is_empty())
                .map(SecretString::from)
        };
        Some(Self {
            secret_key: secret(&config.billing.stripe_secret_key)?,
            price_id: set(&config.billing.stripe_price_id)?,
            webhook_secret: secret(&config.billing.stripe_webhook_secret)?,
            api_base: set(&config.billing.stripe_api_base),
        })
    }
}

impl BillingConfig {
    /// Where Stripe's hosted pages live (Checkout, the billing portal): the fake's address
    /// when the API is a fake, else Stripe's.
    pub fn page_origins(&self) -> Vec<String> {
        match &self.api_base {
            Some(base) => vec![base.trim_end_matches('/').to_string()],
            None => vec![
                "https://checkout.stripe.com".into(),
                "https://billing.stripe.com".into(),
            ],
        }
    }
}

/// How long a Checkout Session stays open (Stripe allows 30 minutes to a day): short, so an
/// abandoned one soon makes way for a new one. A minute over Stripe's least, for clock skew.
const CHECKOUT_LIFETIME_SECONDS: i64 = 31 * 60;

/// The Stripe client and what Checkout needs; cheap to clone.
#[derive(Clone)]
pub struct Billing {
    client: stripe::Client,
    /// The API key is a live one (`sk_live_`, `rk_live_`): only live-mode events count.
    live: bool,
    price_id: String,
    webhook_secret: SecretString,
    public_url: String,
}

impl Billing {
    pub fn new(config: &BillingConfig, public_url: &str) -> Result<Self, BillingError> {
        let mut builder = stripe::ClientBuilder::new(config.secret_key.expose_secret())
            // Two attempts for 429/5xx/network errors, with one idempotency key for both.
            .request_strategy(stripe::RequestStrategy::Retry(2))
            .timeout(std::time::Duration::from_secs(10));
        if let Some(base) = &config.api_base {
            builder = builder.url(base.clone());
        }
        let key = config.secret_key.expose_secret();
        Ok(Self {
            live: key.starts_with("sk_live_") || key.starts_with("rk_live_"),
            client: builder.build()?,
            price_id: config.price_id.clone(),
            webhook_secret: config.webhook_secret.clone(),
            public_url: public_url.trim_end_matches('/').to_string(),
        })
    }

    /// The price of the Premium subscription (`price_…`).
    pub fn price_id(&self) -> &str {
        &self.price_id
    }

    pub fn webhook_secret(&self) -> &str {
        self.webhook_secret.expose_secret()
    }

    /// What the webhook checks events against.
    pub fn endpoint(&self) -> webhook::Endpoint<'_> {
        webhook::Endpoint {
            secret: self.webhook_secret.expose_secret(),
            price: &self.price_id,
            live: self.live,
        }
    }

    /// A Checkout Session for `user` to subscribe to Premium; the URL to send them to. The
    /// user's Stripe customer is reused when known, so one person is one customer. While one
    /// of their sessions is open, that one is given again: two tabs (or a double click) lead
    /// to one Checkout, so they cannot pay for two subscriptions.
    pub async fn checkout_url(&self, pool: &PgPool, user: &User) -> Result<String, BillingError> {
        use stripe_checkout::checkout_session::{
            CreateCheckoutSession, CreateCheckoutSessionLineItems,
        };
        let mut tx = pool.begin().await?;
        // One at a time per user: a second request waits here, then finds the first's session.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("checkout:{}", user.id))
            .execute(&mut *tx)
            .await?;
        let open: Option<String> = sqlx::query_scalar(
            "SELECT url FROM checkout_sessions
              WHERE user_id = $1 AND closed_at IS NULL AND expires_at > now() + interval '5 minutes'
              ORDER BY created_at DESC LIMIT 1",
        )
        .bind(user.id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(url) = open {
            return Ok(url);
        }
        let customer: Option<String> =
            sqlx::query_scalar("SELECT stripe_customer_id FROM users WHERE id = $1")
                .bind(user.id)
                .fetch_one(&mut *tx)
                .await?;
        let expires_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |now| now.as_secs() as i64)
            + CHECKOUT_LIFETIME_SECONDS;
        let mut request = CreateCheckoutSession::new()
            .mode(stripe_checkout::CheckoutSessionMode::Subscription)
            .line_items(vec![CreateCheckoutSessionLineItems {
                price: Some(self.price_id.clone()),
                quantity: Some(1),
                ..Default::default()
            }])
            .client_reference_id(user.id.to_string())
            // The webhook grants Premium only to Checkouts that carry this price (made here),
            // not to a Payment Link or another product's Checkout on the same Stripe account.
            .metadata([(webhook::PRICE_METADATA.to_string(), self.price_id.clone())])
            .success_url(format!(
                "{}/premium/success?session_id={{CHECKOUT_SESSION_ID}}",
                self.public_url
            ))
            .cancel_url(format!("{}/premium/cancelled", self.public_url))
            .expires_at(expires_at);
        request = match customer {
            Some(customer) => request.customer(customer),
            None => request.customer_email(user.email.clone()),
        };
        let session = request.send(&self.client).await?;
        let url = session
            .url
            .ok_or_else(|| BillingError::Stripe("the Checkout Session has no URL".into()))?;
        sqlx::query(
            "INSERT INTO checkout_sessions (id, user_id, url, expires_at)
             VALUES ($1, $2, $3, to_timestamp($4))",
        )
        .bind(session.id.as_str())
        .bind(user.id)
        .bind(&url)
        .bind(session.expires_at as f64)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(url)
    }

    /// A billing portal session for the `account`th of `user`'s Stripe customers (see
    /// [`customers`]); `None` when there is no such customer.
    pub async fn portal_url(
        &self,
        pool: &PgPool,
        user: &User,
        account: usize,
    ) -> Result<Option<String>, BillingError> {
        let Some(customer) = customers(pool, user.id).await?.into_iter().nth(account) else {
            return Ok(None);
        };
        let portal = stripe_billing::billing_portal_session::CreateBillingPortalSession::new()
            .customer(customer)
            .return_url(format!("{}/account", self.public_url))
            .send(&self.client)
            .await?;
        Ok(Some(portal.url))
    }
}

/// Stripe's answer to a customer update: only its id is read.
#[derive(miniserde::Deserialize)]
struct UpdatedCustomer {
    id: String,
}

#[derive(serde::Serialize)]
struct CustomerEmail<'a> {
    email: &'a str,
}

impl Billing {
    /// Gives every Stripe customer of `user_id` ([`customers`]) the user's address, when it
    /// changed since they last got it (`users.stripe_email_stale`), and clears the mark; how
    /// many customers were updated. A request through the real client's request builder: the
    /// generated customer API is a crate of its own, heavy to compile for one call.
    pub async fn sync_customer_email(
        &self,
        pool: &PgPool,
        user_id: i64,
    ) -> Result<usize, BillingError> {
        let email: Option<String> =
            sqlx::query_scalar("SELECT email FROM users WHERE id = $1 AND stripe_email_stale")
                .bind(user_id)
                .fetch_optional(pool)
                .await?;
        let Some(email) = email else {
            return Ok(0);
        };
        let customers = customers(pool, user_id).await?;
        for customer in &customers {
            let updated: UpdatedCustomer = stripe_client_core::RequestBuilder::new(
                stripe_client_core::StripeMethod::Post,
                format!("/customers/{customer}"),
            )
            .form(&CustomerEmail { email: &email })
            .customize()
            .send(&self.client)
            .await?;
            tracing::info!(
                user = user_id,
                customer = updated.id,
                "Stripe customer's address updated"
            );
        }
        // Only if the address is still the one sent (another change may have come meanwhile).
        sqlx::query("UPDATE users SET stripe_email_stale = false WHERE id = $1 AND email = $2")
            .bind(user_id)
            .bind(&email)
            .execute(pool)
            .await?;
        Ok(customers.len())
    }
}

impl Billing {
    /// Cancels, at once, every subscription of `user` that can still charge them (deleting
    /// an account). Stripe's answer is recorded as the subscription's state; the webhook that
    /// follows finds nothing left to change.
    pub async fn cancel_live_subscriptions(
        &self,
        pool: &PgPool,
        user: &User,
    ) -> Result<usize, BillingError> {
        let live = live_subscriptions(pool, user.id).await?;
        for id in &live {
            let cancelled = stripe_billing::subscription::CancelSubscription::new(id.as_str())
                .send(&self.client)
                .await?;
            sqlx::query(
                "UPDATE stripe_subscriptions SET status = $2, updated_at = now() WHERE id = $1",
            )
            .bind(id)
            .bind(cancelled.status.as_str())
            .execute(pool)
            .await?;
            tracing::info!(user = user.id, subscription = %id, "subscription cancelled");
        }
        Ok(live.len())
    }
}

/// Every Stripe customer of `user_id`, the linked one first: one person is one customer since
/// Checkout reuses it, but a user who paid in two Checkouts at once before that (two tabs)
/// has a second, whose subscription only its own portal can cancel.
pub async fn customers(pool: &PgPool, user_id: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT customer FROM (
             SELECT stripe_customer_id AS customer, 0 AS rank FROM users
              WHERE id = $1 AND stripe_customer_id IS NOT NULL
             UNION
             SELECT customer_id, 1 FROM stripe_subscriptions s
              WHERE s.user_id = $1
                AND customer_id IS DISTINCT FROM (SELECT stripe_customer_id FROM users WHERE id = $1)
         ) c
         ORDER BY rank, customer",
    )
    .bind(user_id)
    .fetch_all(pool)
    .await
}

/// The ids of `user_id`'s subscriptions that are not over.
pub async fn live_subscriptions(pool: &PgPool, user_id: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT s.id FROM stripe_subscriptions s, users u
          WHERE u.id = $1 AND (s.user_id = u.id OR s.customer_id = u.stripe_customer_id)
            AND s.status <> ALL($2)
          ORDER BY s.id",
    )
    .bind(user_id)
    .bind(&ENDED_STATUSES[..])
    .fetch_all(pool)
    .await
}

/// What the account page shows about billing.
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct BillingStatus {
    /// Stripe customers ([`customers`]): one billing portal each.
    pub customers: i64,
    /// Has a subscription that is not over (active, trialing, past due, unpaid...): a new
    /// Checkout would make a second one, so the portal is offered instead.
    pub has_live_subscription: bool,
    /// `YYYY-MM-DD` of the newest failed payment, while a subscription is past due or unpaid.
    pub payment_failed_on: Option<String>,
}

/// Subscription statuses after which nothing is charged any more.
pub(crate) const ENDED_STATUSES: [&str; 2] = ["canceled", "incomplete_expired"];

pub async fn status(pool: &PgPool, user_id: i64) -> Result<BillingStatus, sqlx::Error> {
    let status: Option<BillingStatus> = sqlx::query_as(
        "WITH mine AS (
             SELECT s.* FROM stripe_subscriptions s, users u
              WHERE u.id = $1 AND (s.user_id = u.id OR s.customer_id = u.stripe_customer_id)
         )
         SELECT (SELECT count(DISTINCT c) FROM (
                    SELECT u.stripe_customer_id AS c WHERE u.stripe_customer_id IS NOT NULL
                    UNION SELECT customer_id FROM stripe_subscriptions WHERE user_id = u.id
                 ) linked) AS customers,
                EXISTS (SELECT 1 FROM mine WHERE status <> ALL($2)) AS has_live_subscription,
                CASE WHEN EXISTS (SELECT 1 FROM mine WHERE status IN ('past_due', 'unpaid')) THEN
                    (SELECT to_char(max(f.failed_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD')
                       FROM payment_failures f
                      WHERE f.customer_id = u.stripe_customer_id
                         OR f.subscription_id IN (SELECT id FROM mine))
                END AS payment_failed_on
           FROM users u WHERE u.id = $1",
    )
    .bind(user_id)
    .bind(&ENDED_STATUSES[..])
    .fetch_optional(pool)
    .await?;
    Ok(status.unwrap_or_default())
}
