//! The records the transaction service stores, and the request it sends a producer:
//! - the half record of a prepared send (`RMQ_SYS_TRANS_HALF_TOPIC` queue 0, the real topic and
//!   queue in `REAL_TOPIC`/`REAL_QID`, transaction type reset so it gets a consume-queue unit);
//! - the committed record (the half message on its real topic and queue, type COMMIT, its
//!   prepared-transaction offset pointing at the half record);
//! - the op record of a decision (`RMQ_SYS_TRANS_OP_HALF_TOPIC`, tag `d`, body `"off,off,"`);
//! - a put-back copy for a check and a discarded copy (`TRANS_CHECK_MAX_TIME_TOPIC`);
//! - CHECK_TRANSACTION_STATE (39), whose body is the half message in stored form with its real
//!   topic and queue, as Java's `Broker2Client.checkProducerTransactionState` sends it.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};

use crate::error::BrokerError;
use crate::metadata::topic_validator::{
    TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC,
};
use crate::protocol::codes::request_code;
use crate::protocol::headers::CheckTransactionStateRequestHeader;
use crate::protocol::java_hash::tags_code;
use crate::protocol::message::{self, sys_flag, DecodedRecord, MessageToStore};
use crate::protocol::msg_id::offset_msg_id;
use crate::protocol::properties::{self, keys};
use crate::protocol::RemotingCommand;
use crate::shard::Shard;
use crate::store::TagsCode;
use crate::transaction::{HALF_QUEUE_ID, REMOVE_TAG};
use crate::writer::{AppendRecord, IndexKeys};

/// One message of a prepared send, as the send path read it from the request.
pub struct Prepared<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub reconsume_times: i32,
    pub body: &'a Bytes,
    pub properties: &'a str,
}

/// The half record of a prepared send and its UNIQ_KEY. The client's properties are kept as
/// sent, with the broker's pairs appended (a key's last value wins, as in Java's map, so a
/// client's own REAL_TOPIC cannot redirect the commit), and the body stays in the request's
/// frame: the writer copies it from there, as for a plain send.
pub fn half_record(shard: &Shard, m: Prepared<'_>) -> Result<(AppendRecord, String), BrokerError> {
    let mut props = String::with_capacity(m.properties.len() + 160);
    props.push_str(m.properties);
    let uniq = match properties::get(m.properties, keys::UNIQ_KEY) {
        Some(u) => u.to_owned(),
        None => {
            let u = shard.next_uniq(crate::common::now_ms());
            properties::append(&mut props, keys::UNIQ_KEY, &u);
            u
        }
    };
    if properties::get(m.properties, keys::CLUSTER).is_none() {
        properties::append(
            &mut props,
            keys::CLUSTER,
            &shard.ctx.cfg.broker_cluster_name,
        );
    }
    properties::append(&mut props, keys::REAL_TOPIC, m.topic);
    properties::append(&mut props, keys::REAL_QID, &m.queue_id.to_string());
    properties::append(&mut props, keys::TRANSACTION_ID, &uniq);
    let msg = MessageToStore {
        topic: TRANS_HALF_TOPIC,
        queue_id: HALF_QUEUE_ID as i32,
        flag: m.flag,
        sys_flag: with_type(m.sys_flag, sys_flag::TRANSACTION_NOT_TYPE),
        born_timestamp: m.born_timestamp,
        born_host: m.born_host,
        store_host: shard.ctx.store_host,
        reconsume_times: m.reconsume_times,
        prepared_transaction_offset: 0,
        body: m.body,
        properties: &props,
    };
    let mut bytes = BytesMut::with_capacity(message::stored_len(
        msg.sys_flag | sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6,
        0,
        TRANS_HALF_TOPIC.len(),
        props.len(),
    ));
    let body_at = message::encode_without_body(&msg, &mut bytes)
        .map_err(|e| BrokerError::MessageIllegal(e.to_string()))?;
    let record = AppendRecord {
        topic: Some(TRANS_HALF_TOPIC.into()),
        queue_id: HALF_QUEUE_ID,
        tags_code: TagsCode::Known(tags_code(properties::get(&props, keys::TAGS))),
        keys: IndexKeys::Owned(indexed_keys(&props)),
        dispatch: true,
        bytes,
        body: m.body.clone(),
        body_at: body_at as u32,
        replicated: false,
    };
    Ok((record, uniq))
}

/// KEYS split on spaces, then UNIQ_KEY: what the IndexFile indexes.
fn indexed_keys(props: &str) -> Vec<String> {
    let mut out: Vec<String> = properties::get(props, keys::KEYS)
        .map(|k| {
            k.split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if let Some(u) = properties::get(props, keys::UNIQ_KEY) {
        out.push(u.to_owned());
    }
    out
}

/// The half message `half` (stored at `half_phy`) committed to its real topic and queue: its
/// properties without REAL_TOPIC and REAL_QID, copied pair by pair. TRAN_MSG stays, as Java
/// keeps it: consumers (and the gRPC endpoint's message type) see a transactional message.
pub fn committed_record(
    shard: &Shard,
    half: &DecodedRecord<'_>,
    half_phy: u64,
) -> Result<AppendRecord, BrokerError> {
    if is_delayed(half.properties) {
        return delayed_commit(shard, half, half_phy);
    }
    let mut props = String::with_capacity(half.properties.len());
    let (mut topic, mut qid) = (None, None);
    for (k, v) in properties::pairs(half.properties) {
        match k {
            keys::REAL_TOPIC => topic = Some(v),
            keys::REAL_QID => qid = v.parse::<u32>().ok(),
            _ => properties::append(&mut props, k, v),
        }
    }
    let (Some(topic), Some(qid)) = (topic, qid) else {
        return Err(BrokerError::System(format!(
            "the half message at {half_phy} has no REAL_TOPIC/REAL_QID"
        )));
    };
    let fields = Fields::of(
        half,
        topic,
        qid,
        with_type(half.sys_flag, sys_flag::TRANSACTION_COMMIT),
        half_phy as i64,
    );
    encode_str(&fields, half.body, &props)
}

/// A delay level or a timer on the message: its commit is parked like any delayed send.
fn is_delayed(props: &str) -> bool {
    properties::pairs(props).any(|(k, v)| match k {
        keys::DELAY => v.trim().parse::<i32>().is_ok_and(|l| l > 0),
        keys::TIMER_DELIVER_MS | keys::TIMER_DELAY_SEC | keys::TIMER_DELAY_MS => true,
        _ => false,
    })
}

/// A committed message with a delay level or a timer goes through the send path's parking
/// (schedule or timer topic), as RocketMQ treats a COMMIT-type put with a delay.
fn delayed_commit(
    shard: &Shard,
    half: &DecodedRecord<'_>,
    half_phy: u64,
) -> Result<AppendRecord, BrokerError> {
    let mut props = properties::parse(half.properties);
    let topic = value(&props, keys::REAL_TOPIC).map(str::to_owned);
    let qid = value(&props, keys::REAL_QID).and_then(|q| q.parse::<i32>().ok());
    let (Some(topic), Some(qid)) = (topic, qid) else {
        return Err(BrokerError::System(format!(
            "the half message at {half_phy} has no REAL_TOPIC/REAL_QID"
        )));
    };
    props.retain(|(k, _)| k != keys::REAL_TOPIC && k != keys::REAL_QID && k != keys::TRAN_MSG);
    crate::append::build_record(
        shard,
        crate::append::Outgoing {
            topic: &topic,
            queue_id: qid,
            flag: half.flag,
            sys_flag: with_type(half.sys_flag, sys_flag::TRANSACTION_COMMIT),
            born_timestamp: half.born_timestamp,
            born_host: half.born_host,
            reconsume_times: half.reconsume_times,
            body: half.body,
            props,
        },
    )
}

/// The op record of a decision that resolves the half offsets `halves`.
pub fn op_record(shard: &Shard, halves: &[u64]) -> Result<AppendRecord, BrokerError> {
    let mut body = String::with_capacity(halves.len() * 12);
    for h in halves {
        body.push_str(&h.to_string());
        body.push(',');
    }
    let now = crate::common::now_ms();
    let props = vec![
        (keys::TAGS.to_owned(), REMOVE_TAG.to_owned()),
        (keys::WAIT.to_owned(), "false".to_owned()),
        (keys::UNIQ_KEY.to_owned(), shard.next_uniq(now)),
    ];
    let fields = Fields {
        topic: TRANS_OP_HALF_TOPIC,
        queue_id: HALF_QUEUE_ID,
        flag: 0,
        sys_flag: 0,
        born_timestamp: now,
        born_host: shard.ctx.store_host,
        store_host: shard.ctx.store_host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    };
    encode(&fields, body.as_bytes(), &props)
}

/// The half offsets an op record's body names (`"12,13,"`); junk between commas is skipped.
pub fn op_offsets(body: &[u8]) -> Vec<u64> {
    std::str::from_utf8(body)
        .unwrap_or("")
        .split(',')
        .filter_map(|s| s.trim().parse::<u64>().ok())
        .collect()
}

/// A copy of a half message for the end of the half queue, with `props` in place of its own
/// (a check increments TRANSACTION_CHECK_TIMES; an immunity copy records the original offset).
pub fn half_copy(
    half: &DecodedRecord<'_>,
    props: &[(String, String)],
) -> Result<AppendRecord, BrokerError> {
    let fields = Fields::of(half, TRANS_HALF_TOPIC, HALF_QUEUE_ID, half.sys_flag, 0);
    encode(&fields, half.body, props)
}

/// A half message given up after `transactionCheckMax` checks, for TRANS_CHECK_MAX_TIME_TOPIC.
pub fn discarded_record(half: &DecodedRecord<'_>) -> Result<AppendRecord, BrokerError> {
    let fields = Fields::of(half, TRANS_CHECK_MAX_TIME_TOPIC, 0, half.sys_flag, 0);
    encode_str(&fields, half.body, half.properties)
}

/// Where a put-back copy landed.
pub struct CopyAt {
    pub phy: u64,
    pub queue_offset: u64,
    pub store_timestamp: i64,
}

/// The body of CHECK_TRANSACTION_STATE: the copy of `half` with properties `props` in stored
/// form, on its real topic and queue; its offsets are filled in by `check_request` once the copy
/// is stored.
pub fn check_body(
    half: &DecodedRecord<'_>,
    props: &[(String, String)],
) -> Result<BytesMut, BrokerError> {
    let real_topic = value(props, keys::REAL_TOPIC).unwrap_or(TRANS_HALF_TOPIC);
    let real_qid = value(props, keys::REAL_QID)
        .and_then(|q| q.parse::<i32>().ok())
        .unwrap_or(0);
    let props_str = properties::encode(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let msg = MessageToStore {
        topic: real_topic,
        queue_id: real_qid,
        flag: half.flag,
        sys_flag: half.sys_flag,
        born_timestamp: half.born_timestamp,
        born_host: half.born_host,
        store_host: half.store_host,
        reconsume_times: half.reconsume_times,
        prepared_transaction_offset: 0,
        body: half.body,
        properties: &props_str,
    };
    let mut body = BytesMut::new();
    message::encode(&msg, &mut body).map_err(|e| BrokerError::System(e.to_string()))?;
    Ok(body)
}

/// CHECK_TRANSACTION_STATE (oneway) for the copy stored at `at`, transaction `uniq`.
pub fn check_request(
    shard: &Shard,
    mut body: BytesMut,
    real_topic: &str,
    uniq: &str,
    at: &CopyAt,
) -> RemotingCommand {
    message::patch(
        &mut body,
        at.queue_offset as i64,
        at.phy as i64,
        at.store_timestamp,
    );
    let mut cmd = RemotingCommand::new_request(request_code::CHECK_TRANSACTION_STATE);
    CheckTransactionStateRequestHeader {
        topic: Some(real_topic.to_owned()),
        tran_state_table_offset: at.queue_offset as i64,
        commit_log_offset: at.phy as i64,
        msg_id: Some(uniq.to_owned()),
        transaction_id: Some(uniq.to_owned()),
        offset_msg_id: Some(offset_msg_id(shard.ctx.store_host, at.phy as i64)),
        broker_name: Some(shard.ctx.cfg.broker_name.clone()),
    }
    .write_to(&mut cmd);
    cmd.set_oneway();
    cmd.with_body(body.freeze())
}

/// The record fields besides body and properties.
struct Fields<'a> {
    topic: &'a str,
    queue_id: u32,
    flag: i32,
    sys_flag: i32,
    born_timestamp: i64,
    born_host: SocketAddr,
    store_host: SocketAddr,
    reconsume_times: i32,
    prepared_transaction_offset: i64,
}

impl<'a> Fields<'a> {
    /// A stored record's fields, moved to `topic`/`queue_id` with `sys_flag`.
    fn of(
        r: &DecodedRecord<'_>,
        topic: &'a str,
        queue_id: u32,
        sys_flag: i32,
        prepared_transaction_offset: i64,
    ) -> Self {
        Fields {
            topic,
            queue_id,
            flag: r.flag,
            sys_flag,
            born_timestamp: r.born_timestamp,
            born_host: r.born_host,
            store_host: r.store_host,
            reconsume_times: r.reconsume_times,
            prepared_transaction_offset,
        }
    }
}

fn encode(
    f: &Fields<'_>,
    body: &[u8],
    props: &[(String, String)],
) -> Result<AppendRecord, BrokerError> {
    let props_str = properties::encode(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    encode_str(f, body, &props_str)
}

/// The record with its body inside; its tag hash and index keys from `props`.
fn encode_str(f: &Fields<'_>, body: &[u8], props: &str) -> Result<AppendRecord, BrokerError> {
    let msg = MessageToStore {
        topic: f.topic,
        queue_id: f.queue_id as i32,
        flag: f.flag,
        sys_flag: f.sys_flag,
        born_timestamp: f.born_timestamp,
        born_host: f.born_host,
        store_host: f.store_host,
        reconsume_times: f.reconsume_times,
        prepared_transaction_offset: f.prepared_transaction_offset,
        body,
        properties: props,
    };
    let mut bytes = BytesMut::with_capacity(message::stored_len(
        f.sys_flag | sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6,
        body.len(),
        f.topic.len(),
        props.len(),
    ));
    message::encode(&msg, &mut bytes).map_err(|e| BrokerError::MessageIllegal(e.to_string()))?;
    Ok(AppendRecord::whole(
        Some(f.topic.into()),
        f.queue_id,
        // The tag hash, as `store::tags_code` gives it outside the parking topics: these records
        // go to the transaction topics or to a topic a client sent to, never to the schedule one.
        TagsCode::Known(tags_code(properties::get(props, keys::TAGS))),
        IndexKeys::Owned(indexed_keys(props)),
        true,
        bytes,
    ))
}

/// `flag` with its transaction type replaced.
pub fn with_type(flag: i32, tx_type: i32) -> i32 {
    (flag & !sys_flag::TRANSACTION_ROLLBACK) | tx_type
}

pub fn value<'a>(props: &'a [(String, String)], key: &str) -> Option<&'a str> {
    props
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Sets `key`, replacing every earlier value.
pub fn set(props: &mut Vec<(String, String)>, key: &str, v: String) {
    props.retain(|(k, _)| k != key);
    props.push((key.to_owned(), v));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The op body is Java's comma-terminated list; junk entries are ignored, not fatal.
    #[test]
    fn op_body_round_trip() {
        assert_eq!(op_offsets(b"12,13,"), vec![12, 13]);
        assert_eq!(op_offsets(b"7,x,,9"), vec![7, 9]);
        assert!(op_offsets(b"\xff\xfe").is_empty());
    }

    /// Only the transaction bits change.
    #[test]
    fn transaction_type_replaced() {
        let f = sys_flag::TRANSACTION_PREPARED | sys_flag::BORNHOST_V6 | 0x1;
        let c = with_type(f, sys_flag::TRANSACTION_COMMIT);
        assert_eq!(sys_flag::transaction_type(c), sys_flag::TRANSACTION_COMMIT);
        assert_eq!(
            c & !sys_flag::TRANSACTION_ROLLBACK,
            f & !sys_flag::TRANSACTION_ROLLBACK
        );
    }
}
