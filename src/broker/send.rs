//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), oneway or not.
//!
//! The shard validates, resolves the topic (auto-creating it through shard 0 when allowed),
//! encodes the stored records (the one copy of the body on the send path), hands them to the
//! writer thread without blocking, and answers when the writer replies. A full writer inbox is
//! SYSTEM_BUSY; a failed oneway send is counted and logged, never silent.

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BytesMut;

use crate::broker::clients::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use crate::broker::metadata::{topic_config, PERM_INHERIT, PERM_READ, PERM_WRITE};
use crate::broker::schedule::SCHEDULE_TOPIC;
use crate::broker::{admin, BrokerError, Shard};
use crate::constants::MAX_BATCH_MESSAGES;
use crate::protocol::batch::decode_batch;
use crate::protocol::body::TopicConfig;
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::{SendMessageRequestHeader, SendMessageResponseHeader};
use crate::protocol::java_hash::tags_code;
use crate::protocol::message::{self, MessageToStore};
use crate::protocol::msg_id::offset_msg_id;
use crate::protocol::properties::{self, keys};
use crate::protocol::RemotingCommand;
use crate::remoting::ConnInfo;
use crate::runtime::mailbox;
use crate::writer::{AppendOutcome, AppendRecord, AppendRequest, AppendStatus};

/// Oneway sends the broker could not store (busy, bad input); exported as a metric.
pub static ONEWAY_DROPPED: AtomicU64 = AtomicU64::new(0);
static ONEWAY_LAST_LOG_MS: AtomicU64 = AtomicU64::new(0);

/// Serves a send request; `None` for oneway requests (they get no response).
pub async fn send(
    shard: Rc<Shard>,
    conn: &ConnInfo,
    cmd: &RemotingCommand,
) -> Option<RemotingCommand> {
    let res = send_inner(&shard, conn, cmd).await;
    if cmd.is_oneway() {
        if let Err(e) = res {
            let n = ONEWAY_DROPPED.fetch_add(1, Ordering::Relaxed) + 1;
            let now = crate::broker::now_ms() as u64;
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

/// One message of a send: body, user flag, properties.
type BatchItem = (bytes::Bytes, i32, Vec<(String, String)>);

/// RocketMQ's topic name rule: `[%|a-zA-Z0-9_-]`, at most 127 bytes (255 for retry/DLQ topics).
pub fn validate_topic(topic: &str) -> Result<(), BrokerError> {
    let max = if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
        || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
    {
        255
    } else {
        127
    };
    if topic.is_empty() {
        return Err(BrokerError::InvalidParameter("the topic is empty".into()));
    }
    if topic.len() > max {
        return Err(BrokerError::InvalidParameter(format!(
            "the topic length {} exceeds {max}",
            topic.len()
        )));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-')))
    {
        return Err(BrokerError::InvalidParameter(format!(
            "the topic[{topic}] contains illegal character {c:?}"
        )));
    }
    Ok(())
}

/// Finds the topic, creating it through shard 0 from its template (TBW102) when allowed.
pub async fn ensure_topic(
    shard: &Rc<Shard>,
    topic: &str,
    default_topic: &str,
    default_queue_nums: i32,
) -> Result<TopicConfig, BrokerError> {
    if let Some(tc) = shard.topics.borrow().get(topic) {
        return Ok(tc.clone());
    }
    let wanted = topic.to_string();
    let topic = topic.to_string();
    let default_topic = default_topic.to_string();
    let created = shard
        .mesh
        .call(0, move |s0| async move {
            let (tc, changed) = {
                let mut m = s0.meta().borrow_mut();
                if let Some(tc) = m.topics.get(&topic) {
                    return Some(tc.clone());
                }
                let tc = if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
                    || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
                {
                    topic_config(&topic, 1, PERM_READ | PERM_WRITE)
                } else {
                    let template = m.topics.get(&default_topic)?;
                    if !s0.ctx.cfg.auto_create_topic_enable || template.perm & PERM_INHERIT == 0 {
                        return None;
                    }
                    let q = default_queue_nums.clamp(1, template.write_queue_nums.max(1));
                    topic_config(&topic, q, PERM_READ | PERM_WRITE)
                };
                let changed = m.upsert_topic(tc.clone());
                (tc, changed)
            };
            if changed {
                admin::topics_changed(&s0);
            }
            Some(tc)
        })
        .await?;
    created.ok_or(BrokerError::TopicNotExist(wanted))
}

/// Keys indexed for QUERY_MESSAGE: each space-separated KEYS entry plus UNIQ_KEY.
pub fn index_keys(props: &[(String, String)]) -> Vec<String> {
    let mut keys_out = Vec::new();
    for (k, v) in props {
        if k == keys::KEYS {
            keys_out.extend(v.split(' ').filter(|s| !s.is_empty()).map(String::from));
        } else if k == keys::UNIQ_KEY {
            keys_out.push(v.clone());
        }
    }
    keys_out
}

async fn send_inner(
    shard: &Rc<Shard>,
    conn: &ConnInfo,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = SendMessageRequestHeader::from_command(cmd)?;
    validate_topic(&h.topic)?;
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
    let write_queues = tc.write_queue_nums.max(1);
    let queue_id = if h.queue_id < 0 {
        (shard.next_round_robin() % write_queues as u64) as i32
    } else {
        h.queue_id
    };
    if queue_id >= tc.read_queue_nums.max(tc.write_queue_nums) {
        return Err(BrokerError::InvalidParameter(format!(
            "request queueId[{queue_id}] is illegal, topic {} has {} queues",
            h.topic, write_queues
        )));
    }
    let ctx = &shard.ctx;
    let max_size = ctx.cfg.store.max_message_size;
    let cluster = ctx.cfg.broker_cluster_name.as_str();
    let now = crate::broker::now_ms();

    // Build (body, properties) pairs: one for a single send, one per inner message of a batch.
    let mut items: Vec<BatchItem> = Vec::new();
    if h.batch {
        if h.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return Err(BrokerError::MessageIllegal(
                "batch request does not support retry group".into(),
            ));
        }
        for e in decode_batch(&cmd.body, MAX_BATCH_MESSAGES)? {
            items.push((e.body, e.flag, properties::parse(&e.properties)));
        }
    } else {
        items.push((cmd.body.clone(), h.flag, properties::parse(&h.properties)));
    }
    if items.is_empty() {
        return Err(BrokerError::MessageIllegal("the batch is empty".into()));
    }
    // A retry-topic send past the group's limit goes to the dead-letter queue (PROTOCOL 2.3 step 3).
    let mut topic = h.topic.clone();
    let mut queue_id = queue_id;
    if let Some(group) = h.topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
        let max = match h.max_reconsume_times {
            Some(m) => m,
            None => crate::broker::retry::group_retry_max(shard, group).await?,
        };
        if h.reconsume_times > max {
            topic = format!("{DLQ_GROUP_TOPIC_PREFIX}{group}");
            queue_id = 0;
            ensure_topic(shard, &topic, "", 1).await?;
        }
    }
    let to_dlq = topic != h.topic;
    let mut wait_flush = true;
    let mut records = Vec::with_capacity(items.len());
    let mut uniq_keys = Vec::with_capacity(items.len());
    for (body, flag, mut props) in items {
        if body.len() > max_size {
            return Err(BrokerError::MessageIllegal(format!(
                "the message body size {} exceeds the limit {max_size}",
                body.len()
            )));
        }
        let uniq = match props.iter().find(|(k, _)| k == keys::UNIQ_KEY) {
            Some((_, v)) => v.clone(),
            None => {
                let u = shard.uniq.borrow_mut().next(now);
                props.push((keys::UNIQ_KEY.into(), u.clone()));
                u
            }
        };
        if !props.iter().any(|(k, _)| k == keys::CLUSTER) {
            props.push((keys::CLUSTER.into(), cluster.into()));
        }
        if props.iter().any(|(k, v)| k == keys::WAIT && v == "false") {
            wait_flush = false;
        }
        if to_dlq {
            props.retain(|(k, _)| k != keys::DELAY);
        }
        records.push(build_record(
            shard,
            Outgoing {
                topic: &topic,
                queue_id,
                flag,
                sys_flag: h.sys_flag,
                born_timestamp: h.born_timestamp,
                born_host: conn.peer,
                reconsume_times: h.reconsume_times,
                body: &body,
                props,
            },
        )?);
        uniq_keys.push(uniq);
    }

    let outcome = append(shard, records, wait_flush).await?;
    let code = match outcome.status {
        AppendStatus::PutOk => rc::SUCCESS,
        AppendStatus::FlushDiskTimeout => rc::FLUSH_DISK_TIMEOUT,
    };
    let msg_id = outcome
        .phy_offsets
        .iter()
        .map(|p| offset_msg_id(ctx.store_host, *p as i64))
        .collect::<Vec<_>>()
        .join(",");
    let mut resp = RemotingCommand::response_for(cmd, code, None);
    SendMessageResponseHeader {
        msg_id,
        queue_id,
        queue_offset: outcome.queue_offsets.first().copied().unwrap_or(0) as i64,
        transaction_id: Some(uniq_keys.join(",")),
    }
    .write_to(&mut resp);
    Ok(resp)
}

/// A message about to be stored, before delay rewriting and encoding.
pub struct Outgoing<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: std::net::SocketAddr,
    pub reconsume_times: i32,
    pub body: &'a [u8],
    pub props: Vec<(String, String)>,
}

/// Encodes a stored record. A `DELAY` level > 0 (on a non-transactional message) moves it to
/// the schedule topic: queue level - 1, real topic and queue kept in properties, and the
/// delivery time in the ConsumeQueue tag slot.
pub fn build_record(shard: &Shard, m: Outgoing<'_>) -> Result<AppendRecord, BrokerError> {
    let mut props = m.props;
    let tx_type = message::sys_flag::transaction_type(m.sys_flag);
    let delay = props
        .iter()
        .find(|(k, _)| k == keys::DELAY)
        .and_then(|(_, v)| v.trim().parse::<i32>().ok())
        .filter(|l| *l > 0)
        .filter(|_| tx_type == 0 || tx_type == message::sys_flag::TRANSACTION_COMMIT);
    let now = crate::broker::now_ms();
    let timer_at = if delay.is_none() {
        crate::broker::timer::requested_delivery(&props, now)?.filter(|at| *at > now)
    } else {
        None
    };
    let (topic, queue_id, tags) = if let Some(at) = timer_at {
        props.retain(|(k, _)| {
            k != keys::REAL_TOPIC && k != keys::REAL_QID && k != crate::broker::timer::TIMER_OUT_MS
        });
        props.push((keys::REAL_TOPIC.into(), m.topic.to_string()));
        props.push((keys::REAL_QID.into(), m.queue_id.to_string()));
        props.push((crate::broker::timer::TIMER_OUT_MS.into(), at.to_string()));
        (
            crate::broker::timer::TIMER_TOPIC.to_string(),
            crate::broker::timer::TIMER_QUEUE as i32,
            at,
        )
    } else {
        match delay.and_then(|l| {
            let levels = &shard.ctx.delay_levels;
            levels.delay_ms(l).map(|d| (l.min(levels.max_level()), d))
        }) {
            Some((level, delay_ms)) => {
                props.retain(|(k, _)| k != keys::REAL_TOPIC && k != keys::REAL_QID);
                props.push((keys::REAL_TOPIC.into(), m.topic.to_string()));
                props.push((keys::REAL_QID.into(), m.queue_id.to_string()));
                (
                    SCHEDULE_TOPIC.to_string(),
                    level - 1,
                    crate::broker::now_ms() + delay_ms,
                )
            }
            None => {
                let tag = props
                    .iter()
                    .find(|(k, _)| k == keys::TAGS)
                    .map(|(_, v)| v.as_str());
                (m.topic.to_string(), m.queue_id, tags_code(tag))
            }
        }
    };
    let index = index_keys(&props);
    let props_str = properties::encode(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let msg = MessageToStore {
        topic: &topic,
        queue_id,
        flag: m.flag,
        sys_flag: m.sys_flag,
        born_timestamp: m.born_timestamp,
        born_host: m.born_host,
        store_host: shard.ctx.store_host,
        reconsume_times: m.reconsume_times,
        prepared_transaction_offset: 0,
        body: m.body,
        properties: &props_str,
    };
    let mut bytes = BytesMut::with_capacity(message::stored_len(
        m.sys_flag,
        m.body.len(),
        topic.len(),
        props_str.len(),
    ));
    message::encode(&msg, &mut bytes).map_err(|e| BrokerError::MessageIllegal(e.to_string()))?;
    Ok(AppendRecord {
        topic,
        queue_id: queue_id as u32,
        tags_code: tags,
        keys: index,
        dispatch: tx_type != message::sys_flag::TRANSACTION_PREPARED
            && tx_type != message::sys_flag::TRANSACTION_ROLLBACK,
        bytes,
    })
}

/// Re-appends a record parked in a system topic (schedule or timer) to the topic and queue in
/// its `REAL_TOPIC`/`REAL_QID` properties, dropping those and `strip`. A record without them
/// cannot be routed: it is logged and skipped rather than retried forever.
pub async fn reappend_to_real_topic(
    shard: &Rc<Shard>,
    phy: u64,
    size: u32,
    strip: &[&str],
) -> Result<(), BrokerError> {
    let record = {
        let mut reader = shard.reader.borrow_mut();
        let bytes = reader.read(phy, size)?;
        let r = message::decode(bytes, true)
            .map_err(|e| BrokerError::System(format!("corrupt parked record at {phy}: {e}")))?;
        let mut props = properties::parse(r.properties);
        let mut take = |key: &str| {
            let i = props.iter().position(|(k, _)| k == key)?;
            Some(props.remove(i).1)
        };
        let topic = take(keys::REAL_TOPIC);
        let qid = take(keys::REAL_QID).and_then(|q| q.parse::<u32>().ok());
        for k in strip {
            take(k);
        }
        let (Some(topic), Some(qid)) = (topic, qid) else {
            tracing::error!(phy, "parked message without REAL_TOPIC/REAL_QID; skipped");
            return Ok(());
        };
        let tag = props
            .iter()
            .find(|(k, _)| k == keys::TAGS)
            .map(|(_, v)| v.clone());
        let props_str = properties::encode(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let msg = MessageToStore {
            topic: &topic,
            queue_id: qid as i32,
            flag: r.flag,
            sys_flag: r.sys_flag,
            born_timestamp: r.born_timestamp,
            born_host: r.born_host,
            store_host: r.store_host,
            reconsume_times: r.reconsume_times,
            prepared_transaction_offset: r.prepared_transaction_offset,
            body: r.body,
            properties: &props_str,
        };
        let mut bytes = BytesMut::with_capacity(r.total_size as usize);
        message::encode(&msg, &mut bytes)
            .map_err(|e| BrokerError::MessageIllegal(e.to_string()))?;
        AppendRecord {
            keys: index_keys(&props),
            topic,
            queue_id: qid,
            tags_code: tags_code(tag.as_deref()),
            dispatch: true,
            bytes,
        }
    };
    append(shard, vec![record], true).await.map(|_| ())
}

/// Hands records to the writer (never blocking) and waits for its reply.
pub async fn append(
    shard: &Rc<Shard>,
    records: Vec<AppendRecord>,
    wait_flush: bool,
) -> Result<AppendOutcome, BrokerError> {
    let (tx, rx) = mailbox::<Result<AppendOutcome, crate::store::StoreError>>(1);
    let req = AppendRequest {
        records,
        wait_flush,
        reply: Box::new(move |r| {
            let _ = tx.try_send(r);
        }),
    };
    if shard.ctx.writer.try_append(req).is_err() {
        return Err(BrokerError::Busy);
    }
    match rx.recv().await {
        Some(r) => Ok(r?),
        None => Err(BrokerError::ServiceNotAvailable(
            "the store writer stopped".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RocketMQ's topic rule: legal characters and lengths accepted, others rejected clearly.
    #[test]
    fn topic_validation() {
        assert!(validate_topic("Topic_Test-1").is_ok());
        assert!(validate_topic("%RETRY%group").is_ok());
        assert!(validate_topic("").is_err());
        assert!(validate_topic("bad topic").is_err());
        assert!(validate_topic(&"a".repeat(128)).is_err());
        assert!(validate_topic(&format!("%RETRY%{}", "a".repeat(200))).is_ok());
    }

    /// KEYS split on spaces and UNIQ_KEY are the indexed keys.
    #[test]
    fn index_keys_from_properties() {
        let props = vec![
            (keys::KEYS.to_string(), "k1 k2".to_string()),
            (keys::UNIQ_KEY.to_string(), "U".to_string()),
            (keys::TAGS.to_string(), "T".to_string()),
        ];
        assert_eq!(index_keys(&props), vec!["k1", "k2", "U"]);
    }
}
