//! Which peers may call the daemon. The cuzk protocol has no authentication: the address the
//! daemon listens on, and the networks `serve --allow` names, are its only gate.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A network: an address and how many of its leading bits a peer must share with it
/// (`10.0.0.0/8`, `fd00::/8`; a bare address is that address alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl Network {
    /// Whether `ip` is in this network. An IPv4 peer reaching an IPv6 socket
    /// (`::ffff:a.b.c.d`) counts as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                leading_bits_equal(&net.octets(), &ip.octets(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                leading_bits_equal(&net.octets(), &ip.octets(), self.prefix)
            }
            _ => false,
        }
    }
}

/// Whether the first `bits` bits of `a` and `b` are equal.
fn leading_bits_equal(a: &[u8], b: &[u8], bits: u8) -> bool {
    let (bytes, rest) = (bits as usize / 8, bits % 8);
    if a[..bytes] != b[..bytes] {
        return false;
    }
    rest == 0 || (a[bytes] ^ b[bytes]) >> (8 - rest) == 0
}

impl FromStr for Network {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address or network (10.0.0.0/8, ::1)"))?;
        let width = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => width,
            Some(p) => match p.trim().parse::<u8>() {
                Ok(p) if p <= width => p,
                _ => return Err(format!("{s:?}: the prefix must be 0 to {width} bits")),
            },
        };
        Ok(Network {
            addr: addr.to_canonical(),
            prefix,
        })
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// The peers the daemon admits: every one, or those in the given networks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peers {
    /// Empty: every peer.
    networks: Vec<Network>,
}

impl Peers {
    /// Every peer that reaches the listening address.
    pub fn any() -> Self {
        Peers::default()
    }

    /// Peers in `networks` only (none given: every peer).
    pub fn only(networks: Vec<Network>) -> Self {
        Peers { networks }
    }

    pub fn admits_any(&self) -> bool {
        self.networks.is_empty()
    }

    pub fn admits(&self, ip: IpAddr) -> bool {
        self.admits_any() || self.networks.iter().any(|n| n.contains(ip))
    }
}

impl fmt::Display for Peers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.admits_any() {
            return f.write_str("every peer");
        }
        let names: Vec<String> = self.networks.iter().map(Network::to_string).collect();
        f.write_str(&names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Network {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_hold_the_addresses_under_their_prefix() {
        assert!(net("10.0.0.0/8").contains(ip("10.200.3.4")));
        assert!(!net("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(net("192.168.1.0/25").contains(ip("192.168.1.127")));
        assert!(!net("192.168.1.0/25").contains(ip("192.168.1.128")));
        assert!(net("0.0.0.0/0").contains(ip("8.8.8.8")));
        assert!(net("127.0.0.1").contains(ip("127.0.0.1")));
        assert!(!net("127.0.0.1").contains(ip("127.0.0.2")));
        assert!(net("fd00::/8").contains(ip("fd12::1")));
        assert!(!net("fd00::/8").contains(ip("fe80::1")));
        assert!(net("::1").contains(ip("::1")));
        // An IPv4 peer on an IPv6 socket, and an IPv4 network written as mapped.
        assert!(net("10.0.0.0/8").contains(ip("::ffff:10.1.2.3")));
        assert!(!net("::1").contains(ip("127.0.0.1")), "no family crossing");
    }

    #[test]
    fn bad_networks_are_refused_with_what_is_wrong() {
        for bad in [
            "",
            "10.0.0",
            "10.0.0.0/33",
            "::1/129",
            "10.0.0.0/x",
            "host.example",
        ] {
            let err = bad.parse::<Network>().unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn peers_admit_every_peer_or_those_listed() {
        assert!(Peers::any().admits(ip("203.0.113.9")));
        let lan = Peers::only(vec![net("10.0.0.0/8"), net("::1")]);
        assert!(lan.admits(ip("10.0.0.7")) && lan.admits(ip("::1")));
        assert!(!lan.admits(ip("127.0.0.1")));
        assert_eq!(lan.to_string(), "10.0.0.0/8, ::1/128");
        assert_eq!(Peers::any().to_string(), "every peer");
    }
}
