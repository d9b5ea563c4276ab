//! POP consumption (RocketMQ 5's broker-side consume model): POP_MESSAGE and PEEK_MESSAGE
//! (`pop_message`), ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME (`ack`),
//! NOTIFICATION and POLLING_INFO (`notify`), the redelivery of what was not acked in time
//! (`revive`), and the durability of it all (`persist`).
//!
//! The state lives on the shard owning each queue (`state::PopTables`, one per shard): the pop
//! offset and the messages in flight of every (group, popped topic, queue), indexed by the time
//! each becomes visible again; no thread or timer per message. Each change is first made there,
//! then written as a small JSON record into the system topic [`POP_STATE_TOPIC`] through the
//! writer, like any message, so it replicates to slaves; a request is answered once its record
//! is stored. `persist` snapshots the tables into `config/popState.json` with the state
//! queue's offset it covers, and at start-up (and on promotion to master) loads the snapshot
//! and replays the records after it.

pub mod ack;
pub mod notify;
pub mod persist;
pub mod pop_message;
pub mod queue;
pub mod revive;
pub mod state;

use std::rc::Rc;
use std::time::Duration;

use crate::append::{append, build_record, Outgoing};
use crate::common::now_ms;
use crate::error::BrokerError;
use crate::metadata::PERM_READ;
use crate::protocol::body::TopicConfig;
use crate::protocol::topics;
use crate::shard::Shard;
use state::StateRecord;

/// The system topic POP's state records are written to (queue 0): ringmq's own, where Java
/// writes checkpoints and acks into `rmq_sys_REVIVE_LOG_{cluster}`.
pub const POP_STATE_TOPIC: &str = "rmq_sys_POP_STATE";
/// The state topic's one queue.
pub const POP_STATE_QUEUE: u32 = 0;
/// Java's `reviveQueueNum`: non-orderly pops name a revive queue in `0..8` in their handles.
pub const REVIVE_QUEUE_NUM: u64 = 8;

/// Writes state records (one commit-log record each) and waits until they are stored.
pub async fn write_state(shard: &Rc<Shard>, records: &[StateRecord]) -> Result<(), BrokerError> {
    if records.is_empty() {
        return Ok(());
    }
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        out.push(state_append_record(shard, r)?);
    }
    append(shard, out, true).await.map(|_| ())
}

/// One state record as a stored message of the state topic.
fn state_append_record(
    shard: &Shard,
    r: &StateRecord,
) -> Result<crate::writer::AppendRecord, BrokerError> {
    let body = serde_json::to_vec(r).map_err(|e| BrokerError::System(e.to_string()))?;
    build_record(
        shard,
        Outgoing {
            topic: POP_STATE_TOPIC,
            queue_id: POP_STATE_QUEUE as i32,
            flag: 0,
            sys_flag: 0,
            born_timestamp: now_ms(),
            born_host: shard.ctx.store_host,
            reconsume_times: 0,
            body: &body,
            props: Vec::new(),
        },
    )
}

/// The retry topic a group's redeliveries of `topic` go to, in the configured form.
pub fn retry_topic_of(shard: &Shard, group: &str, topic: &str) -> String {
    topics::pop_retry_topic(group, topic, shard.ctx.cfg.pop.retry_topic_v2)
}

/// The retry topics a pop of `topic` reads: the configured form first, then the other.
pub fn retry_topics_read(shard: &Shard, group: &str, topic: &str) -> [String; 2] {
    let v2 = shard.ctx.cfg.pop.retry_topic_v2;
    [
        topics::pop_retry_topic(group, topic, v2),
        topics::pop_retry_topic(group, topic, !v2),
    ]
}

/// Java refuses pops on a slave.
pub(crate) fn refuse_on_slave(shard: &Shard) -> Result<(), BrokerError> {
    if shard.ctx.role.is_slave() {
        return Err(BrokerError::NoPermission(
            "the broker is a slave: pops are served by its master".into(),
        ));
    }
    Ok(())
}

/// The group must exist (or be created, under autoCreateSubscriptionGroup) and may consume.
pub(crate) async fn check_group(shard: &Rc<Shard>, group: &str) -> Result<(), BrokerError> {
    let auto = shard.settings().auto_create_subscription_group;
    let g = group.to_string();
    let cfg = shard
        .mesh
        .call(0, move |s0| async move {
            s0.meta_mut().group_or_create(&g, auto)
        })
        .await?;
    match cfg {
        None => Err(BrokerError::SubscriptionGroupNotExist(format!(
            "subscription group [{group}] does not exist"
        ))),
        Some(c) if !c.consume_enable => Err(BrokerError::NoPermission(format!(
            "subscription group no permission, {group}"
        ))),
        Some(_) => Ok(()),
    }
}

/// Parks on every queue (on their owners) until one of them is woken or `wait` passes; false
/// when a queue had no room for another parked request.
pub(crate) async fn park_on_queues(
    shard: &Rc<Shard>,
    queues: &[(String, u32)],
    wait: Duration,
) -> bool {
    let local = crate::long_poll::Waiter::new();
    let full = Rc::new(std::cell::Cell::new(false));
    for (topic, qid) in queues {
        let (owner, topic, qid) = (shard.owner(topic, *qid), topic.clone(), *qid);
        let (local, full, shard2) = (local.clone(), full.clone(), shard.clone());
        crate::runtime::spawn(async move {
            let parked = shard2
                .mesh
                .call(owner, move |s| queue::park(s, topic, qid, wait))
                .await
                .unwrap_or(false);
            if !parked {
                full.set(true);
            }
            local.notify();
        });
    }
    let _ = crate::runtime::timeout(wait, local.notified()).await;
    !full.get()
}

/// The checks every pop-side request makes first, in Java's order (the topic, its read
/// permission, the queue id, the group), and the queues it names: `queue_id`'s, or every
/// readable queue for a negative one.
pub(crate) async fn readable(
    shard: &Rc<Shard>,
    group: &str,
    topic: &str,
    queue_id: i32,
) -> Result<(TopicConfig, Vec<u32>), BrokerError> {
    let tc = shard.topics().get(topic).cloned().ok_or_else(|| {
        BrokerError::TopicNotExist(format!("topic[{topic}] not exist, apply first please!"))
    })?;
    if tc.perm & PERM_READ == 0 {
        return Err(BrokerError::NoPermission(format!(
            "the topic[{topic}] peeking message is forbidden"
        )));
    }
    if queue_id >= tc.read_queue_nums {
        return Err(BrokerError::InvalidParameter(format!(
            "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[{group}]",
            tc.read_queue_nums
        )));
    }
    check_group(shard, group).await?;
    let queues = match u32::try_from(queue_id) {
        Ok(q) => vec![q],
        Err(_) => (0..tc.read_queue_nums.max(0) as u32).collect(),
    };
    Ok((tc, queues))
}
