//! REGISTER_BROKER body in both forms (Java's `RegisterBrokerBody`): JSON, or with header
//! `compressed=true` a zlib stream of length-prefixed parts: DataVersion JSON, topic count + per
//! topic `TopicConfig.encode()` ("name read write perm filterType [attributesJson]", space
//! separated), filterServerList JSON, and (5.x) mapping count + per mapping JSON.
//!
//! Called by the name server (decode) and our broker (encode when configured to compress).
//! Invariants: inflation stops at `max_inflated` bytes; every length is checked against the
//! inflated bytes left, so a hostile body cannot allocate or panic.

use std::io::{Read, Write};

use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use flate2::Compression;

use super::{from_json, to_json, DataVersion, RegisterBrokerBody, TopicConfig, TopicFilterType};
use crate::ProtocolError;

fn bad(msg: impl Into<String>) -> ProtocolError {
    ProtocolError::BadBody(format!("register broker body: {}", msg.into()))
}

/// Decodes a REGISTER_BROKER body; `compressed` is the request header's flag.
pub fn decode_register_broker_body(
    body: &[u8],
    compressed: bool,
    max_inflated: usize,
) -> Result<RegisterBrokerBody, ProtocolError> {
    if !compressed {
        return from_json(body);
    }
    let mut raw = Vec::new();
    ZlibDecoder::new(body)
        .take(max_inflated as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|e| bad(format!("zlib: {e}")))?;
    if raw.len() > max_inflated {
        return Err(bad(format!("inflates past {max_inflated} bytes")));
    }
    let mut r = Parts { buf: &raw, pos: 0 };
    let mut out = RegisterBrokerBody::default();
    let wrapper = &mut out.topic_config_serialize_wrapper;
    wrapper.data_version = from_json::<DataVersion>(r.part("dataVersion")?)?;
    let topics = r.count("topic count")?;
    for _ in 0..topics {
        let text = std::str::from_utf8(r.part("topic config")?)
            .map_err(|_| bad("topic config is not UTF-8"))?;
        let tc = decode_topic_config(text)?;
        wrapper.topic_config_table.insert(tc.topic_name.clone(), tc);
    }
    // Java logs and continues with an empty list when this JSON is bad.
    out.filter_server_list = from_json(r.part("filterServerList")?).unwrap_or_default();
    // 4.x brokers stop here; 5.x append static-topic mappings, which we do not use.
    if r.pos < raw.len() {
        let mappings = r.count("mapping count")?;
        for _ in 0..mappings {
            r.part("topic queue mapping")?;
        }
    }
    Ok(out)
}

/// The compressed form, as a Java broker with `compressedRegister=true` sends it.
pub fn encode_register_broker_body_compressed(body: &RegisterBrokerBody) -> Vec<u8> {
    let wrapper = &body.topic_config_serialize_wrapper;
    let mut raw = Vec::new();
    put_part(&mut raw, &to_json(&wrapper.data_version));
    raw.extend_from_slice(&(wrapper.topic_config_table.len() as i32).to_be_bytes());
    for tc in wrapper.topic_config_table.values() {
        put_part(&mut raw, encode_topic_config(tc).as_bytes());
    }
    put_part(&mut raw, &to_json(&body.filter_server_list));
    raw.extend_from_slice(&0i32.to_be_bytes()); // no static-topic mappings
    let mut enc = ZlibEncoder::new(Vec::new(), Compression::best());
    enc.write_all(&raw).expect("writing to a Vec cannot fail");
    enc.finish().expect("writing to a Vec cannot fail")
}

fn put_part(dst: &mut Vec<u8>, part: &[u8]) {
    dst.extend_from_slice(&(part.len() as i32).to_be_bytes());
    dst.extend_from_slice(part);
}

/// `TopicConfig.encode()`: topicSysFlag and order are not carried (Java drops them too).
pub fn encode_topic_config(tc: &TopicConfig) -> String {
    let filter = match tc.topic_filter_type {
        TopicFilterType::MultiTag => "MULTI_TAG",
        TopicFilterType::SingleTag | TopicFilterType::Unknown => "SINGLE_TAG",
    };
    let attributes = String::from_utf8(to_json(&tc.attributes)).expect("JSON is UTF-8");
    format!(
        "{} {} {} {} {} {}",
        tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, filter, attributes
    )
}

/// `TopicConfig.decode()`: at least five space-separated parts; numbers and the filter type
/// must parse (Java throws); a sixth part is attributes JSON, ignored when unparsable.
pub fn decode_topic_config(text: &str) -> Result<TopicConfig, ProtocolError> {
    let parts: Vec<&str> = text.split(' ').collect();
    if parts.len() < 5 {
        return Err(bad(format!("topic config {text:?} has fewer than 5 parts")));
    }
    let num = |s: &str| {
        s.parse::<i32>()
            .map_err(|_| bad(format!("bad number {s:?}")))
    };
    let topic_filter_type = match parts[4] {
        "SINGLE_TAG" => TopicFilterType::SingleTag,
        "MULTI_TAG" => TopicFilterType::MultiTag,
        other => return Err(bad(format!("bad topic filter type {other:?}"))),
    };
    let attributes = parts
        .get(5)
        .and_then(|a| from_json(a.as_bytes()).ok())
        .unwrap_or_default();
    Ok(TopicConfig {
        topic_name: parts[0].to_owned(),
        read_queue_nums: num(parts[1])?,
        write_queue_nums: num(parts[2])?,
        perm: num(parts[3])?,
        topic_filter_type,
        attributes,
        ..TopicConfig::default()
    })
}

struct Parts<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Parts<'a> {
    fn count(&mut self, what: &str) -> Result<usize, ProtocolError> {
        let b = self
            .buf
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| bad(format!("{what}: truncated")))?;
        self.pos += 4;
        let n = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        usize::try_from(n).map_err(|_| bad(format!("{what}: negative {n}")))
    }

    fn part(&mut self, what: &str) -> Result<&'a [u8], ProtocolError> {
        let len = self.count(what)?;
        let end = self
            .pos
            .checked_add(len)
            .filter(|end| *end <= self.buf.len())
            .ok_or_else(|| bad(format!("{what}: length {len} past the end")))?;
        let part = &self.buf[self.pos..end];
        self.pos = end;
        Ok(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::TopicConfigSerializeWrapper;

    fn sample() -> RegisterBrokerBody {
        let mut w = TopicConfigSerializeWrapper {
            data_version: DataVersion {
                counter: 5,
                state_version: 1,
                timestamp: 1_717_000_000_000,
            },
            ..Default::default()
        };
        for (name, filter) in [
            ("T1", TopicFilterType::SingleTag),
            ("T2", TopicFilterType::MultiTag),
        ] {
            w.topic_config_table.insert(
                name.into(),
                TopicConfig {
                    topic_name: name.into(),
                    read_queue_nums: 4,
                    write_queue_nums: 8,
                    perm: 6,
                    topic_filter_type: filter,
                    attributes: [("+message.type".to_string(), "NORMAL".to_string())].into(),
                    ..Default::default()
                },
            );
        }
        RegisterBrokerBody {
            filter_server_list: vec![],
            topic_config_serialize_wrapper: w,
        }
    }

    /// Compressed encode -> decode keeps everything the compressed form carries.
    #[test]
    fn compressed_round_trip() {
        let b = sample();
        let z = encode_register_broker_body_compressed(&b);
        assert_eq!(decode_register_broker_body(&z, true, 1 << 20).unwrap(), b);
        let json = to_json(&b);
        assert_eq!(
            decode_register_broker_body(&json, false, 1 << 20).unwrap(),
            b
        );
    }

    /// Java's topic config line, with and without attributes; garbage attributes are ignored.
    #[test]
    fn topic_config_lines() {
        let tc = decode_topic_config("T 8 8 6 SINGLE_TAG {\"a\":\"b\"}").unwrap();
        assert_eq!(
            (tc.read_queue_nums, tc.write_queue_nums, tc.perm),
            (8, 8, 6)
        );
        assert_eq!(tc.attributes["a"], "b");
        let tc = decode_topic_config("T 1 2 7 MULTI_TAG").unwrap();
        assert_eq!(tc.topic_filter_type, TopicFilterType::MultiTag);
        assert!(decode_topic_config("T 1 2 7 MULTI_TAG {broken")
            .unwrap()
            .attributes
            .is_empty());
        assert!(decode_topic_config("T 1 2 7").is_err());
        assert!(decode_topic_config("T x 2 7 SINGLE_TAG").is_err());
        assert!(decode_topic_config("T 1 2 7 NO_TAG").is_err());
        assert_eq!(
            encode_topic_config(&sample().topic_config_serialize_wrapper.topic_config_table["T2"]),
            "T2 4 8 6 MULTI_TAG {\"+message.type\":\"NORMAL\"}"
        );
    }

    /// A 4.x body without the mapping count decodes; truncations, bad zlib and bombs fail.
    #[test]
    fn legacy_and_malformed() {
        let mut raw = Vec::new();
        put_part(&mut raw, br#"{"counter":1,"stateVersion":0,"timestamp":2}"#);
        raw.extend_from_slice(&1i32.to_be_bytes());
        put_part(&mut raw, b"T 4 4 6 SINGLE_TAG");
        put_part(&mut raw, b"[]");
        let zip = |raw: &[u8]| {
            let mut e = ZlibEncoder::new(Vec::new(), Compression::fast());
            e.write_all(raw).unwrap();
            e.finish().unwrap()
        };
        let b = decode_register_broker_body(&zip(&raw), true, 1 << 20).unwrap();
        assert_eq!(
            b.topic_config_serialize_wrapper.topic_config_table["T"].read_queue_nums,
            4
        );
        for cut in [0, 3, 10, 50, raw.len() - 1] {
            assert!(
                decode_register_broker_body(&zip(&raw[..cut]), true, 1 << 20).is_err(),
                "{cut}"
            );
        }
        let mut huge = raw.clone();
        huge[..4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_register_broker_body(&zip(&huge), true, 1 << 20).is_err());
        assert!(decode_register_broker_body(b"not zlib", true, 1 << 20).is_err());
        let bomb = zip(&vec![0u8; 1 << 20]);
        assert!(decode_register_broker_body(&bomb, true, 1 << 16).is_err());
    }
}
