//! RocketMQ's system topics and the rules clients' requests are checked against (Java's
//! `TopicValidator`): which names are the broker's own, and which no client may send to.
//! Pure functions over names; every handler that must refuse a system topic asks here.

use crate::broker::metadata::TBW102;
use crate::broker::schedule::SCHEDULE_TOPIC;

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

/// A topic a client's send must be refused for.
pub fn is_not_allowed_send_topic(topic: &str) -> bool {
    NOT_ALLOWED_SEND_TOPICS.contains(&topic)
}

/// Topics kept out of the name server's routes: the transaction service's own queues are read
/// only by the broker, so no client is ever pointed at them.
pub fn is_hidden_from_routes(topic: &str) -> bool {
    topic == TRANS_HALF_TOPIC || topic == TRANS_OP_HALF_TOPIC
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
}
