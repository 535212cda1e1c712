//! Premium through Stripe, with the real async-stripe client against the fake Stripe and a real
//! PostgreSQL: Checkout Sessions, signed webhooks (bad signatures, replays, out-of-order
//! delivery), cancellation, failed payments, and the billing portal.

use crate::common;

use crate::common::{Browser, TestApp, location};
use fakes::stripe::{ApiBehaviour, FakeStripe, FakeStripeConfig, events, sign};
use server::billing::{Billing, BillingConfig, webhook};
use server::mail;
use sqlx::PgPool;

const SECRET: &str = "whsec_test_secret";
const PRICE: &str = "price_test_premium";
const PASSWORD: &str = "correct horse battery";

/// The fake Stripe and the app wired to each other; a signed-in free user in `browser`.
struct Shop {
    fake: FakeStripe,
    app: TestApp,
    browser: Browser,
    user_id: i64,
}

async fn shop(pool: &PgPool) -> Shop {
    let fake = FakeStripe::start(
        FakeStripeConfig {
            api_key: "sk_test_123".into(),
            price_id: PRICE.into(),
            webhook_url: None,
            webhook_secret: SECRET.into(),
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let app = common::spawn_app_with(pool.clone(), |config| {
        config.billing.stripe_secret_key = Some("sk_test_123".into());
        config.billing.stripe_price_id = Some(PRICE.into());
        config.billing.stripe_webhook_secret = Some(SECRET.into());
        config.billing.stripe_api_base = Some(fake.base_url());
    })
    .await;
    fake.set_webhook_url(&app.url("/stripe/webhook"));
    let user_id = common::insert_user(pool, "pay@example.com", PASSWORD).await;
    let browser = Browser::new(&app);
    let csrf = browser.csrf().await;
    let response = browser
        .post(
            "/login",
            &[
                ("email", "pay@example.com"),
                ("password", PASSWORD),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(location(&response), "/account");
    Shop {
        fake,
        app,
        browser,
        user_id,
    }
}

/// The app's billing service as the shop's app has it, for calls the tests make themselves.
fn billing(shop: &Shop) -> Billing {
    Billing::new(
        &BillingConfig {
            secret_key: "sk_test_123".to_string().into(),
            price_id: PRICE.into(),
            webhook_secret: SECRET.to_string().into(),
            api_base: Some(shop.fake.base_url()),
        },
        &shop.app.url(""),
    )
    .unwrap()
}

async fn plan(pool: &PgPool, user_id: i64) -> String {
    sqlx::query_scalar("SELECT plan FROM users WHERE id = $1")
        .bind(user_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Clicks "Go Premium"; the Checkout Session id the browser is sent to.
async fn go_premium(shop: &Shop) -> String {
    let csrf = shop.browser.csrf().await;
    let response = shop
        .browser
        .post("/premium/checkout", &[("csrf", &csrf)])
        .await;
    let target = location(&response);
    let prefix = format!("{}/checkout/", shop.fake.base_url());
    assert!(target.starts_with(&prefix), "{target}");
    target[prefix.len()..].to_string()
}

#[sqlx::test(migrations = "../migrations")]
async fn go_premium_creates_a_subscription_checkout_and_the_webhook_sets_premium(pool: PgPool) {
    let shop = shop(&pool).await;
    let session = go_premium(&shop).await;
    let request = shop.fake.requests().pop().unwrap();
    assert_eq!(request.path, "/v1/checkout/sessions");
    assert_eq!(request.field("mode"), Some("subscription"));
    assert_eq!(request.field("line_items[0][price]"), Some(PRICE));
    assert_eq!(request.field("line_items[0][quantity]"), Some("1"));
    assert_eq!(request.field("metadata[zenbu_price]"), Some(PRICE));
    assert_eq!(
        request.field("client_reference_id"),
        Some(shop.user_id.to_string().as_str())
    );
    assert_eq!(request.field("customer_email"), Some("pay@example.com"));
    assert_eq!(request.field("customer"), None);
    assert_eq!(
        request.field("success_url"),
        Some(
            format!(
                "{}/premium/success?session_id={{CHECKOUT_SESSION_ID}}",
                shop.app.url("")
            )
            .as_str()
        )
    );
    assert_eq!(
        request.field("cancel_url"),
        Some(shop.app.url("/premium/cancelled").as_str())
    );

    // Coming back to the success page changes nothing: only Stripe's word does.
    assert!(
        shop.browser
            .page("/premium/success")
            .await
            .contains("as soon as Stripe confirms")
    );
    assert_eq!(plan(&pool, shop.user_id).await, "free");

    let (customer, _) = shop.fake.complete_checkout(&session).await.unwrap();
    assert_eq!(
        shop.fake.deliveries(),
        vec![("checkout.session.completed".to_string(), 200)]
    );
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    let account = shop.browser.page("/account").await;
    assert!(
        account.contains(r#"<dd class="plan">Premium</dd>"#),
        "{account}"
    );
    assert!(account.contains("of 200 searches this month"), "{account}");
    assert!(account.contains("Manage billing"), "{account}");

    // The billing portal opens for the known customer.
    let csrf = shop.browser.csrf().await;
    let portal = shop
        .browser
        .post("/billing/portal", &[("csrf", &csrf)])
        .await;
    assert!(location(&portal).starts_with(&format!("{}/portal/", shop.fake.base_url())));
    let request = shop.fake.requests().pop().unwrap();
    assert_eq!(request.path, "/v1/billing_portal/sessions");
    assert_eq!(request.field("customer"), Some(customer.as_str()));
    assert_eq!(
        request.field("return_url"),
        Some(shop.app.url("/account").as_str())
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn cancelling_or_not_paying_returns_to_free_and_a_new_checkout_reuses_the_customer(
    pool: PgPool,
) {
    let shop = shop(&pool).await;
    let session = go_premium(&shop).await;
    let (customer, subscription) = shop.fake.complete_checkout(&session).await.unwrap();
    assert_eq!(plan(&pool, shop.user_id).await, "premium");

    // A renewal fails: recorded, the subscription goes past due (free), and the account page
    // says so and offers the billing portal; "Go Premium" leads there too, not to a second
    // subscription.
    assert_eq!(
        shop.fake.fail_payment(&subscription).await,
        Some((200, 200))
    );
    let failures: i64 =
        sqlx::query_scalar("SELECT count(*) FROM payment_failures WHERE customer_id = $1")
            .bind(&customer)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(failures, 1);
    assert_eq!(plan(&pool, shop.user_id).await, "free");
    let account = shop.browser.page("/account").await;
    assert!(account.contains("failed. Update your card"), "{account}");
    assert!(account.contains("Manage billing"), "{account}");
    let csrf = shop.browser.csrf().await;
    let response = shop
        .browser
        .post("/premium/checkout", &[("csrf", &csrf)])
        .await;
    assert!(location(&response).starts_with(&format!("{}/portal/", shop.fake.base_url())));
    assert_eq!(
        shop.fake.requests().last().unwrap().path,
        "/v1/billing_portal/sessions"
    );
    // Paid after all: Premium again, the notice gone.
    shop.fake
        .set_subscription_status(&subscription, "active")
        .await;
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    assert!(
        !shop
            .browser
            .page("/account")
            .await
            .contains("failed. Update your card")
    );
    shop.fake
        .set_subscription_status(&subscription, "unpaid")
        .await;
    assert_eq!(plan(&pool, shop.user_id).await, "free");
    shop.fake
        .set_subscription_status(&subscription, "active")
        .await;
    shop.fake
        .set_subscription_status(&subscription, "canceled")
        .await;
    assert_eq!(plan(&pool, shop.user_id).await, "free");
    assert_eq!(
        shop.fake.deliveries().last().unwrap(),
        &("customer.subscription.deleted".to_string(), 200)
    );

    // Buying again: the same Stripe customer.
    go_premium(&shop).await;
    let request = shop.fake.requests().pop().unwrap();
    assert_eq!(request.field("customer"), Some(customer.as_str()));
    assert_eq!(request.field("customer_email"), None);
}

/// Hands a payload signed at `t` straight to the webhook handler (clock at `t`).
async fn deliver(pool: &PgPool, t: i64, payload: String) -> webhook::Handled {
    webhook::handle(
        pool,
        &webhook::Endpoint {
            secret: SECRET,
            price: PRICE,
            live: false,
        },
        &payload,
        &sign(&payload, SECRET, t),
        Some(t),
    )
    .await
    .unwrap()
    .unwrap()
}

/// Delivers `payload` to the app's webhook with `signature`; (status, body).
async fn post_webhook(app: &TestApp, payload: &str, signature: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(app.url("/stripe/webhook"))
        .header("stripe-signature", signature)
        .body(payload.to_string())
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn completed_event(id: &str, created: i64, user_id: i64) -> String {
    let session = events::checkout_session(
        "cs_test_manual",
        &serde_json::json!({
            "client_reference_id": user_id.to_string(), "customer": "cus_manual",
            "subscription": "sub_manual", "status": "complete", "payment_status": "paid",
            "metadata": { webhook::PRICE_METADATA: PRICE },
        }),
        "http://fake",
    );
    events::event(id, "checkout.session.completed", created, session).to_string()
}

#[sqlx::test(migrations = "../migrations")]
async fn forged_stale_and_replayed_events_change_nothing(pool: PgPool) {
    let shop = shop(&pool).await;
    let now = events::now();
    let payload = completed_event("evt_manual_1", now, shop.user_id);

    for (signature, why) in [
        (sign(&payload, "whsec_wrong", now), "another secret"),
        (
            sign(&payload.replace("cus_manual", "cus_other"), SECRET, now),
            "another body",
        ),
        (sign(&payload, SECRET, now - 301), "older than 5 minutes"),
        ("t=abc,v1=00".to_string(), "malformed header"),
        (String::new(), "no signature"),
    ] {
        let (status, _) = post_webhook(&shop.app, &payload, &signature).await;
        assert_eq!(status, 400, "{why}");
    }
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM stripe_events")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(events, 0);
    assert_eq!(plan(&pool, shop.user_id).await, "free");

    // Signed now: applied once; the same event again is acknowledged and ignored.
    let signature = sign(&payload, SECRET, now);
    let (status, body) = post_webhook(&shop.app, &payload, &signature).await;
    assert_eq!(
        (status, body.contains("applied checkout.session.completed")),
        (200, true),
        "{body}"
    );
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    // Cancelled since; then the old completion is replayed: still free.
    let cancelled = events::event(
        "evt_manual_2",
        "customer.subscription.deleted",
        now + 1,
        events::subscription("sub_manual", "cus_manual", "canceled", PRICE),
    )
    .to_string();
    let (status, _) = post_webhook(&shop.app, &cancelled, &sign(&cancelled, SECRET, now)).await;
    assert_eq!(status, 200);
    assert_eq!(plan(&pool, shop.user_id).await, "free");
    let (status, body) = post_webhook(&shop.app, &payload, &signature).await;
    assert_eq!(
        (status, body.contains("already handled")),
        (200, true),
        "{body}"
    );
    assert_eq!(plan(&pool, shop.user_id).await, "free");
}

#[sqlx::test(migrations = "../migrations")]
async fn events_delivered_out_of_order_leave_the_plan_of_the_newest(pool: PgPool) {
    let shop = shop(&pool).await;
    let t = events::now() - 100;
    // Stripe's order: completed (t), cancelled (t+50). Delivered: cancelled first.
    let cancelled = events::event(
        "evt_b",
        "customer.subscription.deleted",
        t + 50,
        events::subscription("sub_manual", "cus_manual", "canceled", PRICE),
    );
    deliver(&pool, t + 100, cancelled.to_string()).await;
    deliver(&pool, t + 100, completed_event("evt_a", t, shop.user_id)).await;
    assert_eq!(plan(&pool, shop.user_id).await, "free");
    // An older "active" update arriving last does not revive it either.
    let active = events::event(
        "evt_c",
        "customer.subscription.updated",
        t + 10,
        events::subscription("sub_manual", "cus_manual", "active", PRICE),
    );
    deliver(&pool, t + 100, active.to_string()).await;
    assert_eq!(plan(&pool, shop.user_id).await, "free");
    let status: String =
        sqlx::query_scalar("SELECT status FROM stripe_subscriptions WHERE id = 'sub_manual'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(status, "canceled");
}

#[sqlx::test(migrations = "../migrations")]
async fn premium_holds_while_any_subscription_is_live_whatever_the_order(pool: PgPool) {
    let shop = shop(&pool).await;
    // Two tabs, two Checkouts, both paid before either webhook arrived: two customers, two
    // subscriptions.
    let first = go_premium(&shop).await;
    let second = go_premium(&shop).await;
    let (_, a) = shop.fake.complete_checkout(&first).await.unwrap();
    let (_, b) = shop.fake.complete_checkout(&second).await.unwrap();
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    // Cancelling one leaves the other: still Premium; cancelling both: free.
    shop.fake.set_subscription_status(&a, "canceled").await;
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    shop.fake.set_subscription_status(&b, "canceled").await;
    assert_eq!(plan(&pool, shop.user_id).await, "free");

    // A late first delivery of an old Checkout (its subscription since cancelled) while a new
    // subscription is live: the plan stays right.
    let t = events::now();
    let live = events::event(
        "evt_live",
        "customer.subscription.updated",
        t - 10,
        events::subscription("sub_new", "cus_manual", "active", PRICE),
    );
    deliver(
        &pool,
        t,
        completed_event("evt_new", t - 20, shop.user_id).replace("sub_manual", "sub_new"),
    )
    .await;
    deliver(&pool, t, live.to_string()).await;
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    let old_cancelled = events::event(
        "evt_old_cancel",
        "customer.subscription.deleted",
        t - 100,
        events::subscription("sub_manual", "cus_manual", "canceled", PRICE),
    );
    deliver(&pool, t, old_cancelled.to_string()).await;
    deliver(&pool, t, completed_event("evt_old", t - 200, shop.user_id)).await;
    assert_eq!(plan(&pool, shop.user_id).await, "premium");

    // A Checkout whose payment is still pending (a delayed method) gives nothing yet.
    let other = common::insert_user(&pool, "slow@example.com", PASSWORD).await;
    let pending = completed_event("evt_pending", t, other)
        .replace("sub_manual", "sub_slow")
        .replace("cus_manual", "cus_slow")
        .replace(r#""payment_status":"paid""#, r#""payment_status":"unpaid""#);
    assert!(pending.contains(r#""payment_status":"unpaid""#));
    deliver(&pool, t, pending).await;
    assert_eq!(plan(&pool, other).await, "free");
}

#[sqlx::test(migrations = "../migrations")]
async fn premium_comes_only_from_a_subscription_to_the_premium_price(pool: PgPool) {
    let shop = shop(&pool).await;
    let t = events::now() - 100;
    // Checkouts Zenbu did not make for the Premium price (a Payment Link, a cheaper product on
    // the same account): the user's id and a paid subscription are not enough.
    let cheaper = completed_event("evt_cheap", t, shop.user_id).replace(PRICE, "price_cheap");
    let unmarked = completed_event("evt_link", t + 1, shop.user_id)
        .replace(webhook::PRICE_METADATA, "something_else");
    for payload in [cheaper, unmarked] {
        assert!(matches!(
            deliver(&pool, t + 50, payload).await,
            webhook::Handled::Ignored(_)
        ));
        assert_eq!(plan(&pool, shop.user_id).await, "free");
    }
    let foreign_update = events::event(
        "evt_cheap_update",
        "customer.subscription.updated",
        t + 2,
        events::subscription("sub_cheap", "cus_manual", "active", "price_cheap"),
    );
    deliver(&pool, t + 50, foreign_update.to_string()).await;
    assert_eq!(plan(&pool, shop.user_id).await, "free");
    // Zenbu's own Checkout: Premium; moved to another price later: no longer.
    deliver(
        &pool,
        t + 50,
        completed_event("evt_ours", t + 3, shop.user_id),
    )
    .await;
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    let switched = events::event(
        "evt_switched",
        "customer.subscription.updated",
        t + 4,
        events::subscription("sub_manual", "cus_manual", "active", "price_cheap"),
    );
    deliver(&pool, t + 50, switched.to_string()).await;
    assert_eq!(plan(&pool, shop.user_id).await, "free");
}

#[sqlx::test(migrations = "../migrations")]
async fn an_update_in_the_same_second_never_overwrites_a_cancellation(pool: PgPool) {
    let shop = shop(&pool).await;
    let t = events::now() - 100;
    deliver(&pool, t + 50, completed_event("evt_a", t, shop.user_id)).await;
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    let at = |id: &str, kind: &str, status: &str| {
        events::event(
            id,
            kind,
            t + 10,
            events::subscription("sub_manual", "cus_manual", status, PRICE),
        )
        .to_string()
    };
    deliver(
        &pool,
        t + 50,
        at("evt_b", "customer.subscription.deleted", "canceled"),
    )
    .await;
    deliver(
        &pool,
        t + 50,
        at("evt_c", "customer.subscription.updated", "active"),
    )
    .await;
    assert_eq!(plan(&pool, shop.user_id).await, "free");
}

#[sqlx::test(migrations = "../migrations")]
async fn stripe_errors_are_retried_once_then_shown_and_nothing_changes(pool: PgPool) {
    let shop = shop(&pool).await;
    shop.fake.set_behaviour(ApiBehaviour::Status(429));
    let csrf = shop.browser.csrf().await;
    let response = shop
        .browser
        .post("/premium/checkout", &[("csrf", &csrf)])
        .await;
    assert_eq!(location(&response), "/premium?error=stripe");
    let requests = shop.fake.requests();
    assert_eq!(requests.len(), 2, "one retry");
    assert!(requests[0].idempotency_key.is_some());
    assert_eq!(requests[0].idempotency_key, requests[1].idempotency_key);
    let page = shop.browser.page("/premium?error=stripe").await;
    assert!(page.contains("Nothing was charged"), "{page}");
    assert_eq!(plan(&pool, shop.user_id).await, "free");
}

#[sqlx::test(migrations = "../migrations")]
async fn without_stripe_settings_the_site_runs_and_says_billing_is_off(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let browser = Browser::new(&app);
    let page = browser.page("/premium").await;
    assert!(
        page.contains("Billing is not configured on this server"),
        "{page}"
    );
    let csrf = browser.csrf().await;
    // Signed out: asked to log in first.
    let response = browser.post("/premium/checkout", &[("csrf", &csrf)]).await;
    assert_eq!(location(&response), "/login?next=/premium");
    let response = reqwest::Client::new()
        .post(app.url("/stripe/webhook"))
        .header("stripe-signature", "t=1,v1=00")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_wrong_secret_key_is_refused_the_way_stripe_refuses_it(pool: PgPool) {
    let shop = shop(&pool).await;
    let wrong = Billing::new(
        &BillingConfig {
            secret_key: "sk_test_wrong".into(),
            price_id: PRICE.into(),
            webhook_secret: SECRET.into(),
            api_base: Some(shop.fake.base_url()),
        },
        &shop.app.url(""),
    )
    .unwrap();
    let user = server::accounts::user_by_id(&pool, shop.user_id)
        .await
        .unwrap()
        .unwrap();
    let error = wrong.checkout_url(&pool, &user).await.unwrap_err();
    assert!(error.to_string().contains("Invalid API Key"), "{error}");
    // 401 is not retried.
    assert_eq!(shop.fake.requests().len(), 1);
}

/// Two subscriptions cancelled at the same moment (the two-tab purchase above, both ended):
/// each webhook's transaction must see the other's cancellation, or the last to write keeps
/// Premium on for good. The test holds the user's row so that both deliveries are in flight at
/// once, each past its own subscription's write, before either may finish.
#[sqlx::test(migrations = "../migrations")]
async fn two_cancellations_arriving_together_end_premium(pool: PgPool) {
    let user = common::insert_user(&pool, "two@example.com", PASSWORD).await;
    let t = events::now() - 100;
    let second = |payload: String| {
        payload
            .replace("sub_manual", "sub_two")
            .replace("cus_manual", "cus_two")
    };
    deliver(&pool, t + 50, completed_event("evt_one", t, user)).await;
    deliver(&pool, t + 50, second(completed_event("evt_two", t, user))).await;
    assert_eq!(plan(&pool, user).await, "premium");

    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE")
        .bind(user)
        .execute(&mut *holder)
        .await
        .unwrap();
    let cancel = |id: &str, created: i64| {
        events::event(
            id,
            "customer.subscription.deleted",
            created,
            events::subscription("sub_manual", "cus_manual", "canceled", PRICE),
        )
        .to_string()
    };
    let deliveries = [
        cancel("evt_cancel_one", t + 10),
        second(cancel("evt_cancel_two", t + 10)),
    ]
    .map(|payload| {
        let pool = pool.clone();
        tokio::spawn(async move { deliver(&pool, t + 50, payload).await })
    });
    // Both wait on a lock (the held row, or each other) before the row is let go.
    let waiting = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    let started = std::time::Instant::now();
    while waiting().await < 2 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the deliveries never both waited"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    holder.commit().await.unwrap();
    for delivery in deliveries {
        assert!(matches!(
            delivery.await.unwrap(),
            webhook::Handled::Applied(_)
        ));
    }
    assert_eq!(plan(&pool, user).await, "free");
}

#[sqlx::test(migrations = "../migrations")]
async fn deleting_the_account_cancels_premium_through_stripe_first(pool: PgPool) {
    let shop = shop(&pool).await;
    let session = go_premium(&shop).await;
    shop.fake.complete_checkout(&session).await.unwrap();
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    sqlx::query(
        "INSERT INTO search_usage (subject, query_key, counted_at) VALUES ($1, 'k', now())",
    )
    .bind(format!("user:{}", shop.user_id))
    .execute(&pool)
    .await
    .unwrap();
    let browser = &shop.browser;
    let delete = |password: &'static str| async move {
        let csrf = browser.csrf().await;
        location(
            &browser
                .post(
                    "/account/delete",
                    &[("password", password), ("csrf", &csrf)],
                )
                .await,
        )
    };
    let users = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM users")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(delete("not it").await, "/account?error=wrong-password");
    // Stripe failing: nothing is deleted, and the page says why.
    shop.fake.set_behaviour(ApiBehaviour::Status(500));
    assert_eq!(delete(PASSWORD).await, "/account?error=stripe");
    assert_eq!(users().await, 1);
    shop.fake.set_behaviour(ApiBehaviour::Normal);

    assert_eq!(delete(PASSWORD).await, "/login?notice=account-deleted");
    let cancel = shop.fake.requests().pop().unwrap();
    assert!(
        cancel.path.starts_with("/v1/subscriptions/sub_"),
        "{}",
        cancel.path
    );
    assert_eq!(users().await, 0);
    let left: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM search_usage), (SELECT count(*) FROM user_sessions),
                (SELECT count(*) FROM stripe_subscriptions WHERE status = 'canceled' AND user_id IS NULL)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        left,
        (0, 0, 1),
        "usage and sessions gone; the cancelled subscription's state kept"
    );
    assert!(
        shop.browser
            .page("/account")
            .await
            .contains("You are not logged in")
    );
    assert_eq!(
        mail::latest_for(&pool, "pay@example.com", 1).await.unwrap()[0].subject,
        "Zenbu: your account is deleted"
    );
}

/// Two tabs (or a double click) on "Go Premium": one Checkout Session, given to both, so two
/// subscriptions cannot be paid for; once it is over (expired here), a new one.
#[sqlx::test(migrations = "../migrations")]
async fn a_second_checkout_while_one_is_open_reuses_it(pool: PgPool) {
    let shop = shop(&pool).await;
    let first = go_premium(&shop).await;
    let second = go_premium(&shop).await;
    assert_eq!(first, second);
    let csrf = shop.browser.csrf().await;
    let browser = std::sync::Arc::new(shop.browser);
    let together: Vec<_> = (0..3)
        .map(|_| {
            let (browser, csrf) = (browser.clone(), csrf.clone());
            tokio::spawn(async move {
                location(&browser.post("/premium/checkout", &[("csrf", &csrf)]).await)
            })
        })
        .collect();
    for tab in together {
        assert!(tab.await.unwrap().ends_with(&first));
    }
    let created = shop
        .fake
        .requests()
        .iter()
        .filter(|r| r.path == "/v1/checkout/sessions")
        .count();
    assert_eq!(created, 1);
    let expires: i64 = shop.fake.requests()[0]
        .field("expires_at")
        .unwrap()
        .parse()
        .unwrap();
    assert!((expires - events::now() - 31 * 60).abs() < 60, "{expires}");

    // It expires unused: the next "Go Premium" makes a new one.
    let session = events::checkout_session(
        &first,
        &serde_json::json!({ "status": "expired", "payment_status": "unpaid" }),
        "http://fake",
    );
    let t = events::now();
    let expired = events::event("evt_expired", "checkout.session.expired", t, session).to_string();
    assert!(matches!(
        deliver(&pool, t, expired).await,
        webhook::Handled::Applied(_)
    ));
    let csrf = browser.csrf().await;
    let next = location(&browser.post("/premium/checkout", &[("csrf", &csrf)]).await);
    assert!(!next.ends_with(&first), "{next}");
}

/// An event from Stripe's other mode (a test-mode event reaching a live server, or the other
/// way round) changes nothing, however well signed.
#[sqlx::test(migrations = "../migrations")]
async fn events_of_the_other_mode_than_the_key_change_nothing(pool: PgPool) {
    let user = common::insert_user(&pool, "mode@example.com", PASSWORD).await;
    let t = events::now();
    let live =
        completed_event("evt_live", t, user).replace("\"livemode\":false", "\"livemode\":true");
    assert!(live.contains("\"livemode\":true"));
    assert!(matches!(
        deliver(&pool, t, live).await,
        webhook::Handled::Ignored(_)
    ));
    assert_eq!(plan(&pool, user).await, "free");
    assert!(matches!(
        deliver(&pool, t, completed_event("evt_test", t, user)).await,
        webhook::Handled::Applied(_)
    ));
    assert_eq!(plan(&pool, user).await, "premium");
}

/// A Checkout's completion and an update of its subscription arriving together: both write the
/// user's row and the subscription's. They took them in opposite orders (users first in one,
/// the subscription first in the other), and PostgreSQL broke the deadlock by failing one.
#[sqlx::test(migrations = "../migrations")]
async fn a_checkout_and_its_subscription_update_arriving_together_both_apply(pool: PgPool) {
    let user = common::insert_user(&pool, "order@example.com", PASSWORD).await;
    let t = events::now() - 100;
    deliver(&pool, t + 50, completed_event("evt_first", t, user)).await;
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE")
        .bind(user)
        .execute(&mut *holder)
        .await
        .unwrap();
    let waiting = |n: i64| {
        let pool = pool.clone();
        async move {
            let started = std::time::Instant::now();
            loop {
                let now: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity
                      WHERE datname = current_database() AND wait_event_type = 'Lock'",
                )
                .fetch_one(&pool)
                .await
                .unwrap();
                if now >= n {
                    break;
                }
                assert!(
                    started.elapsed() < std::time::Duration::from_secs(20),
                    "never waited"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    };
    // The Checkout's event first (it waits on the held user), then the subscription's.
    let checkout = {
        let pool = pool.clone();
        let payload = completed_event("evt_again", t + 20, user);
        tokio::spawn(async move { deliver(&pool, t + 50, payload).await })
    };
    waiting(1).await;
    let update = {
        let pool = pool.clone();
        let payload = events::event(
            "evt_update",
            "customer.subscription.updated",
            t + 30,
            events::subscription("sub_manual", "cus_manual", "active", PRICE),
        )
        .to_string();
        tokio::spawn(async move { deliver(&pool, t + 50, payload).await })
    };
    waiting(2).await;
    holder.commit().await.unwrap();
    assert!(matches!(
        checkout.await.unwrap(),
        webhook::Handled::Applied(_)
    ));
    assert!(matches!(
        update.await.unwrap(),
        webhook::Handled::Applied(_)
    ));
    assert_eq!(plan(&pool, user).await, "premium");
}

/// A Checkout Session made straight through the fake's API, as a second tab did before the
/// app reused open sessions: the way a user came to have two customers.
async fn session_through_the_api(shop: &Shop) -> String {
    let user = shop.user_id.to_string();
    let success = shop.app.url("/premium/success");
    let cancel = shop.app.url("/premium/cancelled");
    let form = [
        ("mode", "subscription"),
        ("line_items[0][price]", PRICE),
        ("line_items[0][quantity]", "1"),
        ("client_reference_id", user.as_str()),
        ("customer_email", "pay@example.com"),
        ("metadata[zenbu_price]", PRICE),
        ("success_url", success.as_str()),
        ("cancel_url", cancel.as_str()),
    ];
    let session: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/v1/checkout/sessions", shop.fake.base_url()))
        .bearer_auth("sk_test_123")
        .form(&form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    session["id"].as_str().unwrap().to_string()
}

/// Someone who paid in two Checkouts at once has two Stripe customers: each gets its own
/// "Manage billing", so the second subscription can be cancelled too.
#[sqlx::test(migrations = "../migrations")]
async fn the_portal_reaches_every_customer_of_the_user(pool: PgPool) {
    let shop = shop(&pool).await;
    let (first, second) = (
        session_through_the_api(&shop).await,
        session_through_the_api(&shop).await,
    );
    let (customer_one, _) = shop.fake.complete_checkout(&first).await.unwrap();
    let (customer_two, _) = shop.fake.complete_checkout(&second).await.unwrap();
    assert_ne!(customer_one, customer_two);
    let account = shop.browser.page("/account").await;
    assert!(
        account.contains("Manage billing (account 1 of 2)"),
        "{account}"
    );
    assert!(
        account.contains("Manage billing (account 2 of 2)"),
        "{account}"
    );
    for (index, customer) in [("0", &customer_one), ("1", &customer_two)] {
        let csrf = shop.browser.csrf().await;
        let response = shop
            .browser
            .post("/billing/portal", &[("csrf", &csrf), ("account", index)])
            .await;
        assert!(location(&response).starts_with(&format!("{}/portal/", shop.fake.base_url())));
        let request = shop.fake.requests().pop().unwrap();
        assert_eq!(request.field("customer"), Some(customer.as_str()));
    }
    // No third: back to the Premium page, no portal.
    let csrf = shop.browser.csrf().await;
    let response = shop
        .browser
        .post("/billing/portal", &[("csrf", &csrf), ("account", "2")])
        .await;
    assert_eq!(location(&response), "/premium");
}

/// A cancellation whose webhook never arrived (Stripe gave up) ends Premium at the next
/// reconciliation, which reads the subscriptions through the API; a failing API changes
/// nothing.
#[sqlx::test(migrations = "../migrations")]
async fn reconciling_finds_a_cancellation_whose_webhook_never_came(pool: PgPool) {
    let shop = shop(&pool).await;
    let session = go_premium(&shop).await;
    let (_, subscription) = shop.fake.complete_checkout(&session).await.unwrap();
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    assert!(
        shop.fake
            .set_subscription_status_silently(&subscription, "canceled")
    );
    assert_eq!(plan(&pool, shop.user_id).await, "premium", "no webhook");
    let billing = billing(&shop);
    shop.fake.set_behaviour(ApiBehaviour::Status(500));
    let failed = billing.reconcile(&pool).await.unwrap();
    assert_eq!(failed.customers, 0);
    assert_eq!(plan(&pool, shop.user_id).await, "premium");
    shop.fake.set_behaviour(ApiBehaviour::Normal);
    let pass = billing.reconcile(&pool).await.unwrap();
    assert_eq!((pass.customers, pass.corrected), (1, 1));
    assert_eq!(plan(&pool, shop.user_id).await, "free");
    let listed = shop.fake.requests().pop().unwrap();
    assert_eq!(listed.path, "/v1/subscriptions");
    assert_eq!(listed.field("status"), Some("all"));
    // A second pass finds nothing more to correct.
    assert_eq!(billing.reconcile(&pool).await.unwrap().corrected, 0);
}

/// Changes the signed-in user's address to `new` through the account page and its mailed link;
/// where the confirmation sends the browser.
async fn change_address(shop: &Shop, pool: &PgPool, new: &str) -> String {
    let csrf = shop.browser.csrf().await;
    let asked = shop
        .browser
        .post(
            "/account/email",
            &[("email", new), ("password", PASSWORD), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(location(&asked), "/account?notice=email-link-sent");
    let body = &mail::latest_for(pool, new, 1).await.unwrap()[0].body;
    let start = body.find("token=").expect("a link") + "token=".len();
    let token = body[start..].split_whitespace().next().unwrap();
    location(
        &shop
            .browser
            .post(
                "/account/email/confirm",
                &[("token", token), ("csrf", &csrf)],
            )
            .await,
    )
}

async fn stale(pool: &PgPool, user_id: i64) -> bool {
    sqlx::query_scalar("SELECT stripe_email_stale FROM users WHERE id = $1")
        .bind(user_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A new address reaches the user's Stripe customer with the change (receipts go there); when
/// Stripe fails then, the change stands and the next reconciliation delivers it.
#[sqlx::test(migrations = "../migrations")]
async fn a_changed_address_reaches_the_stripe_customer(pool: PgPool) {
    let shop = shop(&pool).await;
    let session = go_premium(&shop).await;
    let (customer, _) = shop.fake.complete_checkout(&session).await.unwrap();
    assert_eq!(
        shop.fake.customer_email(&customer).as_deref(),
        Some("pay@example.com")
    );

    assert_eq!(
        change_address(&shop, &pool, "paid@example.com").await,
        "/account?notice=email-changed"
    );
    assert_eq!(
        shop.fake.customer_email(&customer).as_deref(),
        Some("paid@example.com")
    );
    assert!(!stale(&pool, shop.user_id).await);
    let update = shop.fake.requests().pop().unwrap();
    assert_eq!(update.path, format!("/v1/customers/{customer}"));

    shop.fake.set_behaviour(ApiBehaviour::Status(500));
    assert_eq!(
        change_address(&shop, &pool, "later@example.com").await,
        "/account?notice=email-changed",
        "Stripe failing does not undo the change"
    );
    assert_eq!(
        shop.fake.customer_email(&customer).as_deref(),
        Some("paid@example.com")
    );
    assert!(stale(&pool, shop.user_id).await);
    shop.fake.set_behaviour(ApiBehaviour::Normal);
    let billing = billing(&shop);
    assert_eq!(billing.reconcile(&pool).await.unwrap().addresses, 1);
    assert_eq!(
        shop.fake.customer_email(&customer).as_deref(),
        Some("later@example.com")
    );
    assert!(!stale(&pool, shop.user_id).await);
    assert_eq!(billing.reconcile(&pool).await.unwrap().addresses, 0);
}
