//! What must hold for any input that reaches the parsers hostile bytes reach first, one function
//! per fuzz target. The targets in `fuzz_targets/` run them under libFuzzer (nightly,
//! `scripts/fuzz`); the `replay` tests run the saved inputs through them on stable, so CI keeps
//! every finding fixed. Each check panics (a libFuzzer crash) when a property fails. They live
//! here, not in the server, because only the fuzzer and its replay need them.

use std::sync::LazyLock;

use app::{i18n::Lang, search::Filters};

use server::{
    accounts::{csrf, network::ClientNetwork, visitor},
    billing::webhook::{self, Rejected},
    catalog::{Media, document},
    search::{Query, SearchError, cache, lexical},
};

/// Fields of one input: the bytes as text (invalid UTF-8 replaced, as the HTTP layer does for
/// forms) split at newlines.
fn fields(data: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(data)
        .split('\n')
        .map(str::to_string)
        .collect()
}

/// Text as the pipeline may hand it on: no control characters, no runs of spaces, trimmed.
fn is_tidy(text: &str) -> bool {
    !text.chars().any(char::is_control)
        && text.trim() == text
        && !text.contains("  ")
        && !text.chars().any(|c| c.is_whitespace() && c != ' ')
}

/// The query normaliser: `Query::parse`, the cache key's `normalise`, the lexical `words`.
pub fn query(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    match Query::parse(&raw) {
        Ok(query) => {
            let cleaned = query.typed().to_string();
            assert!(is_tidy(&cleaned), "untidy clean query {cleaned:?}");
            let length = cleaned.chars().count();
            assert!((1..=server::search::MAX_QUERY_CHARS).contains(&length));
            assert_eq!(Query::parse(&cleaned).ok().as_ref(), Some(&query));
            let normalised = cache::normalise(&cleaned);
            assert_eq!(query.normalised(), normalised);
            assert!(normalised.chars().count() <= server::search::MAX_QUERY_CHARS);
            assert!(
                is_tidy(&normalised),
                "untidy normalised query {normalised:?}"
            );
            // The results cache is keyed by the normalised text: normalising again must not
            // move a query to another key.
            assert_eq!(cache::normalise(&normalised), normalised);
            let filters = Filters::default();
            assert_eq!(
                query.results_key("p", &filters),
                cache::results_key("p", &cache::normalise(&normalised), &filters)
            );
            let words = lexical::words(&normalised);
            for (i, word) in words.iter().enumerate() {
                assert!(word.chars().count() > 1, "{word:?}");
                assert!(!words[..i].contains(word), "{word:?} twice");
            }
            assert!(is_tidy(&lexical::title_text(&cleaned)));
        }
        Err(SearchError::EmptyQuery) => assert!(
            raw.chars().all(|c| c.is_whitespace() || c.is_control()),
            "{raw:?} refused as empty"
        ),
        Err(SearchError::QueryTooLong(length)) => {
            assert!(length > server::search::MAX_QUERY_CHARS)
        }
        Err(other) => panic!("Query::parse failed with {other}"),
    }
}

/// The document builder, from AniList Media JSON: whatever the catalog holds, what is stored
/// has no NUL (PostgreSQL refuses it) and the texts that go to the lexical index and the
/// embedder have no control characters (line breaks aside).
pub fn document(data: &[u8]) {
    let Ok(media) = serde_json::from_slice::<Media>(data) else {
        return;
    };
    fn has_nul(value: &serde_json::Value) -> bool {
        match value {
            serde_json::Value::String(text) => text.contains('\0'),
            serde_json::Value::Array(items) => items.iter().any(has_nul),
            serde_json::Value::Object(fields) => fields.values().any(has_nul),
            _ => false,
        }
    }
    let stored = serde_json::to_value(media.without_nul()).expect("Media serialises");
    assert!(!has_nul(&stored), "NUL left in {stored}");
    let premise = document::Premise {
        root_title: "Root".into(),
        text: "A premise.".into(),
    };
    let plain = |text: &str| !text.chars().any(|c| c.is_control() && c != '\n');
    for premise in [None, Some(&premise)] {
        let text = document::build_document(&media, premise);
        assert!(plain(&text), "control character in the document {text:?}");
        let fields = document::lexical_fields(&media, premise);
        for field in [&fields.titles, &fields.topics, &fields.text] {
            assert!(
                plain(field),
                "control character in a lexical field {field:?}"
            );
        }
    }
    if let Some(description) = &media.description {
        let clean = document::clean_description(description);
        for line in clean.lines() {
            assert!(is_tidy(line) && !line.is_empty(), "untidy line {line:?}");
        }
    }
    for title in document::titles(&media) {
        assert!(
            is_tidy(&title) && !title.is_empty(),
            "untidy title {title:?}"
        );
    }
    // In a catalog of itself and an anime without themes, every theme it has weighs.
    let mut untagged = media.clone();
    (untagged.genres, untagged.tags) = (Vec::new(), Vec::new());
    let frequencies = document::ThemeFrequencies::of(&[media.clone(), untagged]);
    if let Some(vector) = document::theme_vector(&media, &frequencies) {
        assert!(
            vector.starts_with('{')
                && vector.ends_with(&format!("}}/{}", document::THEME_DIMENSIONS))
        );
    }
}

static KEY: LazyLock<visitor::CookieKey> = LazyLock::new(|| {
    visitor::CookieKey::load(Some(&"5a".repeat(64)), std::path::Path::new("/nonexistent"))
        .expect("a valid key")
});

/// The cookie and header parsers: the signed visitor cookie, the form token, the language
/// cookie and `Accept-Language`, and `X-Forwarded-For`. Fields: a `Cookie` header, a visitor
/// id, a submitted form token, an `Accept-Language`, an `X-Forwarded-For`.
pub fn cookies(data: &[u8]) {
    use axum::http::{Extensions, HeaderMap, HeaderValue, header};
    let fields = fields(data);
    let field = |i: usize| fields.get(i).map(String::as_str).unwrap_or_default();
    let (cookie, id, token, accept_language, forwarded) =
        (field(0), field(1), field(2), field(3), field(4));

    // A forged cookie is never taken for a visitor: whatever it verifies to was signed by us.
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(cookie) {
        headers.insert(header::COOKIE, value);
    }
    if let Some(verified) = visitor::verified_id(&KEY, &headers, visitor::COOKIE) {
        let signed = visitor::set_cookie(&KEY, &verified, false);
        let pair = signed.split(';').next().expect("a name=value pair");
        let (_, value) = pair.split_once('=').expect("name=value");
        assert!(cookie.contains(value), "{cookie:?} verified as {verified}");
    }
    // Any id we sign comes back; a valid form token is exactly ours.
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        let signed = visitor::set_cookie(&KEY, id, false);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(signed.split(';').next().unwrap()).unwrap(),
        );
        assert_eq!(
            visitor::verified_id(&KEY, &headers, visitor::COOKIE).as_deref(),
            Some(id)
        );
    }
    assert_eq!(
        csrf::verify(&KEY, id, token),
        token == csrf::token(&KEY, id),
        "form token {token:?} for {id:?}"
    );

    // The language: a cookie naming a language wins; otherwise Spanish needs "es" asked for,
    // and a plain "es" (or "es-XX") alone gets it.
    let lang = Lang::negotiate(Some(cookie), Some(accept_language));
    match Lang::from_code(cookie) {
        Some(chosen) => assert_eq!(lang, chosen),
        None if lang == Lang::Es => {
            assert!(accept_language.to_ascii_lowercase().contains("es"))
        }
        None => {
            let only = accept_language.trim().to_ascii_lowercase();
            let plain_spanish =
                only == "es" || (only.starts_with("es-") && !only.contains([',', ';']));
            assert!(!plain_spanish, "{accept_language:?} got {lang:?}");
        }
    }

    // The network: X-Forwarded-For counts only from a trusted proxy, and then (one hop) only
    // its last entry.
    use server::accounts::network::TrustedProxies;
    const PREFIX: u8 = server::config::DEFAULT_IPV6_PREFIX;
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(forwarded) {
        headers.insert("x-forwarded-for", value);
    }
    let peer: std::net::SocketAddr = "192.0.2.1:4000".parse().unwrap();
    let mut extensions = Extensions::new();
    extensions.insert(axum::extract::ConnectInfo(peer));
    assert_eq!(
        ClientNetwork::from_request(&headers, &extensions, &TrustedProxies::none(), PREFIX),
        ClientNetwork::of(peer.ip(), PREFIX)
    );
    // A peer that is no trusted proxy: its own address, whatever it forwards.
    assert_eq!(
        ClientNetwork::from_request(
            &headers,
            &extensions,
            &TrustedProxies::private_ranges(),
            PREFIX
        ),
        ClientNetwork::of(peer.ip(), PREFIX)
    );
    // Behind a proxy: the last entry's address when it is one ("ip" or "ip:port"), else the
    // peer; never an earlier entry.
    let proxy = TrustedProxies {
        networks: vec!["192.0.2.1/32".parse().expect("a network")],
        hops: 1,
    };
    let behind = ClientNetwork::from_request(&headers, &extensions, &proxy, PREFIX);
    let last = forwarded.rsplit(',').next().unwrap_or_default().trim();
    let expected = match headers.contains_key("x-forwarded-for") {
        true => last
            .parse::<std::net::IpAddr>()
            .ok()
            .or_else(|| last.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
            .map_or(ClientNetwork::of(peer.ip(), PREFIX), |ip| {
                ClientNetwork::of(ip, PREFIX)
            }),
        false => ClientNetwork::of(peer.ip(), PREFIX),
    };
    assert_eq!(behind, expected, "{forwarded:?}");
}

const WEBHOOK_SECRET: &str = "whsec_fuzz";

/// The Stripe webhook reader: a payload signed with our secret is read or refused as
/// unparsable, never as a bad signature and never with a panic; the same bytes tampered with,
/// or signed too long ago, are refused. When the input's first line starts with `t=`, it is
/// the signature header itself: a header passes only if it carries our HMAC of its own
/// timestamp and the payload (Stripe's scheme lets other entries and spellings around it).
pub fn webhook(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let now = 1_800_000_000;
    if let Some((header, payload)) = text.split_once('\n')
        && header.starts_with("t=")
    {
        let result = webhook::read_delivery(WEBHOOK_SECRET, payload, header, Some(now));
        if !matches!(result, Err(Rejected::Signature(_))) {
            let entries: Vec<(&str, &str)> = header
                .split(',')
                .filter_map(|e| e.split_once('='))
                .collect();
            let carries_our_mac = entries.iter().filter(|(k, _)| *k == "t").any(|(_, t)| {
                t.parse::<i64>().is_ok_and(|t| {
                    let signed = fakes::stripe::sign(payload, WEBHOOK_SECRET, t);
                    let mac = signed.rsplit("v1=").next().expect("sign writes v1=");
                    entries
                        .iter()
                        .any(|(k, v)| *k == "v1" && v.eq_ignore_ascii_case(mac))
                })
            });
            assert!(carries_our_mac, "{header:?} accepted without our signature");
        }
        return;
    }
    let signature = fakes::stripe::sign(&text, WEBHOOK_SECRET, now);
    match webhook::read_delivery(WEBHOOK_SECRET, &text, &signature, Some(now)) {
        Ok(_) | Err(Rejected::Unparsable(_)) => {}
        Err(Rejected::Signature(error)) => panic!("our own signature refused: {error}"),
    }
    let tampered = format!("{text} ");
    assert!(matches!(
        webhook::read_delivery(WEBHOOK_SECRET, &tampered, &signature, Some(now)),
        Err(Rejected::Signature(_))
    ));
    let stale = fakes::stripe::sign(&text, WEBHOOK_SECRET, now - 3600);
    assert!(matches!(
        webhook::read_delivery(WEBHOOK_SECRET, &text, &stale, Some(now)),
        Err(Rejected::Signature(_))
    ));
}

#[cfg(test)]
mod replay;
