//! Outgoing mail. Whatever sends mail (sign-up links, password resets, notices) queues a
//! [`Letter`] in the `mail_outbox` table, in the same transaction as the change it reports, so a
//! rolled-back change sends nothing and a committed one is never lost. [`delivery`] sends the
//! queue over SMTP, or to the log when no SMTP server is configured. Local runs and the browser
//! tests can also read the queue at `/dev/mail` (only when `ZENBU_DEV_MAILBOX` is on).

pub mod delivery;

use serde::Serialize;
use sqlx::PgExecutor;

/// One message: a subject, paragraphs and at most one call to action (a link). Both the text
/// and the HTML body are made from it, so they cannot say different things.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    pub subject: String,
    pub paragraphs: Vec<String>,
    /// The link's label and address; shown as a button in HTML and on a line of its own in text.
    pub link: Option<(String, String)>,
    /// Said after the link (what to do if the mail was unexpected).
    pub footer: Option<String>,
}

impl Letter {
    pub fn text(&self) -> String {
        let mut parts: Vec<String> = self.paragraphs.clone();
        if let Some((_, url)) = &self.link {
            parts.push(url.clone());
        }
        parts.extend(self.footer.clone());
        parts.join("\n\n") + "\n"
    }

    /// A plain HTML body (inline styles only: mail readers ignore style sheets).
    pub fn html(&self) -> String {
        use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};
        let mut body = String::new();
        for paragraph in &self.paragraphs {
            body += &format!("<p>{}</p>\n", text(paragraph));
        }
        if let Some((label, url)) = &self.link {
            body += &format!(
                "<p><a href=\"{}\" style=\"display:inline-block;padding:10px 16px;\
                 background:#4f46e5;color:#fff;text-decoration:none;border-radius:6px\">{}</a></p>\n\
                 <p style=\"font-size:13px;color:#555\">{}</p>\n",
                attr(url),
                text(label),
                text(url)
            );
        }
        if let Some(footer) = &self.footer {
            body += &format!(
                "<p style=\"font-size:13px;color:#555\">{}</p>\n",
                text(footer)
            );
        }
        format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{}</title></head>\n\
             <body style=\"font-family:sans-serif;line-height:1.5;max-width:560px\">\n{body}</body></html>\n",
            text(&self.subject)
        )
    }
}

/// A queued message as `/dev/mail` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Mail {
    pub id: i64,
    pub recipient: String,
    pub subject: String,
    pub body: String,
}

/// Queues `letter` for `recipient` (an address [`crate::accounts::email::normalise`] accepted).
pub async fn queue(
    db: impl PgExecutor<'_>,
    recipient: &str,
    letter: &Letter,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO mail_outbox (recipient, subject, body, html_body) VALUES ($1, $2, $3, $4)",
    )
    .bind(recipient)
    .bind(&letter.subject)
    .bind(letter.text())
    .bind(letter.html())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_html_say_the_same_and_html_is_escaped() {
        let letter = Letter {
            subject: "Zenbu <test>".into(),
            paragraphs: vec!["Tom & Jerry said \"hi\".".into()],
            link: Some(("Open".into(), "https://zenbu.example/a?x=1&y=\"2\"".into())),
            footer: Some("Ignore it.".into()),
        };
        assert_eq!(
            letter.text(),
            "Tom & Jerry said \"hi\".\n\nhttps://zenbu.example/a?x=1&y=\"2\"\n\nIgnore it.\n"
        );
        let html = letter.html();
        assert!(html.contains("<title>Zenbu &lt;test&gt;</title>"), "{html}");
        assert!(
            html.contains("<p>Tom &amp; Jerry said \"hi\".</p>"),
            "{html}"
        );
        assert!(
            html.contains("href=\"https://zenbu.example/a?x=1&amp;y=&quot;2&quot;\""),
            "{html}"
        );
        assert!(!html.contains("<test>"));
    }
}
