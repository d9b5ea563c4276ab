//! The broker's topic-name check (Java's `TopicValidator.validateTopic`) over the reserved names
//! of `protocol::topics`, re-exported here for the handlers that refuse system topics.

use crate::error::BrokerError;
pub use crate::protocol::topics::*;

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
