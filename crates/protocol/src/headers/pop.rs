//! Headers of RocketMQ 5's POP requests (Java's `PopMessageRequestHeader` and its siblings):
//! POP_MESSAGE (200050) and PEEK_MESSAGE (200052), ACK_MESSAGE (200051),
//! CHANGE_MESSAGE_INVISIBLETIME (200053), NOTIFICATION (200054) and POLLING_INFO (200055).
//!
//! A queue id below 0 means "every readable queue of the topic on this broker" (Java's getters
//! turn any negative id into -1); `queue_id_or_all` says which. The receipt handle a consumer
//! sends back (`extraInfo`) is parsed by `pop::ExtraInfo`.

use super::ext_header;

ext_header! {
    /// POP_MESSAGE (200050): pop up to `max_msg_nums` (at most 32) messages of `topic` for
    /// `consumer_group`, invisible to other pops for `invisible_time` ms; park for up to
    /// `poll_time` ms when there are none.
    pub struct PopMessageRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub max_msg_nums: i32 => "maxMsgNums",
        pub invisible_time: i64 => "invisibleTime",
        pub poll_time: i64 => "pollTime",
        /// When the client sent the request (Java fills in the broker's clock when it is absent
        /// or 0).
        pub born_time: i64 => "bornTime" or 0,
        /// Where a group without an offset starts: 0 the queue's first message, 1 its end.
        pub init_mode: i32 => "initMode",
        /// `TAG` or `SQL92`; absent is a tag expression.
        pub exp_type: Option<String> => "expType",
        pub exp: Option<String> => "exp",
        /// An orderly (FIFO) pop.
        pub order: bool => "order",
        /// An orderly pop's id: a retry with the same id gets the same messages.
        pub attempt_id: Option<String> => "attemptId",
    }
}

ext_header! {
    /// POP_MESSAGE's answer: when the messages were popped, for how long, the revive queue
    /// (999 for orderly pops) and what is left; the info strings are `pop`'s formats.
    pub struct PopMessageResponseHeader {
        pub pop_time: i64 => "popTime",
        pub invisible_time: i64 => "invisibleTime",
        pub revive_qid: i32 => "reviveQid",
        pub rest_num: i64 => "restNum",
        pub start_offset_info: Option<String> => "startOffsetInfo",
        pub msg_offset_info: Option<String> => "msgOffsetInfo",
        pub order_count_info: Option<String> => "orderCountInfo",
    }
}

ext_header! {
    /// PEEK_MESSAGE (200052): read without popping (no state changes).
    pub struct PeekMessageRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub max_msg_nums: i32 => "maxMsgNums",
        pub consumer_group: String => "consumerGroup",
    }
}

ext_header! {
    /// ACK_MESSAGE (200051): the message at `offset` of `topic` (the retry topic for a message
    /// popped from it) and `queue_id` is consumed; `extra_info` is its receipt handle.
    pub struct AckMessageRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub extra_info: String => "extraInfo",
        pub offset: i64 => "offset",
    }
}

ext_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053): the message becomes visible again
    /// `invisible_time` ms from now; the answer's times make its new receipt handle.
    pub struct ChangeInvisibleTimeRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub extra_info: String => "extraInfo",
        pub offset: i64 => "offset",
        pub invisible_time: i64 => "invisibleTime",
    }
}

ext_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME's answer.
    pub struct ChangeInvisibleTimeResponseHeader {
        pub pop_time: i64 => "popTime",
        pub invisible_time: i64 => "invisibleTime",
        pub revive_qid: i32 => "reviveQid",
    }
}

ext_header! {
    /// NOTIFICATION (200054): wait up to `poll_time` ms for a message to pop, without popping.
    pub struct NotificationRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub poll_time: i64 => "pollTime",
        pub born_time: i64 => "bornTime" or 0,
        pub order: bool => "order",
        pub attempt_id: Option<String> => "attemptId",
    }
}

ext_header! {
    /// NOTIFICATION's answer (always SUCCESS in Java).
    pub struct NotificationResponseHeader {
        pub has_msg: bool => "hasMsg",
        pub polling_full: bool => "pollingFull",
    }
}

ext_header! {
    /// POLLING_INFO (200055): how many pops are parked on a queue (-1: on the topic).
    pub struct PollingInfoRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
    }
}

ext_header! {
    /// POLLING_INFO's answer.
    pub struct PollingInfoResponseHeader {
        pub polling_num: i32 => "pollingNum",
    }
}

/// A request's queue id as Java reads it: `None` for every queue (any negative id), else the
/// queue.
pub fn queue_id_or_all(queue_id: i32) -> Option<u32> {
    u32::try_from(queue_id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RemotingCommand;

    /// A pop request as rocketmq-clients' Java proxy writes it reads back field by field;
    /// optional fields default as Java's do; a missing required field is named.
    #[test]
    fn pop_request_reads_and_writes() {
        let mut cmd = RemotingCommand::new_request(crate::codes::request_code::POP_MESSAGE);
        for (k, v) in [
            ("consumerGroup", "G"),
            ("topic", "T"),
            ("queueId", "-1"),
            ("maxMsgNums", "32"),
            ("invisibleTime", "60000"),
            ("pollTime", "20000"),
            ("bornTime", "1700000000000"),
            ("initMode", "1"),
            ("expType", "TAG"),
            ("exp", "*"),
            ("order", "false"),
        ] {
            cmd.ext_fields.insert(k, v);
        }
        let h = PopMessageRequestHeader::from_command(&cmd).unwrap();
        assert_eq!(h.queue_id, -1);
        assert_eq!(queue_id_or_all(h.queue_id), None);
        assert_eq!(queue_id_or_all(3), Some(3));
        assert_eq!(h.max_msg_nums, 32);
        assert_eq!(h.exp.as_deref(), Some("*"));
        assert!(!h.order);
        assert_eq!(h.attempt_id, None);
        let mut back = RemotingCommand::new_request(crate::codes::request_code::POP_MESSAGE);
        h.write_to(&mut back);
        assert_eq!(PopMessageRequestHeader::from_command(&back).unwrap(), h);
        cmd.ext_fields.remove("invisibleTime");
        let err = PopMessageRequestHeader::from_command(&cmd).unwrap_err();
        assert!(err.to_string().contains("invisibleTime"), "{err}");
    }

    /// The answers' headers round-trip through extFields.
    #[test]
    fn answers_round_trip() {
        let h = PopMessageResponseHeader {
            pop_time: 1,
            invisible_time: 2,
            revive_qid: 999,
            rest_num: 4,
            start_offset_info: Some("0 1 100".into()),
            msg_offset_info: Some("0 1 100,101".into()),
            order_count_info: None,
        };
        let mut cmd = RemotingCommand::new_request(0);
        h.write_to(&mut cmd);
        assert_eq!(PopMessageResponseHeader::from_command(&cmd).unwrap(), h);
        let n = NotificationResponseHeader {
            has_msg: true,
            polling_full: false,
        };
        let mut cmd = RemotingCommand::new_request(0);
        n.write_to(&mut cmd);
        assert_eq!(NotificationResponseHeader::from_command(&cmd).unwrap(), n);
    }
}
