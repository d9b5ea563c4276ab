//! Admin statistics over queues: GET_CONSUME_STATS (mqadmin `consumerProgress`) and
//! GET_TOPIC_STATS_INFO (mqadmin `topicStatus`).
//!
//! Each queue's bounds and consumer offsets live on its owner shard; a handler asks each owner
//! with one `Mesh::call` per queue (through `offsets::on_owner`), reading the topic list from the
//! shard's published topic snapshot. The bodies are Java's `ConsumeStats` and `TopicStatsTable`
//! as fastjson writes them: a `Map<MessageQueue, _>` has JSON objects as keys
//! (`{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}`), which is not JSON, so those maps are
//! written by [`object_keyed_map`] rather than serde; the admin tools of both Java and
//! rocketmq-rust read that form.

use std::collections::BTreeSet;
use std::rc::Rc;

use serde::Serialize;

use crate::error::BrokerError;
use crate::offsets::{on_owner, query_local, store_timestamp};
pub use crate::protocol::body::{MessageQueue, OffsetWrapper, TopicOffset};
use crate::protocol::headers::{GetConsumeStatsRequestHeader, GetTopicStatsInfoRequestHeader};
use crate::protocol::RemotingCommand;
use crate::shard::Shard;

/// `{key:value,...}` with each key a JSON object, as fastjson writes a map keyed by a bean.
pub fn object_keyed_map<V: Serialize>(entries: &[(MessageQueue, V)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Serializing these plain structs cannot fail; an empty object keeps the body valid.
        out.push_str(&serde_json::to_string(k).unwrap_or_else(|_| "{}".into()));
        out.push(':');
        out.push_str(&serde_json::to_string(v).unwrap_or_else(|_| "{}".into()));
    }
    out.push('}');
    out
}

/// Java's `ConsumeStats` body.
pub fn consume_stats_json(consume_tps: f64, table: &[(MessageQueue, OffsetWrapper)]) -> Vec<u8> {
    let tps = serde_json::to_string(&consume_tps).unwrap_or_else(|_| "0.0".into());
    format!(
        "{{\"consumeTps\":{tps},\"offsetTable\":{}}}",
        object_keyed_map(table)
    )
    .into_bytes()
}

/// Java's `TopicStatsTable` body, with its `topicPutTps` (messages stored per second over the
/// minute window, Java's `tpsTopicPutNums`).
pub fn topic_stats_json(put_tps: f64, table: &[(MessageQueue, TopicOffset)]) -> Vec<u8> {
    let tps = serde_json::to_string(&put_tps).unwrap_or_else(|_| "0.0".into());
    format!(
        "{{\"offsetTable\":{},\"topicPutTps\":{tps}}}",
        object_keyed_map(table)
    )
    .into_bytes()
}

pub(crate) fn queue_nums(shard: &Shard, topic: &str) -> Option<(u32, u32)> {
    let topics = shard.topics();
    let cfg = topics.get(topic)?;
    let read = u32::try_from(cfg.read_queue_nums).unwrap_or(0);
    let write = u32::try_from(cfg.write_queue_nums).unwrap_or(0);
    Some((read, write))
}

/// Store time of the message at `offset` of the queue, if it is still there.
fn time_at(s: &Shard, topic: &str, qid: u32, offset: u64) -> Option<i64> {
    let u = s.unit_at(topic, qid, offset)?;
    store_timestamp(s, u.phy_offset, u.size)
}

/// Topics `group` has committed offsets for, over every shard's table.
pub(crate) async fn topics_of_group(
    shard: &Rc<Shard>,
    group: &str,
) -> Result<BTreeSet<String>, BrokerError> {
    let suffix = format!("@{group}");
    let mut topics = BTreeSet::new();
    for i in 0..shard.mesh.len() {
        let sfx = suffix.clone();
        let pick = move |s: &Shard| -> Vec<String> {
            s.offsets()
                .keys()
                .filter_map(|k| k.strip_suffix(sfx.as_str()).map(str::to_owned))
                .collect()
        };
        let found = if i == shard.id {
            pick(shard)
        } else {
            shard.mesh.call(i, move |s| async move { pick(&s) }).await?
        };
        topics.extend(found);
    }
    Ok(topics)
}

/// GET_CONSUME_STATS: per queue of the group's topics, the queue's max offset, the group's
/// committed and pull offsets and the store time of the last consumed message.
pub async fn consume_stats(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetConsumeStatsRequestHeader::from_command(cmd)?;
    let topics = match h.topic.as_deref().filter(|t| !t.is_empty()) {
        Some(t) => BTreeSet::from([t.to_owned()]),
        None => topics_of_group(&shard, &h.consumer_group).await?,
    };
    // As Java does: while the group is online, only the topics it subscribes to count.
    let subscribed: Option<BTreeSet<String>> = shard
        .subscriptions()
        .get(&h.consumer_group)
        .filter(|s| !s.is_empty())
        .map(|s| s.keys().cloned().collect());
    let mut table = Vec::new();
    let mut counted = Vec::new();
    for topic in topics {
        if subscribed.as_ref().is_some_and(|s| !s.contains(&topic)) {
            continue;
        }
        let Some((read, _)) = queue_nums(&shard, &topic) else {
            continue;
        };
        counted.push(topic.clone());
        table.extend(group_queue_stats(&shard, &topic, &h.consumer_group, read).await?);
    }
    let tps = crate::broker_stats::group_get_tps(&shard, &h.consumer_group, counted).await?;
    Ok(RemotingCommand::response_for(cmd, 0, None).with_body(consume_stats_json(tps, &table)))
}

/// One group's progress on queues 0..`queues` of `topic`, each read on its owner shard: the
/// queue's max offset, the committed offset (0 when none) and the store time of the last
/// consumed message.
pub(crate) async fn group_queue_stats(
    shard: &Rc<Shard>,
    topic: &str,
    group: &str,
    queues: u32,
) -> Result<Vec<(MessageQueue, OffsetWrapper)>, BrokerError> {
    let broker_name = shard.ctx.cfg.broker_name.clone();
    let mut table = Vec::new();
    for qid in 0..queues {
        let (t, g) = (topic.to_owned(), group.to_owned());
        let w = on_owner(shard, topic, qid, move |s| {
            let max = s.queue_bounds(&t, qid).1;
            let consumed = query_local(s, &t, &g, qid).unwrap_or(0).max(0);
            let last = match u64::try_from(consumed) {
                Ok(c) if c > 0 => time_at(s, &t, qid, c - 1).unwrap_or(0),
                _ => 0,
            };
            // Java: the larger of the committed offset and the last pull's next offset.
            let pulled = crate::metrics::pulled::get(&t, &g, qid)
                .and_then(|p| i64::try_from(p).ok())
                .unwrap_or(0);
            OffsetWrapper {
                broker_offset: i64::try_from(max).unwrap_or(i64::MAX),
                consumer_offset: consumed,
                last_timestamp: last,
                pull_offset: consumed.max(pulled),
            }
        })
        .await?;
        let mq = MessageQueue {
            broker_name: broker_name.clone(),
            queue_id: qid as i32,
            topic: topic.to_owned(),
        };
        table.push((mq, w));
    }
    Ok(table)
}

/// GET_TOPIC_STATS_INFO: per write queue, min and max offsets and the last message's store time;
/// and the topic's put rate.
pub async fn topic_stats(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetTopicStatsInfoRequestHeader::from_command(cmd)?;
    let Some((_, write)) = queue_nums(&shard, &h.topic) else {
        return Err(BrokerError::TopicNotExist(h.topic));
    };
    let broker_name = shard.ctx.cfg.broker_name.clone();
    let mut table = Vec::new();
    for qid in 0..write {
        let t = h.topic.clone();
        let o = on_owner(&shard, &h.topic, qid, move |s| {
            let (min, max) = s.queue_bounds(&t, qid);
            let last = if max > 0 {
                time_at(s, &t, qid, max - 1).unwrap_or(0)
            } else {
                0
            };
            TopicOffset {
                last_update_timestamp: last,
                max_offset: i64::try_from(max).unwrap_or(i64::MAX),
                min_offset: i64::try_from(min).unwrap_or(i64::MAX),
            }
        })
        .await?;
        let mq = MessageQueue {
            broker_name: broker_name.clone(),
            queue_id: qid as i32,
            topic: h.topic.clone(),
        };
        table.push((mq, o));
    }
    let tps = crate::broker_stats::topic_put_tps(&shard, &h.topic).await?;
    Ok(RemotingCommand::response_for(cmd, 0, None).with_body(topic_stats_json(tps, &table)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(q: i32) -> MessageQueue {
        MessageQueue {
            broker_name: "broker-a".into(),
            queue_id: q,
            topic: "T".into(),
        }
    }

    /// ConsumeStats is written as fastjson writes it: MessageQueue objects as map keys.
    #[test]
    fn consume_stats_keys_are_message_queue_objects() {
        let w = OffsetWrapper {
            broker_offset: 5,
            consumer_offset: 3,
            last_timestamp: 7,
            pull_offset: 3,
        };
        let body = consume_stats_json(0.0, &[(mq(0), w.clone()), (mq(1), w)]);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "{\"consumeTps\":0.0,\"offsetTable\":{\
             {\"brokerName\":\"broker-a\",\"queueId\":0,\"topic\":\"T\"}:\
             {\"brokerOffset\":5,\"consumerOffset\":3,\"lastTimestamp\":7,\"pullOffset\":3},\
             {\"brokerName\":\"broker-a\",\"queueId\":1,\"topic\":\"T\"}:\
             {\"brokerOffset\":5,\"consumerOffset\":3,\"lastTimestamp\":7,\"pullOffset\":3}}}"
        );
    }

    /// TopicStatsTable uses the same object keys; an empty table is `{}`; a topic name is escaped.
    #[test]
    fn topic_stats_keys_are_message_queue_objects() {
        let o = TopicOffset {
            last_update_timestamp: 9,
            max_offset: 4,
            min_offset: 1,
        };
        let mut q = mq(2);
        q.topic = "a\"b".into();
        assert_eq!(
            String::from_utf8(topic_stats_json(2.5, &[(q, o)])).unwrap(),
            "{\"offsetTable\":{{\"brokerName\":\"broker-a\",\"queueId\":2,\"topic\":\"a\\\"b\"}:\
             {\"lastUpdateTimestamp\":9,\"maxOffset\":4,\"minOffset\":1}},\"topicPutTps\":2.5}"
        );
        assert_eq!(
            topic_stats_json(0.0, &[]),
            b"{\"offsetTable\":{},\"topicPutTps\":0.0}"
        );
    }
}
