//! The classic HA protocol between a master and its slaves (Java's `DefaultHAConnection` and
//! `DefaultHAClient`), on its own TCP port, with no remoting frames and no handshake:
//!
//! - slave to master, a report: the slave's commit-log max offset, 8 bytes big-endian, sent
//!   after every frame it appended and as a heartbeat; the master reads only the newest
//!   complete report in what has arrived, and the first one says where to start;
//! - master to slave, a transfer: a 12-byte header (commit-log offset: i64, body size: i32,
//!   big-endian) and that many raw commit-log bytes, never crossing a segment; a header with
//!   size 0 is a heartbeat.
//!
//! The protocol's rules, with the Java files they come from: docs/replication.md.

/// Bytes of one report.
pub const REPORT_LEN: usize = 8;
/// Bytes of a transfer header.
pub const TRANSFER_HEADER_LEN: usize = 12;

/// A report of `max_offset`.
pub fn encode_report(max_offset: u64) -> [u8; REPORT_LEN] {
    (max_offset as i64).to_be_bytes()
}

/// The newest complete report in `buf` and the bytes it accounts for (every whole report up
/// to it; a partial one stays for the next read). `None` when no report is complete yet.
pub fn last_report(buf: &[u8]) -> Option<(i64, usize)> {
    let whole = buf.len() - buf.len() % REPORT_LEN;
    if whole == 0 {
        return None;
    }
    let last: [u8; REPORT_LEN] = buf[whole - REPORT_LEN..whole].try_into().ok()?;
    Some((i64::from_be_bytes(last), whole))
}

/// The header of a transfer of `size` bytes from commit-log offset `phy`.
pub fn encode_transfer_header(phy: u64, size: u32) -> [u8; TRANSFER_HEADER_LEN] {
    let mut h = [0u8; TRANSFER_HEADER_LEN];
    h[..8].copy_from_slice(&(phy as i64).to_be_bytes());
    h[8..].copy_from_slice(&(size as i32).to_be_bytes());
    h
}

/// (commit-log offset, body size) of a transfer header; `None` when `buf` is shorter.
pub fn decode_transfer_header(buf: &[u8]) -> Option<(i64, i32)> {
    let h: &[u8; TRANSFER_HEADER_LEN] = buf.get(..TRANSFER_HEADER_LEN)?.try_into().ok()?;
    let phy = i64::from_be_bytes(h[..8].try_into().ok()?);
    let size = i32::from_be_bytes(h[8..].try_into().ok()?);
    Some((phy, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the newest whole report counts; a partial one waits.
    #[test]
    fn newest_whole_report() {
        let mut b = Vec::new();
        assert_eq!(last_report(&b), None);
        b.extend_from_slice(&encode_report(7));
        b.extend_from_slice(&encode_report(4096));
        b.extend_from_slice(&[0, 0, 0]);
        assert_eq!(last_report(&b), Some((4096, 16)));
        assert_eq!(last_report(&b[..5]), None);
    }

    /// Headers as Java writes them: offset then size, big-endian.
    #[test]
    fn transfer_header_round_trip() {
        let h = encode_transfer_header(0x0102_0304_0506, 32768);
        assert_eq!(&h[..8], &[0, 0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(&h[8..], &[0, 0, 0x80, 0]);
        assert_eq!(decode_transfer_header(&h), Some((0x0102_0304_0506, 32768)));
        assert_eq!(decode_transfer_header(&h[..11]), None);
    }
}
