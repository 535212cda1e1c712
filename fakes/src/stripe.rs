//! A fake Stripe: the API calls Zenbu makes (Checkout Sessions, Billing Portal sessions, listing
//! and cancelling subscriptions) in
//! Stripe's wire format (form-encoded requests with bracketed keys, bearer auth, Stripe-shaped
//! JSON errors), a stand-in for the hosted Checkout and portal pages, and signed webhook delivery
//! (`Stripe-Signature: t=…,v1=HMAC-SHA256("t.body")`, keyed by the whole `whsec_…` secret, as
//! Stripe signs). Tests and the browser suite drive the real async-stripe client against it.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{
    Form, Json, Router,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{Html, IntoResponse, Redirect, Response},
    routing::{get, post},
};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::Served;

/// How the API answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiBehaviour {
    Normal,
    /// Every API call fails with this status and a Stripe error body (429: `rate_limit`).
    Status(u16),
}

#[derive(Debug, Clone)]
pub struct FakeStripeConfig {
    pub api_key: String,
    /// The only price that exists.
    pub price_id: String,
    /// Where events are delivered (the app's `/stripe/webhook`); none: not delivered.
    pub webhook_url: Option<String>,
    pub webhook_secret: String,
}

/// One API request as received: path and decoded form fields.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    pub path: String,
    pub form: Vec<(String, String)>,
    pub idempotency_key: Option<String>,
}

impl ApiRequest {
    pub fn field(&self, name: &str) -> Option<&str> {
        field(&self.form, name)
    }
}

#[derive(Debug, Clone)]
struct CheckoutSession {
    client_reference_id: Option<String>,
    customer: Option<String>,
    customer_email: Option<String>,
    success_url: String,
    cancel_url: String,
    completed: bool,
    /// `metadata[key]=value` fields of the creation request.
    metadata: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    behaviour: Option<ApiBehaviour>,
    requests: Vec<ApiRequest>,
    sessions: HashMap<String, CheckoutSession>,
    /// customer id → email
    customers: HashMap<String, Option<String>>,
    /// subscription id → (customer id, status)
    subscriptions: HashMap<String, (String, String)>,
    /// portal session id → (customer id, return url)
    portals: HashMap<String, (String, String)>,
    /// Webhook deliveries: (event type, HTTP status the app answered).
    deliveries: Vec<(String, u16)>,
}

struct Shared {
    config: Mutex<FakeStripeConfig>,
    base_url: String,
    inner: Mutex<Inner>,
    http: reqwest::Client,
}

impl Shared {
    /// A new id, unique across runs too (as Stripe's are): a database that outlives this fake
    /// must not take a new event for a replay of an old one.
    fn next_id(&self, prefix: &str) -> String {
        let mut inner = self.inner.lock().unwrap();
        inner.next_id += 1;
        let mut random = [0u8; 6];
        getrandom::fill(&mut random).expect("the OS random source");
        format!("{prefix}_test_{}{}", inner.next_id, hex(&random))
    }
}

/// The fake's HTTP server; stopped when dropped.
pub struct FakeStripe {
    served: Served,
    shared: Arc<Shared>,
}

impl FakeStripe {
    pub async fn start(config: FakeStripeConfig, addr: SocketAddr) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        drop(listener);
        let shared = Arc::new(Shared {
            config: Mutex::new(config),
            base_url: format!("http://{addr}"),
            inner: Mutex::default(),
            http: reqwest::Client::new(),
        });
        let app = Router::new()
            .route("/v1/checkout/sessions", post(create_checkout_session))
            .route("/v1/billing_portal/sessions", post(create_portal_session))
            .route(
                "/v1/subscriptions/{id}",
                axum::routing::delete(cancel_subscription),
            )
            .route("/v1/subscriptions", get(list_subscriptions))
            .route("/v1/customers/{id}", post(update_customer))
            .route("/checkout/{id}", get(checkout_page))
            .route("/checkout/{id}/pay", post(pay))
            .route("/portal/{id}", get(portal_page))
            .route("/portal/{id}/cancel", post(cancel_from_portal))
            .with_state(shared.clone());
        let served = super::serve(app, addr).await?;
        Ok(Self { served, shared })
    }

    /// What the client's base URL is set to.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.served.addr)
    }

    /// Where events go from now on (a test learns the app's address after starting this).
    pub fn set_webhook_url(&self, url: &str) {
        self.shared.config.lock().unwrap().webhook_url = Some(url.to_string());
    }

    pub fn set_behaviour(&self, behaviour: ApiBehaviour) {
        self.shared.inner.lock().unwrap().behaviour = Some(behaviour);
    }

    pub fn requests(&self) -> Vec<ApiRequest> {
        self.shared.inner.lock().unwrap().requests.clone()
    }

    /// The address Stripe holds for `customer` (`None`: no such customer, or none given).
    pub fn customer_email(&self, customer: &str) -> Option<String> {
        self.shared
            .inner
            .lock()
            .unwrap()
            .customers
            .get(customer)
            .cloned()
            .flatten()
    }

    /// Event types delivered so far, with the status the app answered.
    pub fn deliveries(&self) -> Vec<(String, u16)> {
        self.shared.inner.lock().unwrap().deliveries.clone()
    }

    /// Pays a Checkout Session as a customer on the hosted page would: creates the customer and
    /// an active subscription and delivers `checkout.session.completed`. Returns (customer,
    /// subscription).
    pub async fn complete_checkout(&self, session_id: &str) -> Option<(String, String)> {
        complete(&self.shared, session_id).await
    }

    /// Changes a subscription's status and delivers `customer.subscription.updated` (or
    /// `.deleted` for `canceled`).
    pub async fn set_subscription_status(&self, subscription: &str, status: &str) -> Option<u16> {
        set_status(&self.shared, subscription, status).await
    }

    /// Changes a subscription's status and delivers nothing: a webhook Stripe gave up on (the
    /// app was down for days, the endpoint misconfigured). Only reading the subscription from
    /// the API shows it.
    pub fn set_subscription_status_silently(&self, subscription: &str, status: &str) -> bool {
        let mut inner = self.shared.inner.lock().unwrap();
        match inner.subscriptions.get_mut(subscription) {
            Some(entry) => {
                entry.1 = status.to_string();
                true
            }
            None => false,
        }
    }

    /// A renewal payment fails, as on Stripe: `invoice.payment_failed`, then the subscription
    /// goes `past_due` (`customer.subscription.updated`). The app's answers, in that order.
    pub async fn fail_payment(&self, subscription: &str) -> Option<(u16, u16)> {
        let customer = {
            let inner = self.shared.inner.lock().unwrap();
            inner.subscriptions.get(subscription)?.0.clone()
        };
        let invoice = self.shared.next_id("in");
        let object = events::invoice(&invoice, &customer, subscription);
        let failed = deliver(&self.shared, "invoice.payment_failed", object).await?;
        let past_due = set_status(&self.shared, subscription, "past_due").await?;
        Some((failed, past_due))
    }
}

fn stripe_error(status: StatusCode, kind: &str, code: Option<&str>, message: &str) -> Response {
    let mut error = json!({ "type": kind, "message": message });
    if let Some(code) = code {
        error["code"] = json!(code);
    }
    (status, Json(json!({ "error": error }))).into_response()
}

/// Authentication and the configured failure mode, as Stripe answers them.
fn refuse(
    shared: &Shared,
    headers: &HeaderMap,
    path: &str,
    form: &[(String, String)],
) -> Option<Response> {
    let mut inner = shared.inner.lock().unwrap();
    inner.requests.push(ApiRequest {
        path: path.to_string(),
        form: form.to_vec(),
        idempotency_key: headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    });
    let expected = format!("Bearer {}", shared.config.lock().unwrap().api_key);
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return Some(stripe_error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            None,
            "Invalid API Key provided",
        ));
    }
    match inner.behaviour {
        Some(ApiBehaviour::Status(429)) => Some(stripe_error(
            StatusCode::TOO_MANY_REQUESTS,
            "invalid_request_error",
            Some("rate_limit"),
            "Too many requests hit the API too quickly.",
        )),
        Some(ApiBehaviour::Status(status)) => Some(stripe_error(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            "api_error",
            None,
            "An unknown error occurred",
        )),
        _ => None,
    }
}

fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

async fn create_checkout_session(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    if let Some(refusal) = refuse(&shared, &headers, "/v1/checkout/sessions", &form) {
        return refusal;
    }
    let missing = |param: &str| {
        stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("parameter_missing"),
            &format!("Missing required param: {param}."),
        )
    };
    if field(&form, "mode") != Some("subscription") {
        return missing("mode");
    }
    let Some(price) = field(&form, "line_items[0][price]") else {
        return missing("line_items[0][price]");
    };
    if price != shared.config.lock().unwrap().price_id {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("resource_missing"),
            &format!("No such price: '{price}'"),
        );
    }
    let (Some(success_url), Some(cancel_url)) =
        (field(&form, "success_url"), field(&form, "cancel_url"))
    else {
        return missing("success_url");
    };
    let customer = field(&form, "customer").map(str::to_string);
    if let Some(customer) = &customer
        && !shared
            .inner
            .lock()
            .unwrap()
            .customers
            .contains_key(customer)
    {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("resource_missing"),
            &format!("No such customer: '{customer}'"),
        );
    }
    let id = shared.next_id("cs");
    let session = CheckoutSession {
        client_reference_id: field(&form, "client_reference_id").map(str::to_string),
        customer,
        customer_email: field(&form, "customer_email").map(str::to_string),
        success_url: success_url.to_string(),
        cancel_url: cancel_url.to_string(),
        completed: false,
        metadata: form
            .iter()
            .filter_map(|(name, value)| {
                let key = name.strip_prefix("metadata[")?.strip_suffix(']')?;
                Some((key.to_string(), value.clone()))
            })
            .collect(),
    };
    let body =
        events::checkout_session(&id, &session_json_fields(&session, None), &shared.base_url);
    shared.inner.lock().unwrap().sessions.insert(id, session);
    Json(body).into_response()
}

fn session_json_fields(session: &CheckoutSession, subscription: Option<&str>) -> Value {
    json!({
        "client_reference_id": session.client_reference_id,
        "customer": session.customer,
        "customer_email": session.customer_email,
        "subscription": subscription,
        "success_url": session.success_url,
        "cancel_url": session.cancel_url,
        "status": if session.completed { "complete" } else { "open" },
        "payment_status": if session.completed { "paid" } else { "unpaid" },
        "metadata": session.metadata,
    })
}

async fn create_portal_session(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    if let Some(refusal) = refuse(&shared, &headers, "/v1/billing_portal/sessions", &form) {
        return refusal;
    }
    let customer = field(&form, "customer").unwrap_or_default().to_string();
    if !shared
        .inner
        .lock()
        .unwrap()
        .customers
        .contains_key(&customer)
    {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("resource_missing"),
            &format!("No such customer: '{customer}'"),
        );
    }
    let return_url = field(&form, "return_url").unwrap_or_default().to_string();
    let id = shared.next_id("bps");
    let url = format!("{}/portal/{id}", shared.base_url);
    shared
        .inner
        .lock()
        .unwrap()
        .portals
        .insert(id.clone(), (customer.clone(), return_url.clone()));
    Json(json!({
        "id": id, "object": "billing_portal.session", "configuration": "bpc_test_1",
        "created": events::now(), "customer": customer, "livemode": false,
        "return_url": return_url, "url": url,
    }))
    .into_response()
}

/// The hosted Checkout page, reduced to a Pay button and a cancel link.
async fn checkout_page(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let Some(session) = shared.inner.lock().unwrap().sessions.get(&id).cloned() else {
        return (StatusCode::NOT_FOUND, "no such Checkout Session").into_response();
    };
    let email = session.customer_email.unwrap_or_default();
    Html(format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Fake Stripe Checkout</title></head>\
         <body><main><h1>Fake Stripe Checkout</h1><p>Zenbu Premium, monthly. {email}</p>\
         <form method=\"post\" action=\"/checkout/{id}/pay\"><button type=\"submit\">Pay</button></form>\
         <p><a href=\"{cancel}\">Cancel</a></p></main></body></html>",
        email = html_escape::encode_text(&email),
        cancel = html_escape::encode_double_quoted_attribute(&session.cancel_url),
    ))
    .into_response()
}

async fn pay(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let Some(success_url) = shared
        .inner
        .lock()
        .unwrap()
        .sessions
        .get(&id)
        .map(|s| s.success_url.clone())
    else {
        return (StatusCode::NOT_FOUND, "no such Checkout Session").into_response();
    };
    complete(&shared, &id).await;
    Redirect::to(&success_url.replace("{CHECKOUT_SESSION_ID}", &id)).into_response()
}

async fn complete(shared: &Arc<Shared>, session_id: &str) -> Option<(String, String)> {
    let session = shared
        .inner
        .lock()
        .unwrap()
        .sessions
        .get(session_id)
        .cloned()?;
    let customer = match &session.customer {
        Some(customer) => customer.clone(),
        None => {
            let customer = shared.next_id("cus");
            shared
                .inner
                .lock()
                .unwrap()
                .customers
                .insert(customer.clone(), session.customer_email.clone());
            customer
        }
    };
    let subscription = shared.next_id("sub");
    let completed = {
        let mut inner = shared.inner.lock().unwrap();
        inner
            .subscriptions
            .insert(subscription.clone(), (customer.clone(), "active".into()));
        let stored = inner.sessions.get_mut(session_id)?;
        stored.completed = true;
        stored.customer = Some(customer.clone());
        stored.clone()
    };
    let object = events::checkout_session(
        session_id,
        &session_json_fields(&completed, Some(&subscription)),
        &shared.base_url,
    );
    deliver(shared, "checkout.session.completed", object).await;
    Some((customer, subscription))
}

async fn set_status(shared: &Arc<Shared>, subscription: &str, status: &str) -> Option<u16> {
    let customer = {
        let mut inner = shared.inner.lock().unwrap();
        let entry = inner.subscriptions.get_mut(subscription)?;
        entry.1 = status.to_string();
        entry.0.clone()
    };
    let kind = if status == "canceled" {
        "customer.subscription.deleted"
    } else {
        "customer.subscription.updated"
    };
    let price = shared.config.lock().unwrap().price_id.clone();
    let object = events::subscription(subscription, &customer, status, &price);
    deliver(shared, kind, object).await
}

/// `DELETE /v1/subscriptions/{id}`: cancels at once, answers the subscription (and delivers
/// `customer.subscription.deleted`, as Stripe does).
async fn cancel_subscription(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    if let Some(refusal) = refuse(&shared, &headers, &format!("/v1/subscriptions/{id}"), &form) {
        return refusal;
    }
    let Some((customer, _)) = shared.inner.lock().unwrap().subscriptions.get(&id).cloned() else {
        return stripe_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("resource_missing"),
            &format!("No such subscription: '{id}'"),
        );
    };
    let price = shared.config.lock().unwrap().price_id.clone();
    let object = events::subscription(&id, &customer, "canceled", &price);
    // Answered before the event goes out, as Stripe's events follow its API answers.
    let delivering = shared.clone();
    tokio::spawn(async move {
        set_status(&delivering, &id, "canceled").await;
    });
    Json(object).into_response()
}

/// `POST /v1/customers/{id}` (form fields; only `email` is kept): the customer as Stripe
/// answers, or Stripe's 404 for an unknown one.
async fn update_customer(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    if let Some(refusal) = refuse(&shared, &headers, &format!("/v1/customers/{id}"), &form) {
        return refusal;
    }
    let mut inner = shared.inner.lock().unwrap();
    let Some(email) = inner.customers.get_mut(&id) else {
        return stripe_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("resource_missing"),
            &format!("No such customer: '{id}'"),
        );
    };
    if let Some(new) = field(&form, "email") {
        *email = Some(new.to_string());
    }
    Json(json!({
        "id": id, "object": "customer", "email": email.clone(), "livemode": false,
        "created": events::now(),
    }))
    .into_response()
}

/// `GET /v1/subscriptions?customer=…&status=all&limit=…`: the customer's subscriptions, as
/// Stripe lists them (without `status`, Stripe leaves out cancelled ones; so does this).
async fn list_subscriptions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    axum::extract::Query(query): axum::extract::Query<Vec<(String, String)>>,
) -> Response {
    if let Some(refusal) = refuse(&shared, &headers, "/v1/subscriptions", &query) {
        return refusal;
    }
    let customer = field(&query, "customer").map(str::to_string);
    let all = field(&query, "status") == Some("all");
    let price = shared.config.lock().unwrap().price_id.clone();
    let mut data: Vec<(String, Value)> = shared
        .inner
        .lock()
        .unwrap()
        .subscriptions
        .iter()
        .filter(|(_, (owner, status))| {
            customer.as_ref().is_none_or(|c| c == owner) && (all || status != "canceled")
        })
        .map(|(id, (owner, status))| (id.clone(), events::subscription(id, owner, status, &price)))
        .collect();
    data.sort_by(|a, b| a.0.cmp(&b.0));
    Json(json!({
        "object": "list", "url": "/v1/subscriptions", "has_more": false,
        "data": data.into_iter().map(|(_, subscription)| subscription).collect::<Vec<_>>(),
    }))
    .into_response()
}

/// The hosted billing portal, reduced to a button that cancels the customer's subscriptions.
async fn portal_page(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let Some((_, return_url)) = shared.inner.lock().unwrap().portals.get(&id).cloned() else {
        return (StatusCode::NOT_FOUND, "no such portal session").into_response();
    };
    Html(format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Fake Stripe billing portal</title></head>\
         <body><main><h1>Fake Stripe billing portal</h1>\
         <form method=\"post\" action=\"/portal/{id}/cancel\"><button type=\"submit\">Cancel plan</button></form>\
         <p><a href=\"{back}\">Return to Zenbu</a></p></main></body></html>",
        back = html_escape::encode_double_quoted_attribute(&return_url),
    ))
    .into_response()
}

async fn cancel_from_portal(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let Some((customer, return_url)) = shared.inner.lock().unwrap().portals.get(&id).cloned()
    else {
        return (StatusCode::NOT_FOUND, "no such portal session").into_response();
    };
    let subscriptions: Vec<String> = shared
        .inner
        .lock()
        .unwrap()
        .subscriptions
        .iter()
        .filter(|(_, (owner, status))| *owner == customer && status != "canceled")
        .map(|(id, _)| id.clone())
        .collect();
    for subscription in subscriptions {
        set_status(&shared, &subscription, "canceled").await;
    }
    Redirect::to(&return_url).into_response()
}

/// Signs and posts one event to the webhook URL; the app's answer status, if it answered.
async fn deliver(shared: &Arc<Shared>, kind: &str, object: Value) -> Option<u16> {
    let (url, secret) = {
        let config = shared.config.lock().unwrap();
        (config.webhook_url.clone()?, config.webhook_secret.clone())
    };
    let id = shared.next_id("evt");
    let payload = events::event(&id, kind, events::now(), object).to_string();
    let signature = sign(&payload, &secret, events::now());
    let status = match shared
        .http
        .post(url)
        .header("content-type", "application/json")
        .header("stripe-signature", signature)
        .body(payload)
        .send()
        .await
    {
        Ok(response) => response.status().as_u16(),
        Err(error) => {
            tracing::warn!(%error, kind, "fake Stripe could not deliver an event");
            0
        }
    };
    shared
        .inner
        .lock()
        .unwrap()
        .deliveries
        .push((kind.to_string(), status));
    Some(status)
}

/// The `Stripe-Signature` header Stripe sends for `payload` at Unix time `timestamp`.
pub fn sign(payload: &str, secret: &str, timestamp: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(format!("{timestamp}.{payload}").as_bytes());
    format!("t={timestamp},v1={}", hex(&mac.finalize().into_bytes()))
}

/// Stripe objects and events in the shape of API version 2026-09-30 (what async-stripe 1.0
/// parses), with only the fields that version requires plus the ones Zenbu reads.
pub mod events {
    use serde_json::{Value, json};

    pub fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default()
    }

    /// An event envelope.
    pub fn event(id: &str, kind: &str, created: i64, object: Value) -> Value {
        json!({
            "id": id, "object": "event", "api_version": "2026-09-30.endive", "created": created,
            "livemode": false, "pending_webhooks": 1, "request": null, "type": kind,
            "data": { "object": object },
        })
    }

    /// A Checkout Session; `fields` adds or overrides (customer, subscription, status...).
    pub fn checkout_session(id: &str, fields: &Value, fake_base_url: &str) -> Value {
        let mut session = json!({
            "id": id, "object": "checkout.session", "automatic_tax": { "enabled": false },
            "created": now(), "custom_fields": [], "custom_text": {}, "expires_at": now() + 86_400,
            "livemode": false, "mode": "subscription", "payment_method_types": ["card"],
            "payment_status": "unpaid", "shipping_options": [], "status": "open",
            "url": format!("{fake_base_url}/checkout/{id}"),
        });
        if let (Some(session), Some(fields)) = (session.as_object_mut(), fields.as_object()) {
            for (key, value) in fields {
                session.insert(key.clone(), value.clone());
            }
        }
        session
    }

    /// A subscription with one item, at `price`.
    pub fn subscription(id: &str, customer: &str, status: &str, price: &str) -> Value {
        let start = now() - 60;
        let period_end = start + 30 * 86_400;
        json!({
            "id": id, "object": "subscription", "automatic_tax": { "enabled": false },
            "billing_cycle_anchor": start, "billing_mode": { "type": "classic" },
            "billing_schedules": [], "cancel_at_period_end": false,
            "collection_method": "charge_automatically", "created": start, "currency": "usd",
            "customer": customer, "discounts": [],
            "invoice_settings": { "issuer": { "type": "self" } },
            "items": {
                "object": "list", "has_more": false,
                "url": format!("/v1/subscription_items?subscription={id}"),
                "data": [{
                    "id": format!("si_{id}"), "object": "subscription_item", "created": start,
                    "current_period_start": start, "current_period_end": period_end,
                    "discounts": [], "metadata": {}, "quantity": 1, "subscription": id,
                    "plan": {
                        "id": price, "object": "plan", "active": true,
                        "billing_scheme": "per_unit", "created": start, "currency": "usd",
                        "interval": "month", "interval_count": 1, "livemode": false,
                        "usage_type": "licensed",
                    },
                    "price": {
                        "id": price, "object": "price", "active": true,
                        "billing_scheme": "per_unit", "created": start, "currency": "usd",
                        "livemode": false, "metadata": {}, "product": "prod_premium",
                        "type": "recurring",
                    },
                }],
            },
            "livemode": false, "metadata": {}, "start_date": start, "status": status,
        })
    }

    pub fn invoice(id: &str, customer: &str, subscription: &str) -> Value {
        let created = now();
        json!({
            "id": id, "object": "invoice", "amount_due": 500, "amount_overpaid": 0,
            "amount_paid": 0, "amount_remaining": 500, "amount_shipping": 0, "attempt_count": 1,
            "attempted": true, "automatic_tax": { "enabled": false },
            "collection_method": "charge_automatically", "created": created, "currency": "usd",
            "customer": customer, "default_tax_rates": [], "discounts": [],
            "issuer": { "type": "self" },
            "lines": { "object": "list", "data": [], "has_more": false,
                       "url": format!("/v1/invoices/{id}/lines") },
            "livemode": false,
            "parent": { "type": "subscription_details", "quote_details": null,
                        "subscription_details": { "metadata": {}, "subscription": subscription } },
            "payment_settings": {}, "period_end": created, "period_start": created - 30 * 86_400,
            "post_payment_credit_notes_amount": 0, "pre_payment_credit_notes_amount": 0,
            "starting_balance": 0, "status": "open", "status_transitions": {}, "subtotal": 500,
            "total": 500,
        })
    }
}

/// Lower-case hex digits of `bytes`, as Stripe writes signatures.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
