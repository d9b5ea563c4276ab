//! RocketMQ's system topics and the rules clients' requests are checked against (Java's
//! `TopicValidator`): which names are the broker's own, and which no client may send to.
//! Pure functions over names; every handler that must refuse a system topic, or check a
//! topic name, asks here.

use crate::broker::error::BrokerError;
pub use crate::store::tags_code::{SCHEDULE_TOPIC, TIMER_TOPIC};

/// The template auto-created topics copy (Java's `AUTO_CREATE_TOPIC_KEY_TOPIC`).
pub const TBW102: &str = "TBW102";
/// A consumer group's retry topic is this prefix and the group.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// A consumer group's dead-letter topic is this prefix and the group.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// Java's `MixAll.REPLY_TOPIC_POSTFIX`: the reply topic is `<brokerClusterName>_REPLY_TOPIC`.
pub const REPLY_TOPIC_POSTFIX: &str = "REPLY_TOPIC";

/// Prefix of every topic the broker creates for itself (the timer's wheel topic is one).
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";
/// Half (prepared) transactional messages, always queue 0.
pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Commit/rollback markers of half messages (tag `d`, body = half-queue offsets).
pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Half messages given up on after `transactionCheckMax` checks.
pub const TRANS_CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
pub const BENCHMARK_TOPIC: &str = "BenchmarkTest";
pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
pub const SELF_TEST_TOPIC: &str = "SELF_TEST_TOPIC";
pub const OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
pub const ROCKSDB_OFFSET_TOPIC: &str = "CHECKPOINT_TOPIC";

/// Topics that belong to the broker (Java's `SYSTEM_TOPIC_SET`), besides the `rmq_sys_` prefix.
const SYSTEM_TOPICS: [&str; 10] = [
    TBW102,
    SCHEDULE_TOPIC,
    BENCHMARK_TOPIC,
    TRANS_HALF_TOPIC,
    TRACE_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT,
    ROCKSDB_OFFSET_TOPIC,
];

/// Topics no client may send to (Java's `NOT_ALLOWED_SEND_TOPIC_SET`).
const NOT_ALLOWED_SEND_TOPICS: [&str; 6] = [
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT,
];

/// A topic the broker owns: listed, or named with the `rmq_sys_` prefix.
pub fn is_system_topic(topic: &str) -> bool {
    SYSTEM_TOPICS.contains(&topic) || topic.starts_with(SYSTEM_TOPIC_PREFIX)
}

/// Java's `TopicValidator.getSystemTopicSet()` on a running broker: the listed topics and the
/// timer's wheel topic, which Java's timer store adds when it starts.
pub fn system_topic_set() -> impl Iterator<Item = &'static str> {
    SYSTEM_TOPICS
        .into_iter()
        .chain(std::iter::once(TIMER_TOPIC))
}

/// A topic a client's send must be refused for.
pub fn is_not_allowed_send_topic(topic: &str) -> bool {
    NOT_ALLOWED_SEND_TOPICS.contains(&topic)
}

/// Topics kept out of the name server's routes: the transaction service's own queues are read
/// only by the broker, so no client is ever pointed at them.
pub fn is_hidden_from_routes(topic: &str) -> bool {
    topic == TRANS_HALF_TOPIC || topic == TRANS_OP_HALF_TOPIC
}

/// The topic replies of this cluster are sent to.
pub fn reply_topic(cluster: &str) -> String {
    format!("{cluster}_{REPLY_TOPIC_POSTFIX}")
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The Java sets: system topics by name and prefix; the send ban covers the transaction
    /// and schedule topics but not the auto-create template or a user topic.
    #[test]
    fn java_topic_sets() {
        assert!(is_system_topic(TRANS_HALF_TOPIC));
        assert!(is_system_topic("rmq_sys_wheel_timer"));
        assert!(is_system_topic(TBW102));
        assert!(!is_system_topic("TopicTest"));
        assert!(is_not_allowed_send_topic(SCHEDULE_TOPIC));
        assert!(is_not_allowed_send_topic(TRANS_OP_HALF_TOPIC));
        assert!(!is_not_allowed_send_topic(TBW102));
        assert!(!is_not_allowed_send_topic("TopicTest"));
    }

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

    /// Java's `MixAll.getReplyTopic`: the cluster name, an underscore, REPLY_TOPIC.
    #[test]
    fn reply_topic_name() {
        assert_eq!(reply_topic("DefaultCluster"), "DefaultCluster_REPLY_TOPIC");
    }
}
