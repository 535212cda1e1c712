//! Email addresses as account keys: one person, one spelling. Addresses are trimmed, NFKC
//! normalised and lower-cased (the domain is case-insensitive, and in practice no provider
//! treats the local part's case as significant), then held to a strict `local@domain` form:
//! no display name (`Ana <ana@…>`), no quoting, comments, spaces or line breaks (a header
//! injection like `x\r\nBcc: …`), no IP-literal domains. What RFC 5322 allows beyond that is
//! not needed by anyone signing up to a website, and every such form is a way to make one
//! address look like another.
//!
//! [`mailbox`] folds the forms that reach one mailbox (`+tags`, Gmail's dots): accounts and the
//! per-address throttles are counted by it.

use sqlx::PgExecutor;
use unicode_normalization::UnicodeNormalization;

/// RFC 5321's limit on a forward path.
const MAX_LEN: usize = 254;
/// RFC 5321's limits on a local part and a domain label.
const MAX_LOCAL: usize = 64;
const MAX_LABEL: usize = 63;
/// The punctuation RFC 5322 allows unquoted in a local part (its `atext`), besides the dot.
const LOCAL_PUNCTUATION: &str = "!#$%&'*+/=?^_`{|}~-";

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EmailError {
    #[error("enter an email address like name@example.com")]
    Invalid,
}

/// The normalised form of `raw`, or why it is not an address we accept.
pub fn normalise(raw: &str) -> Result<String, EmailError> {
    let email: String = raw.trim().nfkc().collect::<String>().to_lowercase();
    let strict = email.len() <= MAX_LEN
        && email
            .split_once('@')
            .is_some_and(|(local, domain)| local_ok(local) && domain_ok(domain));
    // The crate's RFC check as well: strict is a subset of valid, never a superset.
    if strict && email_address::EmailAddress::is_valid(&email) {
        Ok(email)
    } else {
        Err(EmailError::Invalid)
    }
}

/// Dot-separated runs of letters, digits (any script: internationalised addresses) and
/// `atext` punctuation; no empty run (no leading, trailing or double dot).
fn local_ok(local: &str) -> bool {
    local.len() <= MAX_LOCAL
        && local.split('.').all(|run| {
            !run.is_empty()
                && run
                    .chars()
                    .all(|c| c.is_alphanumeric() || LOCAL_PUNCTUATION.contains(c))
        })
}

/// Two or more labels of letters, digits and inner hyphens, the last not all digits: a name
/// that can be looked up on the internet (so no `localhost`, no `[127.0.0.1]`).
fn domain_ok(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= MAX_LABEL
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
        && !labels
            .last()
            .is_some_and(|tld| tld.chars().all(|c| c.is_ascii_digit()))
}

/// The mailbox a normalised address delivers to (`ana+news@x.org` → `ana@x.org`; for Gmail also
/// without dots). The folding is defined once, in SQL (`mailbox_of`, migration 26), because the
/// `users.mailbox` column is generated from it.
pub async fn mailbox(db: impl PgExecutor<'_>, email: &str) -> Result<String, sqlx::Error> {
    sqlx::query_scalar("SELECT mailbox_of($1)")
        .bind(email)
        .fetch_one(db)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_address_normalise_alike() {
        assert_eq!(normalise("  Ana@Example.COM ").unwrap(), "ana@example.com");
        // Full-width characters (NFKC) become their ASCII forms.
        assert_eq!(normalise("ａｎａ@example.com").unwrap(), "ana@example.com");
    }

    #[test]
    fn ordinary_addresses_are_accepted() {
        for good in [
            "ana@example.com",
            "ana.maria+zenbu@mail.example.co.uk",
            "o'brien@example.ie",
            "x_y-z@sub-domain.example",
            "josé@correo.example",
        ] {
            assert!(normalise(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn non_addresses_are_refused() {
        for bad in [
            "",
            "ana",
            "ana@",
            "@example.com",
            "ana@localhost",
            "ana@[127.0.0.1]",
            "ana@127.0.0.1",
            "a na@example.com",
            "ana@@example.com",
            ".ana@example.com",
            "ana.@example.com",
            "an..a@example.com",
            "ana@-example.com",
            "ana@example..com",
            // A display name, a header injection, quoting and comments: all ways of making one
            // address look like another.
            "A <victim@example.com>",
            "<victim@example.com>",
            "x\r\nBcc: evil <victim@example.com>",
            "ana@example.com\r\nBcc: victim@example.com",
            "\"ana\"@example.com",
            "\"a b\"@example.com",
            "ana(comment)@example.com",
            "ana@example.com (Ana)",
            "ana,bob@example.com",
            "ana;bob@example.com",
        ] {
            assert_eq!(normalise(bad), Err(EmailError::Invalid), "{bad:?}");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert_eq!(normalise(&long), Err(EmailError::Invalid));
        let long_local = format!("{}@example.com", "a".repeat(65));
        assert_eq!(normalise(&long_local), Err(EmailError::Invalid));
    }
}
