//! Which network a request comes from, for limits that a cleared cookie must not reset (new
//! anonymous ids, log-in failures). An IPv4 address counts alone; IPv6 is grouped by /64, the
//! block one household or device usually gets.

use std::net::{IpAddr, SocketAddr};

use axum::{extract::ConnectInfo, http::request::Parts};

/// A client's network key, e.g. `203.0.113.7` or `2001:db8:1:2::/64`; put in the request's
/// extensions by the visitor middleware.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientNetwork(pub String);

impl ClientNetwork {
    /// No peer address is known (a test calling the router directly).
    pub fn unknown() -> Self {
        Self("unknown".into())
    }

    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self(v4.to_string()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(v4.to_string()),
                None => {
                    let s = v6.segments();
                    Self(format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3]))
                }
            },
        }
    }

    /// From the peer address, or, behind a trusted proxy, from the last `X-Forwarded-For` entry
    /// (the one that proxy appended; earlier entries are the client's to forge). Only that entry
    /// is ever read: if it cannot be parsed, the peer address is used, never an earlier one.
    pub fn from_request(
        headers: &axum::http::HeaderMap,
        extensions: &axum::http::Extensions,
        behind_proxy: bool,
    ) -> Self {
        if behind_proxy
            && let Some(ip) = headers
                .get_all("x-forwarded-for")
                .iter()
                .next_back()
                // The last entry alone is read as text: bytes a client put in earlier entries
                // (non-ASCII ones made the whole header unreadable, and the request count as
                // the proxy's own network; found by fuzzing) cannot hide it.
                .and_then(|value| value.as_bytes().rsplit(|&b| b == b',').next())
                .and_then(|entry| std::str::from_utf8(entry).ok())
                .and_then(parse_forwarded)
        {
            return Self::of(ip);
        }
        extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| Self::of(addr.ip()))
            .unwrap_or_else(Self::unknown)
    }

    /// The network the visitor middleware recorded for a request.
    pub fn of_parts(parts: &Parts) -> Self {
        parts
            .extensions
            .get::<ClientNetwork>()
            .cloned()
            .unwrap_or_else(Self::unknown)
    }
}

/// An address as proxies write it: `203.0.113.7`, `203.0.113.7:51234`, `2001:db8::1` or
/// `[2001:db8::1]:443`.
fn parse_forwarded(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|addr| addr.ip()))
}

#[cfg(test)]
mod tests {
    use axum::http::{Extensions, HeaderMap, HeaderValue};

    use super::*;

    #[test]
    fn ipv6_is_grouped_by_64_and_ipv4_stands_alone() {
        let a = ClientNetwork::of("2001:db8:1:2:aaaa::1".parse().unwrap());
        let b = ClientNetwork::of("2001:db8:1:2:bbbb::9".parse().unwrap());
        let c = ClientNetwork::of("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.0, "2001:db8:1:2::/64");
        assert_eq!(
            ClientNetwork::of("::ffff:192.0.2.1".parse().unwrap()).0,
            "192.0.2.1"
        );
    }

    #[test]
    fn forwarded_for_is_trusted_only_behind_a_proxy_and_only_its_last_entry() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("6.6.6.6, 198.51.100.4"),
        );
        let mut extensions = Extensions::new();
        extensions.insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 1], 5000))));
        assert_eq!(
            ClientNetwork::from_request(&headers, &extensions, true).0,
            "198.51.100.4"
        );
        assert_eq!(
            ClientNetwork::from_request(&headers, &extensions, false).0,
            "10.0.0.1"
        );
        assert_eq!(
            ClientNetwork::from_request(&HeaderMap::new(), &Extensions::new(), false),
            ClientNetwork::unknown()
        );
        // Whatever bytes the client sent before it, the proxy's entry is read.
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"13.\xa67, 198.51.100.4").unwrap(),
        );
        assert_eq!(
            ClientNetwork::from_request(&headers, &extensions, true).0,
            "198.51.100.4"
        );
        // A proxy that appends ip:port: still its entry, not the client's.
        for (appended, expected) in [
            ("198.51.100.4:51234", "198.51.100.4"),
            ("[2001:db8:5:6::1]:443", "2001:db8:5:6::/64"),
            ("unknown", "10.0.0.1"),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(
                "x-forwarded-for",
                HeaderValue::from_str(&format!("6.6.6.6, {appended}")).unwrap(),
            );
            assert_eq!(
                ClientNetwork::from_request(&headers, &extensions, true).0,
                expected,
                "{appended}"
            );
        }
    }
}
