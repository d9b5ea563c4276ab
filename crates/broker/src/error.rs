//! The broker layer's error type and its ONE mapping to RocketMQ response codes.

use crate::protocol::codes::response_code as rc;
use crate::protocol::ProtocolError;
use crate::runtime::MeshBusy;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("bad request: {0}")]
    Protocol(#[from] ProtocolError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("topic[{0}] not exist, apply first please!")]
    TopicNotExist(String),
    #[error("{0}")]
    InvalidParameter(String),
    #[error("{0}")]
    NoPermission(String),
    #[error("[REJECTREQUEST]system busy, start flow control for a while")]
    Busy,
    #[error("{0}")]
    MessageIllegal(String),
    #[error("subscription group [{0}] does not exist")]
    SubscriptionGroupNotExist(String),
    #[error("the consumer's subscription not exist, group: {0}")]
    SubscriptionNotExist(String),
    #[error("the consumer's subscription not latest, group: {0}")]
    SubscriptionNotLatest(String),
    #[error("parse the consumer's subscription failed: {0}")]
    SubscriptionParseFailed(String),
    #[error("{0}")]
    QueryNotFound(String),
    #[error("{0}")]
    ServiceNotAvailable(String),
    /// A request only a master serves reached a slave.
    #[error("{0}")]
    SlaveNotAvailable(String),
    /// A client the broker relayed a request to did not answer in time.
    #[error("{0}")]
    ConsumeMsgTimeout(String),
    #[error("{0}")]
    System(String),
    #[error("{0}")]
    IllegalOperation(String),
    /// POP: the offset asked for is outside the queue, or there is nothing to pop.
    #[error("{0}")]
    NoMessage(String),
    /// POP: too many pops parked on the queue or the broker.
    #[error("{0}")]
    PollingFull(String),
    /// POP: the request came too late, or its poll time ended with nothing to pop.
    #[error("{0}")]
    PollingTimeout(String),
    /// No client of this consumer group is registered (Java's remark, the group inside).
    #[error("the consumer group[{0}] not online")]
    ConsumerNotOnline(String),
    /// INVOKE_BROKER_TO_RESET_OFFSET with no consumer of the group online (Java's remark).
    #[error(
        "Consumer not online, so can not reset offset, Group: {group} Topic: {topic} Timestamp: {timestamp}"
    )]
    ConsumerNotOnlineToReset {
        group: String,
        topic: String,
        timestamp: i64,
    },
}

impl From<MeshBusy> for BrokerError {
    fn from(_: MeshBusy) -> Self {
        BrokerError::Busy
    }
}

impl BrokerError {
    /// The response code a RocketMQ client expects for this error.
    pub fn response_code(&self) -> i32 {
        match self {
            BrokerError::Protocol(_) => rc::INVALID_PARAMETER,
            BrokerError::Store(e) => match e {
                StoreError::DiskFull(_) | StoreError::NotWritable(_) => rc::SERVICE_NOT_AVAILABLE,
                StoreError::Busy => rc::SYSTEM_BUSY,
                StoreError::MessageTooLarge { .. } | StoreError::PropertiesTooLong(_) => {
                    rc::MESSAGE_ILLEGAL
                }
                StoreError::Invalid(_) => rc::INVALID_PARAMETER,
                _ => rc::SYSTEM_ERROR,
            },
            BrokerError::TopicNotExist(_) => rc::TOPIC_NOT_EXIST,
            BrokerError::InvalidParameter(_) => rc::INVALID_PARAMETER,
            BrokerError::NoPermission(_) => rc::NO_PERMISSION,
            BrokerError::Busy => rc::SYSTEM_BUSY,
            BrokerError::MessageIllegal(_) => rc::MESSAGE_ILLEGAL,
            BrokerError::SubscriptionGroupNotExist(_) => rc::SUBSCRIPTION_GROUP_NOT_EXIST,
            BrokerError::SubscriptionNotExist(_) => rc::SUBSCRIPTION_NOT_EXIST,
            BrokerError::SubscriptionNotLatest(_) => rc::SUBSCRIPTION_NOT_LATEST,
            BrokerError::SubscriptionParseFailed(_) => rc::SUBSCRIPTION_PARSE_FAILED,
            BrokerError::QueryNotFound(_) => rc::QUERY_NOT_FOUND,
            BrokerError::ServiceNotAvailable(_) => rc::SERVICE_NOT_AVAILABLE,
            BrokerError::SlaveNotAvailable(_) => rc::SLAVE_NOT_AVAILABLE,
            BrokerError::ConsumeMsgTimeout(_) => rc::CONSUME_MSG_TIMEOUT,
            BrokerError::System(_) => rc::SYSTEM_ERROR,
            BrokerError::IllegalOperation(_) => rc::ILLEGAL_OPERATION,
            BrokerError::NoMessage(_) => rc::NO_MESSAGE,
            BrokerError::PollingFull(_) => rc::POLLING_FULL,
            BrokerError::PollingTimeout(_) => rc::POLLING_TIMEOUT,
            BrokerError::ConsumerNotOnline(_) | BrokerError::ConsumerNotOnlineToReset { .. } => {
                rc::CONSUMER_NOT_ONLINE
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Disk full must reach the client as SERVICE_NOT_AVAILABLE (retriable elsewhere), a full
    /// writer inbox as SYSTEM_BUSY with RocketMQ's [REJECTREQUEST] remark.
    #[test]
    fn mapping_matches_rocketmq() {
        let e = BrokerError::Store(StoreError::DiskFull("98% used".into()));
        assert_eq!(e.response_code(), 14);
        assert_eq!(BrokerError::Busy.response_code(), 2);
        assert!(BrokerError::Busy.to_string().starts_with("[REJECTREQUEST]"));
        assert_eq!(BrokerError::TopicNotExist("T".into()).response_code(), 17);
        let e = BrokerError::Store(StoreError::MessageTooLarge { size: 9, max: 1 });
        assert_eq!(e.response_code(), 13);
        // A relayed request the consumer did not answer: Java's CONSUME_MSG_TIMEOUT.
        assert_eq!(
            BrokerError::ConsumeMsgTimeout("t".into()).response_code(),
            207
        );
        let e = BrokerError::ConsumerNotOnline("G".into());
        assert_eq!(e.response_code(), 206);
        assert_eq!(e.to_string(), "the consumer group[G] not online");
    }
}
