//! Message ids (Java's `MessageDecoder.createMessageId` and `MessageClientIDSetter`).
//!
//! The offset msg id is uppercase hex of store IP (4 or 16 bytes) + port (int) + commit-log
//! offset (long): 32 hex chars for IPv4, 56 for IPv6; the decoder picks the family from the
//! length. `UniqKeyGenerator` makes broker-side UNIQ_KEYs for messages that arrive without one,
//! in the client's layout (ip + pid + discriminator + ms since month start + counter) so that
//! Java tools that read the time out of a UNIQ_KEY still work. Called by the send, pull-by-id
//! and transaction paths.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};

use super::ProtocolError;
use crate::common::time::{civil_from_days, days_from_civil};

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn push_hex(dst: &mut String, bytes: &[u8]) {
    let mut hex = [0u8; 32];
    for chunk in bytes.chunks(16) {
        let out = &mut hex[..2 * chunk.len()];
        hex_into(out, chunk);
        // Every byte is an ASCII digit from HEX_UPPER: never the empty fallback.
        dst.push_str(std::str::from_utf8(out).unwrap_or_default());
    }
}

fn ip_octets(ip: IpAddr) -> ([u8; 16], usize) {
    let mut buf = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => {
            buf[..4].copy_from_slice(&v4.octets());
            (buf, 4)
        }
        IpAddr::V6(v6) => {
            buf.copy_from_slice(&v6.octets());
            (buf, 16)
        }
    }
}

/// `MessageDecoder.createMessageId`: hex(store IP, port, phy_offset), uppercase.
pub fn offset_msg_id(store_host: SocketAddr, phy_offset: i64) -> String {
    let mut s = String::with_capacity(offset_msg_id_len(store_host));
    push_offset_msg_id(&mut s, store_host, phy_offset);
    s
}

/// Length of an offset msg id for this store host: 32 (IPv4) or 56 (IPv6).
pub fn offset_msg_id_len(store_host: SocketAddr) -> usize {
    (ip_octets(store_host.ip()).1 + 12) * 2
}

/// Appends `offset_msg_id(store_host, phy_offset)` to `dst` (batch responses join many).
pub fn push_offset_msg_id(dst: &mut String, store_host: SocketAddr, phy_offset: i64) {
    push_offset_msg_ids(dst, store_host, &[phy_offset as u64]);
}

/// Appends the offset msg ids of `phy_offsets`, joined by ',' (a batch response's msgId). The
/// host part is formatted once and each id is built on the stack and appended whole: a
/// capacity check per hex digit, and the host per id, showed in the batch path's profile.
pub fn push_offset_msg_ids(dst: &mut String, store_host: SocketAddr, phy_offsets: &[u64]) {
    let (ip, ip_len) = ip_octets(store_host.ip());
    let mut raw = [0u8; 20];
    raw[..ip_len].copy_from_slice(&ip[..ip_len]);
    raw[ip_len..ip_len + 4].copy_from_slice(&(store_host.port() as i32).to_be_bytes());
    let host_hex = 2 * (ip_len + 4);
    // ',' + host + 16 digits of offset; the first id skips the ','.
    let mut id = [b','; 1 + 40 + 16];
    hex_into(&mut id[1..1 + host_hex], &raw[..ip_len + 4]);
    let end = 1 + host_hex + 16;
    dst.reserve(phy_offsets.len() * end);
    for (i, phy) in phy_offsets.iter().enumerate() {
        hex_into(&mut id[1 + host_hex..end], &phy.to_be_bytes());
        let from = usize::from(i == 0);
        // Every byte is ',' or an ASCII digit from HEX_UPPER: never the empty fallback.
        dst.push_str(std::str::from_utf8(&id[from..end]).unwrap_or_default());
    }
}

/// Uppercase hex of `bytes` into `out` (twice as long).
fn hex_into(out: &mut [u8], bytes: &[u8]) {
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX_UPPER[(b >> 4) as usize];
        pair[1] = HEX_UPPER[(b & 0xF) as usize];
    }
}

/// Inverse of `offset_msg_id` (hex digits of either case). Errors: a length other than 32/56,
/// a non-hex digit, a port outside 0..=65535.
pub fn decode_offset_msg_id(id: &str) -> Result<(SocketAddr, i64), ProtocolError> {
    let invalid = || ProtocolError::InvalidField {
        name: "msgId",
        value: id.chars().take(64).collect(),
    };
    let ip_len = match id.len() {
        32 => 4,
        56 => 16,
        _ => return Err(invalid()),
    };
    let mut raw = [0u8; 28];
    let n = id.len() / 2;
    for (i, pair) in id.as_bytes().chunks_exact(2).enumerate() {
        let hi = hex_val(pair[0]).ok_or_else(invalid)?;
        let lo = hex_val(pair[1]).ok_or_else(invalid)?;
        raw[i] = (hi << 4) | lo;
    }
    let raw = &raw[..n];
    let ip = if ip_len == 4 {
        IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))
    } else {
        let mut o = [0u8; 16];
        o.copy_from_slice(&raw[..16]);
        IpAddr::V6(Ipv6Addr::from(o))
    };
    let port = i32::from_be_bytes(raw[ip_len..ip_len + 4].try_into().expect("4 bytes"));
    let port = u16::try_from(port).map_err(|_| invalid())?;
    let offset = i64::from_be_bytes(raw[ip_len + 4..ip_len + 12].try_into().expect("8 bytes"));
    Ok((SocketAddr::new(ip, port), offset))
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'F' => Some(c - b'A' + 10),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Distinguishes generators inside one process (one per shard), taking the slot the Java
/// client fills with its class loader's hash.
static GENERATOR_SEQ: AtomicU32 = AtomicU32::new(0);

/// Broker-side UNIQ_KEY source: 32 uppercase hex chars for an IPv4 broker (56 for IPv6),
/// unique within the process and, through ip + pid + time, across processes.
pub struct UniqKeyGenerator {
    /// Hex of ip + pid (short) + discriminator (int): fixed for this generator.
    prefix: String,
    /// Start of the current UTC month in ms, and the start of the next one.
    month_start_ms: i64,
    next_month_start_ms: i64,
    counter: u16,
}

impl UniqKeyGenerator {
    pub fn new(ip: IpAddr) -> Self {
        let (octets, ip_len) = ip_octets(ip);
        let pid = std::process::id() as u16;
        // Spread consecutive generator numbers over the int so ids of different shards differ
        // early in the string (golden-ratio multiply, a bijection on u32).
        let seq = GENERATOR_SEQ.fetch_add(1, Ordering::Relaxed);
        let disc = seq.wrapping_mul(0x9E37_79B9) ^ std::process::id();
        let mut prefix = String::with_capacity((ip_len + 6) * 2);
        push_hex(&mut prefix, &octets[..ip_len]);
        push_hex(&mut prefix, &pid.to_be_bytes());
        push_hex(&mut prefix, &disc.to_be_bytes());
        UniqKeyGenerator {
            prefix,
            month_start_ms: 0,
            next_month_start_ms: i64::MIN,
            counter: 0,
        }
    }

    /// The next id for a message stored at wall-clock `now_ms`.
    pub fn next(&mut self, now_ms: i64) -> String {
        let mut s = String::with_capacity(self.prefix.len() + 12);
        self.push_next(&mut s, now_ms);
        s
    }

    /// Appends the next id to `dst` (the send path writes it straight into the properties).
    pub fn push_next(&mut self, s: &mut String, now_ms: i64) {
        if now_ms >= self.next_month_start_ms || now_ms < self.month_start_ms {
            let (start, next) = utc_month_bounds_ms(now_ms);
            self.month_start_ms = start;
            self.next_month_start_ms = next;
        }
        let since_month = (now_ms - self.month_start_ms) as i32; // < 31 days in ms, fits
        s.push_str(&self.prefix);
        push_hex(s, &since_month.to_be_bytes());
        push_hex(s, &self.counter.to_be_bytes());
        self.counter = self.counter.wrapping_add(1);
    }
}

/// Start of the UTC month containing `ms` and of the following month, in ms since the epoch.
fn utc_month_bounds_ms(ms: i64) -> (i64, i64) {
    const DAY_MS: i64 = 86_400_000;
    let days = ms.div_euclid(DAY_MS);
    let (y, m, d) = civil_from_days(days);
    let start = (days - (d - 1)) * DAY_MS;
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    let next = days_from_civil(ny, nm, 1) * DAY_MS;
    (start, next)
}

/// Debug helper for logs: hex of arbitrary bytes (uppercase, like the ids).
pub fn to_hex_upper(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02X}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden IPv4 id from the spec layout: 10.0.0.1:10911 at offset 0x1234.
    #[test]
    fn offset_msg_id_golden_ipv4() {
        let addr: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        let id = offset_msg_id(addr, 0x1234);
        assert_eq!(id, "0A00000100002A9F0000000000001234");
        assert_eq!(decode_offset_msg_id(&id).unwrap(), (addr, 0x1234));
        assert_eq!(
            decode_offset_msg_id(&id.to_lowercase()).unwrap(),
            (addr, 0x1234)
        );
    }

    /// A batch's joined ids are the single ids joined by ',', for both address families.
    #[test]
    fn joined_ids_match_one_by_one() {
        for host in ["10.0.0.7:10911", "[2001:db8::1]:30911"] {
            let host: SocketAddr = host.parse().unwrap();
            for phys in [&[][..], &[0][..], &[1 << 40, 7, u64::MAX >> 1][..]] {
                let mut joined = String::from("x");
                push_offset_msg_ids(&mut joined, host, phys);
                let one_by_one: Vec<String> = phys
                    .iter()
                    .map(|p| offset_msg_id(host, *p as i64))
                    .collect();
                assert_eq!(joined, format!("x{}", one_by_one.join(",")));
            }
        }
    }

    /// IPv6 ids are 56 hex chars and round-trip.
    #[test]
    fn offset_msg_id_ipv6_round_trip() {
        let addr: SocketAddr = "[fe80::1:2]:10911".parse().unwrap();
        let id = offset_msg_id(addr, i64::MAX);
        assert_eq!(id.len(), 56);
        assert!(id.starts_with("FE800000000000000000000000010002"));
        assert_eq!(decode_offset_msg_id(&id).unwrap(), (addr, i64::MAX));
    }

    /// Bad lengths, non-hex digits and impossible ports are errors.
    #[test]
    fn decode_errors() {
        for bad in [
            "",
            "0A00",
            "0A00000100002A9F000000000000123",
            "0A00000100002A9F000000000000123G",
            "0A000001FFFFFFFF0000000000001234",
            "ÄÄ00000100002A9F00000000000012",
        ] {
            assert!(
                matches!(
                    decode_offset_msg_id(bad),
                    Err(ProtocolError::InvalidField { name: "msgId", .. })
                ),
                "{bad}"
            );
        }
    }

    /// UNIQ_KEYs are 32 uppercase hex chars, distinct across calls and generators, and carry
    /// the ms since the start of the UTC month where Java's reader expects them.
    #[test]
    fn uniq_keys_are_unique_and_shaped_like_java() {
        let ip: IpAddr = "192.168.1.7".parse().unwrap();
        let mut a = UniqKeyGenerator::new(ip);
        let mut b = UniqKeyGenerator::new(ip);
        // 2024-03-05T00:00:01.500Z; March 1st 00:00 UTC = 1709251200000.
        let now = 1_709_596_801_500i64;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            for g in [&mut a, &mut b] {
                let k = g.next(now);
                assert_eq!(k.len(), 32);
                assert!(k
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c)));
                assert!(k.starts_with("C0A80107"));
                let t = i32::from_str_radix(&k[20..28], 16).unwrap() as i64;
                assert_eq!(t, now - 1_709_251_200_000);
                assert!(seen.insert(k));
            }
        }
    }

    /// Month boundaries, including a leap February and a year end.
    #[test]
    fn utc_month_bounds() {
        // 2024-02-29T12:00Z -> Feb 1 .. Mar 1.
        let (s, n) = utc_month_bounds_ms(1_709_208_000_000);
        assert_eq!(s, 1_706_745_600_000);
        assert_eq!(n, 1_709_251_200_000);
        // 2023-12-31T23:59:59.999Z -> Dec 1 .. Jan 1 2024.
        let (s, n) = utc_month_bounds_ms(1_704_067_199_999);
        assert_eq!(s, 1_701_388_800_000);
        assert_eq!(n, 1_704_067_200_000);
        assert_eq!(to_hex_upper(&[0xAB, 0x01]), "AB01");
    }
}
