//! Reconciling with Stripe: the plans follow webhooks, and Stripe stops retrying one after
//! three days of failures (the app down, the endpoint misconfigured). A cancellation missed that
//! way would keep Premium forever, and a missed payment would withhold it. So now and then
//! ([`spawn`]) every customer with something live here, and every Premium user's, is read back
//! from Stripe through the API, and what Stripe says is recorded as the newest state. A pass
//! also gives Stripe the addresses it missed when users changed theirs.

use std::time::Duration;

use sqlx::PgPool;
use stripe_billing::subscription::{ListSubscription, ListSubscriptionStatus};

use super::{Billing, BillingError, ENDED_STATUSES, webhook};

/// What one pass found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Customers read from Stripe.
    pub customers: usize,
    /// Subscriptions whose status here differed from Stripe's (now corrected).
    pub corrected: usize,
    /// Customers given an address Stripe did not get when the user changed it.
    pub addresses: usize,
}

impl Billing {
    /// One pass over every customer worth reading (see the module documentation). A customer
    /// Stripe fails on is logged and skipped; the next pass tries again.
    pub async fn reconcile(&self, pool: &PgPool) -> Result<Reconciled, BillingError> {
        let customers: Vec<String> = sqlx::query_scalar(
            "SELECT customer_id FROM stripe_subscriptions WHERE status <> ALL($1)
             UNION
             SELECT stripe_customer_id FROM users
              WHERE plan = $2 AND stripe_customer_id IS NOT NULL
             ORDER BY 1",
        )
        .bind(&ENDED_STATUSES[..])
        .bind(crate::quota::Plan::Premium.stored())
        .fetch_all(pool)
        .await?;
        let mut pass = Reconciled::default();
        let stale: Vec<i64> =
            sqlx::query_scalar("SELECT id FROM users WHERE stripe_email_stale ORDER BY id")
                .fetch_all(pool)
                .await?;
        for user in stale {
            match self.sync_customer_email(pool, user).await {
                Ok(updated) => pass.addresses += updated,
                Err(BillingError::Stripe(error)) => {
                    tracing::warn!(%error, user, "giving Stripe a user's new address failed");
                }
                Err(error) => return Err(error),
            }
        }
        for customer in &customers {
            match self.reconcile_customer(pool, customer).await {
                Ok(corrected) => {
                    pass.customers += 1;
                    pass.corrected += corrected;
                }
                Err(BillingError::Stripe(error)) => {
                    tracing::warn!(%error, customer, "reading a customer's subscriptions from Stripe failed");
                }
                Err(error) => return Err(error),
            }
        }
        Ok(pass)
    }

    /// Reads `customer`'s subscriptions from Stripe and records each as the newest state (newer
    /// than any event so far), then sets the plans of the customer's users; how many statuses
    /// changed.
    pub async fn reconcile_customer(
        &self,
        pool: &PgPool,
        customer: &str,
    ) -> Result<usize, BillingError> {
        let listed = ListSubscription::new()
            .customer(customer)
            .status(ListSubscriptionStatus::All)
            .limit(100)
            .send(&self.client)
            .await?;
        if listed.has_more {
            tracing::warn!(
                customer,
                "over 100 subscriptions: only the first 100 were read"
            );
        }
        let read_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |now| now.as_secs() as i64);
        let mut tx = pool.begin().await?;
        // Users first, as the webhook takes them.
        webhook::lock_users(&mut tx, customer, None, None).await?;
        let mut corrected = 0;
        for subscription in &listed.data {
            let id = subscription.id.as_str();
            let before: Option<String> =
                sqlx::query_scalar("SELECT status FROM stripe_subscriptions WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?;
            let status = subscription.status.as_str();
            let state = webhook::SubscriptionState {
                status,
                period_end: webhook::period_end(subscription),
                ours: webhook::prices(subscription).contains(&self.price_id),
                event_created: read_at,
            };
            webhook::record_subscription(&mut tx, id, customer, &state).await?;
            if before.as_deref() != Some(status) {
                corrected += 1;
                tracing::warn!(subscription = id, customer, was = ?before, now = status, "a subscription's state differed from Stripe's: corrected");
            }
        }
        webhook::refresh_plans(&mut tx, customer).await?;
        tx.commit().await?;
        Ok(corrected)
    }
}

/// Reconciles every `every` (the first pass one period after start).
pub fn spawn(pool: PgPool, billing: Billing, every: Duration) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            ticks.tick().await;
            match billing.reconcile(&pool).await {
                Ok(pass) => tracing::info!(
                    customers = pass.customers,
                    corrected = pass.corrected,
                    addresses = pass.addresses,
                    "reconciled with Stripe"
                ),
                Err(error) => tracing::warn!(%error, "reconciling with Stripe failed"),
            }
        }
    });
}
