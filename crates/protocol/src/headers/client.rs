//! Headers of the requests the broker sends clients and waits on: GET_CONSUMER_RUNNING_INFO
//! (307) and CONSUME_MESSAGE_DIRECTLY (309), which an admin tool sends the broker to relay, and
//! PUSH_REPLY_MESSAGE_TO_CLIENT (326), the reply of a request-reply exchange.

use super::{ext_header, HeaderField};
use crate::{ProtocolError, RemotingCommand};

ext_header! {
    /// GET_CONSUMER_RUNNING_INFO (307), admin to broker and broker to consumer.
    pub struct GetConsumerRunningInfoRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub client_id: String => "clientId",
        pub jstack_enable: bool => "jstackEnable",
    }
}

ext_header! {
    /// CONSUME_MESSAGE_DIRECTLY (309); the broker adds `brokerName` and the sys flags before it
    /// relays the request, with the stored message as the body.
    pub struct ConsumeMessageDirectlyResultRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub client_id: Option<String> => "clientId",
        /// The offset message id of the message to consume.
        pub msg_id: Option<String> => "msgId",
        pub broker_name: Option<String> => "brokerName",
        pub topic: Option<String> => "topic",
        pub topic_sys_flag: Option<i32> => "topicSysFlag",
        pub group_sys_flag: Option<i32> => "groupSysFlag",
    }
}

/// PUSH_REPLY_MESSAGE_TO_CLIENT (326): the reply's send header as the replier sent it, plus where
/// and when it passed through the broker. `born_host` and `store_host` are `ip:port`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplyMessageRequestHeader {
    pub producer_group: String,
    pub topic: String,
    pub default_topic: String,
    pub default_topic_queue_nums: i32,
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub flag: i32,
    pub properties: Option<String>,
    pub reconsume_times: Option<i32>,
    pub unit_mode: bool,
    pub born_host: String,
    pub store_host: String,
    pub store_timestamp: i64,
}

impl ReplyMessageRequestHeader {
    pub fn from_command(cmd: &RemotingCommand) -> Result<Self, ProtocolError> {
        Ok(ReplyMessageRequestHeader {
            producer_group: HeaderField::read(cmd, "producerGroup")?,
            topic: HeaderField::read(cmd, "topic")?,
            default_topic: HeaderField::read(cmd, "defaultTopic")?,
            default_topic_queue_nums: HeaderField::read(cmd, "defaultTopicQueueNums")?,
            queue_id: HeaderField::read(cmd, "queueId")?,
            sys_flag: HeaderField::read(cmd, "sysFlag")?,
            born_timestamp: HeaderField::read(cmd, "bornTimestamp")?,
            flag: HeaderField::read(cmd, "flag")?,
            properties: HeaderField::read(cmd, "properties")?,
            reconsume_times: HeaderField::read(cmd, "reconsumeTimes")?,
            unit_mode: HeaderField::read(cmd, "unitMode")?,
            born_host: HeaderField::read(cmd, "bornHost")?,
            store_host: HeaderField::read(cmd, "storeHost")?,
            store_timestamp: HeaderField::read(cmd, "storeTimestamp")?,
        })
    }

    pub fn write_to(&self, cmd: &mut RemotingCommand) {
        self.producer_group.write(cmd, "producerGroup");
        self.topic.write(cmd, "topic");
        self.default_topic.write(cmd, "defaultTopic");
        self.default_topic_queue_nums
            .write(cmd, "defaultTopicQueueNums");
        self.queue_id.write(cmd, "queueId");
        self.sys_flag.write(cmd, "sysFlag");
        self.born_timestamp.write(cmd, "bornTimestamp");
        self.flag.write(cmd, "flag");
        self.properties.write(cmd, "properties");
        self.reconsume_times.write(cmd, "reconsumeTimes");
        self.unit_mode.write(cmd, "unitMode");
        self.born_host.write(cmd, "bornHost");
        self.store_host.write(cmd, "storeHost");
        self.store_timestamp.write(cmd, "storeTimestamp");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::request_code;

    /// The 326 header round-trips under Java's field names, and a missing required field is an
    /// error naming it.
    #[test]
    fn reply_header_round_trip() {
        let h = ReplyMessageRequestHeader {
            producer_group: "pg".into(),
            topic: "DefaultCluster_REPLY_TOPIC".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: -1,
            sys_flag: 0,
            born_timestamp: 17,
            flag: 3,
            properties: Some("CORRELATION_ID\u{1}c1\u{2}".into()),
            reconsume_times: None,
            unit_mode: false,
            born_host: "127.0.0.1:4000".into(),
            store_host: "127.0.0.1:10911".into(),
            store_timestamp: 18,
        };
        let mut cmd = RemotingCommand::new_request(request_code::PUSH_REPLY_MESSAGE_TO_CLIENT);
        h.write_to(&mut cmd);
        assert_eq!(cmd.ext("bornHost"), Some("127.0.0.1:4000"));
        assert_eq!(cmd.ext("reconsumeTimes"), None);
        assert_eq!(ReplyMessageRequestHeader::from_command(&cmd).unwrap(), h);
        cmd.ext_fields.remove("storeHost");
        let err = ReplyMessageRequestHeader::from_command(&cmd).unwrap_err();
        assert!(err.to_string().contains("storeHost"), "{err}");
    }
}
