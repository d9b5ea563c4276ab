//! The default `brokerIP1`: the address this host is reached at, picked among the interfaces
//! the way Java's `NetworkUtil.getLocalInetAddress` picks it, so that routes advertise an
//! address remote clients can connect to. Read once by `BrokerConfig::default`.
//!
//! Interfaces that are down, point-to-point, bridges or aliases (`eth0:1`) are skipped, as are
//! loopback addresses. IPv4 is preferred over IPv6; among IPv4 the first public address wins,
//! else the last private one (10/8, 172.16/12, 192.168/16); among IPv6 the first that is not
//! link- or site-local, else the first. With none at all it falls back to 127.0.0.1.
//! A broker bound to one address announces that one instead (`BrokerConfig::broker_ip1`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One address of an interface that is up and not a bridge, alias or point-to-point link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub interface: String,
    pub ip: IpAddr,
}

/// The address Java's broker would announce on this host.
pub fn local_address() -> IpAddr {
    pick(&candidates()).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// [`local_address`], looked up once per process (the config asks for it more than once).
pub fn host_address() -> IpAddr {
    static HOST: std::sync::OnceLock<IpAddr> = std::sync::OnceLock::new();
    *HOST.get_or_init(local_address)
}

/// Whether an interface of this host that is up has `ip` (bridges and aliases included: this
/// asks where a connection to `ip` can land, not which address Java would pick).
pub fn is_local(ip: IpAddr) -> bool {
    let probe = std::net::SocketAddr::new(ip, 0);
    // Binding succeeds exactly for the host's own addresses (and fails fast for others).
    std::net::UdpSocket::bind(probe).is_ok()
}

/// Java's `UtilAll.isInternalIP`: 10/8, 127/8, 172.16/12, 192.168/16.
fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    o[0] == 10
        || o[0] == 127
        || (o[0] == 172 && (16..=31).contains(&o[1]))
        || (o[0] == 192 && o[1] == 168)
}

/// Java's `UtilAll.isInternalV6IP`: unspecified, link-local, loopback, site-local (fec0::/10).
fn is_internal_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments()[0];
    ip.is_unspecified() || ip.is_loopback() || (s & 0xffc0) == 0xfe80 || (s & 0xffc0) == 0xfec0
}

/// The choice among candidates, in interface order (pure: the tests feed it lists).
pub fn pick(cands: &[Candidate]) -> Option<IpAddr> {
    let v4: Vec<Ipv4Addr> = cands
        .iter()
        .filter_map(|c| match c.ip {
            IpAddr::V4(a) if !a.is_loopback() => Some(a),
            _ => None,
        })
        .collect();
    if let Some(last) = v4.last() {
        let public = v4.iter().find(|a| !is_internal_v4(**a));
        return Some(IpAddr::V4(*public.unwrap_or(last)));
    }
    let v6: Vec<Ipv6Addr> = cands
        .iter()
        .filter_map(|c| match c.ip {
            IpAddr::V6(a) if !a.is_loopback() => Some(a),
            _ => None,
        })
        .collect();
    let first = v6.first()?;
    let public = v6.iter().find(|a| !is_internal_v6(**a));
    Some(IpAddr::V6(*public.unwrap_or(first)))
}

/// The addresses of usable interfaces, from getifaddrs(3).
fn candidates() -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, valid until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if let Some(c) = candidate(ifa) {
            out.push(c);
        }
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

fn candidate(ifa: &libc::ifaddrs) -> Option<Candidate> {
    if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
        return None;
    }
    let flags = ifa.ifa_flags;
    if flags & libc::IFF_UP as u32 == 0 || flags & libc::IFF_POINTOPOINT as u32 != 0 {
        return None;
    }
    // SAFETY: ifa_name is a NUL-terminated string owned by the getifaddrs list.
    let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
        .to_string_lossy()
        .into_owned();
    // Java skips virtual (alias) interfaces and Linux bridges.
    if name.contains(':')
        || std::path::Path::new("/sys/class/net")
            .join(&name)
            .join("bridge")
            .exists()
    {
        return None;
    }
    // SAFETY: ifa_addr is non-null; the family says which sockaddr type it points at.
    let ip = unsafe {
        match (*ifa.ifa_addr).sa_family as i32 {
            libc::AF_INET => {
                let sa = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                IpAddr::V4(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)))
            }
            libc::AF_INET6 => {
                let sa = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                IpAddr::V6(Ipv6Addr::from(sa.sin6_addr.s6_addr))
            }
            _ => return None,
        }
    };
    Some(Candidate {
        interface: name,
        ip,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(ip: &str) -> Candidate {
        Candidate {
            interface: "eth".into(),
            ip: ip.parse().unwrap(),
        }
    }

    /// Java's preference: IPv4 first, a public one over private ones, else the last private
    /// one; IPv6 only without IPv4; loopback never.
    #[test]
    fn picks_like_java() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(
            pick(&[c("127.0.0.1"), c("10.0.0.5"), c("192.168.1.2")]),
            ip("192.168.1.2")
        );
        assert_eq!(
            pick(&[c("10.0.0.5"), c("203.0.113.7"), c("172.16.0.1")]),
            ip("203.0.113.7")
        );
        assert_eq!(pick(&[c("172.32.0.1"), c("10.0.0.5")]), ip("172.32.0.1"));
        assert_eq!(
            pick(&[c("fe80::1"), c("2001:db8::1"), c("10.1.1.1")]),
            ip("10.1.1.1")
        );
        assert_eq!(
            pick(&[c("::1"), c("fe80::1"), c("2001:db8::1")]),
            ip("2001:db8::1")
        );
        assert_eq!(pick(&[c("::1"), c("fe80::1")]), ip("fe80::1"));
        assert_eq!(pick(&[c("127.0.0.1"), c("::1")]), None);
    }

    /// On this host the default is an address of an up interface, and loopback only when no
    /// other address exists.
    #[test]
    fn local_address_is_not_loopback_when_another_exists() {
        let cands = candidates();
        let a = local_address();
        if cands.iter().any(|c| !c.ip.is_loopback()) {
            assert!(!a.is_loopback(), "{a} among {cands:?}");
            assert!(cands.iter().any(|c| c.ip == a));
        } else {
            assert!(a.is_loopback());
        }
    }
}
