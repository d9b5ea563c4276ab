//! The SEND_BATCH_MESSAGE body (Java `MessageDecoder.encodeMessages`).
//!
//! Records: totalSize int, magic int (0, ignored), bodyCRC int (0, ignored), flag int,
//! bodyLen int + body, propertiesLen short + properties. Called by the send path (decode) and the
//! load generator (encode). Invariants: every length is checked against the bytes left before it
//! is used, bodies are zero-copy slices of the request body, and the entry vector never grows
//! past `max_entries` nor past what the input could hold.

use bytes::{BufMut, Bytes, BytesMut};

use super::ProtocolError;
use crate::constants::{BATCH_RECORD_MIN_LEN, MAX_PROPERTIES_LEN};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchEntry {
    pub flag: i32,
    pub body: Bytes,
    pub properties: String,
}

fn bad(msg: String) -> ProtocolError {
    ProtocolError::BadBody(format!("batch: {msg}"))
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A decoded record borrowing its properties from the request body (the send path's form:
/// no allocation per message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchEntryRef<'a> {
    pub flag: i32,
    pub body: Bytes,
    pub properties: &'a str,
}

/// Decodes every record of a batch body. Errors: truncation, a totalSize that disagrees with
/// the record's own lengths, negative lengths, properties that are not UTF-8, more than
/// `max_entries` records, or an empty body.
pub fn decode_batch(body: &Bytes, max_entries: usize) -> Result<Vec<BatchEntry>, ProtocolError> {
    Ok(decode_batch_ref(body, max_entries)?
        .into_iter()
        .map(|e| BatchEntry {
            flag: e.flag,
            body: e.body,
            properties: e.properties.to_owned(),
        })
        .collect())
}

/// `decode_batch` without copying the properties; same checks and errors.
pub fn decode_batch_ref(
    body: &Bytes,
    max_entries: usize,
) -> Result<Vec<BatchEntryRef<'_>>, ProtocolError> {
    if body.is_empty() {
        return Err(bad("empty body".into()));
    }
    let cap = (body.len() / BATCH_RECORD_MIN_LEN).min(max_entries);
    let mut entries = Vec::with_capacity(cap);
    let mut pos = 0usize;
    while pos < body.len() {
        if entries.len() == max_entries {
            return Err(bad(format!("more than {max_entries} messages")));
        }
        let (entry, len) = decode_record(body, pos)?;
        entries.push(entry);
        pos += len;
    }
    Ok(entries)
}

/// One record at `pos`; returns it and its total size.
fn decode_record(body: &Bytes, pos: usize) -> Result<(BatchEntryRef<'_>, usize), ProtocolError> {
    let rest = &body[pos..];
    if rest.len() < BATCH_RECORD_MIN_LEN {
        return Err(bad(format!(
            "record at {pos}: {} bytes left, a record needs {BATCH_RECORD_MIN_LEN}",
            rest.len()
        )));
    }
    let total = be_i32(rest, 0);
    if total < BATCH_RECORD_MIN_LEN as i32 || total as usize > rest.len() {
        return Err(bad(format!(
            "record at {pos}: totalSize {total} outside [{BATCH_RECORD_MIN_LEN}, {}]",
            rest.len()
        )));
    }
    let total = total as usize;
    let flag = be_i32(rest, 12);
    let body_len = be_i32(rest, 16);
    // bodyLen must leave room for the properties length inside totalSize.
    if body_len < 0 || body_len as usize > total - BATCH_RECORD_MIN_LEN {
        return Err(bad(format!(
            "record at {pos}: bodyLen {body_len} does not fit totalSize {total}"
        )));
    }
    let body_start = 20;
    let body_end = body_start + body_len as usize;
    let props_len = i16::from_be_bytes([rest[body_end], rest[body_end + 1]]);
    let props_start = body_end + 2;
    if props_len < 0 || props_start + props_len as usize != total {
        return Err(bad(format!(
            "record at {pos}: propertiesLen {props_len} disagrees with totalSize {total}"
        )));
    }
    let properties = std::str::from_utf8(&rest[props_start..total])
        .map_err(|_| bad(format!("record at {pos}: properties are not UTF-8")))?;
    let entry = BatchEntryRef {
        flag,
        body: body.slice(pos + body_start..pos + body_end),
        properties,
    };
    Ok((entry, total))
}

/// Appends `entries` in Java's batch layout (magic and CRC 0). Errors: properties longer than
/// a short or a record larger than an int; `dst` is unchanged on error.
pub fn encode_batch<'a>(
    entries: impl IntoIterator<Item = &'a BatchEntry>,
    dst: &mut BytesMut,
) -> Result<(), ProtocolError> {
    let start = dst.len();
    for e in entries {
        if let Err(err) = encode_record(e, dst) {
            dst.truncate(start);
            return Err(err);
        }
    }
    Ok(())
}

fn encode_record(e: &BatchEntry, dst: &mut BytesMut) -> Result<(), ProtocolError> {
    if e.properties.len() > MAX_PROPERTIES_LEN {
        return Err(ProtocolError::Unencodable(format!(
            "batch properties of {} bytes exceed {MAX_PROPERTIES_LEN}",
            e.properties.len()
        )));
    }
    let total = BATCH_RECORD_MIN_LEN + e.body.len() + e.properties.len();
    let total = i32::try_from(total)
        .map_err(|_| ProtocolError::Unencodable(format!("batch record of {total} bytes")))?;
    dst.reserve(total as usize);
    dst.put_i32(total);
    dst.put_i32(0); // magic: ignored by the broker
    dst.put_i32(0); // body CRC: the broker recomputes it
    dst.put_i32(e.flag);
    dst.put_i32(e.body.len() as i32); // < total, so it fits
    dst.put_slice(&e.body);
    dst.put_i16(e.properties.len() as i16);
    dst.put_slice(e.properties.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden record from the spec table: flag 7, body "ab", properties "K\x01V\x02".
    fn golden_record() -> Vec<u8> {
        let mut r = vec![0, 0, 0, 28]; // 22 + 2 + 4
        r.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // magic, crc
        r.extend_from_slice(&[0, 0, 0, 7]); // flag
        r.extend_from_slice(&[0, 0, 0, 2, b'a', b'b']);
        r.extend_from_slice(&[0, 4, b'K', 1, b'V', 2]);
        r
    }

    /// Two golden records decode; encode reproduces the bytes.
    #[test]
    fn golden_decode_and_encode() {
        let mut two = golden_record();
        two.extend_from_slice(&golden_record());
        let body = Bytes::from(two.clone());
        let entries = decode_batch(&body, 10).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].flag, 7);
        assert_eq!(&entries[0].body[..], b"ab");
        assert_eq!(entries[0].properties, "K\u{1}V\u{2}");
        let mut out = BytesMut::new();
        encode_batch(&entries, &mut out).unwrap();
        assert_eq!(&out[..], &two[..]);
    }

    /// Empty bodies and properties are legal records.
    #[test]
    fn empty_body_and_properties() {
        let e = BatchEntry {
            flag: -1,
            body: Bytes::new(),
            properties: String::new(),
        };
        let mut out = BytesMut::new();
        encode_batch([&e], &mut out).unwrap();
        assert_eq!(out.len(), BATCH_RECORD_MIN_LEN);
        assert_eq!(decode_batch(&out.freeze(), 1).unwrap(), vec![e]);
    }

    /// Every truncation and each inconsistent length is an error, never a panic.
    #[test]
    fn malformed_batches() {
        let rec = golden_record();
        for cut in 0..rec.len() {
            let r = decode_batch(&Bytes::from(rec[..cut].to_vec()), 10);
            assert!(matches!(r, Err(ProtocolError::BadBody(_))), "cut {cut}");
        }
        let patch = |at: usize, bytes: &[u8]| {
            let mut r = rec.clone();
            r[at..at + bytes.len()].copy_from_slice(bytes);
            Bytes::from(r)
        };
        for body in [
            patch(0, &[0x7F, 0xFF, 0xFF, 0xFF]), // totalSize huge
            patch(0, &[0xFF, 0xFF, 0xFF, 0xFF]), // totalSize negative
            patch(0, &[0, 0, 0, 27]),            // totalSize too small for contents
            patch(16, &[0x7F, 0, 0, 0]),         // bodyLen huge
            patch(16, &[0xFF, 0, 0, 0]),         // bodyLen negative
            patch(22, &[0x80, 0]),               // propertiesLen negative
            patch(22, &[0, 3]),                  // propertiesLen short of totalSize
            patch(24, &[0xFF]),                  // properties not UTF-8
        ] {
            assert!(matches!(
                decode_batch(&body, 10),
                Err(ProtocolError::BadBody(_))
            ));
        }
    }

    /// The entry limit is enforced.
    #[test]
    fn entry_limit() {
        let mut three = Vec::new();
        for _ in 0..3 {
            three.extend_from_slice(&golden_record());
        }
        let body = Bytes::from(three);
        assert_eq!(decode_batch(&body, 3).unwrap().len(), 3);
        assert!(decode_batch(&body, 2).is_err());
    }

    /// Over-long properties are refused on encode and leave dst unchanged.
    #[test]
    fn encode_refuses_long_properties() {
        let ok = BatchEntry {
            flag: 0,
            body: Bytes::from_static(b"x"),
            properties: String::new(),
        };
        let long = BatchEntry {
            properties: "p".repeat(MAX_PROPERTIES_LEN + 1),
            ..ok.clone()
        };
        let mut out = BytesMut::new();
        assert!(encode_batch([&ok, &long], &mut out).is_err());
        assert!(out.is_empty());
    }
}
