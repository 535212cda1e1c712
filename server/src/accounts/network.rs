//! Which network a request comes from, for limits that a cleared cookie must not reset (new
//! anonymous ids, anonymous searches, log-in failures). An IPv4 address counts alone; IPv6 is
//! grouped by a prefix, /48 unless configured: a household usually gets a /64, but one customer
//! or server often holds a whole /48, which would be 65,536 "networks" at /64.

use std::net::{IpAddr, SocketAddr};

use axum::{extract::ConnectInfo, http::request::Parts};

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

    /// The client's network: the peer address, unless the peer is a trusted proxy
    /// ([`TrustedProxies`]); then `X-Forwarded-For` is read from its end, one entry per hop,
    /// for as long as the address read is a trusted proxy too (at most `hops` entries). Earlier
    /// entries are the client's to forge and are never read; an entry that cannot be parsed
    /// stops the walk at the last address known.
    pub fn from_request(
        headers: &axum::http::HeaderMap,
        extensions: &axum::http::Extensions,
        proxies: &TrustedProxies,
        ipv6_prefix: u8,
    ) -> Self {
        let Some(peer) = extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip())
        else {
            return Self::unknown();
        };
        let mut client = peer;
        if proxies.trusts(peer) {
            // Entries as bytes, last first: bytes a client put in earlier entries (non-ASCII
            // ones made the whole header unreadable, and the request count as the proxy's own
            // network; found by fuzzing) cannot hide the proxies' entries.
            let mut entries = headers
                .get_all("x-forwarded-for")
                .iter()
                .rev()
                .flat_map(|value| value.as_bytes().rsplit(|&b| b == b','));
            for _ in 0..proxies.hops {
                let Some(ip) = entries
                    .next()
                    .and_then(|entry| std::str::from_utf8(entry).ok())
                    .and_then(parse_forwarded)
                else {
                    break;
                };
                client = ip;
                if !proxies.trusts(ip) {
                    break;
                }
            }
        }
        Self::of(client, ipv6_prefix)
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

/// The proxies whose `X-Forwarded-For` entries are believed, and how many of them may stand
/// in a row in front of the app (a CDN, then a load balancer: 2). A request from anywhere else
/// is its peer address, whatever it sends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    pub networks: Vec<ipnet::IpNet>,
    pub hops: usize,
}

impl TrustedProxies {
    /// The proxies whose X-Forwarded-For is believed: the ones named, else loopback and
    /// private addresses when behind a proxy, else none.
    pub fn from_config(config: &crate::config::HttpConfig) -> Self {
        let hops = usize::from(config.proxy_hops);
        if !config.trusted_proxies.is_empty() {
            Self {
                networks: config.trusted_proxies.clone(),
                hops,
            }
        } else if config.behind_proxy {
            Self {
                hops,
                ..Self::private_ranges()
            }
        } else {
            Self::none()
        }
    }

    /// No proxy: every request is its peer address.
    pub fn none() -> Self {
        Self::default()
    }

    /// Loopback and private addresses (`ZENBU_BEHIND_PROXY=true`): a proxy on the same host or
    /// the same private network, one hop. A client reaching the app directly from a public
    /// address cannot pick its own network.
    pub fn private_ranges() -> Self {
        let networks = [
            "127.0.0.0/8",
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "::1/128",
            "fc00::/7",
        ]
        .iter()
        .map(|net| net.parse().expect("a valid network"))
        .collect();
        Self { networks, hops: 1 }
    }

    pub fn is_empty(&self) -> bool {
        self.networks.is_empty() || self.hops == 0
    }

    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.hops > 0 && self.networks.iter().any(|net| net.contains(&ip))
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

    fn from(peer: [u8; 4], forwarded: &[u8], proxies: &TrustedProxies) -> String {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_bytes(forwarded).unwrap(),
        );
        let mut extensions = Extensions::new();
        extensions.insert(ConnectInfo(SocketAddr::from((peer, 5000))));
        ClientNetwork::from_request(&headers, &extensions, proxies, 64).0
    }

    #[test]
    fn forwarded_for_is_trusted_only_from_a_trusted_proxy_and_only_its_last_entry() {
        let private = TrustedProxies::private_ranges();
        assert_eq!(
            from([10, 0, 0, 1], b"6.6.6.6, 198.51.100.4", &private),
            "198.51.100.4"
        );
        assert_eq!(
            from(
                [10, 0, 0, 1],
                b"6.6.6.6, 198.51.100.4",
                &TrustedProxies::none()
            ),
            "10.0.0.1"
        );
        // Reaching the app directly from a public address: the header is the client's own.
        assert_eq!(
            from([198, 51, 100, 9], b"6.6.6.6", &private),
            "198.51.100.9"
        );
        assert_eq!(
            ClientNetwork::from_request(&HeaderMap::new(), &Extensions::new(), &private, 64),
            ClientNetwork::unknown()
        );
        // Whatever bytes the client sent before it, the proxy's entry is read.
        assert_eq!(
            from([10, 0, 0, 1], b"13.\xa67, 198.51.100.4", &private),
            "198.51.100.4"
        );
        // A proxy that appends ip:port: still its entry, not the client's.
        for (appended, expected) in [
            ("198.51.100.4:51234", "198.51.100.4"),
            ("[2001:db8:5:6::1]:443", "2001:db8:5:6::/64"),
            ("unknown", "10.0.0.1"),
        ] {
            assert_eq!(
                from(
                    [10, 0, 0, 1],
                    format!("6.6.6.6, {appended}").as_bytes(),
                    &private
                ),
                expected,
                "{appended}"
            );
        }
    }

    #[test]
    fn two_trusted_hops_are_walked_back_and_no_further() {
        // A CDN (203.0.113.0/24) in front of a load balancer (10.0.0.0/8).
        let proxies = TrustedProxies {
            networks: vec![
                "10.0.0.0/8".parse().unwrap(),
                "203.0.113.0/24".parse().unwrap(),
            ],
            hops: 2,
        };
        // Client → CDN → balancer → app: the balancer appended the CDN, the CDN the client.
        assert_eq!(
            from(
                [10, 0, 0, 2],
                b"6.6.6.6, 198.51.100.4, 203.0.113.5",
                &proxies
            ),
            "198.51.100.4"
        );
        // Came to the balancer without the CDN: the entry it appended is the client.
        assert_eq!(
            from([10, 0, 0, 2], b"6.6.6.6, 198.51.100.4", &proxies),
            "198.51.100.4"
        );
        // Never more than two entries back, whatever the client forged as "proxies".
        assert_eq!(
            from(
                [10, 0, 0, 2],
                b"6.6.6.6, 203.0.113.9, 203.0.113.5, 203.0.113.7",
                &proxies
            ),
            "203.0.113.5"
        );
        // One hop only: the last entry, even when it names a trusted proxy.
        let one = TrustedProxies {
            hops: 1,
            ..proxies.clone()
        };
        assert_eq!(
            from([10, 0, 0, 2], b"6.6.6.6, 198.51.100.4, 203.0.113.5", &one),
            "203.0.113.5"
        );
        // Headers split over several lines are one list.
        let mut headers = HeaderMap::new();
        headers.append(
            "x-forwarded-for",
            HeaderValue::from_static("6.6.6.6, 198.51.100.4"),
        );
        headers.append("x-forwarded-for", HeaderValue::from_static("203.0.113.5"));
        let mut extensions = Extensions::new();
        extensions.insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 2], 5000))));
        assert_eq!(
            ClientNetwork::from_request(&headers, &extensions, &proxies, 64).0,
            "198.51.100.4"
        );
    }
}
