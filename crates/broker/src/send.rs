//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), oneway or not.
//!
//! The shard validates, resolves the topic (auto-creating it through shard 0 when allowed),
//! encodes the stored records, hands them to the writer thread without blocking, and answers
//! when the writer replies. A plain send's records leave the body in the received frame, and the
//! writer's pwritev copies it from there into the page cache: this path makes no user-space copy
//! of a body (the connection's read loop may still move a partial frame when its buffer grows).
//! A full writer inbox is SYSTEM_BUSY; a failed oneway send is counted and logged, never silent.

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BytesMut;

use crate::append::{append, build_record, Outgoing};
use crate::constants::MAX_BATCH_MESSAGES;
use crate::error::BrokerError;
use crate::metadata::topic_validator::validate_topic;
use crate::metadata::topic_validator::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use crate::metadata::{topic_validator, PERM_WRITE};
use crate::metrics::record::{self as metrics, Hist, MessageType, MESSAGE_SIZE_BOUNDS};
use crate::protocol::batch::decode_batch_ref;
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::{
    SendMessageRequestHeader, SendMessageResponseHeader, DEFAULT_REGION,
};
use crate::protocol::message::{self, MessageToStore};
use crate::protocol::msg_id::push_offset_msg_ids;
use crate::protocol::properties::{self, keys};
use crate::protocol::RemotingCommand;
use crate::remoting::ConnInfo;
use crate::shard::Shard;
use crate::stats::ONEWAY_DROPPED;
use crate::store::tags_code;
use crate::topic_manager::{ensure_topic, send_queue};
use crate::transaction;
use crate::writer::{AppendRecord, AppendStatus, IndexKeys};

static ONEWAY_LAST_LOG_MS: AtomicU64 = AtomicU64::new(0);

/// Serves a send request; `None` for oneway requests (they get no response).
/// With the `testkit` feature (test builds only), a send to this topic panics on the shard: how
/// tests prove that any panic ends the process.
#[cfg(feature = "testkit")]
pub const PANIC_SHARD_TOPIC: &str = "RINGMQ_TEST_PANIC_SHARD";

pub async fn send(
    shard: Rc<Shard>,
    conn: &ConnInfo,
    cmd: &RemotingCommand,
) -> Option<RemotingCommand> {
    let res = send_inner(&shard, conn, cmd).await;
    if cmd.is_oneway() {
        if let Err(e) = res {
            let n = ONEWAY_DROPPED.fetch_add(1, Ordering::Relaxed) + 1;
            let now = crate::common::now_ms() as u64;
            let last = ONEWAY_LAST_LOG_MS.load(Ordering::Relaxed);
            if now.saturating_sub(last) >= 1000
                && ONEWAY_LAST_LOG_MS
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                tracing::warn!(dropped_total = n, error = %e, "oneway send not stored");
            }
        }
        return None;
    }
    Some(match res {
        Ok(r) => r,
        Err(e) => RemotingCommand::response_for(cmd, e.response_code(), Some(e.to_string())),
    })
}

async fn send_inner(
    shard: &Rc<Shard>,
    conn: &ConnInfo,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let mut h = SendMessageRequestHeader::from_command(cmd)?;
    #[cfg(feature = "testkit")]
    if h.topic == PANIC_SHARD_TOPIC {
        panic!("test switch: a send to {PANIC_SHARD_TOPIC}");
    }
    validate_topic(&h.topic)?;
    if topic_validator::is_not_allowed_send_topic(&h.topic) {
        return Err(BrokerError::NoPermission(format!(
            "Sending message to topic[{}] is forbidden.",
            h.topic
        )));
    }
    let tx_type = message::sys_flag::transaction_type(h.sys_flag);
    if tx_type == message::sys_flag::TRANSACTION_ROLLBACK {
        return Err(BrokerError::MessageIllegal(
            "a send cannot carry the rollback transaction type; end a transaction with END_TRANSACTION".into(),
        ));
    }
    let tc = ensure_topic(
        shard,
        &h.topic,
        &h.default_topic,
        h.default_topic_queue_nums,
    )
    .await?;
    if tc.perm & PERM_WRITE == 0 {
        return Err(BrokerError::NoPermission(format!(
            "the topic[{}] sending message is forbidden",
            h.topic
        )));
    }
    // Java's SendMessageProcessor marks every record of a MULTI_TAG topic.
    if tc.topic_filter_type == crate::protocol::body::TopicFilterType::MultiTag {
        h.sys_flag |= message::sys_flag::MULTI_TAGS;
    }
    let queue_id = send_queue(shard, &tc, &h.topic, h.queue_id)?;
    let ctx = &shard.ctx;

    // One item per message: body, flag, and the client's encoded properties (borrowed).
    let items: Vec<Item<'_>> = if h.batch {
        if h.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return Err(BrokerError::MessageIllegal(
                "batch request does not support retry group".into(),
            ));
        }
        decode_batch_ref(&cmd.body, MAX_BATCH_MESSAGES)?
            .into_iter()
            .map(|e| Item {
                body: e.body,
                flag: e.flag,
                props: e.properties,
            })
            .collect()
    } else {
        vec![Item {
            body: cmd.body.clone(),
            flag: h.flag,
            props: &h.properties,
        }]
    };
    if items.is_empty() {
        return Err(BrokerError::MessageIllegal("the batch is empty".into()));
    }
    let max_size = ctx.cfg.store.max_message_size;
    if let Some(big) = items.iter().find(|i| i.body.len() > max_size) {
        return Err(BrokerError::MessageIllegal(format!(
            "the message body size {} exceeds the limit {max_size}",
            big.body.len()
        )));
    }
    // A retry-topic send past the group's limit goes to the dead-letter queue, as in Java's
    // `SendMessageProcessor.handleRetryAndDLQ` (a client whose CONSUMER_SEND_MSG_BACK failed
    // resends to `%RETRY%<group>` itself).
    let mut topic = h.topic.clone();
    let mut queue_id = queue_id;
    if let Some(group) = h.topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
        let max = match h.max_reconsume_times {
            Some(m) => m,
            None => crate::retry::group_retry_max(shard, group).await?,
        };
        if h.reconsume_times > max {
            topic = format!("{DLQ_GROUP_TOPIC_PREFIX}{group}");
            queue_id = 0;
            ensure_topic(shard, &topic, "", 1).await?;
        }
    }
    let to_dlq = topic != h.topic;
    let scans: Vec<Scan<'_>> = items.iter().map(|i| scan(i.props)).collect();
    let wait_flush = !scans.iter().any(|s| s.no_wait);
    let prepared =
        tx_type == message::sys_flag::TRANSACTION_PREPARED || scans.iter().any(|s| s.prepared);
    if prepared {
        if h.batch {
            return Err(BrokerError::MessageIllegal(
                "a transactional message cannot be sent in a batch".into(),
            ));
        }
        if ctx.cfg.transaction.reject_transaction_message {
            return Err(BrokerError::NoPermission(format!(
                "the broker[{}] sending transaction message is forbidden",
                ctx.cfg.broker_name
            )));
        }
    }
    // The metrics' size histogram, on the stack: recorded once the records are stored.
    let mut sizes = Hist::default();
    for i in &items {
        sizes.observe(&MESSAGE_SIZE_BOUNDS, i.body.len() as f64);
    }
    let kind = if prepared {
        MessageType::Transaction
    } else if scans.iter().any(|s| s.rewrite) {
        MessageType::Delay
    } else {
        MessageType::Normal
    };
    let target = Target {
        topic: &topic,
        queue_id,
        h: &h,
        born_host: conn.peer,
    };
    let (records, uniq_keys) = if prepared {
        let item = &items[0];
        let (record, uniq) = transaction::records::half_record(
            shard,
            transaction::records::Prepared {
                topic: &h.topic,
                queue_id,
                flag: item.flag,
                sys_flag: h.sys_flag,
                born_timestamp: h.born_timestamp,
                born_host: conn.peer,
                reconsume_times: h.reconsume_times,
                body: &item.body,
                properties: item.props,
            },
        )?;
        (vec![record], uniq)
    } else if to_dlq || scans.iter().any(|s| s.rewrite) {
        encode_rewritten(shard, &target, &items, to_dlq)?
    } else {
        encode_plain(shard, &target, items, &scans)?
    };

    let outcome = append(shard, records, wait_flush).await?;
    metrics::message_in(&topic, kind, &sizes);
    if to_dlq {
        metrics::sent_to_dlq(&topic[DLQ_GROUP_TOPIC_PREFIX.len()..]);
    }
    let code = match outcome.status {
        AppendStatus::PutOk => rc::SUCCESS,
        AppendStatus::FlushDiskTimeout => rc::FLUSH_DISK_TIMEOUT,
        AppendStatus::FlushSlaveTimeout => rc::FLUSH_SLAVE_TIMEOUT,
    };
    let mut msg_id = String::new();
    push_offset_msg_ids(&mut msg_id, ctx.store_host, &outcome.phy_offsets);
    let mut resp = RemotingCommand::response_for(cmd, code, None);
    SendMessageResponseHeader {
        msg_id,
        queue_id,
        queue_offset: outcome.queue_offsets.first().copied().unwrap_or(0) as i64,
        transaction_id: Some(uniq_keys),
    }
    .write_to_with_region(&mut resp, DEFAULT_REGION, ctx.cfg.trace_on);
    Ok(resp)
}

/// One message of a send request: body, user flag, and its encoded properties as sent.
struct Item<'a> {
    body: bytes::Bytes,
    flag: i32,
    props: &'a str,
}

/// Where the messages of one send go and the request fields every record shares.
struct Target<'a> {
    topic: &'a str,
    queue_id: i32,
    h: &'a SendMessageRequestHeader,
    born_host: std::net::SocketAddr,
}

/// What the send path reads from a message's properties, found in one pass without allocating.
#[derive(Default)]
struct Scan<'a> {
    uniq: Option<&'a str>,
    cluster: bool,
    no_wait: bool,
    tags: Option<&'a str>,
    keys: Option<&'a str>,
    /// DELAY or a timer property: the record is parked in a system topic (`build_record`).
    rewrite: bool,
    /// TRAN_MSG=true: a prepared transactional message, stored as a half message.
    prepared: bool,
}

fn scan(props: &str) -> Scan<'_> {
    let mut s = Scan::default();
    // The last occurrence of a key wins, as in Java's parsed map.
    for (k, v) in properties::pairs(props) {
        match k {
            keys::UNIQ_KEY => s.uniq = Some(v),
            keys::CLUSTER => s.cluster = true,
            keys::WAIT => s.no_wait = v == "false",
            keys::TAGS => s.tags = Some(v),
            keys::KEYS => s.keys = Some(v),
            keys::DELAY | keys::TIMER_DELIVER_MS | keys::TIMER_DELAY_SEC | keys::TIMER_DELAY_MS => {
                s.rewrite = true
            }
            keys::TRAN_MSG => s.prepared = v.eq_ignore_ascii_case("true"),
            _ => {}
        }
    }
    s
}

/// Appends `key 0x01 value 0x02` to the properties segment starting at `start` of `buf`,
/// separating it from an unterminated last pair; returns the value's range.
fn push_pair(
    buf: &mut String,
    start: usize,
    key: &str,
    value: impl FnOnce(&mut String),
) -> (usize, usize) {
    if buf.len() > start && !buf.ends_with(properties::PROPERTY_SEPARATOR) {
        buf.push(properties::PROPERTY_SEPARATOR);
    }
    buf.push_str(key);
    buf.push(properties::NAME_VALUE_SEPARATOR);
    let from = buf.len();
    value(buf);
    let to = buf.len();
    buf.push(properties::PROPERTY_SEPARATOR);
    (from, to)
}

/// The common send: no delay, timer or DLQ rewrite. The client's properties string is stored
/// as sent (readers take a key's last value, as Java's map does) with UNIQ_KEY and CLUSTER
/// appended when missing, and all records are encoded into one buffer, without their bodies
/// (each record keeps its body as a slice of the frame): no per-message parse, re-encode, body
/// copy or allocation beyond the record's topic and index keys.
fn encode_plain(
    shard: &Shard,
    t: &Target<'_>,
    items: Vec<Item<'_>>,
    scans: &[Scan<'_>],
) -> Result<(Vec<AppendRecord>, String), BrokerError> {
    let ctx = &shard.ctx;
    let levels = &ctx.delay_levels;
    let cluster = ctx.cfg.broker_cluster_name.as_str();
    let now = crate::common::now_ms();
    let mut props = String::with_capacity(items.iter().map(|i| i.props.len() + 96).sum());
    // (properties range, UNIQ_KEY value range) per message, into `props`.
    let mut spans = Vec::with_capacity(items.len());
    let mut capacity = 0;
    let widest = t.h.sys_flag | message::sys_flag::BORNHOST_V6 | message::sys_flag::STOREHOST_V6;
    let mut topic: Option<std::sync::Arc<str>> = Some(t.topic.into());
    for (item, sc) in items.iter().zip(scans) {
        let start = props.len();
        props.push_str(item.props);
        let uniq = match sc.uniq {
            // A subslice of `item.props`, copied at `start`.
            Some(u) => {
                let at = start + (u.as_ptr() as usize - item.props.as_ptr() as usize);
                (at, at + u.len())
            }
            None => push_pair(&mut props, start, keys::UNIQ_KEY, |b| {
                shard.push_next_uniq(b, now)
            }),
        };
        if !sc.cluster {
            push_pair(&mut props, start, keys::CLUSTER, |b| b.push_str(cluster));
        }
        spans.push(((start, props.len()), uniq));
        capacity += message::stored_len(widest, 0, t.topic.len(), props.len() - start);
    }
    let dispatch = message::sys_flag::is_dispatched(t.h.sys_flag);
    let mut buf = BytesMut::with_capacity(capacity);
    let mut records = Vec::with_capacity(items.len());
    let mut uniq_keys = String::with_capacity(spans.iter().map(|(_, (a, b))| b - a + 1).sum());
    for ((item, sc), ((p0, p1), (u0, u1))) in items.into_iter().zip(scans).zip(spans) {
        let msg = MessageToStore {
            topic: t.topic,
            queue_id: t.queue_id,
            flag: item.flag,
            sys_flag: t.h.sys_flag,
            born_timestamp: t.h.born_timestamp,
            born_host: t.born_host,
            store_host: ctx.store_host,
            reconsume_times: t.h.reconsume_times,
            prepared_transaction_offset: 0,
            body: &item.body,
            properties: &props[p0..p1],
        };
        let body_at = message::encode_without_body(&msg, &mut buf)
            .map_err(|e| BrokerError::MessageIllegal(e.to_string()))?;
        // The properties end the record, so `props[p0..p1]` sits at `buf.len() - (p1 - p0)`;
        // `from` and `to` index `props` (both >= p0). The ranges index `bytes`, which holds the
        // record without its body.
        let in_record = buf.len() - (p1 - p0);
        let at = |from: usize, to: usize| {
            (
                (in_record + (from - p0)) as u32,
                (in_record + (to - p0)) as u32,
            )
        };
        let keys = sc.keys.map(|k| {
            // A subslice of `item.props`, copied at `p0`.
            let off = p0 + (k.as_ptr() as usize - item.props.as_ptr() as usize);
            at(off, off + k.len())
        });
        let index = IndexKeys::InRecord {
            keys,
            uniq: Some(at(u0, u1)),
        };
        let uniq = &props[u0..u1];
        if !uniq_keys.is_empty() {
            uniq_keys.push(',');
        }
        uniq_keys.push_str(uniq);
        records.push(AppendRecord {
            // The first record names the topic, the rest repeat it (see AppendRecord::topic).
            topic: topic.take(),
            queue_id: t.queue_id as u32,
            // A plain send to the timer topic is parked there like a timer message.
            tags_code: tags_code::of_record_tagged(t.topic, &props[p0..p1], sc.tags, levels),
            keys: index,
            dispatch,
            bytes: buf.split(),
            body: item.body,
            body_at: body_at as u32,
            replicated: false,
        });
    }
    Ok((records, uniq_keys))
}

/// Sends that rewrite properties: delay levels and timers (parked in system topics) and
/// retry sends moved to the DLQ. Parses each message's properties into pairs.
fn encode_rewritten(
    shard: &Shard,
    t: &Target<'_>,
    items: &[Item<'_>],
    to_dlq: bool,
) -> Result<(Vec<AppendRecord>, String), BrokerError> {
    let cluster = shard.ctx.cfg.broker_cluster_name.as_str();
    let now = crate::common::now_ms();
    let mut records = Vec::with_capacity(items.len());
    let mut uniq_keys = String::new();
    for item in items {
        let mut props = properties::parse(item.props);
        let uniq = match props.iter().find(|(k, _)| k == keys::UNIQ_KEY) {
            Some((_, v)) => v.clone(),
            None => {
                let u = shard.next_uniq(now);
                props.push((keys::UNIQ_KEY.into(), u.clone()));
                u
            }
        };
        if !props.iter().any(|(k, _)| k == keys::CLUSTER) {
            props.push((keys::CLUSTER.into(), cluster.into()));
        }
        if to_dlq {
            props.retain(|(k, _)| k != keys::DELAY);
        }
        records.push(build_record(
            shard,
            Outgoing {
                topic: t.topic,
                queue_id: t.queue_id,
                flag: item.flag,
                sys_flag: t.h.sys_flag,
                born_timestamp: t.h.born_timestamp,
                born_host: t.born_host,
                reconsume_times: t.h.reconsume_times,
                body: &item.body,
                props,
            },
        )?);
        if !uniq_keys.is_empty() {
            uniq_keys.push(',');
        }
        uniq_keys.push_str(&uniq);
    }
    Ok((records, uniq_keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's string is kept; an unterminated last pair is closed before a new pair, and
    /// an empty segment gets no leading separator.
    #[test]
    fn push_pair_appends_to_segment() {
        let mut b = String::from("X\u{1}1\u{2}A\u{1}b");
        let (f, t) = push_pair(&mut b, 6, "K", |s| s.push('v'));
        assert_eq!(b, "X\u{1}1\u{2}A\u{1}b\u{2}K\u{1}v\u{2}");
        assert_eq!(&b[f..t], "v");
        let start = b.len();
        push_pair(&mut b, start, "C", |s| s.push('c'));
        assert!(b.ends_with("\u{2}K\u{1}v\u{2}C\u{1}c\u{2}"));
    }

    /// One pass finds the keys the send path needs; the last duplicate wins.
    #[test]
    fn scan_reads_needed_keys() {
        let p = "TAGS\u{1}a\u{2}KEYS\u{1}k1 k2\u{2}TAGS\u{1}b\u{2}WAIT\u{1}false\u{2}UNIQ_KEY\u{1}U\u{2}";
        let s = scan(p);
        assert_eq!(s.tags, Some("b"));
        assert_eq!(s.keys, Some("k1 k2"));
        assert_eq!(s.uniq, Some("U"));
        assert!(s.no_wait && !s.cluster && !s.rewrite);
        assert!(scan("DELAY\u{1}3\u{2}").rewrite);
        assert!(scan("TIMER_DELAY_SEC\u{1}3\u{2}").rewrite);
    }
}
