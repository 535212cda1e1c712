//! Delivers the outbox. Each app server runs one worker ([`spawn`]); a worker takes one due row at
//! a time with `FOR UPDATE SKIP LOCKED` and keeps it locked while it talks to the SMTP server,
//! so two workers never send the same row, and a worker that dies mid-send releases the row to
//! be tried again rather than losing it. (The one window left: the SMTP server accepted the
//! message and the worker died before its commit. Then the message goes again, with the same
//! `Message-ID`, which receiving servers use to drop the copy.)
//!
//! A refused or failed send is retried with exponential backoff (30 s doubling to an hour) until
//! [`MAX_ATTEMPTS`]; a permanent refusal (a 5xx reply: no such mailbox, rejected content) is
//! given up at once. Either way the row keeps its attempts and last error, and giving up is an
//! error line in the log.

use std::time::Duration;

use anyhow::Context;
use backon::{BackoffBuilder, ExponentialBuilder};
use lettre::{
    AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
    message::{Mailbox, MultiPart},
};
use secrecy::{ExposeSecret, SecretString};
use sqlx::PgPool;
use tracing::Instrument;

/// Sends after which a message is given up.
pub const MAX_ATTEMPTS: i32 = 8;
/// How often a worker looks for due mail when it found none.
const POLL_EVERY: Duration = Duration::from_secs(2);
/// How long one SMTP conversation may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// Where queued mail goes.
#[derive(Clone)]
pub enum Courier {
    /// An SMTP server (`smtp://`, `smtp://…?tls=required` for STARTTLS, `smtps://`).
    Smtp {
        transport: Box<AsyncSmtpTransport<Tokio1Executor>>,
        from: Mailbox,
        /// The domain of `Message-ID`s.
        domain: String,
    },
    /// No SMTP server configured (local runs): each message is written to the log, links
    /// included, and marked sent.
    Log,
}

impl Courier {
    /// The courier for `smtp_url` with `from` as the sender; [`Courier::Log`] without a URL.
    pub fn from_config(smtp_url: Option<&SecretString>, from: &str) -> anyhow::Result<Self> {
        let Some(url) = smtp_url else {
            return Ok(Courier::Log);
        };
        let from: Mailbox = from
            .parse()
            .with_context(|| format!("ZENBU_MAIL_FROM {from:?} is not a mail address"))?;
        let domain = from.email.domain().to_string();
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url.expose_secret())
            .context("ZENBU_SMTP_URL is not an SMTP URL (smtp://, smtps://user:pass@host:465)")?
            .timeout(Some(SMTP_TIMEOUT))
            .build()
            .into();
        Ok(Courier::Smtp {
            transport,
            from,
            domain,
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Courier::Smtp { .. } => "smtp",
            Courier::Log => "log",
        }
    }
}

/// A due row, as the worker reads it.
#[derive(sqlx::FromRow)]
struct Queued {
    id: i64,
    recipient: String,
    subject: String,
    body: String,
    html_body: Option<String>,
    attempts: i32,
}

/// What one send did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Sent,
    /// Failed; tried again after a delay.
    Retry,
    /// Failed for good (permanent refusal, or [`MAX_ATTEMPTS`] reached).
    GaveUp,
}

/// Why a send failed, and whether trying again can help.
struct SendError {
    message: String,
    permanent: bool,
}

/// The delay before the next try after `attempts` failed ones: 30 s, 1 min, 2 min, … an hour.
fn retry_delay(attempts: i32) -> Duration {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(30))
        .with_max_delay(Duration::from_secs(3600))
        .with_factor(2.0)
        .without_max_times()
        .build()
        .nth(attempts.saturating_sub(1).max(0) as usize)
        .unwrap_or(Duration::from_secs(3600))
}

/// Sends the oldest due message, if there is one; `None` when nothing is due.
pub async fn deliver_one(pool: &PgPool, courier: &Courier) -> anyhow::Result<Option<Outcome>> {
    let mut tx = pool.begin().await?;
    let row: Option<Queued> = sqlx::query_as(
        "SELECT id, recipient, subject, body, html_body, attempts FROM mail_outbox
          WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
          ORDER BY next_attempt_at, id LIMIT 1
            FOR UPDATE SKIP LOCKED",
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let span = tracing::info_span!("mail", id = row.id, courier = courier.name());
    let outcome = settle(&mut tx, courier, &row).instrument(span).await?;
    tx.commit().await?;
    Ok(Some(outcome))
}

/// Sends `row` and records what happened, in `tx` (which holds the row's lock).
async fn settle(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    courier: &Courier,
    row: &Queued,
) -> anyhow::Result<Outcome> {
    let attempts = row.attempts + 1;
    let outcome = match send(courier, row).await {
        Ok(()) => {
            sqlx::query(
                "UPDATE mail_outbox SET sent_at = now(), attempts = $2, last_error = NULL
                  WHERE id = $1",
            )
            .bind(row.id)
            .bind(attempts)
            .execute(&mut **tx)
            .await?;
            tracing::info!(attempts, "mail sent");
            Outcome::Sent
        }
        Err(error) if error.permanent || attempts >= MAX_ATTEMPTS => {
            sqlx::query(
                "UPDATE mail_outbox SET failed_at = now(), attempts = $2, last_error = $3
                  WHERE id = $1",
            )
            .bind(row.id)
            .bind(attempts)
            .bind(&error.message)
            .execute(&mut **tx)
            .await?;
            tracing::error!(
                attempts,
                permanent = error.permanent,
                error = %error.message,
                "mail given up: it will not be sent"
            );
            Outcome::GaveUp
        }
        Err(error) => {
            let delay = retry_delay(attempts);
            sqlx::query(
                "UPDATE mail_outbox SET attempts = $2, last_error = $3,
                        next_attempt_at = now() + make_interval(secs => $4)
                  WHERE id = $1",
            )
            .bind(row.id)
            .bind(attempts)
            .bind(&error.message)
            .bind(delay.as_secs_f64())
            .execute(&mut **tx)
            .await?;
            tracing::warn!(attempts, error = %error.message, retry_in_s = delay.as_secs(), "mail not sent; will retry");
            Outcome::Retry
        }
    };
    Ok(outcome)
}

async fn send(courier: &Courier, row: &Queued) -> Result<(), SendError> {
    match courier {
        Courier::Log => {
            tracing::info!(to = ?row.recipient, subject = %row.subject, body = %row.body, "mail (no SMTP server configured: logged, not sent)");
            Ok(())
        }
        Courier::Smtp {
            transport,
            from,
            domain,
        } => {
            let to: Mailbox = row.recipient.parse().map_err(|error| SendError {
                message: format!("recipient {:?}: {error}", row.recipient),
                permanent: true,
            })?;
            let body = match &row.html_body {
                Some(html) => MultiPart::alternative_plain_html(row.body.clone(), html.clone()),
                None => MultiPart::alternative()
                    .singlepart(lettre::message::SinglePart::plain(row.body.clone())),
            };
            let message = Message::builder()
                .from(from.clone())
                .to(to)
                .subject(&row.subject)
                // The same id on every try: a copy sent twice is recognisably one message.
                .message_id(Some(format!("<outbox-{}@{domain}>", row.id)))
                .multipart(body)
                .map_err(|error| SendError {
                    message: format!("building the message: {error}"),
                    permanent: true,
                })?;
            // lettre's timeout covers each read and write; this bounds the whole conversation,
            // so a server that stops answering (seen: one that never answers QUIT after a
            // refused DATA) cannot hold the row and its connection.
            match tokio::time::timeout(SMTP_TIMEOUT * 2, transport.send(message)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(error)) => Err(SendError {
                    permanent: error.is_permanent(),
                    message: error.to_string(),
                }),
                Err(_) => Err(SendError {
                    permanent: false,
                    message: format!("no answer within {} s", (SMTP_TIMEOUT * 2).as_secs()),
                }),
            }
        }
    }
}

/// Sends every due message; how many sends were made (whatever their outcome).
pub async fn deliver_due(pool: &PgPool, courier: &Courier) -> anyhow::Result<usize> {
    let mut sends = 0;
    while deliver_one(pool, courier).await?.is_some() {
        sends += 1;
    }
    Ok(sends)
}

/// Runs a delivery worker for the life of the process.
pub fn spawn(pool: PgPool, courier: Courier) {
    tokio::spawn(async move {
        loop {
            if let Err(error) = deliver_due(&pool, &courier).await {
                tracing::warn!(error = %format!("{error:#}"), "mail delivery pass failed");
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_from_half_a_minute_to_an_hour() {
        assert_eq!(retry_delay(1), Duration::from_secs(30));
        assert_eq!(retry_delay(2), Duration::from_secs(60));
        assert_eq!(retry_delay(3), Duration::from_secs(120));
        assert_eq!(retry_delay(20), Duration::from_secs(3600));
    }
}
