//! Counts stored-message records (CommitLog layout) in a PULL_MESSAGE response body without
//! copying them, and finds each body's first bytes for end-to-end timestamps.
//!
//! A thin adapter over `ringmq::protocol::message::decode` (CRC not checked: the broker
//! already did, and the generator must stay cheap). Called by the pull module. Invariants:
//! any inconsistency stops the walk with an error (like Java's `decodesBatch`, a bad record
//! ends the buffer) and never panics; bodies are borrowed, never copied.

use ringmq::protocol::message::decode;

/// One record as the consumer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub total_size: usize,
    pub queue_offset: i64,
    pub body: &'a [u8],
}

/// Parses the record at the start of `buf`.
pub fn parse_record(buf: &[u8]) -> Result<RecordView<'_>, String> {
    let r = decode(buf, false).map_err(|e| format!("stored record: {e}"))?;
    let total_size = r.total_size as usize;
    if total_size == 0 || total_size > buf.len() {
        return Err(format!("stored record size {total_size} outside the body"));
    }
    Ok(RecordView {
        total_size,
        queue_offset: r.queue_offset,
        body: r.body,
    })
}

/// Calls `each` for every record of a pull body; returns (records, body bytes).
pub fn for_each_record(
    mut buf: &[u8],
    mut each: impl FnMut(&RecordView<'_>),
) -> Result<(u64, u64), String> {
    let (mut n, mut bytes) = (0u64, 0u64);
    while !buf.is_empty() {
        let r = parse_record(buf)?;
        each(&r);
        n += 1;
        bytes += r.body.len() as u64;
        buf = &buf[r.total_size..];
    }
    Ok((n, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAGIC_V1: u32 = 0xDAA3_20A7;
    const MAGIC_V2: u32 = 0xDAA3_20AB;
    const BLANK_MAGIC: u32 = 0xCBD4_3194;

    /// Builds a record field by field in the CommitLog layout (independent of the walker).
    fn record(
        v6_born: bool,
        v6_store: bool,
        topic: &str,
        body: &[u8],
        props: &str,
        qoff: i64,
    ) -> Vec<u8> {
        let v2 = topic.len() > 127;
        let mut r = Vec::new();
        r.extend_from_slice(&[0; 4]); // total, patched below
        r.extend_from_slice(&(if v2 { MAGIC_V2 } else { MAGIC_V1 }).to_be_bytes());
        r.extend_from_slice(&0u32.to_be_bytes()); // crc
        r.extend_from_slice(&3i32.to_be_bytes()); // queue id
        r.extend_from_slice(&0i32.to_be_bytes()); // flag
        r.extend_from_slice(&qoff.to_be_bytes());
        r.extend_from_slice(&1234i64.to_be_bytes()); // phy offset
        let sys: i32 = (if v6_born { 0x10 } else { 0 }) | (if v6_store { 0x20 } else { 0 });
        r.extend_from_slice(&sys.to_be_bytes());
        r.extend_from_slice(&1i64.to_be_bytes()); // born ts
        r.extend(std::iter::repeat_n(7u8, if v6_born { 16 } else { 4 })); // born ip
        r.extend_from_slice(&40_000i32.to_be_bytes()); // born port
        r.extend_from_slice(&2i64.to_be_bytes()); // store ts
        r.extend(std::iter::repeat_n(9u8, if v6_store { 16 } else { 4 })); // store ip
        r.extend_from_slice(&10_911i32.to_be_bytes()); // store port
        r.extend_from_slice(&0i32.to_be_bytes()); // reconsume
        r.extend_from_slice(&0i64.to_be_bytes()); // prepared tx
        r.extend_from_slice(&(body.len() as i32).to_be_bytes());
        r.extend_from_slice(body);
        if v2 {
            r.extend_from_slice(&(topic.len() as u16).to_be_bytes());
        } else {
            r.push(topic.len() as u8);
        }
        r.extend_from_slice(topic.as_bytes());
        r.extend_from_slice(&(props.len() as u16).to_be_bytes());
        r.extend_from_slice(props.as_bytes());
        let total = r.len() as u32;
        r[..4].copy_from_slice(&total.to_be_bytes());
        r
    }

    /// The length formula of 3.5 holds for the test builder (guards the builder itself).
    #[test]
    fn builder_matches_spec_formula() {
        let r = record(false, false, "T", b"abc", "K\u{1}V\u{2}", 0);
        assert_eq!(r.len(), 91 + 3 + 1 + 4);
        assert_eq!(record(true, true, "T", b"", "", 0).len(), 91 + 1 + 24);
    }

    /// Mixed IPv4/IPv6 hosts and a long (V2-magic) topic are counted and bodies found.
    #[test]
    fn counts_mixed_records() {
        let long_topic = "t".repeat(200);
        let mut buf = record(false, false, "BenchTopic", b"hello", "A\u{1}B\u{2}", 10);
        buf.extend(record(true, false, "BenchTopic", b"", "", 11));
        buf.extend(record(false, true, &long_topic, &[1; 300], "", 12));
        buf.extend(record(true, true, "X", b"world!", "", 13));
        let mut seen = Vec::new();
        let (n, bytes) =
            for_each_record(&buf, |r| seen.push((r.queue_offset, r.body.to_vec()))).unwrap();
        assert_eq!((n, bytes), (4, 5 + 300 + 6));
        assert_eq!(seen[0], (10, b"hello".to_vec()));
        assert_eq!(seen[3], (13, b"world!".to_vec()));
        assert_eq!(for_each_record(&[], |_| {}).unwrap(), (0, 0));
    }

    /// Every truncation and each inconsistent field is an error, never a panic.
    #[test]
    fn malformed_bodies() {
        let good = record(false, false, "BenchTopic", b"hello", "A\u{1}B\u{2}", 0);
        for cut in 1..good.len() {
            assert!(for_each_record(&good[..cut], |_| {}).is_err(), "cut {cut}");
        }
        let patched = |at: usize, b: &[u8]| {
            let mut r = good.clone();
            r[at..at + b.len()].copy_from_slice(b);
            r
        };
        let body_len_at = 84;
        for bad in [
            patched(4, &BLANK_MAGIC.to_be_bytes()),
            patched(4, &[0, 0, 0, 0]),
            patched(0, &[0, 0, 0, 10]),
            patched(0, &[0xFF, 0xFF, 0xFF, 0xFF]),
            patched(body_len_at, &[0x7F, 0xFF, 0xFF, 0xFF]),
            patched(body_len_at, &[0, 0, 0, 4]),
            patched(36, &[0, 0, 0, 0x10]), // claims IPv6 born host that is not there
        ] {
            assert!(for_each_record(&bad, |_| {}).is_err());
        }
    }
}
