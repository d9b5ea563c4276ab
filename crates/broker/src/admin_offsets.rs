//! Admin changes and listings of committed offsets: INVOKE_BROKER_TO_RESET_OFFSET (222),
//! CLONE_GROUP_OFFSET (314) and GET_BROKER_CONSUME_STATS (317).
//!
//! A reset is done on the broker, as Java's `Broker2Client.resetOffset` computes it and its
//! server-side `resetOffsetInner` applies it: per queue the offset of the timestamp (the max
//! offset for -1), kept only when it moves the group back unless `isForce`; the new offsets are
//! committed on each queue's owner shard (persisted with the next gathering of offsets, within
//! 5 s), then RESET_CONSUMER_CLIENT_OFFSET (220) goes oneway to every online consumer of the
//! group with the table, and the admin gets the same table (`ResetOffsetBody`). With no consumer
//! online nothing changes and the answer is Java's CONSUMER_NOT_ONLINE, on which the admin
//! tools fall back to committing each queue themselves.

use std::rc::Rc;

use crate::admin_stats::{
    consume_stats_json, group_queue_stats, object_keyed_map, queue_nums, topics_of_group,
};
use crate::broker2client;
use crate::error::BrokerError;
use crate::offsets::{commit_local, offset_by_time, on_owner, query_local};
use crate::protocol::body::MessageQueue;
use crate::protocol::codes::{request_code, response_code as rc};
use crate::protocol::headers::{
    CloneGroupOffsetRequestHeader, GetConsumeStatsInBrokerHeader, ResetOffsetRequestHeader,
};
use crate::protocol::RemotingCommand;
use crate::remoting::{encode_frame, Outbound};
use crate::shard::Shard;

/// Java's `ResetOffsetBody`: `{"offsetTable":{{MessageQueue}:offset,...}}`.
pub fn reset_offset_body(table: &[(MessageQueue, i64)]) -> Vec<u8> {
    format!("{{\"offsetTable\":{}}}", object_keyed_map(table)).into_bytes()
}

/// What one queue's reset computes on its owner.
enum QueueReset {
    /// (committed offset, if any; the offset the timestamp or the request names)
    Target(Option<i64>, i64),
    /// An explicit offset outside the queue (Java's remark).
    OutOfRange(String),
}

/// The new offset of one queue (Java's `Broker2Client.resetOffset` rule).
fn chosen(committed: Option<i64>, target: i64, force: bool) -> i64 {
    match committed {
        Some(c) if !force && target >= c => c,
        _ => target,
    }
}

pub async fn reset_offset(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = ResetOffsetRequestHeader::from_command(cmd)?;
    let Some((_, write)) = queue_nums(&shard, &h.topic) else {
        return Ok(RemotingCommand::response_for(
            cmd,
            rc::TOPIC_NOT_EXIST,
            Some(format!(
                "[reset-offset] reset offset failed, no topic in this broker. topic={}",
                h.topic
            )),
        ));
    };
    let queues: Vec<u32> = match u32::try_from(h.queue_id) {
        Ok(q) if q < write => vec![q],
        Ok(q) => {
            return Err(BrokerError::InvalidParameter(format!(
                "queueId {q} is not a queue of topic {} ({write} write queues)",
                h.topic
            )))
        }
        Err(_) => (0..write).collect(),
    };
    let explicit = h.offset.filter(|o| *o != -1 && h.queue_id >= 0);
    let mut planned = Vec::with_capacity(queues.len());
    for qid in queues {
        let (t, g, ts) = (h.topic.clone(), h.group.clone(), h.timestamp);
        let r = on_owner(&shard, &h.topic, qid, move |s| {
            let committed = query_local(s, &t, &g, qid);
            let (min, max) = s.queue_bounds(&t, qid);
            let (min, max) = (min as i64, max as i64);
            let target = match explicit {
                Some(o) if o < min || o > max => {
                    return QueueReset::OutOfRange(format!(
                        "Target offset {o} not in consume queue range [{min}-{max}]"
                    ))
                }
                Some(o) => o,
                None if ts == -1 => max,
                None => offset_by_time(s, &t, qid, ts, false) as i64,
            };
            QueueReset::Target(committed, target.max(0))
        })
        .await?;
        match r {
            QueueReset::OutOfRange(remark) => {
                return Ok(RemotingCommand::response_for(
                    cmd,
                    rc::SYSTEM_ERROR,
                    Some(remark),
                ))
            }
            QueueReset::Target(committed, target) => planned.push((qid, committed, target)),
        }
    }
    if planned.iter().all(|(_, committed, _)| committed.is_none()) {
        return Ok(RemotingCommand::response_for(
            cmd,
            rc::SYSTEM_ERROR,
            Some(format!("THe consumer group <{}> not exist", h.group)),
        ));
    }
    let group = h.group.clone();
    let consumers: Vec<u64> = shard
        .mesh
        .call(0, move |s0| async move {
            let m = s0.meta();
            m.consumers
                .get(&group)
                .map(|info| info.clients.values().map(|c| c.conn_id).collect())
                .unwrap_or_default()
        })
        .await?;
    if consumers.is_empty() {
        return Err(BrokerError::ConsumerNotOnlineToReset {
            group: h.group,
            topic: h.topic,
            timestamp: h.timestamp,
        });
    }
    let broker_name = shard.ctx.cfg.broker_name.clone();
    let mut table = Vec::with_capacity(planned.len());
    for (qid, committed, target) in planned {
        let offset = chosen(committed, target, h.is_force);
        let (t, g) = (h.topic.clone(), h.group.clone());
        on_owner(&shard, &h.topic, qid, move |s| {
            commit_local(s, &t, &g, qid, offset);
            // The group's next pull notes where it really reads from.
            crate::metrics::pulled::forget_queue(&t, &g, qid);
        })
        .await?;
        let mq = MessageQueue {
            broker_name: broker_name.clone(),
            queue_id: qid as i32,
            topic: h.topic.clone(),
        };
        table.push((mq, offset));
    }
    tracing::info!(topic = %h.topic, group = %h.group, timestamp = h.timestamp,
        force = h.is_force, consumers = consumers.len(), "consumer offsets reset");
    let body = reset_offset_body(&table);
    let mut push = RemotingCommand::new_request(request_code::RESET_CONSUMER_CLIENT_OFFSET);
    ResetOffsetRequestHeader {
        group: h.group.clone(),
        topic: h.topic.clone(),
        queue_id: -1,
        offset: None,
        timestamp: h.timestamp,
        is_force: false,
    }
    .write_to(&mut push);
    push.set_oneway();
    if let Some(Outbound::Frame(frame)) = encode_frame(&push.with_body(body.clone())) {
        for conn_id in consumers {
            broker2client::send_oneway(&shard, conn_id, frame.clone());
        }
    }
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body))
}

/// CLONE_GROUP_OFFSET: the source group's committed offsets copied to the destination group,
/// on the topic named or every topic the source has offsets for. Unless `offline`, a topic an
/// online source group does not subscribe to is skipped, as on Java.
pub async fn clone_group_offset(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = CloneGroupOffsetRequestHeader::from_command(cmd)?;
    let topics = match h.topic.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => std::collections::BTreeSet::from([t.to_owned()]),
        None => topics_of_group(&shard, &h.src_group).await?,
    };
    let subscribed = shard.subscriptions().get(&h.src_group).cloned();
    for topic in topics {
        if queue_nums(&shard, &topic).is_none() {
            tracing::warn!(%topic, "clone group offset: no such topic");
            continue;
        }
        if !h.offline
            && subscribed
                .as_ref()
                .is_some_and(|s| !s.is_empty() && !s.contains_key(&topic))
        {
            continue;
        }
        let src = format!("{topic}@{}", h.src_group);
        let dst = format!("{topic}@{}", h.dest_group);
        for i in 0..shard.mesh.len() {
            let (src, dst) = (src.clone(), dst.clone());
            let copy = move |s: &Shard| {
                let mut t = s.offsets_mut();
                if let Some(q) = t.get(&src).cloned() {
                    t.insert(dst, q);
                }
            };
            if i == shard.id {
                copy(&shard);
            } else {
                shard.mesh.call(i, move |s| async move { copy(&s) }).await?;
            }
        }
    }
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// GET_BROKER_CONSUME_STATS: every subscription group's progress on every topic it has offsets
/// for (Java's `ConsumeStatsList`), with the broker's total lag.
pub async fn broker_consume_stats(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetConsumeStatsInBrokerHeader::from_command(cmd)?;
    let groups: Vec<String> = shard
        .mesh
        .call(
            0,
            |s0| async move { s0.meta().groups.keys().cloned().collect() },
        )
        .await?;
    let mut total_diff: i64 = 0;
    let mut entries = Vec::with_capacity(groups.len());
    for group in groups {
        let subscribed = shard.subscriptions().get(&group).cloned();
        let mut stats = Vec::new();
        for topic in topics_of_group(&shard, &group).await? {
            let Some(order) = shard.topics().get(&topic).map(|t| t.order) else {
                continue;
            };
            if h.is_order && !order {
                continue;
            }
            if subscribed
                .as_ref()
                .is_some_and(|s| !s.is_empty() && !s.contains_key(&topic))
            {
                continue;
            }
            let Some((_, write)) = queue_nums(&shard, &topic) else {
                continue;
            };
            let table = group_queue_stats(&shard, &topic, &group, write).await?;
            total_diff += table
                .iter()
                .map(|(_, w)| w.broker_offset.saturating_sub(w.consumer_offset))
                .sum::<i64>();
            stats.push(String::from_utf8_lossy(&consume_stats_json(0.0, &table)).into_owned());
        }
        let name = serde_json::to_string(&group).unwrap_or_else(|_| "\"\"".into());
        entries.push(format!("{{{name}:[{}]}}", stats.join(",")));
    }
    let addr = serde_json::to_string(&shard.ctx.store_host.to_string()).unwrap_or_default();
    let body = format!(
        "{{\"brokerAddr\":{addr},\"consumeStatsList\":[{}],\"totalDiff\":{total_diff},\"totalInflightDiff\":0}}",
        entries.join(",")
    );
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body.into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reset moves a group back to the timestamp's offset, forward only with `isForce`; a
    /// queue the group never committed takes the timestamp's offset.
    #[test]
    fn reset_keeps_the_smaller_offset_unless_forced() {
        assert_eq!(chosen(Some(10), 4, false), 4);
        assert_eq!(chosen(Some(10), 14, false), 10);
        assert_eq!(chosen(Some(10), 14, true), 14);
        assert_eq!(chosen(None, 7, false), 7);
    }

    /// ResetOffsetBody keys its table by MessageQueue objects, as fastjson writes it.
    #[test]
    fn reset_offset_body_shape() {
        let mq = MessageQueue {
            broker_name: "b".into(),
            queue_id: 1,
            topic: "T".into(),
        };
        assert_eq!(
            String::from_utf8(reset_offset_body(&[(mq, 3)])).unwrap(),
            "{\"offsetTable\":{{\"brokerName\":\"b\",\"queueId\":1,\"topic\":\"T\"}:3}}"
        );
    }
}
