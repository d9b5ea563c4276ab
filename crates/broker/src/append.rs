//! How the broker stores a message: records built from what a client or a service wants
//! stored ([`build_record`]: delay levels and timers parked in their system topics), handed to
//! the writer thread without blocking ([`append`]), and parked records re-appended to their real
//! topic when due ([`reappend_to_real_topic`]). Every path that stores a message (sends, retries,
//! replies, transactions, delay and timer deliveries) ends here.

use std::rc::Rc;

use bytes::BytesMut;

use crate::common::now_ms;
use crate::error::BrokerError;
use crate::ha;
use crate::metadata::topic_validator::{SCHEDULE_TOPIC, TIMER_TOPIC};
use crate::protocol::message::{self, MessageToStore};
use crate::protocol::properties::{self, keys};
use crate::shard::Shard;
use crate::store::tags_code;
use crate::timer::state::{requested_delivery, TIMER_QUEUE};
use crate::writer::{AppendOutcome, AppendRecord, AppendRequest, AppendStatus, IndexKeys, ReplyTo};

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
/// delivery time in the ConsumeQueue tag slot (store timestamp + the level's delay, computed
/// from the stored record by `tags_code::of_record` exactly as recovery recomputes it).
pub fn build_record(shard: &Shard, m: Outgoing<'_>) -> Result<AppendRecord, BrokerError> {
    let mut props = m.props;
    let delay = props
        .iter()
        .find(|(k, _)| k == keys::DELAY)
        .and_then(|(_, v)| tags_code::delay_level(v))
        .filter(|_| message::sys_flag::is_dispatched(m.sys_flag));
    let now = now_ms();
    let timer_at = if delay.is_none() {
        requested_delivery(&props, now)?.filter(|at| *at > now)
    } else {
        None
    };
    let (topic, queue_id) = if let Some(at) = timer_at {
        props.retain(|(k, _)| {
            k != keys::REAL_TOPIC && k != keys::REAL_QID && k != keys::TIMER_OUT_MS
        });
        props.push((keys::REAL_TOPIC.into(), m.topic.to_string()));
        props.push((keys::REAL_QID.into(), m.queue_id.to_string()));
        props.push((keys::TIMER_OUT_MS.into(), at.to_string()));
        (TIMER_TOPIC.to_string(), TIMER_QUEUE as i32)
    } else {
        let levels = &shard.ctx.delay_levels;
        match delay {
            Some(level) => {
                props.retain(|(k, _)| k != keys::REAL_TOPIC && k != keys::REAL_QID);
                props.push((keys::REAL_TOPIC.into(), m.topic.to_string()));
                props.push((keys::REAL_QID.into(), m.queue_id.to_string()));
                (
                    SCHEDULE_TOPIC.to_string(),
                    level.min(levels.max_level()) - 1,
                )
            }
            None => (m.topic.to_string(), m.queue_id),
        }
    };
    let index = IndexKeys::Owned(index_keys(&props));
    let props_str = properties::encode(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    // From the stored properties, as recovery recomputes it: the delay-level or timer delivery
    // time for the records parked above, the tag hash for the others.
    let tags = tags_code::of_record(&topic, &props_str, &shard.ctx.delay_levels);
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
    Ok(AppendRecord::whole(
        Some(topic.into()),
        queue_id as u32,
        tags,
        index,
        message::sys_flag::is_dispatched(m.sys_flag),
        bytes,
    ))
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
        let mut reader = shard.reader();
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
        let msg = r.to_store(&topic, qid as i32, &props_str);
        let mut bytes = BytesMut::with_capacity(r.total_size as usize);
        message::encode(&msg, &mut bytes)
            .map_err(|e| BrokerError::MessageIllegal(e.to_string()))?;
        let tags = tags_code::of_record_tagged(
            &topic,
            &props_str,
            tag.as_deref(),
            &shard.ctx.delay_levels,
        );
        AppendRecord::whole(
            Some(topic.into()),
            qid,
            tags,
            IndexKeys::Owned(index_keys(&props)),
            true,
            bytes,
        )
    };
    append(shard, vec![record], true).await.map(|_| ())
}

/// Hands records to the writer (never blocking) and waits for its reply. The writer is woken
/// once per burst of appends on this shard (`Shard::wake_writer_soon`), not once per request.
/// On a SYNC_MASTER that waits for slaves, a waited-for append (`wait_flush`, a message's
/// WAIT property) is answered once enough slaves hold it, or with FlushSlaveTimeout (stored
/// all the same).
pub async fn append(
    shard: &Rc<Shard>,
    records: Vec<AppendRecord>,
    wait_flush: bool,
) -> Result<AppendOutcome, BrokerError> {
    if shard.ctx.role.is_slave() {
        return Err(BrokerError::ServiceNotAvailable(
            "service not available now: the broker is a SLAVE, messages are put to its master"
                .into(),
        ));
    }
    let cm = &shard.ctx.cfg.controller_mode;
    if cm.enabled {
        // Java's rule for a master in controller mode (answered SYSTEM_ERROR, as Java does).
        let members = shard.ctx.role.sync_state_set().0.count_ones() as usize;
        if members < cm.min_in_sync_replicas {
            return Err(BrokerError::System(format!(
                "in-sync replicas not enough: the SyncStateSet has {members}, \
                 minInSyncReplicas is {}",
                cm.min_in_sync_replicas
            )));
        }
    }
    let last_len = records.last().map_or(0, |r| r.stored_len() as u64);
    let mut outcome = submit(shard, records, wait_flush).await?;
    if wait_flush && ha::sends_wait_for_slaves(shard) {
        if let Some(&phy) = outcome.phy_offsets.last() {
            if !ha::wait_for_slaves(shard, phy + last_len).await {
                outcome.status = AppendStatus::FlushSlaveTimeout;
            }
        }
    }
    Ok(outcome)
}

/// A slave's copies of its master's records (`AppendRecord::replicated`), the one write a
/// slave makes.
pub async fn append_replicated(
    shard: &Rc<Shard>,
    records: Vec<AppendRecord>,
) -> Result<AppendOutcome, BrokerError> {
    submit(shard, records, true).await
}

async fn submit(
    shard: &Rc<Shard>,
    records: Vec<AppendRecord>,
    wait_flush: bool,
) -> Result<AppendOutcome, BrokerError> {
    let completions = shard.completions();
    let token = completions.open();
    let req = AppendRequest {
        records,
        wait_flush,
        reply: ReplyTo::Shard {
            shard: shard.id as u16,
            token,
        },
    };
    if shard.ctx.writer.try_append_unwoken(req).is_err() {
        completions.cancel(token);
        return Err(BrokerError::Busy);
    }
    shard.wake_writer_soon();
    Ok(completions.wait(token).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

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
