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

/// Checkout Session metadata key naming the price the session was made for (by
/// [`super::Billing::checkout_url`]).
pub const PRICE_METADATA: &str = "zenbu_price";

/// Subscription statuses that give Premium.
const PREMIUM_STATUSES: [&str; 2] = ["active", "trialing"];

/// The webhook endpoint as configured: its signing secret, the Premium price, and whether the
/// API key is a live one (events must come from the same mode).
#[derive(Debug, Clone, Copy)]
pub struct Endpoint<'a> {
    pub secret: &'a str,
    pub price: &'a str,
    pub live: bool,
}

/// A verified event, reduced to what Zenbu acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: String,
    /// Stripe's live mode (not test mode) made it.
    pub livemode: bool,
    /// The event type, e.g. `customer.subscription.updated`.
    pub kind: String,
    /// When Stripe created the event (Unix seconds): orders subscription states.
    pub created: i64,
    pub change: Change,
}

/// What an event says about a customer's subscriptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A Checkout Session expired unused.
    CheckoutExpired { session: String },
    /// A Checkout Session completed: who paid (our user id, from `client_reference_id`), as
    /// which customer, for which subscription, and whether it is paid already.
    CheckoutCompleted {
        session: String,
        user: Option<i64>,
        customer: Option<String>,
        subscription: Option<String>,
        paid: bool,
        /// The price in the session's metadata (set on the sessions Zenbu makes).
        price: Option<String>,
    },
    /// A subscription's state (updated or deleted) and the prices of its items.
    Subscription {
        id: String,
        customer: String,
        status: String,
        period_end: Option<i64>,
        prices: Vec<String>,
    },
    /// An invoice payment failed.
    PaymentFailed {
        invoice: Option<String>,
        customer: Option<String>,
        subscription: Option<String>,
    },
    /// Anything else: recorded, not acted on.
    Other,
}

/// Verifies one delivery's signature and reads it. `now` overrides the clock (Unix seconds;
/// tests only). No database: this is the part hostile bytes reach first (fuzzed).
pub fn read_delivery(
    secret: &str,
    payload: &str,
    signature: &str,
    now: Option<i64>,
) -> Result<Delivery, Rejected> {
    let event = match now {
        Some(now) => Webhook::construct_event_with_timestamp(payload, signature, secret, now),
        None => Webhook::construct_event(payload, signature, secret),
    };
    let event = match event {
        Ok(event) => event,
        // Parsing comes after verification, so this payload is genuinely from Stripe.
        Err(WebhookError::BadParse(reason)) => return Err(Rejected::Unparsable(reason)),
        Err(error) => return Err(Rejected::Signature(error)),
    };
    let change = match event.data.object {
        EventObject::CheckoutSessionExpired(session) => Change::CheckoutExpired {
            session: session.id.as_str().to_string(),
        },
        EventObject::CheckoutSessionCompleted(session) => Change::CheckoutCompleted {
            session: session.id.as_str().to_string(),
            user: session
                .client_reference_id
                .as_deref()
                .and_then(|id| id.parse().ok()),
            customer: session
                .customer
                .as_ref()
                .map(|c| c.id().as_str().to_string()),
            subscription: session
                .subscription
                .as_ref()
                .map(|s| s.id().as_str().to_string()),
            // Paid now, or nothing to pay (a trial): the subscription is live. A delayed
            // payment method leaves it to the subscription events.
            paid: matches!(
                session.payment_status.as_str(),
                "paid" | "no_payment_required"
            ),
            price: session
                .metadata
                .as_ref()
                .and_then(|metadata| metadata.get(PRICE_METADATA).cloned()),
        },
        EventObject::CustomerSubscriptionUpdated(subscription)
        | EventObject::CustomerSubscriptionDeleted(subscription) => Change::Subscription {
            id: subscription.id.as_str().to_string(),
            customer: subscription.customer.id().as_str().to_string(),
            status: subscription.status.as_str().to_string(),
            period_end: period_end(&subscription),
            prices: prices(&subscription),
        },
        EventObject::InvoicePaymentFailed(invoice) => Change::PaymentFailed {
            invoice: invoice.id.as_ref().map(|id| id.as_str().to_string()),
            customer: invoice
                .customer
                .as_ref()
                .map(|c| c.id().as_str().to_string()),
            subscription: invoice
                .parent
                .as_ref()
                .and_then(|parent| parent.subscription_details.as_ref())
                .map(|details| details.subscription.id().as_str().to_string()),
        },
        _ => Change::Other,
    };
    Ok(Delivery {
        id: event.id.as_str().to_string(),
        livemode: event.livemode,
        kind: event.type_.as_str().to_string(),
        created: event.created,
        change,
    })
}

/// The end of a subscription's current period: its items' latest.
pub(super) fn period_end(subscription: &stripe_billing::Subscription) -> Option<i64> {
    subscription
        .items
        .data
        .iter()
        .map(|item| item.current_period_end)
        .max()
}

/// The prices of a subscription's items.
pub(super) fn prices(subscription: &stripe_billing::Subscription) -> Vec<String> {
    subscription
        .items
        .data
        .iter()
        .map(|item| item.price.id.as_str().to_string())
        .collect()
}

/// Verifies and applies one delivery: Premium comes only from a subscription to the endpoint's
/// price (a Checkout made for it, a subscription whose items hold it), and only from events of
/// the key's mode (a test-mode event reaching a live server changes nothing). `now` overrides
/// the clock (Unix seconds; tests only).
pub async fn handle(
    pool: &PgPool,
    endpoint: &Endpoint<'_>,
    payload: &str,
    signature: &str,
    now: Option<i64>,
) -> Result<Result<Handled, Rejected>, sqlx::Error> {
    let delivery = match read_delivery(endpoint.secret, payload, signature, now) {
        Ok(delivery) => delivery,
        Err(rejected) => return Ok(Err(rejected)),
    };
    let Delivery {
        id,
        livemode,
        kind,
        created,
        change,
    } = delivery;
    if livemode != endpoint.live {
        tracing::warn!(event = %id, livemode, "a Stripe event of the other mode than the API key's: ignored");
        return Ok(Ok(Handled::Ignored(format!(
            "{kind} (livemode {livemode})"
        ))));
    }
    let price = endpoint.price;
    let mut tx = pool.begin().await?;
    if !record_event_once(&mut tx, &id, &kind, created).await? {
        return Ok(Ok(Handled::Replay));
    }
    let applied = apply_change(&mut tx, change, price, &id, created).await?;
    tx.commit().await?;
    Ok(Ok(if applied {
        tracing::info!(event = %id, kind, "Stripe event applied");
        Handled::Applied(kind)
    } else {
        Handled::Ignored(kind)
    }))
}

/// Records the event's id; false when it was recorded before (Stripe delivers at least once).
async fn record_event_once(
    tx: &mut Transaction<'_, Postgres>,
    id: &str,
    kind: &str,
    created: i64,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query(
        "INSERT INTO stripe_events (id, type, created) VALUES ($1, $2, $3)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(id)
    .bind(kind)
    .bind(created)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}

/// Applies what the event of `event_id` changed; false when it changes nothing here (another
/// price's Checkout, an incomplete one, an event type not handled).
async fn apply_change(
    tx: &mut Transaction<'_, Postgres>,
    change: Change,
    price: &str,
    event_id: &str,
    created: i64,
) -> Result<bool, sqlx::Error> {
    // Users first, then subscriptions, in every path that writes both (and in deleting an
    // account): two events about one user cannot wait on each other.
    match &change {
        Change::CheckoutCompleted {
            user,
            customer: Some(customer),
            subscription,
            ..
        } => lock_users(tx, customer, subscription.as_deref(), *user).await?,
        Change::Subscription { id, customer, .. } => {
            lock_users(tx, customer, Some(id), None).await?
        }
        _ => {}
    }
    match change {
        Change::CheckoutExpired { session } => {
            close_checkout(tx, &session).await?;
        }
        Change::CheckoutCompleted {
            session,
            user: Some(user),
            customer: Some(customer),
            subscription: Some(subscription),
            paid,
            price: Some(session_price),
        } if session_price == price => {
            close_checkout(tx, &session).await?;
            link_customer(tx, user, &customer).await?;
            claim_subscription(tx, &subscription, &customer, user, paid, created).await?;
            refresh_plans(tx, &customer).await?;
        }
        Change::Subscription {
            id: subscription,
            customer,
            status,
            period_end,
            prices,
        } => {
            let state = SubscriptionState {
                status: &status,
                period_end,
                ours: prices.iter().any(|p| p == price),
                event_created: created,
            };
            record_subscription(tx, &subscription, &customer, &state).await?;
            refresh_plans(tx, &customer).await?;
        }
        Change::PaymentFailed {
            invoice,
            customer,
            subscription,
        } => {
            sqlx::query(
                "INSERT INTO payment_failures
                     (event_id, invoice_id, customer_id, subscription_id, failed_at)
                 VALUES ($1, $2, $3, $4, to_timestamp($5))",
            )
            .bind(event_id)
            .bind(invoice)
            .bind(customer)
            .bind(subscription)
            .bind(created)
            .execute(&mut **tx)
            .await?;
        }
        Change::CheckoutCompleted { session, .. } => {
            // Not a Premium Checkout (another price, or unpaid): nothing to grant.
            close_checkout(tx, &session).await?;
            return Ok(false);
        }
        Change::Other => return Ok(false),
    }
    Ok(true)
}

/// Locks the rows of the users a subscription event may change (the customer's, the
/// subscription's claimant, the Checkout's user), in id order.
pub(super) async fn lock_users(
    tx: &mut Transaction<'_, Postgres>,
    customer: &str,
    subscription: Option<&str>,
    user: Option<i64>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "SELECT id FROM users
          WHERE stripe_customer_id = $1 OR id = $3
             OR id IN (SELECT user_id FROM stripe_subscriptions WHERE customer_id = $1 OR id = $2)
          ORDER BY id FOR UPDATE",
    )
    .bind(customer)
    .bind(subscription)
    .bind(user)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A Checkout Session is over (completed or expired): the user may open another.
async fn close_checkout(
    tx: &mut Transaction<'_, Postgres>,
    session: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE checkout_sessions SET closed_at = now() WHERE id = $1 AND closed_at IS NULL",
    )
    .bind(session)
    .execute(&mut **tx)
    .await?;
    Ok(())
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

/// Records that `user`'s Checkout (made for the Premium price) created `subscription`. Its
/// state is set (active, as of this event) only if no subscription event has reported one yet:
/// a completed Checkout never overrides what Stripe said about the subscription itself.
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

/// What one subscription event (or a read of it from the API) says about a subscription.
pub(super) struct SubscriptionState<'a> {
    pub status: &'a str,
    pub period_end: Option<i64>,
    /// Its items hold the Premium price.
    pub ours: bool,
    pub event_created: i64,
}

/// Stores a subscription's state unless a newer event already did. Event times are whole
/// seconds, so an update and a cancellation can share one: then the cancellation stays (a
/// cancelled subscription never becomes active again in Stripe).
pub(super) async fn record_subscription(
    tx: &mut Transaction<'_, Postgres>,
    id: &str,
    customer: &str,
    state: &SubscriptionState<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO stripe_subscriptions
             (id, customer_id, status, current_period_end, event_created, premium_price)
         VALUES ($1, $2, $3, to_timestamp($4), $5, $6)
         ON CONFLICT (id) DO UPDATE SET
             status = excluded.status,
             current_period_end = coalesce(excluded.current_period_end, stripe_subscriptions.current_period_end),
             event_created = excluded.event_created,
             premium_price = excluded.premium_price,
             updated_at = now()
         WHERE stripe_subscriptions.event_created < excluded.event_created
            OR (stripe_subscriptions.event_created = excluded.event_created
                AND stripe_subscriptions.status <> 'canceled')",
    )
    .bind(id)
    .bind(customer)
    .bind(state.status)
    .bind(state.period_end.map(|t| t as f64))
    .bind(state.event_created)
    .bind(state.ours)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Sets the plan of the users behind `customer`: Premium while any of their subscriptions
/// (claimed by their Checkout, or of their customer) to the Premium price is active or trialing.
///
/// The users' rows are locked first, in a statement of their own: two events about one user's
/// subscriptions (two cancellations at once, possibly of two customers) then take turns, and
/// the second's plan is read after the first has committed. Read in one statement, each saw
/// the other's subscription as it was before and the last to write kept Premium.
pub(super) async fn refresh_plans(
    tx: &mut Transaction<'_, Postgres>,
    customer: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "SELECT id FROM users
          WHERE stripe_customer_id = $1
             OR id IN (SELECT user_id FROM stripe_subscriptions WHERE customer_id = $1)
          ORDER BY id FOR UPDATE",
    )
    .bind(customer)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE users u SET plan = CASE WHEN EXISTS (
                 SELECT 1 FROM stripe_subscriptions s
                  WHERE (s.user_id = u.id OR s.customer_id = u.stripe_customer_id)
                    AND s.status = ANY($2) AND s.premium_price)
             THEN $3 ELSE $4 END
          WHERE u.stripe_customer_id = $1
             OR u.id IN (SELECT user_id FROM stripe_subscriptions WHERE customer_id = $1)",
    )
    .bind(customer)
    .bind(&PREMIUM_STATUSES[..])
    .bind(crate::quota::Plan::Premium.stored())
    .bind(crate::quota::Plan::Free.stored())
    .execute(&mut **tx)
    .await?;
    Ok(())
}
