//! The query, made once per search: cleaned (control characters out, spaces collapsed,
//! bounded) and normalised (NFKC, lower case) before any stage reads it, with the results
//! cache's key derived from it. Every stage reads the normalised text the key is made of, so
//! two queries that share a key always get the same page.

use app::search::{Filters, MAX_QUERY_CHARS};

use super::{SearchError, cache::normalise};

/// A query the pipeline accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// As typed, cleaned: what the page shows back.
    typed: String,
    /// What the stages read and the caches are keyed by.
    normalised: String,
}

impl Query {
    /// The query `raw` names, or why it cannot be searched (empty, too long).
    pub fn parse(raw: &str) -> Result<Self, SearchError> {
        let (typed, normalised) = clean(raw)?;
        Ok(Self { typed, normalised })
    }

    pub fn typed(&self) -> &str {
        &self.typed
    }

    pub fn normalised(&self) -> &str {
        &self.normalised
    }

    /// The results cache's key of this query under `pipeline` (a fingerprint of everything
    /// else that shapes a page) with `filters`.
    pub fn results_key(&self, pipeline: &str, filters: &Filters) -> String {
        super::cache::results_key(pipeline, &self.normalised, filters)
    }
}

/// `raw` with control characters removed and spaces collapsed, and its length checked.
fn clean(raw: &str) -> Result<(String, String), SearchError> {
    // No character is over 4 bytes: a longer text is refused before any pass over it (NFKC
    // below can make it up to eighteen times longer).
    if raw.len() > 4 * MAX_QUERY_CHARS {
        return Err(SearchError::QueryTooLong(raw.chars().count()));
    }
    let cleaned: String = raw
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let length = cleaned.chars().count();
    if length == 0 {
        return Err(SearchError::EmptyQuery);
    }
    // The stages read the normalised text, and NFKC can turn one character into eighteen
    // (U+FDFA): the limit holds for the longer of the two, so it bounds what is processed.
    let normalised = normalise(&cleaned);
    let processed = length.max(normalised.chars().count());
    if processed > MAX_QUERY_CHARS {
        return Err(SearchError::QueryTooLong(processed));
    }
    Ok((cleaned, normalised))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(raw: &str) -> Result<String, SearchError> {
        Query::parse(raw).map(|query| query.typed)
    }

    #[test]
    fn queries_are_cleaned_and_bounded() {
        assert_eq!(typed("  a\u{0}b\n\tc  ").unwrap(), "a b c");
        assert!(matches!(typed(" \u{7} "), Err(SearchError::EmptyQuery)));
        let long = "x".repeat(MAX_QUERY_CHARS + 1);
        assert!(matches!(
            typed(&long),
            Err(SearchError::QueryTooLong(n)) if n == MAX_QUERY_CHARS + 1
        ));
        assert!(typed(&"ñ".repeat(MAX_QUERY_CHARS)).is_ok());
        // 1,000 characters that NFKC expands eighteenfold are refused for what they become.
        let expanding = "\u{FDFA}".repeat(1_000);
        assert!(expanding.chars().count() <= MAX_QUERY_CHARS);
        assert!(matches!(
            typed(&expanding),
            Err(SearchError::QueryTooLong(n)) if n > 10 * MAX_QUERY_CHARS
        ));
        // Over four bytes a character allows: refused before any pass over it (what it is
        // refused for is its length as sent, not its eighteenfold NFKC expansion).
        let huge = "\u{FDFA}".repeat(700_000);
        assert!(matches!(
            typed(&huge),
            Err(SearchError::QueryTooLong(700_000))
        ));
    }
}
