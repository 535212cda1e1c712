//! Mail delivery against a real SMTP server started by each test (`fakes::smtp`, mailin's
//! protocol implementation): what arrives, in which language, retries after a refusal, giving
//! up, two workers sharing one outbox, a worker that dies mid-send, and STARTTLS required.

use std::time::Duration;

use app::i18n::Lang;
use fakes::smtp::SmtpServer;
use secrecy::SecretString;
use server::{
    accounts,
    mail::{
        self, Letter,
        delivery::{self, Courier, MAX_ATTEMPTS, Outcome},
    },
};
use sqlx::PgPool;

use crate::common::{self, Browser, location};

fn smtp() -> SmtpServer {
    SmtpServer::start("127.0.0.1:0".parse().unwrap()).unwrap()
}

fn courier(smtp: &SmtpServer) -> Courier {
    Courier::from_config(
        Some(&SecretString::from(smtp.url())),
        "Zenbu <no-reply@zenbu.test>",
    )
    .unwrap()
}

fn letter(n: usize) -> Letter {
    Letter {
        subject: format!("message {n}"),
        paragraphs: vec![format!("body {n}")],
        link: None,
        footer: None,
    }
}

/// The delivery columns of one outbox row.
#[derive(sqlx::FromRow, Debug)]
struct State {
    attempts: i32,
    sent: bool,
    failed: bool,
    last_error: Option<String>,
    due_later: bool,
}

async fn state(pool: &PgPool, recipient: &str) -> State {
    sqlx::query_as(
        "SELECT attempts, sent_at IS NOT NULL AS sent, failed_at IS NOT NULL AS failed,
                last_error, next_attempt_at > now() AS due_later
           FROM mail_outbox WHERE recipient = $1",
    )
    .bind(recipient)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn make_due(pool: &PgPool) {
    sqlx::query("UPDATE mail_outbox SET next_attempt_at = now()")
        .execute(pool)
        .await
        .unwrap();
}

#[sqlx::test(migrations = "../migrations")]
async fn a_sign_up_mail_arrives_in_the_visitors_language_with_text_and_html(pool: PgPool) {
    let smtp = smtp();
    let courier = courier(&smtp);
    accounts::request_sign_up(
        &pool,
        "Ana@Example.com",
        "10.0.0.1",
        "https://zenbu.test",
        Lang::Es,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(delivery::deliver_due(&pool, &courier).await.unwrap(), 1);

    let mails = smtp.delivered_to("ana@example.com");
    assert_eq!(mails.len(), 1, "{mails:?}");
    let mail = &mails[0];
    assert_eq!(mail.subject, "Zenbu: termina de crear tu cuenta");
    assert_eq!(mail.from, "no-reply@zenbu.test");
    let start = mail
        .text
        .find("https://zenbu.test/register/confirm?token=")
        .expect("link in text");
    let link = mail.text[start..].split_whitespace().next().unwrap();
    assert_eq!(
        link.len(),
        "https://zenbu.test/register/confirm?token=".len() + 64
    );
    assert!(
        mail.text.contains("Elegir mi contraseña") || mail.text.contains("elegir tu contraseña")
    );
    assert!(
        mail.html.contains(&format!("href=\"{link}\"")),
        "{}",
        mail.html
    );
    assert!(mail.raw.contains("multipart/alternative"));
    let row = state(&pool, "ana@example.com").await;
    assert!(row.sent && !row.failed && row.attempts == 1, "{row:?}");

    // Nothing is due any more: a second pass sends nothing.
    assert_eq!(delivery::deliver_due(&pool, &courier).await.unwrap(), 0);
    assert_eq!(smtp.delivered().len(), 1);

    // The English interface gets the English mail.
    accounts::request_sign_up(
        &pool,
        "bo@example.com",
        "10.0.0.1",
        "https://zenbu.test",
        Lang::En,
    )
    .await
    .unwrap()
    .unwrap();
    delivery::deliver_due(&pool, &courier).await.unwrap();
    assert_eq!(
        smtp.delivered_to("bo@example.com")[0].subject,
        "Zenbu: finish creating your account"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_refused_message_is_retried_after_a_delay_and_sent_once(pool: PgPool) {
    let smtp = smtp();
    let courier = courier(&smtp);
    mail::queue(&pool, "ana@example.com", &letter(1))
        .await
        .unwrap();
    smtp.refuse_next(2);

    assert_eq!(
        delivery::deliver_one(&pool, &courier).await.unwrap(),
        Some(Outcome::Retry)
    );
    let row = state(&pool, "ana@example.com").await;
    assert!(
        !row.sent && !row.failed && row.attempts == 1 && row.due_later,
        "{row:?}"
    );
    assert!(
        row.last_error
            .as_deref()
            .unwrap_or_default()
            .contains("451"),
        "{row:?}"
    );
    // Not due yet: the worker leaves it alone.
    assert_eq!(delivery::deliver_one(&pool, &courier).await.unwrap(), None);

    make_due(&pool).await;
    assert_eq!(
        delivery::deliver_one(&pool, &courier).await.unwrap(),
        Some(Outcome::Retry)
    );
    make_due(&pool).await;
    assert_eq!(
        delivery::deliver_one(&pool, &courier).await.unwrap(),
        Some(Outcome::Sent)
    );
    let row = state(&pool, "ana@example.com").await;
    assert!(
        row.sent && row.attempts == 3 && row.last_error.is_none(),
        "{row:?}"
    );
    assert_eq!(
        smtp.delivered().len(),
        1,
        "refused tries leave nothing behind"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_permanent_refusal_gives_up_at_once_and_a_dead_server_after_the_last_try(pool: PgPool) {
    let smtp = smtp();
    let courier = courier(&smtp);
    smtp.refuse_permanently(true);
    mail::queue(&pool, "gone@example.com", &letter(1))
        .await
        .unwrap();
    assert_eq!(
        delivery::deliver_one(&pool, &courier).await.unwrap(),
        Some(Outcome::GaveUp)
    );
    let row = state(&pool, "gone@example.com").await;
    assert!(row.failed && !row.sent && row.attempts == 1, "{row:?}");
    assert!(row.last_error.unwrap().contains("550"));

    // Nobody listens: retried until the last try, then given up.
    let port = common::free_port();
    let nobody = Courier::from_config(
        Some(&SecretString::from(format!("smtp://127.0.0.1:{port}"))),
        "no-reply@zenbu.test",
    )
    .unwrap();
    mail::queue(&pool, "ana@example.com", &letter(2))
        .await
        .unwrap();
    for attempt in 1..MAX_ATTEMPTS {
        assert_eq!(
            delivery::deliver_one(&pool, &nobody).await.unwrap(),
            Some(Outcome::Retry),
            "try {attempt}"
        );
        make_due(&pool).await;
    }
    assert_eq!(
        delivery::deliver_one(&pool, &nobody).await.unwrap(),
        Some(Outcome::GaveUp)
    );
    let row = state(&pool, "ana@example.com").await;
    assert!(row.failed && row.attempts == MAX_ATTEMPTS, "{row:?}");
    assert_eq!(delivery::deliver_one(&pool, &nobody).await.unwrap(), None);
}

#[sqlx::test(migrations = "../migrations")]
async fn two_workers_share_the_outbox_and_never_send_a_row_twice(pool: PgPool) {
    let smtp = smtp();
    // Slow answers, so both workers are mid-send at once most of the time.
    smtp.set_delay(Duration::from_millis(40));
    for n in 0..30 {
        mail::queue(&pool, &format!("user{n}@example.com"), &letter(n))
            .await
            .unwrap();
    }
    let (a, b) = (courier(&smtp), courier(&smtp));
    let (sent_a, sent_b) = tokio::join!(
        delivery::deliver_due(&pool, &a),
        delivery::deliver_due(&pool, &b)
    );
    let (sent_a, sent_b) = (sent_a.unwrap(), sent_b.unwrap());
    assert_eq!(sent_a + sent_b, 30);
    assert!(sent_a > 0 && sent_b > 0, "both worked: {sent_a} + {sent_b}");
    let mut ids: Vec<String> = smtp.delivered().into_iter().map(|m| m.message_id).collect();
    assert_eq!(ids.len(), 30);
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 30, "every message exactly once");
    let unsent: i64 = sqlx::query_scalar("SELECT count(*) FROM mail_outbox WHERE sent_at IS NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(unsent, 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_row_held_by_a_worker_that_dies_is_sent_once_by_another(pool: PgPool) {
    let smtp = smtp();
    let courier = courier(&smtp);
    mail::queue(&pool, "ana@example.com", &letter(1))
        .await
        .unwrap();
    // A worker has claimed the row and is talking to the SMTP server…
    let mut dying = pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM mail_outbox FOR UPDATE")
        .fetch_one(&mut *dying)
        .await
        .unwrap();
    // …so another worker skips it rather than sending it too.
    assert_eq!(delivery::deliver_one(&pool, &courier).await.unwrap(), None);
    // It dies before finishing: its transaction ends, the row is free and nothing was lost.
    drop(dying);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        delivery::deliver_one(&pool, &courier).await.unwrap(),
        Some(Outcome::Sent)
    );
    assert_eq!(smtp.delivered().len(), 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn without_smtp_mail_goes_to_the_log_and_counts_as_sent(pool: PgPool) {
    mail::queue(&pool, "ana@example.com", &letter(1))
        .await
        .unwrap();
    assert_eq!(
        delivery::deliver_one(&pool, &Courier::Log).await.unwrap(),
        Some(Outcome::Sent)
    );
    assert!(state(&pool, "ana@example.com").await.sent);
}

#[sqlx::test(migrations = "../migrations")]
async fn the_running_app_delivers_sign_up_mail_through_smtp(pool: PgPool) {
    let smtp = smtp();
    let url = smtp.url();
    let app = common::spawn_app_with(pool.clone(), |config| {
        config.accounts.smtp_url = Some(SecretString::from(url));
        config.accounts.mail_from = Some("Zenbu <hello@zenbu.test>".into());
    })
    .await;
    let browser = Browser::new(&app);
    browser.set_cookie("zenbu_lang", "es");
    let csrf = browser.csrf().await;
    let sent = browser
        .post(
            "/register",
            &[("email", "mio@example.com"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(location(&sent), "/register/sent");
    // The app's own worker sends it (it looks every two seconds).
    let mut mails = Vec::new();
    for _ in 0..100 {
        mails = smtp.delivered_to("mio@example.com");
        if !mails.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(mails.len(), 1, "delivered within 10 s");
    assert_eq!(mails[0].subject, "Zenbu: termina de crear tu cuenta");
    assert_eq!(mails[0].from, "hello@zenbu.test");
    // The link in the delivered mail creates the account.
    let start = mails[0].text.find("/register/confirm?token=").unwrap();
    let token = mails[0].text[start..]
        .split_whitespace()
        .next()
        .unwrap()
        .split("token=")
        .nth(1)
        .unwrap()
        .to_string();
    let csrf = browser.csrf().await;
    let created = browser
        .post(
            "/register/confirm",
            &[
                ("token", &token),
                ("password", "correct horse battery"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(location(&created), "/account");
}

/// `?tls=required` (STARTTLS) never falls back to plain text: against a server that does not
/// offer STARTTLS (the test server speaks plain SMTP only) nothing is delivered, the message stays
/// queued for a retry with the reason recorded, and the same server without the requirement
/// takes it.
#[sqlx::test(migrations = "../migrations")]
async fn starttls_when_required_is_never_skipped(pool: PgPool) {
    let smtp = smtp();
    let tls_required = Courier::from_config(
        Some(&SecretString::from(format!("{}?tls=required", smtp.url()))),
        "no-reply@zenbu.test",
    )
    .unwrap();
    mail::queue(&pool, "ana@example.com", &letter(1))
        .await
        .unwrap();
    assert_eq!(
        delivery::deliver_one(&pool, &tls_required).await.unwrap(),
        Some(Outcome::Retry)
    );
    assert!(smtp.delivered().is_empty(), "sent in the clear");
    let row = state(&pool, "ana@example.com").await;
    assert!(!row.sent && !row.failed && row.attempts == 1, "{row:?}");
    assert!(
        row.last_error
            .as_deref()
            .is_some_and(|e| e.contains("STARTTLS")),
        "{row:?}"
    );

    make_due(&pool).await;
    assert_eq!(
        delivery::deliver_one(&pool, &courier(&smtp)).await.unwrap(),
        Some(Outcome::Sent)
    );
    assert_eq!(smtp.delivered_to("ana@example.com").len(), 1);
}
