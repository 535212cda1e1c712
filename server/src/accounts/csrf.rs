//! Form tokens against cross-site request forgery, one layer of two: the router also rejects
//! cross-origin state-changing requests from their `Sec-Fetch-Site` / `Origin` headers
//! (tower-http's `CsrfLayer`), which covers every current browser. The token covers the rest
//! (old browsers, proxies that strip headers): every state-changing form carries
//! HMAC(cookie key, visitor id), which another site can neither read nor compute.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::visitor::CookieKey;

/// Name of the hidden form field.
pub const FIELD: &str = "csrf";

fn mac(key: &CookieKey, visitor_id: &str) -> Hmac<Sha256> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(key.signing_bytes()).expect("HMAC takes any key length");
    mac.update(b"zenbu form token\0");
    mac.update(visitor_id.as_bytes());
    mac
}

/// The token the forms of this visitor carry.
pub fn token(key: &CookieKey, visitor_id: &str) -> String {
    hex::encode(mac(key, visitor_id).finalize().into_bytes())
}

/// Whether `submitted` is this visitor's token (compared in constant time). Only the form
/// [`token`] writes is accepted: 64 lower-case hex digits (no "+", no capitals; the fuzzer
/// found that a lenient hex reader let other spellings of the token through).
pub fn verify(key: &CookieKey, visitor_id: &str, submitted: &str) -> bool {
    let canonical = submitted.len() == 64
        && submitted
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let Some(bytes) = canonical.then(|| hex::decode(submitted).ok()).flatten() else {
        return false;
    };
    mac(key, visitor_id).verify_slice(&bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_belongs_to_one_visitor_and_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = CookieKey::load(None, dir.path()).unwrap();
        let token = token(&key, "aaaa");
        assert_eq!(token.len(), 64);
        assert!(verify(&key, "aaaa", &token));
        assert!(!verify(&key, "bbbb", &token));
        assert!(!verify(&key, "aaaa", ""));
        assert!(!verify(&key, "aaaa", &token[..63]));
        assert!(!verify(&key, "aaaa", &"é".repeat(32)));
        assert!(!verify(&key, "aaaa", &token.to_uppercase()));
        let other = CookieKey::load(None, tempfile::tempdir().unwrap().path()).unwrap();
        assert!(!verify(&other, "aaaa", &token));
    }
}
