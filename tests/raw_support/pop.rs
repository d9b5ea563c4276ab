//! A POP client as the Java client behaves, over `Conn`: POP_MESSAGE requests, the messages of
//! an answer with the receipt handles a client builds from the header (or finds in `POP_CK`),
//! and ACK / CHANGE_MESSAGE_INVISIBLETIME requests made from those handles.

use ringmq::protocol::codes::request_code;
use ringmq::protocol::pop::{parse_start_offset_info, ExtraInfo, RetryFlag};
use ringmq::protocol::properties;
use ringmq::protocol::RemotingCommand;

use super::records;

/// The group these tests pop with unless they say otherwise.
pub const GROUP: &str = "pop-g";

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// POP_MESSAGE of `max` messages of `topic` (queue `qid`, -1 for all) for `GROUP`.
pub fn pop_cmd(
    topic: &str,
    qid: i32,
    max: i32,
    invisible_ms: i64,
    poll_ms: i64,
) -> RemotingCommand {
    RemotingCommand::new_request(request_code::POP_MESSAGE)
        .with_ext("consumerGroup", GROUP)
        .with_ext("topic", topic)
        .with_ext("queueId", qid)
        .with_ext("maxMsgNums", max)
        .with_ext("invisibleTime", invisible_ms)
        .with_ext("pollTime", poll_ms)
        .with_ext("bornTime", now_ms())
        .with_ext("initMode", 0)
        .with_ext("expType", "TAG")
        .with_ext("exp", "*")
        .with_ext("order", false)
}

/// An orderly POP_MESSAGE with `attempt`.
pub fn pop_order_cmd(
    topic: &str,
    qid: i32,
    max: i32,
    invisible_ms: i64,
    attempt: &str,
) -> RemotingCommand {
    let mut c = pop_cmd(topic, qid, max, invisible_ms, 0);
    c.set_ext("order", "true");
    c.set_ext("attemptId", attempt);
    c
}

/// One popped message as a client sees it.
#[derive(Clone, Debug)]
pub struct Popped {
    pub topic: String,
    pub queue_id: i32,
    pub offset: i64,
    /// The record's commit-log offset (what CONSUMER_SEND_MSG_BACK names).
    pub phy_offset: i64,
    pub body: String,
    pub reconsume_times: i32,
    pub handle: ExtraInfo,
    pub properties: String,
}

impl Popped {
    /// The topic an ack of this message names: the retry topic for a message popped from it.
    pub fn ack_topic(&self) -> String {
        self.handle.retry.real_topic(&self.topic, GROUP)
    }
}

/// The messages of a POP answer with their handles, built as the Java client builds them.
pub fn popped(r: &RemotingCommand) -> Vec<Popped> {
    let pop_time: i64 = r.ext("popTime").unwrap().parse().unwrap();
    let invisible: i64 = r.ext("invisibleTime").unwrap().parse().unwrap();
    let revive_qid: i32 = r.ext("reviveQid").unwrap().parse().unwrap();
    let starts = parse_start_offset_info(r.ext("startOffsetInfo").unwrap_or("")).unwrap();
    records(&r.body)
        .into_iter()
        .map(|rec| {
            let props = rec.properties.to_string();
            let handle = match properties::get(&props, "POP_CK") {
                Some(ck) => ExtraInfo::parse(ck).unwrap(),
                None => {
                    let start = starts
                        .iter()
                        .find(|e| e.retry == RetryFlag::Normal && e.queue_id == rec.queue_id)
                        .expect("startOffsetInfo names the message's queue")
                        .value;
                    ExtraInfo {
                        ck_queue_offset: start,
                        pop_time,
                        invisible_time: invisible,
                        revive_qid,
                        retry: RetryFlag::Normal,
                        broker_name: "b".into(),
                        queue_id: rec.queue_id,
                        queue_offset: Some(rec.queue_offset),
                        commit_log_offset: None,
                    }
                }
            };
            Popped {
                topic: rec.topic.to_string(),
                queue_id: rec.queue_id,
                offset: rec.queue_offset,
                phy_offset: rec.phy_offset,
                body: String::from_utf8_lossy(rec.body).into_owned(),
                reconsume_times: rec.reconsume_times,
                handle,
                properties: props,
            }
        })
        .collect()
}

/// ACK_MESSAGE of `m` with the handle `handle` (its own, or another to prove a point).
pub fn ack_cmd(m: &Popped, handle: &ExtraInfo) -> RemotingCommand {
    RemotingCommand::new_request(request_code::ACK_MESSAGE)
        .with_ext("consumerGroup", GROUP)
        .with_ext("topic", m.ack_topic())
        .with_ext("queueId", m.queue_id)
        .with_ext("extraInfo", handle.to_string())
        .with_ext("offset", m.offset)
}

/// CHANGE_MESSAGE_INVISIBLETIME of `m`.
pub fn change_cmd(m: &Popped, invisible_ms: i64) -> RemotingCommand {
    RemotingCommand::new_request(request_code::CHANGE_MESSAGE_INVISIBLETIME)
        .with_ext("consumerGroup", GROUP)
        .with_ext("topic", m.ack_topic())
        .with_ext("queueId", m.queue_id)
        .with_ext("extraInfo", m.handle.to_string())
        .with_ext("offset", m.offset)
        .with_ext("invisibleTime", invisible_ms)
}

/// The handle a CHANGE_MESSAGE_INVISIBLETIME answer gives `m`.
pub fn changed_handle(m: &Popped, r: &RemotingCommand) -> ExtraInfo {
    ExtraInfo {
        ck_queue_offset: m.offset,
        pop_time: r.ext("popTime").unwrap().parse().unwrap(),
        invisible_time: r.ext("invisibleTime").unwrap().parse().unwrap(),
        revive_qid: r.ext("reviveQid").unwrap().parse().unwrap(),
        ..m.handle.clone()
    }
}
