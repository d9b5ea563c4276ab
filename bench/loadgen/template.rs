//! Pre-built send requests: each request is encoded once with the crate's codec and then only
//! patched in place per message (opaque, UNIQ_KEY counters, the e2e timestamp).
//!
//! Called by the send module, one set of templates per connection. Invariants: the opaque is
//! always a 10-digit decimal in [OPAQUE_BASE, OPAQUE_BASE + 2^30), so patching never changes
//! the header length; the UNIQ_KEY counter is a fixed-width 12-digit hex field; the patch
//! positions are found by searching the encoded bytes for sentinels that cannot occur elsewhere
//! (the body is lowercase letters, the sentinels are digits and uppercase hex).

use bytes::{Bytes, BytesMut};
use ringmq::auth::signature::sign_request;
use ringmq::protocol::batch::{encode_batch, BatchEntry};
use ringmq::protocol::codes::request_code;
use ringmq::protocol::headers::SendMessageRequestHeader;
use ringmq::protocol::properties::{self, keys};
use ringmq::protocol::RemotingCommand;

/// Opaques we emit live in [OPAQUE_BASE, OPAQUE_BASE + OPAQUE_SPAN): always 10 digits.
pub const OPAQUE_BASE: i32 = 1_000_000_000;
pub const OPAQUE_SPAN: u32 = 1 << 30;
const OPAQUE_SENTINEL: i32 = 1_999_999_999;
/// Hex digits of the UNIQ_KEY that carry the per-message counter.
const UNIQ_COUNTER_DIGITS: usize = 12;
const UNIQ_SENTINEL_TAIL: &str = "FFFFFFFFFFFF";

/// What kind of request a template is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendKind {
    /// SEND_MESSAGE_V2 (310), one message.
    Single,
    /// SEND_BATCH_MESSAGE (320) with this many messages.
    Batch(usize),
    /// SEND_MESSAGE_V2 with flag ONEWAY.
    Oneway,
}

impl SendKind {
    pub fn msgs_per_request(self) -> usize {
        match self {
            SendKind::Batch(b) => b,
            _ => 1,
        }
    }
}

/// Knobs shared by every template of a run.
#[derive(Clone, Debug)]
pub struct TemplateSpec {
    pub kind: SendKind,
    pub topic: String,
    pub group: String,
    pub body_size: usize,
    /// Add a UNIQ_KEY property per message, as real producers do.
    pub uniq_key: bool,
    /// 20 hex digits unique to this connection (prefix of every UNIQ_KEY).
    pub uniq_prefix: String,
    /// Access key and secret key to sign the request with (then `uniq_key` must be off: the
    /// signature covers every header field, so a patched one would no longer match).
    pub credentials: Option<(String, String)>,
}

/// One encoded request frame (length prefix included) plus where to patch it.
#[derive(Clone, Debug)]
pub struct Template {
    pub bytes: Vec<u8>,
    opaque_at: usize,
    uniq_at: Vec<usize>,
    body_at: Option<usize>,
}

impl Template {
    pub fn build(spec: &TemplateSpec, queue_id: i32, born_ms: i64) -> Result<Template, String> {
        assert_eq!(spec.uniq_prefix.len(), 32 - UNIQ_COUNTER_DIGITS);
        let uniq = format!("{}{UNIQ_SENTINEL_TAIL}", spec.uniq_prefix);
        let msg_props = message_properties(spec.uniq_key.then_some(uniq.as_str()));
        let body = Bytes::from(body_pattern(spec.body_size));
        let (code, header_props, payload) = match spec.kind {
            SendKind::Single | SendKind::Oneway => {
                (request_code::SEND_MESSAGE_V2, msg_props, body.clone())
            }
            SendKind::Batch(n) => {
                let entry = BatchEntry {
                    flag: 0,
                    body: body.clone(),
                    properties: msg_props,
                };
                let mut out = BytesMut::new();
                encode_batch(std::iter::repeat_n(&entry, n), &mut out)
                    .map_err(|e| format!("batch encode: {e}"))?;
                let wait = properties::encode([(keys::WAIT, "true")]);
                (request_code::SEND_BATCH_MESSAGE, wait, out.freeze())
            }
        };
        let header = SendMessageRequestHeader {
            producer_group: spec.group.clone(),
            topic: spec.topic.clone(),
            default_topic: "TBW102".to_owned(),
            default_topic_queue_nums: 4,
            queue_id,
            sys_flag: 0,
            born_timestamp: born_ms,
            flag: 0,
            properties: header_props,
            reconsume_times: 0,
            unit_mode: false,
            max_reconsume_times: None,
            batch: matches!(spec.kind, SendKind::Batch(_)),
            broker_name: None,
        };
        let mut cmd = RemotingCommand::new_request(code).with_body(payload.clone());
        header.write_to_v2(&mut cmd);
        cmd.opaque = OPAQUE_SENTINEL;
        if spec.kind == SendKind::Oneway {
            cmd.set_oneway();
        }
        if let Some((ak, sk)) = &spec.credentials {
            if spec.uniq_key {
                return Err("a signed template cannot carry a patched UNIQ_KEY".to_owned());
            }
            sign_request(&mut cmd, ak, sk).map_err(|e| format!("sign: {e}"))?;
        }
        let mut out = BytesMut::new();
        cmd.encode(&mut out).map_err(|e| format!("encode: {e}"))?;
        let bytes = out.to_vec();
        let needle = format!("\"opaque\":{OPAQUE_SENTINEL}");
        let opaque_at = find_all(&bytes, needle.as_bytes());
        if opaque_at.len() != 1 {
            return Err("opaque sentinel not found exactly once".to_owned());
        }
        let opaque_at = opaque_at[0] + needle.len() - 10;
        let uniq_at = if spec.uniq_key {
            let found: Vec<usize> = find_all(&bytes, uniq.as_bytes())
                .into_iter()
                .map(|p| p + uniq.len() - UNIQ_COUNTER_DIGITS)
                .collect();
            if found.len() != spec.kind.msgs_per_request() {
                return Err(format!("found {} UNIQ_KEY sentinels", found.len()));
            }
            found
        } else {
            Vec::new()
        };
        let body_at = match spec.kind {
            SendKind::Single | SendKind::Oneway => Some(bytes.len() - payload.len()),
            SendKind::Batch(_) => None,
        };
        let mut t = Template {
            bytes,
            opaque_at,
            uniq_at,
            body_at,
        };
        t.set_opaque(OPAQUE_BASE);
        t.set_uniq(0);
        Ok(t)
    }

    /// Writes `opaque` (must be in the 10-digit range) into the header.
    pub fn set_opaque(&mut self, opaque: i32) {
        assert!(
            (OPAQUE_BASE..=i32::MAX).contains(&opaque),
            "opaque {opaque} out of the fixed-width range"
        );
        write_decimal10(
            &mut self.bytes[self.opaque_at..self.opaque_at + 10],
            opaque as u32,
        );
    }

    /// Gives the request's messages the UNIQ_KEY counters first, first+1, ...
    pub fn set_uniq(&mut self, first: u64) {
        for (i, at) in self.uniq_at.iter().enumerate() {
            write_hex(
                &mut self.bytes[*at..*at + UNIQ_COUNTER_DIGITS],
                first.wrapping_add(i as u64),
            );
        }
    }

    /// Stores `stamp` (big-endian) and `nonce` in the first 16 body bytes (single sends only;
    /// bodies shorter than 16 bytes are left alone).
    pub fn set_stamp(&mut self, stamp: u64, nonce: u64) {
        if let Some(at) = self.body_at {
            if self.bytes.len() - at >= 16 {
                self.bytes[at..at + 8].copy_from_slice(&stamp.to_be_bytes());
                self.bytes[at + 8..at + 16].copy_from_slice(&nonce.to_be_bytes());
            }
        }
    }
}

/// Properties of one message: UNIQ_KEY (if any) and WAIT=true, as Java's `Message` sets.
fn message_properties(uniq: Option<&str>) -> String {
    let mut pairs = Vec::new();
    if let Some(u) = uniq {
        pairs.push((keys::UNIQ_KEY, u));
    }
    pairs.push((keys::WAIT, "true"));
    properties::encode(pairs)
}

/// Deterministic lowercase body (no sentinel can match inside it).
pub fn body_pattern(size: usize) -> Vec<u8> {
    (0..size).map(|i| b'a' + (i % 26) as u8).collect()
}

fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return Vec::new();
    }
    (0..=hay.len() - needle.len())
        .filter(|&i| &hay[i..i + needle.len()] == needle)
        .collect()
}

fn write_decimal10(dst: &mut [u8], mut v: u32) {
    for b in dst.iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

fn write_hex(dst: &mut [u8], mut v: u64) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in dst.iter_mut().rev() {
        *b = HEX[(v & 0xF) as usize];
        v >>= 4;
    }
}

/// 20 uppercase hex digits: loopback IP, pid, connection index and a start-time salt, like
/// the fixed part of Java's UNIQ_KEY (which is opaque to the broker).
pub fn uniq_prefix(conn: usize, salt: u32) -> String {
    format!(
        "7F000001{:04X}{:08X}",
        std::process::id() & 0xFFFF,
        salt.wrapping_add(conn as u32)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq::protocol::batch::decode_batch;
    use ringmq::protocol::frame::split_frame;

    fn spec(kind: SendKind) -> TemplateSpec {
        TemplateSpec {
            kind,
            topic: "BenchTopic".into(),
            group: "g".into(),
            body_size: 100,
            uniq_key: true,
            credentials: None,
            uniq_prefix: uniq_prefix(3, 0xABCD),
        }
    }

    fn decode(t: &Template) -> RemotingCommand {
        let mut buf = BytesMut::from(&t.bytes[..]);
        let frame = split_frame(&mut buf, 1 << 24).unwrap().unwrap();
        assert!(buf.is_empty(), "template must be exactly one frame");
        RemotingCommand::decode(frame).unwrap()
    }

    /// The batch template decodes with the crate's batch decoder: B records with the body,
    /// distinct consecutive UNIQ_KEYs after patching, and the V2 header with m=true.
    #[test]
    fn batch_body_round_trips_and_patches() {
        let mut t = Template::build(&spec(SendKind::Batch(5)), 3, 42).unwrap();
        t.set_opaque(1_073_741_999);
        t.set_uniq(0x1_0000_0001);
        let cmd = decode(&t);
        assert_eq!(cmd.code, 320);
        assert_eq!(cmd.opaque, 1_073_741_999);
        let h = SendMessageRequestHeader::from_command(&cmd).unwrap();
        assert!(h.batch);
        assert_eq!(
            (h.topic.as_str(), h.queue_id, h.born_timestamp),
            ("BenchTopic", 3, 42)
        );
        let entries = decode_batch(&cmd.body, 100).unwrap();
        assert_eq!(entries.len(), 5);
        let keys: Vec<String> = entries
            .iter()
            .map(|e| {
                properties::get(&e.properties, keys::UNIQ_KEY)
                    .unwrap()
                    .to_owned()
            })
            .collect();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(k.len(), 32);
            assert!(
                k.ends_with(&format!("{:012X}", 0x1_0000_0001u64 + i as u64)),
                "{k}"
            );
            assert_eq!(&entries[i].body[..], &body_pattern(100)[..]);
        }
    }

    /// Single sends: V2 short names, UNIQ_KEY and WAIT in `i`, stamp in the body, and the
    /// oneway flag only on oneway templates.
    #[test]
    fn single_and_oneway_templates() {
        let mut t = Template::build(&spec(SendKind::Single), 1, 7).unwrap();
        t.set_opaque(OPAQUE_BASE + 5);
        t.set_uniq(0xBEEF);
        t.set_stamp(0x0102_0304_0506_0708, 99);
        let cmd = decode(&t);
        assert_eq!((cmd.code, cmd.opaque, cmd.flag), (310, OPAQUE_BASE + 5, 0));
        assert_eq!(cmd.ext("b"), Some("BenchTopic"));
        assert_eq!(cmd.ext("m"), Some("false"));
        let props = cmd.ext("i").unwrap();
        assert_eq!(properties::get(props, keys::WAIT), Some("true"));
        assert!(properties::get(props, keys::UNIQ_KEY)
            .unwrap()
            .ends_with("00000000BEEF"));
        assert_eq!(cmd.body.len(), 100);
        assert_eq!(&cmd.body[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&cmd.body[8..16], &99u64.to_be_bytes());
        let o = decode(&Template::build(&spec(SendKind::Oneway), 0, 0).unwrap());
        assert!(o.is_oneway());
    }

    /// Without UNIQ_KEY there is nothing to patch and the properties hold WAIT only.
    #[test]
    fn no_uniq_key() {
        let mut s = spec(SendKind::Single);
        s.uniq_key = false;
        let mut t = Template::build(&s, 0, 0).unwrap();
        t.set_uniq(5);
        let cmd = decode(&t);
        assert_eq!(properties::get(cmd.ext("i").unwrap(), keys::UNIQ_KEY), None);
    }

    /// A signed template carries AccessKey and a Signature the broker's check accepts, after
    /// its opaque is patched (the opaque is not signed); with UNIQ_KEY patching it is refused.
    #[test]
    fn signed_template() {
        let mut s = spec(SendKind::Batch(4));
        s.uniq_key = false;
        s.credentials = Some(("bench".into(), "bench-secret".into()));
        let mut t = Template::build(&s, 0, 0).unwrap();
        t.set_opaque(OPAQUE_BASE + 77);
        let cmd = decode(&t);
        assert_eq!(cmd.ext("AccessKey"), Some("bench"));
        ringmq::auth::signature::verify("bench-secret", &cmd.ext_fields, &cmd.body, cmd.version)
            .expect("the broker's check accepts it");
        s.uniq_key = true;
        assert!(Template::build(&s, 0, 0).is_err());
    }

    /// Opaques outside the fixed-width range are a programming error.
    #[test]
    #[should_panic(expected = "fixed-width")]
    fn opaque_range_enforced() {
        let mut t = Template::build(&spec(SendKind::Single), 0, 0).unwrap();
        t.set_opaque(999_999_999);
    }
}
