//! `POST /stripe/webhook`: events from Stripe, verified against the raw body with
//! async-stripe's verifier (HMAC-SHA256 under the endpoint secret, 5 minutes' tolerance), each
//! handled once.

use sqlx::{PgPool, Postgres, Transaction};
use stripe_webhook::{EventObject, Webhook, WebhookError};

/// Why an event was refused (HTTP 400: Stripe shows it in its dashboard and retries).
#[derive(Debug, thiserror::Error)]
pub enum Rejected {
    #[error("bad signature")]
    Signature(#[source] WebhookError),
    #[error("event not understood: {0}")]
    Unparsable(String),
}

/// What was done with a verified event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Applied (the event type).
    Applied(String),
    /// This event id was handled before: nothing done.
    Replay,
    /// A type Zenbu does not act on, or for no known user.
    Ignored(String),
}

/// Subscription statuses that give Premium.
const PREMIUM_STATUSES: [&str; 2] = ["active", "trialing"];

/// Verifies and applies one delivery. `now` overrides the clock (Unix seconds; tests only).
pub async fn handle(
    pool: &PgPool,
    secret: &str,
    payload: &str,
    signature: &str,
    now: Option<i64>,
) -> Result<Result<Handled, Rejected>, sqlx::Error> {
    let event = match now {
        Some(now) => Webhook::construct_event_with_timestamp(payload, signature, secret, now),
        None => Webhook::construct_event(payload, signature, secret),
    };
    let event = match event {
        Ok(event) => event,
        // Parsing comes after verification, so this payload is genuinely from Stripe.
        Err(WebhookError::BadParse(reason)) => return Ok(Err(Rejected::Unparsable(reason))),
        Err(error) => return Ok(Err(Rejected::Signature(error))),
    };
    let kind = event.type_.as_str().to_string();
    let mut tx = pool.begin().await?;
    let first_time = sqlx::query(
        "INSERT INTO stripe_events (id, type, created) VALUES ($1, $2, $3)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(event.id.as_str())
    .bind(&kind)
    .bind(event.created)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !first_time {
        return Ok(Ok(Handled::Replay));
    }
    let created = event.created;
    let applied = match event.data.object {
        EventObject::CheckoutSessionCompleted(session) => {
            let user: Option<i64> = session
                .client_reference_id
                .as_deref()
                .and_then(|id| id.parse().ok());
            let customer = session
                .customer
                .as_ref()
                .map(|c| c.id().as_str().to_string());
            let subscription = session
                .subscription
                .as_ref()
                .map(|s| s.id().as_str().to_string());
            // Paid now, or nothing to pay (a trial): the subscription is live. A delayed payment
            // method leaves it to the subscription events.
            let paid = matches!(
                session.payment_status.as_str(),
                "paid" | "no_payment_required"
            );
            match (user, customer, subscription) {
                (Some(user), Some(customer), Some(subscription)) => {
                    link_customer(&mut tx, user, &customer).await?;
                    claim_subscription(&mut tx, &subscription, &customer, user, paid, created)
                        .await?;
                    refresh_plans(&mut tx, &customer).await?;
                    true
                }
                _ => false,
            }
        }
        EventObject::CustomerSubscriptionUpdated(subscription)
        | EventObject::CustomerSubscriptionDeleted(subscription) => {
            let period_end = subscription
                .items
                .data
                .iter()
                .map(|item| item.current_period_end)
                .max();
            record_subscription(
                &mut tx,
                subscription.id.as_str(),
                subscription.customer.id().as_str(),
                subscription.status.as_str(),
                period_end,
                created,
            )
            .await?;
            refresh_plans(&mut tx, subscription.customer.id().as_str()).await?;
            true
        }
        EventObject::InvoicePaymentFailed(invoice) => {
            let subscription = invoice
                .parent
                .as_ref()
                .and_then(|parent| parent.subscription_details.as_ref())
                .map(|details| details.subscription.id().as_str().to_string());
            sqlx::query(
                "INSERT INTO payment_failures
                     (event_id, invoice_id, customer_id, subscription_id, failed_at)
                 VALUES ($1, $2, $3, $4, to_timestamp($5))",
            )
            .bind(event.id.as_str())
            .bind(invoice.id.as_ref().map(|id| id.as_str().to_string()))
            .bind(
                invoice
                    .customer
                    .as_ref()
                    .map(|c| c.id().as_str().to_string()),
            )
            .bind(subscription)
            .bind(created)
            .execute(&mut *tx)
            .await?;
            true
        }
        _ => false,
    };
    tx.commit().await?;
    Ok(Ok(if applied {
        tracing::info!(event = %event.id.as_str(), kind, "Stripe event applied");
        Handled::Applied(kind)
    } else {
        Handled::Ignored(kind)
    }))
}

/// Links a user to their Stripe customer, unless they have one (Checkout reuses it, so a user
/// has one customer; the billing portal opens that one).
async fn link_customer(
    tx: &mut Transaction<'_, Postgres>,
    user: i64,
    customer: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE users SET stripe_customer_id = coalesce(stripe_customer_id, $2) WHERE id = $1",
    )
    .bind(user)
    .bind(customer)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Records that `user`'s Checkout created `subscription`. Its state is set (active, as of this
/// event) only if no subscription event has reported one yet: a completed Checkout never
/// overrides what Stripe said about the subscription itself.
async fn claim_subscription(
    tx: &mut Transaction<'_, Postgres>,
    subscription: &str,
    customer: &str,
    user: i64,
    paid: bool,
    event_created: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO stripe_subscriptions (id, customer_id, status, event_created, user_id)
         SELECT $1, $2, $3, $4, id FROM users WHERE id = $5
         ON CONFLICT (id) DO UPDATE SET
             user_id = coalesce(stripe_subscriptions.user_id, excluded.user_id)",
    )
    .bind(subscription)
    .bind(customer)
    .bind(if paid { "active" } else { "incomplete" })
    .bind(event_created)
    .bind(user)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Stores a subscription's state unless a newer event already did.
async fn record_subscription(
    tx: &mut Transaction<'_, Postgres>,
    id: &str,
    customer: &str,
    status: &str,
    period_end: Option<i64>,
    event_created: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO stripe_subscriptions (id, customer_id, status, current_period_end, event_created)
         VALUES ($1, $2, $3, to_timestamp($4), $5)
         ON CONFLICT (id) DO UPDATE SET
             status = excluded.status,
             current_period_end = coalesce(excluded.current_period_end, stripe_subscriptions.current_period_end),
             event_created = excluded.event_created,
             updated_at = now()
         WHERE stripe_subscriptions.event_created <= excluded.event_created",
    )
    .bind(id)
    .bind(customer)
    .bind(status)
    .bind(period_end.map(|t| t as f64))
    .bind(event_created)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Sets the plan of the users behind `customer`: Premium while any of their subscriptions
/// (claimed by their Checkout, or of their customer) is active or trialing.
async fn refresh_plans(
    tx: &mut Transaction<'_, Postgres>,
    customer: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE users u SET plan = CASE WHEN EXISTS (
                 SELECT 1 FROM stripe_subscriptions s
                  WHERE (s.user_id = u.id OR s.customer_id = u.stripe_customer_id)
                    AND s.status = ANY($2))
             THEN 'premium' ELSE 'free' END
          WHERE u.stripe_customer_id = $1
             OR u.id IN (SELECT user_id FROM stripe_subscriptions WHERE customer_id = $1)",
    )
    .bind(customer)
    .bind(&PREMIUM_STATUSES[..])
    .execute(&mut **tx)
    .await?;
    Ok(())
}
