//! Redelivery: on every shard, a loop takes the messages whose invisible time passed from the
//! deadline index and stores each again in the group's POP retry topic (queue 0, created with
//! one queue when missing, as Java's `PopReviveService` does), with its reconsume times plus one
//! and `1ST_POP_TIME` set, followed by the record that they left the flight. Orderly queues whose
//! block ended have their parked pops woken. The dead-letter decision is the consumer's (the
//! client, or the gRPC layer), never made here. Runs on a master only.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use crate::append::{append, build_record, Outgoing};
use crate::common::now_ms;
use crate::error::BrokerError;
use crate::protocol::message;
use crate::protocol::pop::PROPERTY_FIRST_POP_TIME;
use crate::protocol::properties::{self, keys};
use crate::protocol::topics;
use crate::runtime;
use crate::shard::Shard;
use crate::topic_manager::ensure_topic;
use crate::writer::AppendRecord;

use super::state::{Due, PopKey, StateRecord};

/// The longest the loop sleeps: a deadline is met within this.
const TICK: Duration = Duration::from_millis(50);
/// Messages redelivered per turn, so a burst cannot monopolise the shard.
const MAX_PER_TURN: usize = 256;
/// A failed redelivery is tried again this much later.
const RETRY_BACKOFF_MS: i64 = 1_000;

/// Starts the loop on this shard.
pub fn start(shard: &Rc<Shard>) {
    runtime::spawn(run(shard.clone()));
}

async fn run(shard: Rc<Shard>) {
    while !shard.is_stopping() {
        if shard.pop_ready() && !shard.is_paused() {
            turn(&shard).await;
        }
        let wait = match shard.pop().next_deadline() {
            Some(at) => {
                Duration::from_millis((at - now_ms()).clamp(1, TICK.as_millis() as i64) as u64)
            }
            None => TICK,
        };
        runtime::sleep(wait).await;
    }
}

/// One turn: what is due now is redelivered (or, for orderly queues, woken).
async fn turn(shard: &Rc<Shard>) {
    let (due, unblocked) = shard.pop_mut().take_due(now_ms(), MAX_PER_TURN);
    for key in unblocked {
        shard.wake_parked(&key.topic, key.queue_id);
    }
    if due.is_empty() {
        return;
    }
    let mut by_key: BTreeMap<Rc<PopKey>, Vec<Due>> = BTreeMap::new();
    for d in due {
        by_key.entry(d.key.clone()).or_default().push(d);
    }
    for (key, items) in by_key {
        let _change = shard.pop_change().await;
        let result = revive_queue(shard, &key, &items).await;
        let mut tables = shard.pop_mut();
        match result {
            Ok(()) => {
                for d in &items {
                    tables.revived(&key, d.offset, d.inflight.pop_time);
                }
                // Pops parked on the topic before its retry topic existed do not wait on
                // the retry topic: wake them to read it now.
                drop(tables);
                if !key.topic.starts_with(topics::RETRY_GROUP_TOPIC_PREFIX) {
                    shard.wake_parked(&key.topic, key.queue_id);
                }
            }
            Err(e) => {
                tracing::warn!(group = %key.group, topic = %key.topic, queue = key.queue_id, error = %e,
                    "redelivery to the retry topic failed; will retry");
                let later = now_ms() + RETRY_BACKOFF_MS;
                for d in &items {
                    tables.retry_later(&key, d.offset, d.inflight.pop_time, later);
                }
            }
        }
    }
}

/// Stores one queue's due messages in the retry topic, then the record that they are done.
async fn revive_queue(shard: &Rc<Shard>, key: &PopKey, items: &[Due]) -> Result<(), BrokerError> {
    let retry_topic = if key.topic.starts_with(topics::RETRY_GROUP_TOPIC_PREFIX) {
        key.topic.clone()
    } else {
        super::retry_topic_of(shard, &key.group, &key.topic)
    };
    ensure_retry_topic(shard, &retry_topic, &key.group).await?;
    let mut records = Vec::with_capacity(items.len() + 1);
    let mut by_pop: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    for d in items {
        if let Some(r) = retry_record(shard, key, &retry_topic, d)? {
            records.push(r);
        }
        by_pop
            .entry(d.inflight.pop_time)
            .or_default()
            .push(d.offset);
    }
    for (pop_time, offsets) in by_pop {
        let state = StateRecord::Ack {
            key: key.clone(),
            pop_time,
            offsets,
        };
        records.push(super::state_append_record(shard, &state)?);
    }
    append(shard, records, true).await?;
    crate::metrics::record::pop_retried(
        &format!("{}@{}", key.topic, key.group),
        items.len() as u64,
    );
    tracing::debug!(group = %key.group, topic = %key.topic, queue = key.queue_id, n = items.len(), "redelivered to {retry_topic}");
    Ok(())
}

/// The retry topic with one queue, as Java creates it; the group starts reading it at 0.
async fn ensure_retry_topic(
    shard: &Rc<Shard>,
    topic: &str,
    group: &str,
) -> Result<(), BrokerError> {
    if shard.topics().get(topic).is_some() {
        return Ok(());
    }
    ensure_topic(shard, topic, "", 1).await?;
    let (t, g) = (topic.to_string(), group.to_string());
    crate::offsets::on_owner(shard, topic, 0, move |s| {
        if crate::offsets::query_local(s, &t, &g, 0).is_none() {
            crate::offsets::commit_local(s, &t, &g, 0, 0);
        }
    })
    .await
}

/// The message at the due offset as Java's `reviveRetry` stores it again; `None` when retention
/// removed it (nothing to redeliver).
fn retry_record(
    shard: &Shard,
    key: &PopKey,
    retry_topic: &str,
    d: &Due,
) -> Result<Option<AppendRecord>, BrokerError> {
    let Some(unit) = shard.unit_at(&key.topic, key.queue_id, d.offset) else {
        return Ok(None);
    };
    if unit.phy_offset < shard.ctx.writer.min_phy_offset() {
        return Ok(None);
    }
    let mut reader = shard.reader();
    let bytes = reader.read(unit.phy_offset, unit.size)?;
    let r = message::decode(bytes, true)
        .map_err(|e| BrokerError::System(format!("stored record at {}: {e}", unit.phy_offset)))?;
    let mut props = properties::parse(r.properties);
    let has_first = props.iter().any(|(k, _)| k == PROPERTY_FIRST_POP_TIME);
    if r.reconsume_times == 0 || !has_first {
        props.retain(|(k, _)| k != PROPERTY_FIRST_POP_TIME);
        props.push((
            PROPERTY_FIRST_POP_TIME.into(),
            d.inflight.pop_time.to_string(),
        ));
    }
    // A retry is stored at once: its invisible time was its delay.
    props.retain(|(k, _)| k != keys::DELAY);
    let body = r.body.to_vec();
    let record = build_record(
        shard,
        Outgoing {
            topic: retry_topic,
            queue_id: 0,
            flag: r.flag,
            sys_flag: r.sys_flag,
            born_timestamp: r.born_timestamp,
            born_host: shard.ctx.store_host,
            reconsume_times: r.reconsume_times + 1,
            body: &body,
            props,
        },
    )?;
    Ok(Some(record))
}
