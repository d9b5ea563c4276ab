//! Decoding of REGISTER_BROKER's compressed body (Java's
//! `RegisterBrokerBody.decode(data, compressed=true, version)`).
//!
//! Called by the REGISTER_BROKER handler when the header says `compressed=true`; the plain JSON
//! form goes through the protocol crate's serde types instead. The input comes from the network,
//! so every length is checked against a cap before anything is allocated, the inflated size is
//! bounded (a small zlib bomb cannot exhaust memory), and errors are returned, never panics.
//!
//! Inflated layout, all ints big-endian: int len + DataVersion JSON; int topicCount; per topic
//! int len + `TopicConfig.encode()` (`"name read write perm filterType [attributesJson]"`);
//! int len + filterServerList JSON; from broker version V5_0_0 (413) on: int count + per entry
//! int len + TopicQueueMappingInfo JSON (static topics; read and ignored here).

use std::collections::BTreeMap;
use std::io::Read;

use super::route_table::{QueueRoute, TopicConfigVersion};
use crate::protocol::body::{self, DataVersion};
use flate2::read::ZlibDecoder;

/// Inflated bytes we accept: a topic config entry is ~40 bytes, so this leaves room for about
/// a million topics while bounding what a hostile 16 MiB frame can make us allocate.
pub const MAX_INFLATED_REGISTER_BODY: u64 = 64 * 1024 * 1024;
/// `MQVersion.Version.V5_0_0.ordinal()`: brokers from here on append the static-topic mappings.
const V5_0_0: i32 = 413;

/// What a registration carries besides its header, whatever the body's form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterBody {
    pub data_version: TopicConfigVersion,
    pub topics: BTreeMap<String, QueueRoute>,
    pub filter_servers: Vec<String>,
}

/// Decodes the zlib form. `broker_version` is the request's `version` field.
pub fn decode_compressed(body: &[u8], broker_version: i32) -> Result<RegisterBody, String> {
    let mut r = ZlibDecoder::new(body).take(MAX_INFLATED_REGISTER_BODY);
    let dv_json = read_chunk(&mut r, "dataVersion")?;
    let dv: DataVersion = body::from_json(&dv_json)
        .map_err(|e| format!("compressed register body: bad dataVersion: {e}"))?;
    let topic_count = read_len(&mut r, "topic count")?;
    let mut topics = BTreeMap::new();
    for _ in 0..topic_count {
        let encoded = read_chunk(&mut r, "topic config")?;
        let (name, route) = decode_topic_config(&encoded)?;
        topics.insert(name, route);
    }
    let fs_json = read_chunk(&mut r, "filterServerList")?;
    let filter_servers: Option<Vec<String>> = serde_json::from_slice(&fs_json)
        .map_err(|e| format!("compressed register body: bad filterServerList JSON: {e}"))?;
    if broker_version >= V5_0_0 {
        // Static-topic mappings: not routed by this name server, but read through so a
        // truncated stream is still reported as such.
        let mappings = read_len(&mut r, "mapping count")?;
        for _ in 0..mappings {
            read_chunk(&mut r, "topic queue mapping")?;
        }
    }
    Ok(RegisterBody {
        data_version: TopicConfigVersion {
            counter: dv.counter,
            state_version: dv.state_version,
            timestamp: dv.timestamp,
        },
        topics,
        filter_servers: filter_servers.unwrap_or_default(),
    })
}

/// Parses `TopicConfig.encode()`: space separated, at least name, read and write queue counts,
/// perm and filter type; an optional attributes JSON follows and is ignored (the route does not
/// carry attributes). `topicSysFlag` is not in this form, so it reads as 0 as in Java.
pub fn decode_topic_config(encoded: &[u8]) -> Result<(String, QueueRoute), String> {
    let text = std::str::from_utf8(encoded)
        .map_err(|_| "compressed register body: topic config is not UTF-8".to_owned())?;
    let fields: Vec<&str> = text.splitn(6, ' ').collect();
    if fields.len() < 5 || fields[0].is_empty() {
        return Err(format!(
            "compressed register body: topic config {text:?} has fewer than 5 fields"
        ));
    }
    let int = |i: usize, what: &str| {
        fields[i]
            .parse::<i32>()
            .map_err(|_| format!("compressed register body: topic config {text:?}: bad {what}"))
    };
    let route = QueueRoute {
        read_queue_nums: int(1, "readQueueNums")?,
        write_queue_nums: int(2, "writeQueueNums")?,
        perm: int(3, "perm")?,
        topic_sys_flag: 0,
    };
    Ok((fields[0].to_owned(), route))
}

fn read_len(r: &mut impl Read, what: &str) -> Result<u64, String> {
    let mut word = [0u8; 4];
    r.read_exact(&mut word)
        .map_err(|e| format!("compressed register body truncated before {what}: {e}"))?;
    let n = i32::from_be_bytes(word);
    if n < 0 {
        return Err(format!("compressed register body: negative {what} {n}"));
    }
    Ok(n as u64)
}

/// Reads `int len` then `len` bytes, allocating only as the bytes actually arrive.
fn read_chunk(r: &mut impl Read, what: &str) -> Result<Vec<u8>, String> {
    let len = read_len(r, what)?;
    let mut buf = Vec::new();
    r.take(len)
        .read_to_end(&mut buf)
        .map_err(|e| format!("compressed register body: cannot inflate {what}: {e}"))?;
    if buf.len() as u64 != len {
        return Err(format!(
            "compressed register body truncated in {what}: {} of {len} bytes",
            buf.len()
        ));
    }
    Ok(buf)
}

/// Test-only encoder of the compressed form, written from the layout above (not from the
/// decoder), so the round-trip test checks the decoder against the spec.
#[cfg(test)]
pub(crate) fn encode_compressed_for_test(
    data_version_json: &str,
    topic_configs: &[&str],
    filter_servers_json: &str,
    mappings: Option<&[&str]>,
) -> Vec<u8> {
    use flate2::{write::ZlibEncoder, Compression};
    use std::io::Write;
    let mut raw = Vec::new();
    let chunk = |raw: &mut Vec<u8>, s: &str| {
        raw.extend_from_slice(&(s.len() as i32).to_be_bytes());
        raw.extend_from_slice(s.as_bytes());
    };
    chunk(&mut raw, data_version_json);
    raw.extend_from_slice(&(topic_configs.len() as i32).to_be_bytes());
    for t in topic_configs {
        chunk(&mut raw, t);
    }
    chunk(&mut raw, filter_servers_json);
    if let Some(m) = mappings {
        raw.extend_from_slice(&(m.len() as i32).to_be_bytes());
        for j in m {
            chunk(&mut raw, j);
        }
    }
    let mut enc = ZlibEncoder::new(Vec::new(), Compression::best());
    enc.write_all(&raw).unwrap();
    enc.finish().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 5.x compressed body with two topics (one with attributes) decodes field by field.
    #[test]
    fn decodes_v5_body() {
        let body = encode_compressed_for_test(
            r#"{"counter":7,"stateVersion":2,"timestamp":1700000000000}"#,
            &[
                "TopicA 8 4 6 SINGLE_TAG",
                r#"TopicB 2 2 7 SINGLE_TAG {"+message.type":"NORMAL"}"#,
            ],
            r#"["10.0.0.9:30000"]"#,
            Some(&[]),
        );
        let got = decode_compressed(&body, 479).unwrap();
        assert_eq!(
            got.data_version,
            TopicConfigVersion {
                counter: 7,
                state_version: 2,
                timestamp: 1_700_000_000_000
            }
        );
        assert_eq!(got.topics.len(), 2);
        let a = got.topics["TopicA"];
        assert_eq!((a.read_queue_nums, a.write_queue_nums, a.perm), (8, 4, 6));
        assert_eq!(got.topics["TopicB"].perm, 7);
        assert_eq!(got.filter_servers, vec!["10.0.0.9:30000".to_owned()]);
    }

    /// A 4.x broker omits the mapping section; a 5.x one that omits it is truncated.
    #[test]
    fn mapping_section_gated_by_version() {
        let body = encode_compressed_for_test(r#"{"counter":1}"#, &[], "[]", None);
        assert!(decode_compressed(&body, 401).is_ok());
        let err = decode_compressed(&body, 413).unwrap_err();
        assert!(err.contains("truncated before mapping count"), "{err}");
    }

    /// Garbage, short topic configs and lying lengths are errors, not panics.
    #[test]
    fn rejects_bad_input() {
        assert!(decode_compressed(b"not zlib at all", 479).is_err());
        let short = encode_compressed_for_test("{}", &["TopicA 8 4"], "[]", Some(&[]));
        assert!(decode_compressed(&short, 479)
            .unwrap_err()
            .contains("fewer than 5"));
        let bad_num = encode_compressed_for_test("{}", &["T x 4 6 SINGLE_TAG"], "[]", None);
        assert!(decode_compressed(&bad_num, 401).is_err());
        // Length word claims 1 GiB but the stream ends: no huge allocation, an error.
        use flate2::{write::ZlibEncoder, Compression};
        use std::io::Write;
        let mut enc = ZlibEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(&0x4000_0000i32.to_be_bytes()).unwrap();
        let lying = enc.finish().unwrap();
        assert!(decode_compressed(&lying, 479)
            .unwrap_err()
            .contains("truncated in dataVersion"));
    }
}
