//! Admin requests on the store: QUERY_CONSUME_QUEUE (321), CLEAN_EXPIRED_CONSUMEQUEUE (306),
//! CLEAN_UNUSED_TOPIC (316) and DELETE_EXPIRED_COMMITLOG (329), as Java's
//! `AdminBrokerProcessor` answers them.
//!
//! Each queue is read or trimmed on its owner shard. 306 trims every owned queue against the
//! commit log's minimum offset now, instead of at the next move of that minimum
//! (`broker::clean`). 316 deletes, as DELETE_TOPIC_IN_BROKER does (`topic_delete`), the queues
//! of topics that no longer have a config, the broker's own topics excepted. 329 asks the
//! writer to run its next retention passes as if it were a `deleteWhen` hour; the answer does
//! not wait for them, as on Java.

use std::collections::BTreeSet;
use std::rc::Rc;

use serde::Serialize;

use crate::clean::trim_queue;
use crate::error::BrokerError;
use crate::metadata::topic_validator::is_system_topic;
use crate::offsets::on_owner;
use crate::protocol::body::{self, SubscriptionData};
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::QueryConsumeQueueRequestHeader;
use crate::protocol::RemotingCommand;
use crate::shard::{QueueKey, Shard};

/// At most this many units per QUERY_CONSUME_QUEUE answer (mqadmin `queryCq` asks for 10).
pub const MAX_QUERY_CQ_UNITS: i32 = 1000;

/// Java's `ConsumeQueueData` for a unit without extension data (nulls left out, as fastjson).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConsumeQueueData {
    eval: bool,
    physic_offset: u64,
    physic_size: u32,
    tags_code: i64,
}

/// Java's `QueryConsumeQueueResponseBody`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QueryConsumeQueueResponseBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    filter_data: Option<String>,
    max_queue_index: u64,
    min_queue_index: u64,
    queue_data: Vec<ConsumeQueueData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subscription_data: Option<SubscriptionData>,
}

/// QUERY_CONSUME_QUEUE: up to `count` units of one queue from `index`, with the queue's bounds
/// and, when a group is named, its subscription. SYSTEM_ERROR "<q>@<topic> is not exist!" for
/// a queue the broker does not have (a queue of a configured topic that never had a message is
/// empty, not missing); an index outside the queue is SUCCESS without a body and Java's remark.
pub async fn query_consume_queue(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = QueryConsumeQueueRequestHeader::from_command(cmd)?;
    let not_exist = || format!("{}@{} is not exist!", h.queue_id, h.topic);
    let Ok(qid) = u32::try_from(h.queue_id) else {
        return Ok(RemotingCommand::response_for(
            cmd,
            rc::SYSTEM_ERROR,
            Some(not_exist()),
        ));
    };
    let count = h.count.clamp(0, MAX_QUERY_CQ_UNITS) as u64;
    let (t, index) = (h.topic.clone(), h.index);
    let found = on_owner(&shard, &h.topic, qid, move |s| {
        let queues = s.read_queues();
        let q = queues.get(&QueueKey(&t, qid))?;
        let (min, max) = (q.cq.min_offset(), q.cq.max_offset());
        let units = u64::try_from(index)
            .ok()
            .filter(|i| *i >= min && *i < max)
            .map(|from| {
                (from..max.min(from.saturating_add(count)))
                    .filter_map(|o| q.cq.get(o))
                    .map(|u| ConsumeQueueData {
                        eval: false,
                        physic_offset: u.phy_offset,
                        physic_size: u.size,
                        tags_code: u.tags_code,
                    })
                    .collect::<Vec<_>>()
            });
        Some((min, max, units))
    })
    .await?;
    // A queue of a configured topic that never had a message is there, empty.
    let configured = || {
        shard
            .topics()
            .get(&h.topic)
            .is_some_and(|t| h.queue_id < t.read_queue_nums.max(t.write_queue_nums))
    };
    let Some((min, max, units)) = found.or_else(|| configured().then_some((0, 0, None))) else {
        return Ok(RemotingCommand::response_for(
            cmd,
            rc::SYSTEM_ERROR,
            Some(not_exist()),
        ));
    };
    let Some(queue_data) = units else {
        let remark = format!(
            "Index {} of {}@{} is not exist!",
            h.index, h.queue_id, h.topic
        );
        return Ok(RemotingCommand::response_for(
            cmd,
            rc::SUCCESS,
            Some(remark),
        ));
    };
    let (subscription_data, filter_data) = match &h.consumer_group {
        None => (None, None),
        Some(g) => match shard.subscriptions().get(g).and_then(|s| s.get(&h.topic)) {
            // Java prints the group's SQL92 filter data here; ringmq keeps none apart from the
            // subscription, which is `null` in Java's form too for a tag subscription.
            Some(sub) => (Some(sub.clone()), Some("null".to_string())),
            None => (None, Some(format!("{g}@{} is not online!", h.topic))),
        },
    };
    let body = QueryConsumeQueueResponseBody {
        filter_data,
        max_queue_index: max,
        min_queue_index: min,
        queue_data,
        subscription_data,
    };
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body::to_json(&body)))
}

/// CLEAN_EXPIRED_CONSUMEQUEUE: every shard trims its queues against the commit log's minimum
/// offset now.
pub async fn clean_expired_consume_queue(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let min_phy = shard.ctx.writer.min_phy_offset();
    let mut deleted = 0;
    for i in 0..shard.mesh.len() {
        let trim = move |s: &Shard| {
            let keys: Vec<(String, u32)> = s.read_queues().keys().cloned().collect();
            keys.iter()
                .map(|k| trim_queue(s, k, min_phy))
                .sum::<usize>()
        };
        deleted += if i == shard.id {
            trim(&shard)
        } else {
            shard.mesh.call(i, move |s| async move { trim(&s) }).await?
        };
    }
    tracing::info!(min_phy, deleted, "clean expired consume queues: done");
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// CLEAN_UNUSED_TOPIC: the queues of every topic without a config are deleted (files, offsets
/// and queue offsets), except the broker's own topics, whose queues exist without a config.
pub async fn clean_unused_topic(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let mut unused = BTreeSet::new();
    for i in 0..shard.mesh.len() {
        let pick = |s: &Shard| -> Vec<String> {
            let topics = s.topics();
            s.read_queues()
                .keys()
                .map(|k| k.0.clone())
                .filter(|t| !topics.contains_key(t))
                .collect()
        };
        let found = if i == shard.id {
            pick(&shard)
        } else {
            shard.mesh.call(i, move |s| async move { pick(&s) }).await?
        };
        unused.extend(found);
    }
    unused.retain(|t| !is_system_topic(t));
    for topic in &unused {
        crate::topic_delete::delete_one(&shard, topic.clone()).await?;
    }
    tracing::info!(topics = unused.len(), "clean unused topics: done");
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// DELETE_EXPIRED_COMMITLOG: expired commit-log segments go at the writer's next retention
/// passes, whatever the hour.
pub fn delete_expired_commit_log(shard: &Shard, cmd: &RemotingCommand) -> RemotingCommand {
    shard.ctx.writer.delete_expired_files_now();
    tracing::warn!("delete expired commit log: asked of the writer's next retention passes");
    RemotingCommand::response_for(cmd, rc::SUCCESS, None)
}
