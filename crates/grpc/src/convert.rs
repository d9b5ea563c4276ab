//! Messages between the two protocols, as Java's proxy converts them (`GrpcConverter`,
//! `SendMessageActivity`): a gRPC `Message` becomes the properties and flags of a Remoting send,
//! and a stored record becomes a gRPC `Message` with its system properties (MD5 body digest in
//! upper-case hex, delivery attempt = reconsume times + 1, the receipt handle).

use std::collections::HashMap;

use md5::{Digest as _, Md5};
use prost_types::{Duration, Timestamp};

use crate::pb::{
    self, Code, DeadLetterQueue, Digest, DigestType, Encoding, MessageType, Resource,
    SystemProperties,
};
use crate::status::GrpcError;
use ringmq_protocol::message::{sys_flag, DecodedRecord};
use ringmq_protocol::msg_id::offset_msg_id;
use ringmq_protocol::properties::{self, keys};

/// Property keys a client may not set (Java's `MessageConst.STRING_HASH_SET`); they are not
/// shown as user properties either.
pub const SYSTEM_KEYS: &[&str] = &[
    "TRACE_ON",
    "MSG_REGION",
    "KEYS",
    "TAGS",
    "WAIT",
    "DELAY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
    "REAL_QID",
    "TRAN_MSG",
    "PGROUP",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "BUYER_ID",
    "ORIGIN_MESSAGE_ID",
    "TRANSFER_FLAG",
    "CORRECTION_FLAG",
    "MQ2_FLAG",
    "RECONSUME_TIME",
    "UNIQ_KEY",
    "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME",
    "POP_CK",
    "POP_CK_OFFSET",
    "1ST_POP_TIME",
    "TRAN_PREPARED_QUEUE_OFFSET",
    "DUP_INFO",
    "EXTEND_UNIQ_INFO",
    "INSTANCE_ID",
    "CORRELATION_ID",
    "REPLY_TO_CLIENT",
    "TTL",
    "ARRIVE_TIME",
    "PUSH_REPLY_TIME",
    "CLUSTER",
    "MSG_TYPE",
    "INNER_MULTI_QUEUE_OFFSET",
    "TIMER_DELAY_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS",
    "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES",
    "TIMER_OUT_MS",
    "TIMER_DEL_UNIQKEY",
    "TIMER_DELAY_LEVEL",
    "__BORNHOST",
    "BORN_TIMESTAMP",
    "DLQ_ORIGIN_TOPIC",
    "DLQ_ORIGIN_MESSAGE_ID",
    "__CRC32#",
];

/// Shown in system properties, so not repeated among user properties.
const SHOWN_ELSEWHERE: &[&str] = &[keys::SHARDING_KEY, TRACE_CONTEXT, keys::TRANSACTION_ID];

/// The trace context property (`MessageConst.PROPERTY_TRACE_CONTEXT`).
pub const TRACE_CONTEXT: &str = "TRACE_CONTEXT";

/// Limits a sent message is held to (`ProxyConfig`'s defaults, the body limit the broker's).
#[derive(Clone, Copy, Debug)]
pub struct SendLimits {
    pub max_body: usize,
    pub max_user_properties: usize,
    pub max_user_property_bytes: usize,
    pub max_message_group: usize,
    pub max_delay_ms: i64,
    pub max_recovery_secs: i64,
}

impl Default for SendLimits {
    fn default() -> SendLimits {
        SendLimits {
            max_body: 4 * 1024 * 1024,
            max_user_properties: 128,
            max_user_property_bytes: 16 * 1024,
            max_message_group: 64,
            max_delay_ms: 24 * 3600 * 1000,
            max_recovery_secs: 3600,
        }
    }
}

/// A gRPC message as the Remoting send it becomes.
#[derive(Debug)]
pub struct Outgoing {
    pub properties: String,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub reconsume_times: i32,
    pub message_id: String,
    pub message_group: Option<String>,
    pub kind: MessageType,
}

fn bad(code: Code, message: impl Into<String>) -> GrpcError {
    GrpcError::new(code, message)
}

/// Checks `m` and builds its Remoting form (`now_ms`: for delivery-time checks).
pub fn outgoing(m: &pb::Message, limits: &SendLimits, now_ms: i64) -> Result<Outgoing, GrpcError> {
    let sys = m.system_properties.clone().unwrap_or_default();
    check_body(m, limits)?;
    let mut props = user_properties(&m.user_properties, limits)?;
    if sys.message_id.is_empty() {
        return Err(bad(Code::IllegalMessageId, "message id is empty"));
    }
    properties::append(&mut props, keys::UNIQ_KEY, &sys.message_id);
    if let Some(tag) = sys.tag.as_deref().filter(|t| !t.is_empty()) {
        if tag.contains('|') || tag.chars().any(char::is_control) {
            return Err(bad(
                Code::IllegalMessageTag,
                format!("tag {tag:?} is illegal"),
            ));
        }
        properties::append(&mut props, keys::TAGS, tag);
    }
    let keys_joined = message_keys(&sys.keys)?;
    if !keys_joined.is_empty() {
        properties::append(&mut props, keys::KEYS, &keys_joined);
    }
    let group = message_group(&sys, limits)?;
    if let Some(g) = &group {
        properties::append(&mut props, keys::SHARDING_KEY, g);
    }
    if let Some(tc) = sys.trace_context.as_deref().filter(|t| !t.is_empty()) {
        properties::append(&mut props, TRACE_CONTEXT, tc);
    }
    let kind = MessageType::try_from(sys.message_type).unwrap_or(MessageType::Unspecified);
    let mut sys_flag = 0;
    if kind == MessageType::Transaction {
        sys_flag |= sys_flag::TRANSACTION_PREPARED;
        properties::append(&mut props, keys::TRAN_MSG, "true");
        if let Some(d) = &sys.orphaned_transaction_recovery_duration {
            let secs = d.seconds.clamp(0, limits.max_recovery_secs);
            properties::append(
                &mut props,
                keys::CHECK_IMMUNITY_TIME_IN_SECONDS,
                &secs.to_string(),
            );
        }
    }
    if let Some(at) = &sys.delivery_timestamp {
        let at_ms = timestamp_ms(at);
        if at_ms - now_ms > limits.max_delay_ms {
            return Err(bad(
                Code::IllegalDeliveryTime,
                format!(
                    "delivery time is more than {} ms ahead",
                    limits.max_delay_ms
                ),
            ));
        }
        if at_ms > now_ms {
            properties::append(&mut props, keys::TIMER_DELIVER_MS, &at_ms.to_string());
        }
    }
    if sys.body_encoding == Encoding::Gzip as i32 {
        sys_flag |= sys_flag::COMPRESSED;
    }
    Ok(Outgoing {
        properties: props,
        sys_flag,
        born_timestamp: sys.born_timestamp.as_ref().map_or(now_ms, timestamp_ms),
        reconsume_times: sys.delivery_attempt.map_or(0, |a| (a - 1).max(0)),
        message_id: sys.message_id,
        message_group: group,
        kind,
    })
}

fn check_body(m: &pb::Message, limits: &SendLimits) -> Result<(), GrpcError> {
    if m.body.is_empty() {
        return Err(bad(Code::MessageBodyEmpty, "message body is empty"));
    }
    if m.body.len() > limits.max_body {
        return Err(bad(
            Code::MessageBodyTooLarge,
            format!(
                "message body of {} bytes exceeds the limit of {} bytes",
                m.body.len(),
                limits.max_body
            ),
        ));
    }
    Ok(())
}

/// The user properties, checked (`ProxyConfig` limits, reserved keys refused), encoded.
fn user_properties(
    user: &HashMap<String, String>,
    limits: &SendLimits,
) -> Result<String, GrpcError> {
    if user.len() > limits.max_user_properties {
        return Err(bad(
            Code::MessagePropertiesTooLarge,
            format!("more than {} user properties", limits.max_user_properties),
        ));
    }
    let mut size = 0;
    let mut out = String::new();
    for (k, v) in user {
        if SYSTEM_KEYS.contains(&k.as_str()) || SHOWN_ELSEWHERE.contains(&k.as_str()) {
            return Err(bad(
                Code::IllegalMessagePropertyKey,
                format!("property key {k:?} is reserved"),
            ));
        }
        if k.is_empty()
            || k.chars()
                .chain(v.chars())
                .any(|c| c == '\u{1}' || c == '\u{2}')
        {
            return Err(bad(
                Code::IllegalMessagePropertyKey,
                format!("property {k:?} is empty or holds a separator character"),
            ));
        }
        size += k.len() + v.len();
        if !v.is_empty() {
            properties::append(&mut out, k, v);
        }
    }
    if size > limits.max_user_property_bytes {
        return Err(bad(
            Code::MessagePropertiesTooLarge,
            format!(
                "user properties of {size} bytes exceed the limit of {} bytes",
                limits.max_user_property_bytes
            ),
        ));
    }
    Ok(out)
}

fn message_keys(keys_in: &[String]) -> Result<String, GrpcError> {
    for k in keys_in {
        if k.trim().is_empty() || k.contains(' ') || k.chars().any(char::is_control) {
            return Err(bad(
                Code::IllegalMessageKey,
                format!("message key {k:?} is illegal"),
            ));
        }
    }
    Ok(keys_in.join(keys::KEY_SEPARATOR))
}

fn message_group(sys: &SystemProperties, limits: &SendLimits) -> Result<Option<String>, GrpcError> {
    let Some(g) = sys.message_group.as_deref().filter(|g| !g.is_empty()) else {
        return Ok(None);
    };
    if g.len() >= limits.max_message_group || g.chars().any(char::is_control) {
        return Err(bad(
            Code::IllegalMessageGroup,
            format!(
                "message group must be under {} bytes, without control characters",
                limits.max_message_group
            ),
        ));
    }
    Ok(Some(g.to_string()))
}

pub fn timestamp_ms(t: &Timestamp) -> i64 {
    t.seconds
        .saturating_mul(1000)
        .saturating_add(i64::from(t.nanos / 1_000_000))
}

pub fn timestamp(ms: i64) -> Timestamp {
    Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

pub fn duration_ms(d: &Duration) -> i64 {
    d.seconds
        .saturating_mul(1000)
        .saturating_add(i64::from(d.nanos / 1_000_000))
}

pub fn duration(ms: i64) -> Duration {
    Duration {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// MD5 of `body` in upper-case hex, the digest clients check.
pub fn md5_upper(body: &[u8]) -> String {
    hex_upper(&Md5::digest(body))
}

/// The properties a delivered message shows in its system properties, read in one pass over
/// the properties string (the last occurrence of a key wins, as in Java's map).
#[derive(Default)]
struct Known<'a> {
    tag: Option<&'a str>,
    keys: Option<&'a str>,
    uniq: Option<&'a str>,
    deliver_ms: Option<&'a str>,
    dlq_topic: Option<&'a str>,
    dlq_id: Option<&'a str>,
    group: Option<&'a str>,
    trace: Option<&'a str>,
    transaction: bool,
    delayed: bool,
}

/// One pass over `p`: the known keys, and every other non-reserved pair as a user property.
fn split_properties(p: &str) -> (Known<'_>, HashMap<String, String>) {
    let mut k = Known::default();
    let mut user = HashMap::new();
    for (key, v) in properties::pairs(p) {
        match key {
            keys::TAGS => k.tag = Some(v),
            keys::KEYS => k.keys = Some(v),
            keys::UNIQ_KEY => k.uniq = Some(v),
            keys::TIMER_DELIVER_MS => {
                k.deliver_ms = Some(v);
                k.delayed = true;
            }
            keys::DELAY | keys::TIMER_DELAY_SEC => k.delayed = true,
            keys::DLQ_ORIGIN_TOPIC => k.dlq_topic = Some(v),
            keys::DLQ_ORIGIN_MESSAGE_ID => k.dlq_id = Some(v),
            keys::SHARDING_KEY => k.group = Some(v),
            TRACE_CONTEXT => k.trace = Some(v),
            keys::TRAN_MSG => k.transaction = v == "true",
            _ if SYSTEM_KEYS.contains(&key)
                || SHOWN_ELSEWHERE.contains(&key)
                || key.starts_with(keys::TRANSIENT_PREFIX) => {}
            _ => {
                user.insert(key.to_string(), v.to_string());
            }
        }
    }
    (k, user)
}

/// The message type a stored message shows (`GrpcConverter`'s order of checks).
fn message_type(k: &Known<'_>) -> MessageType {
    if k.transaction {
        MessageType::Transaction
    } else if k.delayed {
        MessageType::Delay
    } else if k.group.is_some() {
        MessageType::Fifo
    } else {
        MessageType::Normal
    }
}

/// Upper-case hex, as RocketMQ writes digests.
fn hex_upper(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xF) as usize] as char);
    }
    s
}

/// A stored record as a delivered gRPC message: `topic` is the topic the client asked for,
/// `handle` its receipt handle (none for a transaction check's message), `frame` the buffer the
/// record was decoded from (the body is a slice of it, not a copy).
pub fn incoming(
    r: &DecodedRecord<'_>,
    frame: &bytes::Bytes,
    topic: &str,
    handle: Option<String>,
) -> pb::Message {
    let (k, user_properties) = split_properties(r.properties);
    let message_type = message_type(&k);
    let dead_letter_queue = match (k.dlq_topic, k.dlq_id) {
        (Some(t), Some(id)) => Some(DeadLetterQueue {
            topic: t.to_string(),
            message_id: id.to_string(),
        }),
        _ => None,
    };
    let sys = SystemProperties {
        tag: k.tag.map(str::to_string),
        keys: k
            .keys
            .map(|ks| {
                ks.split(' ')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        message_id: k
            .uniq
            .map(str::to_string)
            .unwrap_or_else(|| offset_msg_id(r.store_host, r.phy_offset)),
        body_digest: Some(Digest {
            r#type: DigestType::Md5 as i32,
            checksum: md5_upper(r.body),
        }),
        body_encoding: if r.sys_flag & sys_flag::COMPRESSED != 0 {
            Encoding::Gzip as i32
        } else {
            Encoding::Identity as i32
        },
        message_type: message_type as i32,
        born_timestamp: Some(timestamp(r.born_timestamp)),
        born_host: r.born_host.to_string(),
        store_timestamp: Some(timestamp(r.store_timestamp)),
        store_host: r.store_host.to_string(),
        delivery_timestamp: k
            .deliver_ms
            .and_then(|v| v.parse::<i64>().ok())
            .map(timestamp),
        receipt_handle: handle,
        queue_id: r.queue_id,
        queue_offset: Some(r.queue_offset),
        delivery_attempt: Some(r.reconsume_times.saturating_add(1)),
        message_group: k.group.map(str::to_string),
        trace_context: k.trace.map(str::to_string),
        dead_letter_queue,
        ..Default::default()
    };
    pb::Message {
        topic: Some(Resource {
            resource_namespace: String::new(),
            name: topic.to_string(),
        }),
        user_properties,
        system_properties: Some(sys),
        body: body_of(frame, r.body),
    }
}

/// `body` as a slice of `frame` when it lies inside it (a record decoded in place), a copy
/// otherwise: never a panic.
fn body_of(frame: &bytes::Bytes, body: &[u8]) -> bytes::Bytes {
    let (start, end) = (
        frame.as_ptr() as usize,
        frame.as_ptr() as usize + frame.len(),
    );
    let (from, to) = (body.as_ptr() as usize, body.as_ptr() as usize + body.len());
    if from >= start && to <= end {
        frame.slice_ref(body)
    } else {
        bytes::Bytes::copy_from_slice(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, body: &'static [u8]) -> pb::Message {
        pb::Message {
            topic: Some(Resource {
                resource_namespace: String::new(),
                name: "T".into(),
            }),
            user_properties: [("color".to_string(), "red".to_string())].into(),
            system_properties: Some(SystemProperties {
                tag: Some("TagA".into()),
                keys: vec!["k1".into(), "k2".into()],
                message_id: id.into(),
                message_type: MessageType::Normal as i32,
                ..Default::default()
            }),
            body: bytes::Bytes::from_static(body),
        }
    }

    #[test]
    fn a_message_becomes_remoting_properties() {
        let o = outgoing(&message("ID1", b"hi"), &SendLimits::default(), 0).unwrap();
        assert_eq!(properties::get(&o.properties, keys::UNIQ_KEY), Some("ID1"));
        assert_eq!(properties::get(&o.properties, keys::TAGS), Some("TagA"));
        assert_eq!(properties::get(&o.properties, keys::KEYS), Some("k1 k2"));
        assert_eq!(properties::get(&o.properties, "color"), Some("red"));
        assert_eq!(o.sys_flag, 0);
    }

    #[test]
    fn bad_messages_get_their_codes() {
        let limits = SendLimits::default();
        let code = |m: &pb::Message| outgoing(m, &limits, 0).unwrap_err().code;
        assert_eq!(code(&message("", b"x")), Code::IllegalMessageId);
        assert_eq!(code(&message("A", b"")), Code::MessageBodyEmpty);
        let mut m = message("A", b"x");
        m.user_properties.insert("UNIQ_KEY".into(), "x".into());
        assert_eq!(code(&m), Code::IllegalMessagePropertyKey);
        let mut m = message("A", b"x");
        m.system_properties.as_mut().unwrap().tag = Some("a|b".into());
        assert_eq!(code(&m), Code::IllegalMessageTag);
        let mut m = message("A", b"x");
        m.system_properties.as_mut().unwrap().delivery_timestamp =
            Some(timestamp(limits.max_delay_ms + 10));
        assert_eq!(code(&m), Code::IllegalDeliveryTime);
        let mut m = message("A", b"x");
        m.system_properties.as_mut().unwrap().message_group = Some("g".repeat(64));
        assert_eq!(code(&m), Code::IllegalMessageGroup);
    }

    #[test]
    fn a_record_shows_its_properties_where_clients_look() {
        let props = properties::encode([
            (keys::TAGS, "TagA"),
            (keys::KEYS, "k1 k2"),
            (keys::UNIQ_KEY, "U1"),
            (keys::SHARDING_KEY, "g1"),
            ("color", "red"),
            ("__RMQ.TRANSIENT.X", "hidden"),
        ]);
        let at: std::net::SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let r = DecodedRecord {
            total_size: 0,
            magic: 0,
            body_crc: 0,
            queue_id: 3,
            flag: 0,
            queue_offset: 7,
            phy_offset: 99,
            sys_flag: 0,
            born_timestamp: 1500,
            born_host: at,
            store_timestamp: 2500,
            store_host: at,
            reconsume_times: 2,
            prepared_transaction_offset: 0,
            body: b"hello",
            topic: "T",
            properties: &props,
        };
        let m = incoming(
            &r,
            &bytes::Bytes::from_static(b"hello"),
            "T",
            Some("h".into()),
        );
        assert_eq!(m.user_properties.len(), 1);
        assert_eq!(m.user_properties["color"], "red");
        let sys = m.system_properties.unwrap();
        assert_eq!(sys.tag.as_deref(), Some("TagA"));
        assert_eq!(sys.keys, vec!["k1", "k2"]);
        assert_eq!(sys.message_id, "U1");
        assert_eq!(sys.message_group.as_deref(), Some("g1"));
        assert_eq!(sys.message_type, MessageType::Fifo as i32);
        assert_eq!(sys.delivery_attempt, Some(3));
        assert_eq!((sys.queue_id, sys.queue_offset), (3, Some(7)));
        assert_eq!(sys.receipt_handle.as_deref(), Some("h"));
    }

    #[test]
    fn a_body_inside_its_frame_is_sliced_else_copied() {
        let frame = bytes::Bytes::from_static(b"..body..");
        let inside = body_of(&frame, &frame[2..6]);
        assert_eq!(
            (&inside[..], inside.as_ptr()),
            (&b"body"[..], frame[2..].as_ptr())
        );
        let elsewhere = body_of(&frame, b"other");
        assert_eq!(&elsewhere[..], b"other");
    }

    #[test]
    fn digest_is_upper_case_md5() {
        assert_eq!(md5_upper(b"hello"), "5D41402ABC4B2A76B9719D911017C592");
    }

    #[test]
    fn types_follow_the_converter() {
        let message_type_of = |p: &str| message_type(&split_properties(p).0);
        let p = properties::encode([(keys::SHARDING_KEY, "g")]);
        assert_eq!(message_type_of(&p), MessageType::Fifo);
        let p = properties::encode([(keys::TRAN_MSG, "true"), (keys::SHARDING_KEY, "g")]);
        assert_eq!(message_type_of(&p), MessageType::Transaction);
        let p = properties::encode([(keys::TIMER_DELIVER_MS, "5")]);
        assert_eq!(message_type_of(&p), MessageType::Delay);
        assert_eq!(message_type_of(""), MessageType::Normal);
    }
}
