//! Anonymous visitors: a random id in a signed cookie (the `cookie` crate's signed jar, HMAC
//! with a key from configuration). A missing, unsigned or tampered cookie is never trusted: the
//! request gets a fresh id and the response sets the new cookie. The id is what the anonymous
//! quota counts against (`visitor:<id>`).

use std::path::Path;

use anyhow::{Context, Result};
use axum::{
    extract::{Request, State},
    http::{HeaderValue, header},
    middleware::Next,
    response::Response,
};
use cookie::{Cookie, CookieJar, Key, SameSite};

/// Name of the visitor cookie.
pub const COOKIE: &str = "zenbu_visitor";
/// The cookie's name over https: a browser keeps a `__Host-` cookie only when it came over https
/// from this very host with `Path=/` and no `Domain`, so neither a sibling subdomain nor a
/// plain-http page can plant or overwrite it.
pub const SECURE_COOKIE: &str = "__Host-zenbu_visitor";

/// The visitor cookie's name on a site served over https or not.
pub fn cookie_name(secure: bool) -> &'static str {
    if secure { SECURE_COOKIE } else { COOKIE }
}
/// Browsers keep a cookie at most 400 days; the anonymous allowance is per calendar year.
const MAX_AGE_DAYS: i64 = 400;

/// The key that signs visitor cookies.
#[derive(Clone)]
pub struct CookieKey(Key);

impl CookieKey {
    /// From `configured` (hex, at least 64 bytes), else the key persisted in `data_dir`
    /// (generated on first use, readable by this user only), so local runs keep their visitors
    /// across restarts. Several app servers must share one configured key.
    pub fn load(configured: Option<&str>, data_dir: &Path) -> Result<Self> {
        if let Some(hex) = configured.map(str::trim).filter(|k| !k.is_empty()) {
            return Self::from_hex(hex)
                .context("ZENBU_COOKIE_KEY must be at least 64 bytes of hex");
        }
        let path = data_dir.join("cookie.key");
        if let Ok(stored) = std::fs::read_to_string(&path) {
            return Self::from_hex(stored.trim())
                .with_context(|| format!("{} is not a valid key", path.display()));
        }
        let key = Key::generate();
        std::fs::create_dir_all(data_dir)?;
        let hex = hex::encode(key.master());
        crate::files::write_atomic(&path, hex.as_bytes(), 0o600)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Self(key))
    }

    /// The key's signing half (also keys the CSRF form tokens).
    pub fn signing_bytes(&self) -> &[u8] {
        self.0.signing()
    }

    fn from_hex(hex: &str) -> Result<Self> {
        let bytes = hex::decode(hex).ok().context("not hex")?;
        anyhow::ensure!(bytes.len() >= 64, "need 64 bytes");
        Ok(Self(Key::try_from(bytes.as_slice())?))
    }
}

/// Who an anonymous request is; put in the request's extensions by [`middleware`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visitor {
    /// 32 hex digits.
    pub id: String,
    /// The id was made for this request (no valid cookie came with it).
    pub new: bool,
}

impl Visitor {
    pub fn subject(&self) -> String {
        format!("visitor:{}", self.id)
    }
}

/// The visitor id a request's `Cookie` headers carry under `name`, if one is validly signed.
pub fn verified_id(
    key: &CookieKey,
    request_headers: &axum::http::HeaderMap,
    name: &str,
) -> Option<String> {
    let mut jar = CookieJar::new();
    for value in request_headers.get_all(header::COOKIE) {
        let Ok(value) = value.to_str() else { continue };
        for cookie in Cookie::split_parse(value.to_string()).flatten() {
            jar.add_original(cookie.into_owned());
        }
    }
    jar.signed(&key.0)
        .get(name)
        .map(|c| c.value().to_string())
        .filter(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The `Set-Cookie` value for `id`: signed, HttpOnly, SameSite=Lax, Secure over https.
pub fn set_cookie(key: &CookieKey, id: &str, secure: bool) -> String {
    let mut jar = CookieJar::new();
    let cookie = Cookie::build((cookie_name(secure), id.to_string()))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(secure)
        .max_age(cookie::time::Duration::days(MAX_AGE_DAYS));
    jar.signed_mut(&key.0).add(cookie);
    jar.delta()
        .next()
        .map(|c| c.to_string())
        .expect("one cookie was added")
}

fn new_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source");
    hex::encode(bytes)
}

/// What the middleware needs: the key, whether the site is served over https, and the proxies
/// whose `X-Forwarded-For` is believed.
#[derive(Clone)]
pub struct VisitorConfig {
    pub key: CookieKey,
    pub secure: bool,
    pub proxies: super::network::TrustedProxies,
    /// IPv6 addresses are grouped into networks by this prefix length.
    pub ipv6_prefix: u8,
}

/// Gives every request a [`Visitor`] and its [`ClientNetwork`](super::network::ClientNetwork)
/// (extensions) and sets the cookie when the id is new.
pub async fn middleware(
    State(config): State<VisitorConfig>,
    mut request: Request,
    next: Next,
) -> Response {
    let name = cookie_name(config.secure);
    // Over https, an id from before the cookie had its `__Host-` name is kept (and set again
    // under that name): no visitor gets a second allowance from the rename.
    let (visitor, set) = match verified_id(&config.key, request.headers(), name) {
        Some(id) => (Visitor { id, new: false }, false),
        None => match config
            .secure
            .then(|| verified_id(&config.key, request.headers(), COOKIE))
            .flatten()
        {
            Some(id) => (Visitor { id, new: false }, true),
            None => (
                Visitor {
                    id: new_id(),
                    new: true,
                },
                true,
            ),
        },
    };
    let network = super::network::ClientNetwork::from_request(
        request.headers(),
        request.extensions(),
        &config.proxies,
        config.ipv6_prefix,
    );
    request.extensions_mut().insert(visitor.clone());
    request.extensions_mut().insert(network);
    let mut response = next.run(request).await;
    if set
        && let Ok(value) =
            HeaderValue::from_str(&set_cookie(&config.key, &visitor.id, config.secure))
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderMap;

    use super::*;

    fn headers(cookie: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_str(cookie).unwrap());
        headers
    }

    /// The `name=value` part of a Set-Cookie header.
    fn pair(set_cookie: &str) -> String {
        set_cookie.split(';').next().unwrap().to_string()
    }

    #[test]
    fn a_signed_cookie_round_trips_and_anything_else_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let key = CookieKey::load(None, dir.path()).unwrap();
        let id = new_id();
        let set = set_cookie(&key, &id, true);
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Lax") && set.contains("Secure"));
        // Over https, a `__Host-` cookie: Secure, Path=/ and no Domain, as that prefix requires.
        assert!(
            set.starts_with("__Host-zenbu_visitor=") && set.contains("Path=/"),
            "{set}"
        );
        assert!(!set.contains("Domain"), "{set}");
        assert_eq!(
            verified_id(&key, &headers(&pair(&set)), SECURE_COOKIE),
            Some(id.clone())
        );
        // Beside other cookies, too.
        assert_eq!(
            verified_id(
                &key,
                &headers(&format!("a=b; {}; c=d", pair(&set))),
                SECURE_COOKIE
            ),
            Some(id.clone())
        );

        // Unsigned, tampered, or signed with another key: ignored.
        assert_eq!(
            verified_id(&key, &headers(&format!("{COOKIE}={id}")), COOKIE),
            None
        );
        let value = pair(&set).split_once('=').unwrap().1.to_string();
        let mut tampered = value.clone().into_bytes();
        let last = tampered.len() - 1;
        tampered[last] = if tampered[last] == b'0' { b'1' } else { b'0' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert_eq!(
            verified_id(
                &key,
                &headers(&format!("{SECURE_COOKIE}={tampered}")),
                SECURE_COOKIE
            ),
            None
        );
        let other = CookieKey::load(None, tempfile::tempdir().unwrap().path()).unwrap();
        assert_eq!(
            verified_id(&other, &headers(&pair(&set)), SECURE_COOKIE),
            None
        );
    }

    #[test]
    fn the_generated_key_is_persisted_privately_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let first = CookieKey::load(None, dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join("cookie.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = CookieKey::load(None, dir.path()).unwrap();
        let set = set_cookie(&first, &new_id(), false);
        assert!(verified_id(&again, &headers(&pair(&set)), COOKIE).is_some());
        assert!(!set.contains("Secure"));
        // A configured key wins; a short one is an error.
        let configured = "ab".repeat(64);
        assert!(CookieKey::load(Some(&configured), dir.path()).is_ok());
        assert!(CookieKey::load(Some("abcd"), dir.path()).is_err());
    }
}
