//! Counts stored-message records (PROTOCOL.md 3.5) in a PULL_MESSAGE response body without
//! copying them, and finds each body's first bytes for end-to-end timestamps.
//!
//! TO BE REPLACED by `ringmq::protocol::message::decode` once the store worker's record codec
//! lands; this private walker reads only the length fields it needs (no CRC, no UTF-8 checks),
//! which keeps the consumer's per-message cost to a few loads.
//! Called by the pull module. Invariants: every length is checked against the bytes left
//! before use; any inconsistency stops the walk with an error (like Java's `decodesBatch`, a
//! bad record ends the buffer) and never panics.

/// Offset of SYSFLAG in a record.
const SYSFLAG_AT: usize = 36;
/// Offset of BORNHOST (fixed part before it is 48 bytes).
const BORNHOST_AT: usize = 48;
const MAGIC_V1: u32 = 0xDAA3_20A7;
const MAGIC_V2: u32 = 0xDAA3_20AB;
const BLANK_MAGIC: u32 = 0xCBD4_3194;
const BORNHOST_V6: i32 = 0x10;
const STOREHOST_V6: i32 = 0x20;

/// One record as the consumer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub total_size: usize,
    pub queue_offset: i64,
    pub body: &'a [u8],
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be_i64(b: &[u8], at: usize) -> Option<i64> {
    let s = b.get(at..at + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(i64::from_be_bytes(a))
}

/// Parses the record at the start of `buf`.
pub fn parse_record(buf: &[u8]) -> Result<RecordView<'_>, String> {
    let total = be_u32(buf, 0).ok_or("truncated record header")? as usize;
    let magic = be_u32(buf, 4).ok_or("truncated record header")?;
    let topic_len_size = match magic {
        MAGIC_V1 => 1,
        MAGIC_V2 => 2,
        BLANK_MAGIC => return Err("blank (end-of-file) record in a pull body".to_owned()),
        m => return Err(format!("bad record magic {m:#010x}")),
    };
    if total > buf.len() || total < BORNHOST_AT {
        return Err(format!(
            "record size {total} outside [{BORNHOST_AT}, {}]",
            buf.len()
        ));
    }
    let rec = &buf[..total];
    let sys_flag = be_u32(rec, SYSFLAG_AT).ok_or("truncated record")? as i32;
    let born_len = if sys_flag & BORNHOST_V6 != 0 { 20 } else { 8 };
    let store_len = if sys_flag & STOREHOST_V6 != 0 { 20 } else { 8 };
    // born host, store timestamp, store host, reconsume times, prepared tx offset.
    let body_len_at = BORNHOST_AT + born_len + 8 + store_len + 4 + 8;
    let body_len = be_u32(rec, body_len_at).ok_or("truncated record before body")? as usize;
    let body_at = body_len_at + 4;
    let body = rec
        .get(body_at..body_at.saturating_add(body_len))
        .ok_or("body length exceeds the record")?;
    let topic_at = body_at + body_len;
    let topic_len = match topic_len_size {
        1 => *rec.get(topic_at).ok_or("truncated topic")? as usize,
        _ => rec
            .get(topic_at..topic_at + 2)
            .map(|s| u16::from_be_bytes([s[0], s[1]]) as usize)
            .ok_or("truncated topic")?,
    };
    let props_len_at = topic_at + topic_len_size + topic_len;
    let props_len = rec
        .get(props_len_at..props_len_at + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]) as usize)
        .ok_or("truncated properties length")?;
    if props_len_at + 2 + props_len != total {
        return Err(format!(
            "record lengths add up to {}, TOTALSIZE says {total}",
            props_len_at + 2 + props_len
        ));
    }
    Ok(RecordView {
        total_size: total,
        queue_offset: be_i64(rec, 20).ok_or("truncated record")?,
        body,
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

    /// Builds a record by the PROTOCOL.md 3.5 table (independent of the walker).
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
        r.extend(std::iter::repeat_n(7u8, if v6_born { 20 } else { 8 }));
        r.extend_from_slice(&2i64.to_be_bytes()); // store ts
        r.extend(std::iter::repeat_n(9u8, if v6_store { 20 } else { 8 }));
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
