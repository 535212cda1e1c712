//! Which network a request comes from, for limits that a cleared cookie must not reset (new
//! anonymous ids, anonymous searches, log-in failures). An IPv4 address counts alone; IPv6 is
//! grouped by a prefix, /48 unless configured: a household usually gets a /64, but one customer
//! or server often holds a whole /48, which would be 65,536 "networks" at /64.

use std::net::{IpAddr, SocketAddr};

use axum::{extract::ConnectInfo, http::request::Parts};

/// The IPv6 prefix length addresses are grouped by, unless configured.
pub const DEFAULT_IPV6_PREFIX: u8 = 48;

/// A client's network key, e.g. `203.0.113.7` or `2001:db8:1::/48`; put in the request's
/// extensions by the visitor middleware.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientNetwork(pub String);

impl ClientNetwork {
    /// No peer address is known (a test calling the router directly).
    pub fn unknown() -> Self {
        Self("unknown".into())
    }

    /// The network of `ip`: an IPv4 address alone, an IPv6 address's first `ipv6_prefix` bits
    /// (at most 128).
    pub fn of(ip: IpAddr, ipv6_prefix: u8) -> Self {
        match ip {
            IpAddr::V4(v4) => Self(v4.to_string()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(v4.to_string()),
                None => {
                    let prefix = ipv6_prefix.min(128);
                    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
                    let network = std::net::Ipv6Addr::from(u128::from(v6) & mask);
                    Self(format!("{network}/{prefix}"))
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
        ipv6_prefix: u8,
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
            return Self::of(ip, ipv6_prefix);
        }
        extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| Self::of(addr.ip(), ipv6_prefix))
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
    fn ipv6_is_grouped_by_its_prefix_and_ipv4_stands_alone() {
        let of = |ip: &str, prefix| ClientNetwork::of(ip.parse().unwrap(), prefix);
        // One /48 is one network by default, however its /64s are spread.
        assert_eq!(of("2001:db8:1:2:aaaa::1", 48), of("2001:db8:1:ffff::9", 48));
        assert_ne!(of("2001:db8:1::1", 48), of("2001:db8:2::1", 48));
        assert_eq!(of("2001:db8:1:2:aaaa::1", 48).0, "2001:db8:1::/48");
        // Configured at /64: a household each.
        assert_eq!(of("2001:db8:1:2:aaaa::1", 64).0, "2001:db8:1:2::/64");
        assert_ne!(of("2001:db8:1:2::1", 64), of("2001:db8:1:3::1", 64));
        assert_eq!(of("2001:db8::1", 0).0, "::/0");
        assert_eq!(of("2001:db8::1", 200).0, "2001:db8::1/128");
        assert_eq!(of("::ffff:192.0.2.1", 48).0, "192.0.2.1");
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
            ClientNetwork::from_request(&headers, &extensions, true, 64).0,
            "198.51.100.4"
        );
        assert_eq!(
            ClientNetwork::from_request(&headers, &extensions, false, 64).0,
            "10.0.0.1"
        );
        assert_eq!(
            ClientNetwork::from_request(&HeaderMap::new(), &Extensions::new(), false, 64),
            ClientNetwork::unknown()
        );
        // Whatever bytes the client sent before it, the proxy's entry is read.
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"13.\xa67, 198.51.100.4").unwrap(),
        );
        assert_eq!(
            ClientNetwork::from_request(&headers, &extensions, true, 64).0,
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
                ClientNetwork::from_request(&headers, &extensions, true, 64).0,
                expected,
                "{appended}"
            );
        }
    }
}
