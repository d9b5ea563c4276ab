//! Send and pull headers: the hot-path ones.
//!
//! `SendMessageRequestHeader` accepts Java's V1 (long names, code 10/324) and V2 (`a`..`n`,
//! codes 310/320/325, or whenever field `b` is present) forms; missing-field errors name the
//! wire field that was looked up. Response headers write every field the Java client unboxes.

use super::{ext_header, HeaderField};
use crate::codes::request_code;
use crate::properties::keys;
use crate::{ProtocolError, RemotingCommand};

/// Java's `MSG_REGION` default (`regionId`).
pub const DEFAULT_REGION: &str = "DefaultRegion";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendMessageRequestHeader {
    pub producer_group: String,
    pub topic: String,
    pub default_topic: String,
    pub default_topic_queue_nums: i32,
    /// Negative: the broker picks a queue.
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub flag: i32,
    /// Properties string (absent = "").
    pub properties: String,
    /// Absent = 0.
    pub reconsume_times: i32,
    pub unit_mode: bool,
    pub max_reconsume_times: Option<i32>,
    /// Decides batch vs single, not the request code.
    pub batch: bool,
    pub broker_name: Option<String>,
}

/// Wire names in field order: producer_group .. broker_name.
const SEND_V1_NAMES: [&str; 14] = [
    "producerGroup",
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
    "properties",
    "reconsumeTimes",
    "unitMode",
    "maxReconsumeTimes",
    "batch",
    "bname",
];
const SEND_V2_NAMES: [&str; 14] = [
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
];

impl SendMessageRequestHeader {
    /// True when the command carries the V2 short names.
    pub fn is_v2(cmd: &RemotingCommand) -> bool {
        matches!(
            cmd.code,
            request_code::SEND_MESSAGE_V2
                | request_code::SEND_BATCH_MESSAGE
                | request_code::SEND_REPLY_MESSAGE_V2
        ) || cmd.ext_fields.contains_key("b")
    }

    pub fn from_command(cmd: &RemotingCommand) -> Result<Self, ProtocolError> {
        let n = if Self::is_v2(cmd) {
            &SEND_V2_NAMES
        } else {
            &SEND_V1_NAMES
        };
        Ok(SendMessageRequestHeader {
            producer_group: HeaderField::read(cmd, n[0])?,
            topic: HeaderField::read(cmd, n[1])?,
            default_topic: HeaderField::read(cmd, n[2])?,
            default_topic_queue_nums: HeaderField::read(cmd, n[3])?,
            queue_id: HeaderField::read(cmd, n[4])?,
            sys_flag: HeaderField::read(cmd, n[5])?,
            born_timestamp: HeaderField::read(cmd, n[6])?,
            flag: HeaderField::read(cmd, n[7])?,
            properties: <Option<String>>::read(cmd, n[8])?.unwrap_or_default(),
            reconsume_times: <Option<i32>>::read(cmd, n[9])?.unwrap_or(0),
            unit_mode: HeaderField::read(cmd, n[10])?,
            max_reconsume_times: HeaderField::read(cmd, n[11])?,
            batch: HeaderField::read(cmd, n[12])?,
            broker_name: HeaderField::read(cmd, n[13])?,
        })
    }

    fn write_names(&self, cmd: &mut RemotingCommand, n: &[&str; 14]) {
        self.producer_group.write(cmd, n[0]);
        self.topic.write(cmd, n[1]);
        self.default_topic.write(cmd, n[2]);
        self.default_topic_queue_nums.write(cmd, n[3]);
        self.queue_id.write(cmd, n[4]);
        self.sys_flag.write(cmd, n[5]);
        self.born_timestamp.write(cmd, n[6]);
        self.flag.write(cmd, n[7]);
        self.properties.write(cmd, n[8]);
        self.reconsume_times.write(cmd, n[9]);
        self.unit_mode.write(cmd, n[10]);
        self.max_reconsume_times.write(cmd, n[11]);
        self.batch.write(cmd, n[12]);
        self.broker_name.write(cmd, n[13]);
    }

    /// Long names, for SEND_MESSAGE (10).
    pub fn write_to_v1(&self, cmd: &mut RemotingCommand) {
        self.write_names(cmd, &SEND_V1_NAMES);
    }

    /// Same as `write_to_v2`: what Java and Rust clients send by default.
    pub fn write_to(&self, cmd: &mut RemotingCommand) {
        self.write_to_v2(cmd);
    }

    /// Short names, for SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).
    pub fn write_to_v2(&self, cmd: &mut RemotingCommand) {
        self.write_names(cmd, &SEND_V2_NAMES);
    }
}

/// Send reply: `msg_id` is the offset msg id (comma-joined for a batch), `queue_offset`
/// the first logical offset. Parsing is for clients; the broker uses `write_to`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendMessageResponseHeader {
    pub msg_id: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub transaction_id: Option<String>,
}

impl SendMessageResponseHeader {
    pub fn from_command(cmd: &RemotingCommand) -> Result<Self, ProtocolError> {
        Ok(SendMessageResponseHeader {
            msg_id: HeaderField::read(cmd, "msgId")?,
            queue_id: HeaderField::read(cmd, "queueId")?,
            queue_offset: HeaderField::read(cmd, "queueOffset")?,
            transaction_id: HeaderField::read(cmd, "transactionId")?,
        })
    }

    /// Writes the fields plus MSG_REGION=DefaultRegion and TRACE_ON=true (Java's `traceOn`
    /// default), which Java clients read unconditionally: with false they skip producer traces.
    pub fn write_to(&self, cmd: &mut RemotingCommand) {
        self.write_to_with_region(cmd, DEFAULT_REGION, true);
    }

    /// `write_to` with an explicit region and trace switch.
    pub fn write_to_with_region(&self, cmd: &mut RemotingCommand, region: &str, trace_on: bool) {
        self.msg_id.write(cmd, "msgId");
        self.queue_id.write(cmd, "queueId");
        self.queue_offset.write(cmd, "queueOffset");
        self.transaction_id.write(cmd, "transactionId");
        cmd.set_ext(keys::MSG_REGION, region);
        cmd.set_ext(keys::TRACE_ON, trace_on);
    }
}

ext_header! {
    pub struct PullMessageRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub queue_offset: i64 => "queueOffset",
        pub max_msg_nums: i32 => "maxMsgNums",
        pub sys_flag: i32 => "sysFlag",
        pub commit_offset: i64 => "commitOffset",
        pub suspend_timeout_millis: i64 => "suspendTimeoutMillis",
        pub subscription: Option<String> => "subscription",
        pub sub_version: i64 => "subVersion",
        pub expression_type: Option<String> => "expressionType",
        pub max_msg_bytes: Option<i32> => "maxMsgBytes",
    }
}

/// `PullSysFlag` bits of `PullMessageRequestHeader::sys_flag`.
pub mod pull_sys_flag {
    pub const COMMIT_OFFSET: i32 = 0x1;
    pub const SUSPEND: i32 = 0x2;
    pub const SUBSCRIPTION: i32 = 0x4;
    pub const CLASS_FILTER: i32 = 0x8;
    pub const LITE_PULL: i32 = 0x10;
}

ext_header! {
    /// All four fields are required by the Java client, even on 19/20/21.
    pub struct PullMessageResponseHeader {
        pub suggest_which_broker_id: i64 => "suggestWhichBrokerId",
        pub next_begin_offset: i64 => "nextBeginOffset",
        pub min_offset: i64 => "minOffset",
        pub max_offset: i64 => "maxOffset",
    }
}
