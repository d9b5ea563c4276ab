//! Broker request/response headers other than send/pull: offsets, client management, retry,
//! transactions, query, topic administration.

use super::{ext_header, HeaderField};
use crate::{ProtocolError, RemotingCommand};

ext_header! {
    pub struct QueryConsumerOffsetRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub set_zero_if_not_found: Option<bool> => "setZeroIfNotFound",
    }
}

ext_header! {
    pub struct QueryConsumerOffsetResponseHeader {
        pub offset: i64 => "offset",
    }
}

ext_header! {
    pub struct UpdateConsumerOffsetRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub commit_offset: i64 => "commitOffset",
    }
}

ext_header! {
    pub struct GetMaxOffsetRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
    }
}

ext_header! {
    pub struct GetMaxOffsetResponseHeader {
        pub offset: i64 => "offset",
    }
}

ext_header! {
    pub struct GetMinOffsetRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
    }
}

ext_header! {
    pub struct GetMinOffsetResponseHeader {
        pub offset: i64 => "offset",
    }
}

ext_header! {
    pub struct GetEarliestMsgStoretimeRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
    }
}

ext_header! {
    pub struct GetEarliestMsgStoretimeResponseHeader {
        pub timestamp: i64 => "timestamp",
    }
}

/// SEARCH_OFFSET_BY_TIMESTAMP: `boundaryType` is `lower`/`upper` in any case; anything else,
/// or absent, is lower (Java's `BoundaryType.getType`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchOffsetRequestHeader {
    pub topic: String,
    pub queue_id: i32,
    pub timestamp: i64,
    pub boundary_upper: bool,
}

impl SearchOffsetRequestHeader {
    pub fn from_command(cmd: &RemotingCommand) -> Result<Self, ProtocolError> {
        Ok(SearchOffsetRequestHeader {
            topic: HeaderField::read(cmd, "topic")?,
            queue_id: HeaderField::read(cmd, "queueId")?,
            timestamp: HeaderField::read(cmd, "timestamp")?,
            boundary_upper: cmd
                .ext("boundaryType")
                .is_some_and(|b| b.eq_ignore_ascii_case("upper")),
        })
    }

    pub fn write_to(&self, cmd: &mut RemotingCommand) {
        self.topic.write(cmd, "topic");
        self.queue_id.write(cmd, "queueId");
        self.timestamp.write(cmd, "timestamp");
        let b = if self.boundary_upper {
            "UPPER"
        } else {
            "LOWER"
        };
        cmd.set_ext("boundaryType", b);
    }
}

ext_header! {
    pub struct SearchOffsetResponseHeader {
        pub offset: i64 => "offset",
    }
}

ext_header! {
    pub struct UnregisterClientRequestHeader {
        /// Capital "ID" on the wire.
        pub client_id: String => "clientID",
        pub producer_group: Option<String> => "producerGroup",
        pub consumer_group: Option<String> => "consumerGroup",
    }
}

ext_header! {
    pub struct GetConsumerListByGroupRequestHeader {
        pub consumer_group: String => "consumerGroup",
    }
}

ext_header! {
    /// Broker to client, oneway.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        pub consumer_group: String => "consumerGroup",
    }
}

ext_header! {
    pub struct ConsumerSendMsgBackRequestHeader {
        /// Commit-log offset of the message that failed.
        pub offset: i64 => "offset",
        pub group: String => "group",
        /// 0: broker chooses (3 + reconsumeTimes); negative: straight to the DLQ.
        pub delay_level: i32 => "delayLevel",
        pub origin_msg_id: Option<String> => "originMsgId",
        pub origin_topic: Option<String> => "originTopic",
        pub unit_mode: bool => "unitMode",
        pub max_reconsume_times: Option<i32> => "maxReconsumeTimes",
    }
}

ext_header! {
    pub struct QueryMessageRequestHeader {
        pub topic: String => "topic",
        pub key: String => "key",
        pub max_num: i32 => "maxNum",
        pub begin_timestamp: i64 => "beginTimestamp",
        pub end_timestamp: i64 => "endTimestamp",
    }
}

ext_header! {
    pub struct QueryMessageResponseHeader {
        pub index_last_update_timestamp: i64 => "indexLastUpdateTimestamp",
        pub index_last_update_phyoffset: i64 => "indexLastUpdatePhyoffset",
    }
}

/// extField marking QUERY_MESSAGE's key as a UNIQ_KEY.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

ext_header! {
    pub struct ViewMessageByIdRequestHeader {
        pub offset: i64 => "offset",
    }
}

ext_header! {
    pub struct EndTransactionRequestHeader {
        pub producer_group: String => "producerGroup",
        /// Queue offset of the half message in the half topic.
        pub tran_state_table_offset: i64 => "tranStateTableOffset",
        /// Commit-log offset of the half message.
        pub commit_log_offset: i64 => "commitLogOffset",
        /// MessageSysFlag transaction type: 0 unknown, 8 commit, 12 rollback.
        pub commit_or_rollback: i32 => "commitOrRollback",
        pub from_transaction_check: bool => "fromTransactionCheck",
        pub msg_id: String => "msgId",
        pub transaction_id: Option<String> => "transactionId",
        pub topic: Option<String> => "topic",
    }
}

ext_header! {
    /// Broker to client (oneway); the body is the half message in stored format.
    pub struct CheckTransactionStateRequestHeader {
        pub topic: Option<String> => "topic",
        pub tran_state_table_offset: i64 => "tranStateTableOffset",
        pub commit_log_offset: i64 => "commitLogOffset",
        /// UNIQ_KEY of the half message.
        pub msg_id: Option<String> => "msgId",
        pub transaction_id: Option<String> => "transactionId",
        pub offset_msg_id: Option<String> => "offsetMsgId",
        pub broker_name: Option<String> => "bname",
    }
}

ext_header! {
    /// UPDATE_AND_CREATE_TOPIC (17); optional fields default like Java's admin tools send them.
    pub struct CreateTopicRequestHeader {
        pub topic: String => "topic",
        pub default_topic: String => "defaultTopic" or "TBW102".to_owned(),
        pub read_queue_nums: i32 => "readQueueNums",
        pub write_queue_nums: i32 => "writeQueueNums",
        pub perm: i32 => "perm",
        /// `SINGLE_TAG` or `MULTI_TAG`.
        pub topic_filter_type: String => "topicFilterType" or "SINGLE_TAG".to_owned(),
        pub topic_sys_flag: i32 => "topicSysFlag" or 0,
        pub order: bool => "order",
        /// RocketMQ 5 topic attributes, `+message.type=FIFO,-cleanup.policy`.
        pub attributes: Option<String> => "attributes",
    }
}

ext_header! {
    pub struct DeleteTopicRequestHeader {
        pub topic: String => "topic",
    }
}

ext_header! {
    pub struct DeleteSubscriptionGroupRequestHeader {
        pub group_name: String => "groupName",
        pub clean_offset: bool => "cleanOffset",
    }
}

ext_header! {
    /// Heartbeat response extras (5.x); we leave them out to never advertise heartbeat V2.
    pub struct HeartbeatResponseHeader {
        pub is_support_heart_beat_v2: Option<bool> => "IS_SUPPORT_HEART_BEAT_V2",
        pub is_sub_change: Option<bool> => "IS_SUB_CHANGE",
    }
}

ext_header! {
    /// GET_CONSUMER_CONNECTION_LIST.
    pub struct GetConsumerConnectionListRequestHeader {
        pub consumer_group: String => "consumerGroup",
    }
}

ext_header! {
    /// GET_PRODUCER_CONNECTION_LIST.
    pub struct GetProducerConnectionListRequestHeader {
        pub producer_group: String => "producerGroup",
    }
}

ext_header! {
    /// GET_CONSUME_STATS; without `topic`, every topic the group has offsets for.
    pub struct GetConsumeStatsRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: Option<String> => "topic",
    }
}

ext_header! {
    /// GET_TOPIC_STATS_INFO.
    pub struct GetTopicStatsInfoRequestHeader {
        pub topic: String => "topic",
    }
}

ext_header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222) from an admin, and RESET_CONSUMER_CLIENT_OFFSET (220)
    /// from the broker to a consumer (Java's `ResetOffsetRequestHeader`). `timestamp` -1 means
    /// each queue's max offset; `queueId` and `offset` name one queue and its new offset.
    pub struct ResetOffsetRequestHeader {
        pub group: String => "group",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId" or -1,
        pub offset: Option<i64> => "offset",
        pub timestamp: i64 => "timestamp",
        pub is_force: bool => "isForce",
    }
}

ext_header! {
    /// CLONE_GROUP_OFFSET (314); without `topic`, every topic the source group has offsets for.
    pub struct CloneGroupOffsetRequestHeader {
        pub src_group: String => "srcGroup",
        pub dest_group: String => "destGroup",
        pub topic: Option<String> => "topic",
        pub offline: bool => "offline",
    }
}

ext_header! {
    /// QUERY_CONSUME_QUEUE (321): `count` units of one queue from `index`.
    pub struct QueryConsumeQueueRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId" or 0,
        pub index: i64 => "index" or 0,
        pub count: i32 => "count" or 0,
        pub consumer_group: Option<String> => "consumerGroup",
    }
}

ext_header! {
    /// GET_TOPIC_CONFIG (351); `lo` asks for the static-topic mapping too (ringmq has none).
    pub struct GetTopicConfigRequestHeader {
        pub topic: String => "topic",
        pub lo: Option<bool> => "lo",
    }
}

ext_header! {
    /// GET_SUBSCRIPTIONGROUP_CONFIG (352).
    pub struct GetSubscriptionGroupConfigRequestHeader {
        pub group: String => "group",
    }
}

ext_header! {
    /// QUERY_TOPICS_BY_CONSUMER (343): the topics a group has committed offsets for.
    pub struct QueryTopicsByConsumerRequestHeader {
        pub group: String => "group",
    }
}

ext_header! {
    /// QUERY_SUBSCRIPTION_BY_CONSUMER (345): a group's subscription to a topic.
    pub struct QuerySubscriptionByConsumerRequestHeader {
        pub group: String => "group",
        pub topic: String => "topic",
    }
}

ext_header! {
    /// QUERY_TOPIC_CONSUME_BY_WHO (300).
    pub struct QueryTopicConsumeByWhoRequestHeader {
        pub topic: String => "topic",
    }
}

ext_header! {
    /// GET_BROKER_CONSUME_STATS (317) (Java's `GetConsumeStatsInBrokerHeader`): only ordered
    /// topics when `isOrder`.
    pub struct GetConsumeStatsInBrokerHeader {
        pub is_order: bool => "isOrder",
    }
}

ext_header! {
    /// VIEW_BROKER_STATS_DATA: one of Java's `BrokerStatsManager` stats by name and key.
    pub struct ViewBrokerStatsDataRequestHeader {
        pub stats_name: String => "statsName",
        pub stats_key: String => "statsKey",
    }
}
