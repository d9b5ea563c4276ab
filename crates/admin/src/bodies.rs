//! The typed bodies of admin replies: those RocketMQ's Java admin tools read, with fastjson's
//! field names, plus the body types `protocol::body` already has, re-exported so a caller needs
//! only this module.
//!
//! The maps fastjson keys by `MessageQueue` (TopicStatsTable, ConsumeStats, ResetOffsetBody)
//! are lists of entries here, each carrying its queue, in queue order: that is valid JSON for
//! `--json` output and for a console, where the wire form is not. Java's broker Properties
//! text (GET_BROKER_CONFIG) is read into an ordered map.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::object_map;
pub use crate::protocol::body::{
    BrokerData, ClusterInfo, Connection, ConsumerConnection, KvTable, MessageQueue, OffsetWrapper,
    ProducerConnection, QueueData, SubscriptionData, SubscriptionGroupConfig, TopicConfig,
    TopicList, TopicOffset, TopicRouteData,
};

/// One queue of a topic's status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicQueueStats {
    pub message_queue: MessageQueue,
    #[serde(flatten)]
    pub offset: TopicOffset,
}

/// GET_TOPIC_STATS_INFO's reply (Java's `TopicStatsTable`), merged over brokers by
/// [`super::AdminClient::topic_status`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicStatsTable {
    pub offset_table: Vec<TopicQueueStats>,
}

impl TopicStatsTable {
    /// Reads the wire form (`offsetTable` keyed by MessageQueue objects).
    pub fn from_wire(body: &[u8]) -> Result<Self, String> {
        let v = object_map::parse(body)?;
        let entries = object_map::queue_entries::<TopicOffset>(v.get("offsetTable"))?;
        Ok(TopicStatsTable {
            offset_table: entries
                .into_iter()
                .map(|(message_queue, offset)| TopicQueueStats {
                    message_queue,
                    offset,
                })
                .collect(),
        })
    }
}

/// One queue of a group's progress.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueProgress {
    pub message_queue: MessageQueue,
    #[serde(flatten)]
    pub offset: OffsetWrapper,
}

impl QueueProgress {
    /// Messages not yet consumed (Java's diff: broker offset minus consumer offset).
    pub fn diff(&self) -> i64 {
        (self.offset.broker_offset - self.offset.consumer_offset).max(0)
    }
}

/// GET_CONSUME_STATS's reply (Java's `ConsumeStats`), merged over brokers by
/// [`super::AdminClient::consume_stats`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConsumeStats {
    pub consume_tps: f64,
    pub offset_table: Vec<QueueProgress>,
}

impl ConsumeStats {
    /// Reads the wire form (`offsetTable` keyed by MessageQueue objects).
    pub fn from_wire(body: &[u8]) -> Result<Self, String> {
        let v = object_map::parse(body)?;
        let entries = object_map::queue_entries::<OffsetWrapper>(v.get("offsetTable"))?;
        Ok(ConsumeStats {
            consume_tps: v.get("consumeTps").and_then(|t| t.as_f64()).unwrap_or(0.0),
            offset_table: entries
                .into_iter()
                .map(|(message_queue, offset)| QueueProgress {
                    message_queue,
                    offset,
                })
                .collect(),
        })
    }

    /// The total of every queue's diff.
    pub fn diff_total(&self) -> i64 {
        self.offset_table.iter().map(QueueProgress::diff).sum()
    }
}

/// One queue's new offset after a reset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueOffset {
    pub message_queue: MessageQueue,
    pub offset: i64,
}

/// INVOKE_BROKER_TO_RESET_OFFSET's reply (Java's `ResetOffsetBody`), merged over brokers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResetOffsetBody {
    pub offset_table: Vec<QueueOffset>,
}

impl ResetOffsetBody {
    /// Reads the wire form (`offsetTable` keyed by MessageQueue objects); an empty body is an
    /// empty table.
    pub fn from_wire(body: &[u8]) -> Result<Self, String> {
        if body.is_empty() {
            return Ok(ResetOffsetBody::default());
        }
        let v = object_map::parse(body)?;
        let entries = object_map::queue_entries::<i64>(v.get("offsetTable"))?;
        Ok(ResetOffsetBody {
            offset_table: entries
                .into_iter()
                .map(|(message_queue, offset)| QueueOffset {
                    message_queue,
                    offset,
                })
                .collect(),
        })
    }
}

/// QUERY_TOPIC_CONSUME_BY_WHO's reply (Java's `GroupList`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GroupList {
    pub group_list: BTreeSet<String>,
}

/// Java's Properties text (`key=value` lines; `#` comments and blank lines skipped) as an
/// ordered map. Java's escapes are not undone: the broker's values carry none.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            let (k, v) = l.split_once('=').or_else(|| l.split_once(':'))?;
            Some((k.trim().to_owned(), v.trim().to_owned()))
        })
        .collect()
}

/// `key=value` lines, as UPDATE_BROKER_CONFIG's body carries them.
pub fn properties_text(props: &BTreeMap<String, String>) -> String {
    let mut s = String::new();
    for (k, v) in props {
        s.push_str(k);
        s.push('=');
        s.push_str(v);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TopicStatsTable as the broker writes it reads back, queue by queue.
    #[test]
    fn topic_stats_from_wire() {
        let body = br#"{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":5,"maxOffset":9,"minOffset":2},{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":4,"minOffset":0}},"topicPutTps":0.0}"#;
        let t = TopicStatsTable::from_wire(body).unwrap();
        assert_eq!(t.offset_table.len(), 2);
        assert_eq!(t.offset_table[0].message_queue.queue_id, 0);
        assert_eq!(t.offset_table[0].offset.max_offset, 4);
        assert_eq!(t.offset_table[1].offset.min_offset, 2);
        assert_eq!(t.offset_table[1].offset.last_update_timestamp, 5);
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["offsetTable"][1]["maxOffset"], 9);
        assert_eq!(json["offsetTable"][1]["messageQueue"]["topic"], "T");
    }

    /// ConsumeStats keeps its TPS and per-queue offsets; the diff never goes negative.
    #[test]
    fn consume_stats_from_wire() {
        let body = br#"{"consumeTps":2.5,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":7,"pullOffset":6},{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerOffset":1,"consumerOffset":3,"lastTimestamp":0,"pullOffset":3}}}"#;
        let c = ConsumeStats::from_wire(body).unwrap();
        assert_eq!(c.consume_tps, 2.5);
        assert_eq!(c.offset_table[0].offset.pull_offset, 6);
        assert_eq!(c.offset_table[0].diff(), 6);
        assert_eq!(c.offset_table[1].diff(), 0);
        assert_eq!(c.diff_total(), 6);
    }

    /// ResetOffsetBody maps queues to plain offsets; an empty body is an empty table, a bad
    /// one an error.
    #[test]
    fn reset_offset_from_wire() {
        let body = br#"{"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:42}}"#;
        let r = ResetOffsetBody::from_wire(body).unwrap();
        assert_eq!(r.offset_table.len(), 1);
        assert_eq!(r.offset_table[0].message_queue.queue_id, 3);
        assert_eq!(r.offset_table[0].offset, 42);
        assert!(ResetOffsetBody::from_wire(b"")
            .unwrap()
            .offset_table
            .is_empty());
        assert!(ResetOffsetBody::from_wire(br#"{"offsetTable":{{"queueId":}:1}}"#).is_err());
    }

    /// Properties text: comments and blank lines skipped, values trimmed, `=` inside a value
    /// kept; the writer's output reads back the same.
    #[test]
    fn properties_round_trip() {
        let p = parse_properties("#c\n\nbrokerName=b\n namesrvAddr = a:1;b:2 \nx=y=z\n");
        assert_eq!(p.len(), 3);
        assert_eq!(p["brokerName"], "b");
        assert_eq!(p["namesrvAddr"], "a:1;b:2");
        assert_eq!(p["x"], "y=z");
        assert_eq!(parse_properties(&properties_text(&p)), p);
    }
}
