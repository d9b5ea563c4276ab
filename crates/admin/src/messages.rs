//! Messages as an admin tool sees them: [`MessageView`], a stored record read back from a
//! VIEW_MESSAGE_BY_ID, QUERY_MESSAGE or PULL_MESSAGE reply (Java's `MessageExt` as mqadmin
//! prints it), and [`SendResult`], what a SEND_MESSAGE_V2 made of one message.
//!
//! Bodies are shown as UTF-8 (lossy); a zlib-compressed body is inflated up to the protocol's
//! frame limit, and left as stored beyond it.

use std::collections::BTreeMap;
use std::io::Read;

use serde::{Deserialize, Serialize};

use super::bodies::{QueueOffset, ResetOffsetBody};
use super::client::{malformed, AdminClient, NOT_SUPPORTED};
use super::transport::refused;
use super::AdminError;
use crate::constants::MAX_FRAME_LEN;
use crate::protocol::body::{EXPRESSION_TYPE_TAG, SUB_ALL};
use crate::protocol::codes::{request_code as req, response_code as rc};
use crate::protocol::headers::{
    SendMessageRequestHeader, SendMessageResponseHeader, UNIQUE_KEY_QUERY,
};
use crate::protocol::message::{self, sys_flag};
use crate::protocol::msg_id::{decode_offset_msg_id, offset_msg_id, UniqKeyGenerator};
use crate::protocol::properties::{self, keys};
use crate::protocol::RemotingCommand;

/// One stored message, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MessageView {
    pub topic: String,
    /// The producer's id (UNIQ_KEY), or the offset id when the message has none.
    pub msg_id: String,
    /// The broker's id: store host and commit-log offset.
    pub offset_msg_id: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commit_log_offset: i64,
    pub tags: Option<String>,
    pub keys: Option<String>,
    pub born_timestamp: i64,
    pub store_timestamp: i64,
    pub born_host: String,
    pub store_host: String,
    pub sys_flag: i32,
    pub flag: i32,
    pub reconsume_times: i32,
    pub body_crc: u32,
    pub properties: BTreeMap<String, String>,
    pub body: String,
}

impl MessageView {
    /// Every record of a reply body (records back to back), in order.
    pub fn from_records(body: &[u8]) -> Result<Vec<MessageView>, String> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < body.len() {
            let r = message::decode(&body[pos..], false)
                .map_err(|e| format!("stored record at {pos}: {e}"))?;
            pos += r.total_size as usize;
            out.push(MessageView::from_record(&r));
        }
        Ok(out)
    }

    fn from_record(r: &message::DecodedRecord<'_>) -> MessageView {
        let props: BTreeMap<String, String> = properties::parse(r.properties).into_iter().collect();
        let offset_id = offset_msg_id(r.store_host, r.phy_offset);
        MessageView {
            topic: r.topic.to_owned(),
            msg_id: props
                .get(keys::UNIQ_KEY)
                .cloned()
                .unwrap_or_else(|| offset_id.clone()),
            offset_msg_id: offset_id,
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
            commit_log_offset: r.phy_offset,
            tags: props.get(keys::TAGS).cloned(),
            keys: props.get(keys::KEYS).cloned(),
            born_timestamp: r.born_timestamp,
            store_timestamp: r.store_timestamp,
            born_host: r.born_host.to_string(),
            store_host: r.store_host.to_string(),
            sys_flag: r.sys_flag,
            flag: r.flag,
            reconsume_times: r.reconsume_times,
            body_crc: r.body_crc,
            body: body_text(r.sys_flag, r.body),
            properties: props,
        }
    }
}

/// The body as text: inflated when zlib-compressed (and within the frame limit).
fn body_text(flag: i32, body: &[u8]) -> String {
    let zlib = flag & sys_flag::COMPRESSED != 0
        && matches!(
            flag & sys_flag::COMPRESSION_ZLIB,
            0 | sys_flag::COMPRESSION_ZLIB
        );
    if zlib {
        let mut out = Vec::new();
        let inflated = flate2::read::ZlibDecoder::new(body)
            .take(MAX_FRAME_LEN as u64)
            .read_to_end(&mut out);
        if inflated.is_ok() {
            return String::from_utf8_lossy(&out).into_owned();
        }
    }
    String::from_utf8_lossy(body).into_owned()
}

/// What a send stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SendResult {
    /// SEND_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE.
    pub send_status: String,
    /// The UNIQ_KEY the message was sent with.
    pub msg_id: String,
    /// The broker's id: store host and commit-log offset.
    pub offset_msg_id: String,
    pub broker_name: String,
    pub queue_id: i32,
    pub queue_offset: i64,
}

/// A fresh UNIQ_KEY for a message sent from this process.
pub fn new_uniq_key() -> String {
    let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    UniqKeyGenerator::new(ip).next(crate::common::now_ms())
}

/// What a PULL_MESSAGE found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PullResult {
    /// FOUND, NO_NEW_MSG, NO_MATCHED_MSG or OFFSET_ILLEGAL (Java's `PullStatus`).
    pub pull_status: String,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub messages: Vec<MessageView>,
}

impl AdminClient {
    /// VIEW_MESSAGE_BY_ID (33): the record at commit-log `offset` of the broker at `addr`.
    pub fn view_message(&self, addr: &str, offset: i64) -> Result<MessageView, AdminError> {
        let cmd = RemotingCommand::new_request(req::VIEW_MESSAGE_BY_ID).with_ext("offset", offset);
        let r = self.call(
            addr,
            &cmd,
            &format!("the message at commit-log offset {offset}"),
        )?;
        MessageView::from_records(&r.body)
            .map_err(|e| malformed(addr, e))?
            .into_iter()
            .next()
            .ok_or_else(|| AdminError::NotFound(format!("no message at offset {offset} on {addr}")))
    }

    /// QUERY_MESSAGE (12) on one broker: messages of `topic` whose key (or, with `unique`,
    /// whose UNIQ_KEY) is `key`, stored between `begin` and `end` (ms). None found is empty.
    #[allow(clippy::too_many_arguments)]
    pub fn query_message(
        &self,
        addr: &str,
        topic: &str,
        key: &str,
        max_num: i32,
        begin: i64,
        end: i64,
        unique: bool,
    ) -> Result<Vec<MessageView>, AdminError> {
        let mut cmd = RemotingCommand::new_request(req::QUERY_MESSAGE)
            .with_ext("topic", topic)
            .with_ext("key", key)
            .with_ext("maxNum", max_num)
            .with_ext("beginTimestamp", begin)
            .with_ext("endTimestamp", end);
        if unique {
            cmd.set_ext(UNIQUE_KEY_QUERY, true);
        }
        let r = self.invoke(addr, &cmd)?;
        match r.code {
            rc::SUCCESS => MessageView::from_records(&r.body).map_err(|e| malformed(addr, e)),
            rc::QUERY_NOT_FOUND => Ok(Vec::new()),
            _ => Err(refused(addr, &format!("querying key {key} of {topic}"), &r)),
        }
    }

    /// QUERY_MESSAGE on every master of the topic's route, by key, merged.
    pub fn query_message_by_key(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin: i64,
        end: i64,
    ) -> Result<Vec<MessageView>, AdminError> {
        let mut out = Vec::new();
        for b in self.route_masters(topic)? {
            out.extend(self.query_message(&b.addr, topic, key, max_num, begin, end, false)?);
        }
        Ok(out)
    }

    /// A message by id: by its UNIQ_KEY on the topic's brokers when `topic` is given, else
    /// (or when that finds nothing) by decoding `id` as an offset id (store host and
    /// commit-log offset), as Java's `viewMessage` does. An offset id is followed only to a
    /// broker the name servers list: an id can name any address, and a lookup must not make
    /// this client (a console's, say) connect wherever its caller likes.
    pub fn view_message_by_id(
        &self,
        topic: Option<&str>,
        id: &str,
    ) -> Result<MessageView, AdminError> {
        if let Some(t) = topic {
            for b in self.route_masters(t)? {
                let found = self.query_message(&b.addr, t, id, 32, 0, i64::MAX, true)?;
                if let Some(m) = found.into_iter().find(|m| m.msg_id == id) {
                    return Ok(m);
                }
            }
        }
        match decode_offset_msg_id(id) {
            Ok((host, offset)) => {
                let addr = host.to_string();
                if !self.brokers(None)?.iter().any(|b| b.addr == addr) {
                    return Err(AdminError::NotFound(format!(
                        "message {id} names broker {addr}, which the name servers do not list"
                    )));
                }
                self.view_message(&addr, offset)
            }
            Err(_) if topic.is_some() => Err(AdminError::NotFound(format!(
                "message {id} not found in topic {}",
                topic.unwrap_or_default()
            ))),
            Err(e) => Err(AdminError::InvalidArgument(format!(
                "{id} is not an offset message id ({e}); give the topic (-t) to look it up by its UNIQ_KEY"
            ))),
        }
    }

    /// GET_MAX_OFFSET (30): the queue's next offset.
    pub fn max_offset(&self, addr: &str, topic: &str, queue_id: i32) -> Result<i64, AdminError> {
        self.offset_call(addr, req::GET_MAX_OFFSET, topic, queue_id, None)
    }

    /// GET_MIN_OFFSET (31): the queue's first offset still stored.
    pub fn min_offset(&self, addr: &str, topic: &str, queue_id: i32) -> Result<i64, AdminError> {
        self.offset_call(addr, req::GET_MIN_OFFSET, topic, queue_id, None)
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP (29): the queue offset of the first message stored at or
    /// after `timestamp` (ms).
    pub fn search_offset(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
    ) -> Result<i64, AdminError> {
        self.offset_call(
            addr,
            req::SEARCH_OFFSET_BY_TIMESTAMP,
            topic,
            queue_id,
            Some(timestamp),
        )
    }

    fn offset_call(
        &self,
        addr: &str,
        code: i32,
        topic: &str,
        queue_id: i32,
        timestamp: Option<i64>,
    ) -> Result<i64, AdminError> {
        let mut cmd = RemotingCommand::new_request(code)
            .with_ext("topic", topic)
            .with_ext("queueId", queue_id);
        if let Some(ts) = timestamp {
            cmd.set_ext("timestamp", ts);
        }
        let r = self.call(
            addr,
            &cmd,
            &format!("the offsets of {topic} queue {queue_id}"),
        )?;
        header_i64(addr, &r, "offset")
    }

    /// PULL_MESSAGE (11) without suspension, every tag, as consumer group `group`; the
    /// group's offset is not committed.
    pub fn pull(
        &self,
        addr: &str,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult, AdminError> {
        let cmd = RemotingCommand::new_request(req::PULL_MESSAGE)
            .with_ext("consumerGroup", group)
            .with_ext("topic", topic)
            .with_ext("queueId", queue_id)
            .with_ext("queueOffset", offset)
            .with_ext("maxMsgNums", max_nums)
            .with_ext("sysFlag", PULL_SYS_FLAG_SUBSCRIPTION)
            .with_ext("commitOffset", 0)
            .with_ext("suspendTimeoutMillis", 0)
            .with_ext("subscription", SUB_ALL)
            .with_ext("subVersion", 0)
            .with_ext("expressionType", EXPRESSION_TYPE_TAG);
        let r = self.invoke(addr, &cmd)?;
        let status = match r.code {
            rc::SUCCESS => "FOUND",
            rc::PULL_NOT_FOUND => "NO_NEW_MSG",
            rc::PULL_RETRY_IMMEDIATELY => "NO_MATCHED_MSG",
            rc::PULL_OFFSET_MOVED => "OFFSET_ILLEGAL",
            _ => {
                return Err(refused(
                    addr,
                    &format!("pulling {topic} queue {queue_id}"),
                    &r,
                ))
            }
        };
        let messages = if r.code == rc::SUCCESS {
            MessageView::from_records(&r.body).map_err(|e| malformed(addr, e))?
        } else {
            Vec::new()
        };
        Ok(PullResult {
            pull_status: status.to_owned(),
            next_begin_offset: header_i64(addr, &r, "nextBeginOffset")?,
            min_offset: header_i64(addr, &r, "minOffset")?,
            max_offset: header_i64(addr, &r, "maxOffset")?,
            messages,
        })
    }

    /// SEND_MESSAGE_V2 (310) of one message to the broker at `addr` (queue `queue_id`, or the
    /// broker's choice when negative), with a fresh UNIQ_KEY.
    #[allow(clippy::too_many_arguments)]
    pub fn send_message(
        &self,
        addr: &str,
        broker_name: &str,
        topic: &str,
        queue_id: i32,
        body: &[u8],
        tags: Option<&str>,
        keys: Option<&str>,
    ) -> Result<SendResult, AdminError> {
        let uniq = new_uniq_key();
        let mut props = vec![(keys::UNIQ_KEY, uniq.as_str())];
        if let Some(t) = tags {
            props.push((keys::TAGS, t));
        }
        if let Some(k) = keys {
            props.push((keys::KEYS, k));
        }
        let header = SendMessageRequestHeader {
            producer_group: ADMIN_PRODUCER_GROUP.to_owned(),
            topic: topic.to_owned(),
            default_topic: "TBW102".to_owned(),
            default_topic_queue_nums: 4,
            queue_id,
            sys_flag: 0,
            born_timestamp: crate::common::now_ms(),
            flag: 0,
            properties: properties::encode(props),
            reconsume_times: 0,
            unit_mode: false,
            max_reconsume_times: None,
            batch: false,
            broker_name: Some(broker_name.to_owned()),
        };
        let mut cmd = RemotingCommand::new_request(req::SEND_MESSAGE_V2).with_body(body.to_vec());
        header.write_to_v2(&mut cmd);
        let r = self.invoke(addr, &cmd)?;
        let status = match r.code {
            rc::SUCCESS => "SEND_OK",
            rc::FLUSH_DISK_TIMEOUT => "FLUSH_DISK_TIMEOUT",
            rc::FLUSH_SLAVE_TIMEOUT => "FLUSH_SLAVE_TIMEOUT",
            rc::SLAVE_NOT_AVAILABLE => "SLAVE_NOT_AVAILABLE",
            _ => return Err(refused(addr, &format!("sending to {topic}"), &r)),
        };
        let h = SendMessageResponseHeader::from_command(&r)
            .map_err(|e| malformed(addr, e.to_string()))?;
        Ok(SendResult {
            send_status: status.to_owned(),
            msg_id: uniq,
            offset_msg_id: h.msg_id,
            broker_name: broker_name.to_owned(),
            queue_id: h.queue_id,
            queue_offset: h.queue_offset,
        })
    }

    /// Resets `group`'s offsets on `topic` to `timestamp` on every master of the topic:
    /// INVOKE_BROKER_TO_RESET_OFFSET, or, where the broker does not serve it or no consumer of
    /// the group is online, Java's older way (GET_CONSUME_STATS, SEARCH_OFFSET_BY_TIMESTAMP and
    /// UPDATE_CONSUMER_OFFSET per queue the group has an offset for; without `force` an offset
    /// only moves back).
    pub fn reset_offset(
        &self,
        topic: &str,
        group: &str,
        timestamp: i64,
        force: bool,
    ) -> Result<ResetOffsetBody, AdminError> {
        let mut all = ResetOffsetBody::default();
        for b in self.route_masters(topic)? {
            match self.reset_offset_by_time(&b.addr, topic, group, timestamp, force) {
                Ok(r) => all.offset_table.extend(r.offset_table),
                Err(AdminError::Refused { code, .. })
                    if code == NOT_SUPPORTED || code == rc::CONSUMER_NOT_ONLINE =>
                {
                    // Without the topic the broker lists only the queues the group has
                    // offsets for, so a group that never consumed the topic resets nothing.
                    let stats = match self.consume_stats(&b.addr, group, None) {
                        Ok(s) => s,
                        Err(e) if e.is_not_found() => continue,
                        Err(e) => return Err(e),
                    };
                    let of_topic = stats
                        .offset_table
                        .into_iter()
                        .filter(|q| q.message_queue.topic == topic);
                    for q in of_topic {
                        let mq = q.message_queue;
                        let found = self.search_offset(&b.addr, topic, mq.queue_id, timestamp)?;
                        let offset = if force || found < q.offset.consumer_offset {
                            found
                        } else {
                            q.offset.consumer_offset
                        };
                        self.update_consumer_offset(&b.addr, group, topic, mq.queue_id, offset)?;
                        all.offset_table.push(QueueOffset {
                            message_queue: mq,
                            offset,
                        });
                    }
                }
                Err(e) => return Err(e),
            }
        }
        all.offset_table
            .sort_by(|a, b| a.message_queue.cmp(&b.message_queue));
        Ok(all)
    }
}

/// The producer group admin sends are made under (Java's `TOOLS_CONSUMER_GROUP` counterpart).
pub const ADMIN_PRODUCER_GROUP: &str = "TOOLS_PRODUCER_GROUP";
/// The consumer group admin pulls are made under (Java's `MixAll.TOOLS_CONSUMER_GROUP`).
pub const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";
/// PullSysFlag: the request carries its subscription.
const PULL_SYS_FLAG_SUBSCRIPTION: i32 = 0x4;

/// A numeric header field of a reply.
fn header_i64(addr: &str, r: &RemotingCommand, name: &str) -> Result<i64, AdminError> {
    r.ext(name)
        .ok_or_else(|| malformed(addr, format!("reply without {name}")))?
        .parse()
        .map_err(|e| malformed(addr, format!("{name}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn record(props: &str, body: &[u8], phy: i64) -> Vec<u8> {
        let m = message::MessageToStore {
            topic: "T",
            queue_id: 2,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 11,
            born_host: "127.0.0.1:5000".parse().unwrap(),
            store_host: "127.0.0.1:10911".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body,
            properties: props,
        };
        let mut b = BytesMut::new();
        message::encode(&m, &mut b).unwrap();
        message::patch(&mut b, 7, phy, 22);
        b.to_vec()
    }

    /// Records back to back come out in order with their properties, ids and bodies.
    #[test]
    fn reads_records_back_to_back() {
        let p1 = properties::encode([("UNIQ_KEY", "ABC"), ("TAGS", "t1"), ("KEYS", "k1")]);
        let mut body = record(&p1, b"hello", 0);
        let first_len = body.len() as i64;
        body.extend(record("", b"world", first_len));
        let v = MessageView::from_records(&body).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].msg_id, "ABC");
        assert_eq!(v[0].tags.as_deref(), Some("t1"));
        assert_eq!(v[0].keys.as_deref(), Some("k1"));
        assert_eq!(v[0].body, "hello");
        assert_eq!(
            (v[0].queue_id, v[0].queue_offset, v[0].store_timestamp),
            (2, 7, 22)
        );
        assert_eq!(
            v[1].msg_id, v[1].offset_msg_id,
            "no UNIQ_KEY: the offset id"
        );
        assert_eq!(v[1].commit_log_offset, first_len);
        assert_eq!(v[1].body, "world");
    }

    /// A truncated record is an error, not a panic.
    #[test]
    fn truncated_record_is_an_error() {
        let body = record("", b"hello", 0);
        assert!(MessageView::from_records(&body[..body.len() - 1]).is_err());
    }
}
