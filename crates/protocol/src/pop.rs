//! RocketMQ 5's POP formats (Java's `ExtraInfoUtil` and `BatchAck`): the receipt handle a
//! consumer acks with (`ExtraInfo`, the `POP_CK` property), the offset-info strings of a pop's
//! answer, and BATCH_ACK_MESSAGE's body.
//!
//! A receipt handle is space-separated: `ckQueueOffset popTime invisibleTime reviveQid retry
//! brokerName queueId`, then the message's queue offset (the form clients hold), then, in
//! handles the gRPC proxy makes, the message's commit-log offset. Info strings are `;`-joined
//! entries of `retry queueId value`. Everything here parses input from the network: a malformed
//! string is a `ProtocolError`, never a panic, and nothing grows past what the input holds.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::topics::{is_pop_retry_topic_v2, pop_retry_topic, RETRY_GROUP_TOPIC_PREFIX};
use crate::ProtocolError;

/// The revive queue id that marks an orderly (FIFO) pop (Java's `POP_ORDER_REVIVE_QUEUE`).
pub const POP_ORDER_REVIVE_QUEUE: i32 = 999;
/// The property a popped message carries its receipt handle in.
pub const PROPERTY_POP_CK: &str = "POP_CK";
/// The property that records when a message was first popped.
pub const PROPERTY_FIRST_POP_TIME: &str = "1ST_POP_TIME";
/// The most offsets a BATCH_ACK entry's bit set may cover (8 KiB of bits): far past any pop's
/// span, small enough that a hostile body cannot make the broker walk millions of bits.
pub const BATCH_ACK_MAX_BITS: usize = 1 << 16;

/// Which topic a popped message came from, as handles and info strings write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryFlag {
    /// `0`: the topic itself.
    Normal,
    /// `1`: the group's retry topic, `%RETRY%{group}_{topic}`.
    RetryV1,
    /// `2`: the group's retry topic in its v2 form, `%RETRY%{group}+{topic}`.
    RetryV2,
}

impl RetryFlag {
    /// The flag of a message popped from `topic` (Java's `ExtraInfoUtil.getRetry`).
    pub fn of_topic(topic: &str) -> RetryFlag {
        if is_pop_retry_topic_v2(topic) {
            RetryFlag::RetryV2
        } else if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            RetryFlag::RetryV1
        } else {
            RetryFlag::Normal
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RetryFlag::Normal => "0",
            RetryFlag::RetryV1 => "1",
            RetryFlag::RetryV2 => "2",
        }
    }

    pub fn parse(s: &str) -> Option<RetryFlag> {
        match s {
            "0" => Some(RetryFlag::Normal),
            "1" => Some(RetryFlag::RetryV1),
            "2" => Some(RetryFlag::RetryV2),
            _ => None,
        }
    }

    /// The topic the message was stored in, given the topic the consumer popped and its group
    /// (Java's `ExtraInfoUtil.getRealTopic`).
    pub fn real_topic(self, topic: &str, group: &str) -> String {
        match self {
            RetryFlag::Normal => topic.to_owned(),
            RetryFlag::RetryV1 => pop_retry_topic(group, topic, false),
            RetryFlag::RetryV2 => pop_retry_topic(group, topic, true),
        }
    }
}

/// A receipt handle: which pop handed the message out (its checkpoint's first queue offset, pop
/// time, invisible time and revive queue), from which queue, and where the message is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraInfo {
    pub ck_queue_offset: i64,
    pub pop_time: i64,
    pub invisible_time: i64,
    pub revive_qid: i32,
    pub retry: RetryFlag,
    pub broker_name: String,
    pub queue_id: i32,
    /// The message's queue offset (absent in the broker's seven-field form).
    pub queue_offset: Option<i64>,
    /// The message's commit-log offset (the gRPC proxy's ninth field).
    pub commit_log_offset: Option<i64>,
}

fn bad_handle(raw: &str) -> ProtocolError {
    ProtocolError::InvalidField {
        name: "extraInfo",
        value: raw.chars().take(64).collect(),
    }
}

impl ExtraInfo {
    /// Parses a handle of seven, eight or nine fields.
    pub fn parse(raw: &str) -> Result<ExtraInfo, ProtocolError> {
        let mut f = raw.split(' ');
        let mut next = || f.next().ok_or_else(|| bad_handle(raw));
        let num = |s: &str| s.parse::<i64>().map_err(|_| bad_handle(raw));
        let info = ExtraInfo {
            ck_queue_offset: num(next()?)?,
            pop_time: num(next()?)?,
            invisible_time: num(next()?)?,
            revive_qid: next()?.parse().map_err(|_| bad_handle(raw))?,
            retry: RetryFlag::parse(next()?).ok_or_else(|| bad_handle(raw))?,
            broker_name: next()?.to_owned(),
            queue_id: next()?.parse().map_err(|_| bad_handle(raw))?,
            queue_offset: None,
            commit_log_offset: None,
        };
        let queue_offset = f.next().map(num).transpose()?;
        let commit_log_offset = f.next().map(num).transpose()?;
        if f.next().is_some() || info.broker_name.is_empty() {
            return Err(bad_handle(raw));
        }
        Ok(ExtraInfo {
            queue_offset,
            commit_log_offset,
            ..info
        })
    }

    /// An orderly pop's handle.
    pub fn is_order(&self) -> bool {
        self.revive_qid == POP_ORDER_REVIVE_QUEUE
    }

    /// When the message becomes visible again.
    pub fn next_visible_time(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_time)
    }
}

impl fmt::Display for ExtraInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {} {}",
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry.as_str(),
            self.broker_name,
            self.queue_id
        )?;
        if let Some(o) = self.queue_offset {
            write!(f, " {o}")?;
            if let Some(c) = self.commit_log_offset {
                write!(f, " {c}")?;
            }
        }
        Ok(())
    }
}

/// One entry of an info string: the queue (with its retry flag) and what the entry says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfoEntry<V> {
    pub retry: RetryFlag,
    pub queue_id: i32,
    pub value: V,
}

/// `startOffsetInfo`: each queue's first popped offset, `retry queueId offset;...`.
pub fn start_offset_info(entries: &[InfoEntry<i64>]) -> String {
    join(entries, |v, out| out.push_str(&v.to_string()))
}

/// `msgOffsetInfo`: each queue's popped offsets, `retry queueId o1,o2,...;...`.
pub fn msg_offset_info(entries: &[InfoEntry<Vec<i64>>]) -> String {
    join(entries, |v, out| {
        for (i, o) in v.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&o.to_string());
        }
    })
}

fn join<V>(entries: &[InfoEntry<V>], value: impl Fn(&V, &mut String)) -> String {
    let mut out = String::new();
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        out.push_str(e.retry.as_str());
        out.push(' ');
        out.push_str(&e.queue_id.to_string());
        out.push(' ');
        value(&e.value, &mut out);
    }
    out
}

fn bad_info(name: &'static str, raw: &str) -> ProtocolError {
    ProtocolError::InvalidField {
        name,
        value: raw.chars().take(64).collect(),
    }
}

/// Parses `startOffsetInfo`; empty is no entry.
pub fn parse_start_offset_info(raw: &str) -> Result<Vec<InfoEntry<i64>>, ProtocolError> {
    parse_info(raw, "startOffsetInfo", |v| v.parse().ok())
}

/// Parses `msgOffsetInfo`; empty is no entry.
pub fn parse_msg_offset_info(raw: &str) -> Result<Vec<InfoEntry<Vec<i64>>>, ProtocolError> {
    parse_info(raw, "msgOffsetInfo", |v| {
        v.split(',').map(|o| o.parse().ok()).collect()
    })
}

fn parse_info<V>(
    raw: &str,
    name: &'static str,
    value: impl Fn(&str) -> Option<V>,
) -> Result<Vec<InfoEntry<V>>, ProtocolError> {
    if raw.is_empty() {
        return Ok(Vec::new());
    }
    raw.split(';')
        .map(|entry| {
            let mut p = entry.split(' ');
            let (Some(r), Some(q), Some(v), None) = (p.next(), p.next(), p.next(), p.next()) else {
                return Err(bad_info(name, raw));
            };
            Ok(InfoEntry {
                retry: RetryFlag::parse(r).ok_or_else(|| bad_info(name, raw))?,
                queue_id: q.parse().map_err(|_| bad_info(name, raw))?,
                value: value(v).ok_or_else(|| bad_info(name, raw))?,
            })
        })
        .collect()
}

/// One entry of BATCH_ACK_MESSAGE's body (Java's `BatchAck`, fastjson's short names, the long
/// ones accepted too): the offsets `start_offset + i` for every bit `i` set in `bit_set` are
/// acked for the pop of `pop_time` on `queue_id` of `topic` (the topic the consumer popped;
/// `retry` says whether the messages came from its retry topic).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchAck {
    #[serde(rename = "c", alias = "consumerGroup")]
    pub consumer_group: String,
    #[serde(rename = "t", alias = "topic")]
    pub topic: String,
    #[serde(rename = "r", alias = "retry")]
    pub retry: String,
    #[serde(rename = "so", alias = "startOffset")]
    pub start_offset: i64,
    #[serde(rename = "q", alias = "queueId")]
    pub queue_id: i32,
    #[serde(rename = "rq", alias = "reviveQueueId")]
    pub revive_queue_id: i32,
    #[serde(rename = "pt", alias = "popTime")]
    pub pop_time: i64,
    #[serde(rename = "it", alias = "invisibleTime")]
    pub invisible_time: i64,
    /// Java's `BitSet.toByteArray()` in Base64: bit `i` is bit `i % 8` of byte `i / 8`.
    #[serde(rename = "b", alias = "bitSet", with = "bit_set_base64")]
    pub bit_set: Vec<u8>,
}

impl BatchAck {
    /// The acked queue offsets, ascending; an error past `BATCH_ACK_MAX_BITS`.
    pub fn offsets(&self) -> Result<Vec<i64>, ProtocolError> {
        if self.bit_set.len() * 8 > BATCH_ACK_MAX_BITS {
            return Err(ProtocolError::BadBody(format!(
                "a batch ack's bit set covers {} offsets, more than {BATCH_ACK_MAX_BITS}",
                self.bit_set.len() * 8
            )));
        }
        let mut out = Vec::new();
        for (byte_at, byte) in self.bit_set.iter().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) != 0 {
                    let i = (byte_at * 8 + bit) as i64;
                    out.push(self.start_offset.saturating_add(i));
                }
            }
        }
        Ok(out)
    }

    /// The bit set of `offsets` (each at least `start_offset`) as Java's `toByteArray` lays it out.
    pub fn bits_of(start_offset: i64, offsets: &[i64]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for &o in offsets {
            let Ok(i) = usize::try_from(o - start_offset) else {
                continue;
            };
            if bytes.len() <= i / 8 {
                bytes.resize(i / 8 + 1, 0);
            }
            bytes[i / 8] |= 1 << (i % 8);
        }
        bytes
    }
}

/// BATCH_ACK_MESSAGE's body (Java's `BatchAckMessageRequestBody`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchAckMessageRequestBody {
    #[serde(default)]
    pub broker_name: Option<String>,
    #[serde(default)]
    pub acks: Vec<BatchAck>,
}

mod bit_set_base64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
