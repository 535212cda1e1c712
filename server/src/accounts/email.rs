//! Email addresses as account keys: one person, one spelling. Addresses are trimmed, NFKC
//! normalised and lower-cased (the domain is case-insensitive, and in practice no provider
//! treats the local part's case as significant), then checked for syntax.

use unicode_normalization::UnicodeNormalization;

/// RFC 5321's limit on a forward path.
const MAX_LEN: usize = 254;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EmailError {
    #[error("enter an email address like name@example.com")]
    Invalid,
}

/// The normalised form of `raw`, or why it is not an address we accept.
pub fn normalise(raw: &str) -> Result<String, EmailError> {
    let email: String = raw.trim().nfkc().collect::<String>().to_lowercase();
    let valid = email.len() <= MAX_LEN
        && email_address::EmailAddress::is_valid(&email)
        // Addresses must be reachable on the internet: a dotted domain, no IP literals.
        && email
            .rsplit_once('@')
            .is_some_and(|(_, domain)| domain.contains('.') && !domain.starts_with('['));
    if valid {
        Ok(email)
    } else {
        Err(EmailError::Invalid)
    }
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
    fn non_addresses_are_refused() {
        for bad in [
            "",
            "ana",
            "ana@",
            "@example.com",
            "ana@localhost",
            "ana@[127.0.0.1]",
            "a na@example.com",
            "ana@@example.com",
        ] {
            assert_eq!(normalise(bad), Err(EmailError::Invalid), "{bad:?}");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert_eq!(normalise(&long), Err(EmailError::Invalid));
    }
}
