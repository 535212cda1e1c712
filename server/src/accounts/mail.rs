//! Outgoing mail, kept in the `mail_outbox` table. No mail service is reachable from this
//! environment, so nothing delivers the rows yet: a delivery worker (SMTP or a provider's API)
//! would send rows whose `sent_at` is NULL and set it. Local runs and the browser tests read
//! mail from the outbox (`/dev/mail`, only when `ZENBU_DEV_MAILBOX` is on).

use serde::Serialize;
use sqlx::PgExecutor;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Mail {
    pub id: i64,
    pub recipient: String,
    pub subject: String,
    pub body: String,
}

/// Queues one message.
pub async fn send(
    db: impl PgExecutor<'_>,
    recipient: &str,
    subject: &str,
    body: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO mail_outbox (recipient, subject, body) VALUES ($1, $2, $3)")
        .bind(recipient)
        .bind(subject)
        .bind(body)
        .execute(db)
        .await?;
    Ok(())
}

/// The newest messages to `recipient`, newest first.
pub async fn latest_for(
    db: impl PgExecutor<'_>,
    recipient: &str,
    limit: i64,
) -> Result<Vec<Mail>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, recipient, subject, body FROM mail_outbox
          WHERE recipient = $1 ORDER BY id DESC LIMIT $2",
    )
    .bind(recipient)
    .bind(limit)
    .fetch_all(db)
    .await
}
