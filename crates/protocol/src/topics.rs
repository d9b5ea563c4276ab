//! RocketMQ's reserved topic names (Java's `TopicValidator` and `MixAll`): the broker's system
//! topics, those no client may send to, the retry, dead-letter and reply names. Pure functions
//! over names, shared by the broker (which refuses and creates them), the store (whose delay and
//! timer topics are among them) and the tools (which mark them).

/// The delay-level topic: parked messages wait here until their level's delay passes.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// The timer's wheel topic (Java's `TimerMessageStore.TIMER_TOPIC`).
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";

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

/// A POP consumer group's retry topic for `topic` (Java's `KeyBuilder.buildPopRetryTopic`):
/// `%RETRY%{group}_{topic}`, or with `v2` (`enableRetryTopicV2`) `%RETRY%{group}+{topic}`.
pub fn pop_retry_topic(group: &str, topic: &str, v2: bool) -> String {
    let sep = if v2 { '+' } else { '_' };
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}{sep}{topic}")
}

/// A retry topic in POP's v2 form: the retry prefix and a `+` (Java's `isPopRetryTopicV2`).
pub fn is_pop_retry_topic_v2(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) && topic.contains('+')
}

/// The topic a POP retry topic of `group` retries (Java's `KeyBuilder.parseNormalTopic`): the
/// v2 prefix `%RETRY%{group}+` stripped if present, else the v1 prefix `%RETRY%{group}_`; any
/// other topic is returned as it is.
pub fn pop_normal_topic<'a>(topic: &'a str, group: &str) -> &'a str {
    let Some(rest) = topic
        .strip_prefix(RETRY_GROUP_TOPIC_PREFIX)
        .and_then(|r| r.strip_prefix(group))
    else {
        return topic;
    };
    rest.strip_prefix('+')
        .or_else(|| rest.strip_prefix('_'))
        .unwrap_or(topic)
}

/// The topic replies of this cluster are sent to.
pub fn reply_topic(cluster: &str) -> String {
    format!("{cluster}_{REPLY_TOPIC_POSTFIX}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's POP retry names, both forms, and the way back to the normal topic.
    #[test]
    fn pop_retry_topics() {
        assert_eq!(pop_retry_topic("G", "T", false), "%RETRY%G_T");
        assert_eq!(pop_retry_topic("G", "T", true), "%RETRY%G+T");
        assert!(is_pop_retry_topic_v2("%RETRY%G+T"));
        assert!(!is_pop_retry_topic_v2("%RETRY%G_T"));
        assert!(!is_pop_retry_topic_v2("A+B"));
        assert_eq!(pop_normal_topic("%RETRY%G+T", "G"), "T");
        assert_eq!(pop_normal_topic("%RETRY%G_T_x", "G"), "T_x");
        assert_eq!(pop_normal_topic("T", "G"), "T");
        assert_eq!(pop_normal_topic("%RETRY%G", "G"), "%RETRY%G");
        assert_eq!(pop_normal_topic("%RETRY%H_T", "G"), "%RETRY%H_T");
    }
}
