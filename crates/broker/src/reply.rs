//! Request-reply: SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325), answered by pushing
//! the reply to the requester with PUSH_REPLY_MESSAGE_TO_CLIENT (326) (Java's
//! `ReplyMessageProcessor`).
//!
//! A requester's message carries its client id in `REPLY_TO_CLIENT`; the consumer that handled
//! it sends the reply (to `<brokerClusterName>_REPLY_TOPIC`, which the broker creates at start)
//! with that property copied. The broker finds the requester's connection among the producers
//! registered by heartbeat (shard 0), pushes the reply there through
//! [`broker2client::call_client`] and waits for the requester's acknowledgement; when
//! `storeReplyMessageEnable` (the default) it then also stores the reply like a send. The
//! response's code is the push's outcome, as in Java: SUCCESS, or SYSTEM_ERROR with Java's remark
//! when the property is missing, the requester is not connected, or it did not take the reply.
//! A failed store is logged and leaves the code alone; a stored reply's response carries its
//! offset message id and queue offset, an unstored one msgId "0".

use std::rc::Rc;

use crate::append::Outgoing;
use crate::common::now_ms;
use crate::error::BrokerError;
use crate::metadata::topic_validator;
use crate::metadata::topic_validator::validate_topic;
use crate::protocol::codes::{request_code, response_code as rc};
use crate::protocol::headers::{
    ReplyMessageRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader, DEFAULT_REGION,
};
use crate::protocol::msg_id::offset_msg_id;
use crate::protocol::properties::{self, keys};
use crate::protocol::RemotingCommand;
use crate::remoting::ConnInfo;
use crate::shard::Shard;
use crate::topic_manager::{ensure_topic, send_queue};
use crate::{append, broker2client};

/// SEND_REPLY_MESSAGE / SEND_REPLY_MESSAGE_V2.
pub async fn send_reply(
    shard: Rc<Shard>,
    conn: &ConnInfo,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = SendMessageRequestHeader::from_command(cmd)?;
    let queue_id = check(&shard, &h).await?;
    let pushed = push_reply(&shard, conn, &h, cmd).await;
    let mut resp = match &pushed {
        Ok(()) => RemotingCommand::response_for(cmd, rc::SUCCESS, None),
        Err(remark) => RemotingCommand::response_for(cmd, rc::SYSTEM_ERROR, Some(remark.clone())),
    };
    // What Java puts in the header: zeros (so clients decode it) after a push, the stored
    // position after a store, nothing when neither happened.
    let mut header = pushed.is_ok().then(|| SendMessageResponseHeader {
        msg_id: "0".into(),
        queue_id,
        queue_offset: 0,
        transaction_id: None,
    });
    if shard.settings().store_reply_message_enable {
        match store_reply(&shard, conn, &h, queue_id, cmd).await {
            Ok(stored) => header = Some(stored),
            Err(e) => tracing::warn!(topic = %h.topic, error = %e, "reply message not stored"),
        }
    }
    match header {
        Some(header) => header.write_to(&mut resp),
        None => {
            resp.set_ext(keys::MSG_REGION, DEFAULT_REGION);
            resp.set_ext(keys::TRACE_ON, false);
        }
    }
    Ok(resp)
}

/// Java's send checks for a reply: legal topic, one clients may send to, existing (or created
/// from its template), and a queue it has. Returns the queue (picked when the sender left it).
async fn check(shard: &Rc<Shard>, h: &SendMessageRequestHeader) -> Result<i32, BrokerError> {
    validate_topic(&h.topic)?;
    if topic_validator::is_not_allowed_send_topic(&h.topic) {
        return Err(BrokerError::NoPermission(format!(
            "Sending message to topic[{}] is forbidden.",
            h.topic
        )));
    }
    let tc = ensure_topic(
        shard,
        &h.topic,
        &h.default_topic,
        h.default_topic_queue_nums,
    )
    .await?;
    send_queue(shard, &tc, &h.topic, h.queue_id)
}

/// Pushes the reply to the client named by `REPLY_TO_CLIENT` and waits for it to take it. The
/// error is the remark Java answers with.
async fn push_reply(
    shard: &Rc<Shard>,
    conn: &ConnInfo,
    h: &SendMessageRequestHeader,
    cmd: &RemotingCommand,
) -> Result<(), String> {
    let Some(requester) = properties::get(&h.properties, keys::REPLY_TO_CLIENT) else {
        tracing::warn!("{} is null, can not reply message", keys::REPLY_TO_CLIENT);
        return Err(format!(
            "reply message properties[{}] is null",
            keys::REPLY_TO_CLIENT
        ));
    };
    let failed = || format!("push reply message to {requester}fail.");
    let conn_id = match broker2client::producer_conn(shard, requester).await {
        Ok(Some(c)) => c,
        Ok(None) => {
            let remark = format!("push reply message fail, channel of <{requester}> not found.");
            tracing::warn!("{remark}");
            return Err(remark);
        }
        Err(e) => {
            tracing::warn!(requester, error = %e, "push reply message failed");
            return Err(failed());
        }
    };
    let mut props = properties::parse(&h.properties);
    props.retain(|(k, _)| k != keys::PUSH_REPLY_TIME);
    props.push((keys::PUSH_REPLY_TIME.into(), now_ms().to_string()));
    let store_host = shard.ctx.store_host;
    let header = ReplyMessageRequestHeader {
        producer_group: h.producer_group.clone(),
        topic: h.topic.clone(),
        default_topic: h.default_topic.clone(),
        default_topic_queue_nums: h.default_topic_queue_nums,
        queue_id: h.queue_id,
        sys_flag: h.sys_flag,
        born_timestamp: h.born_timestamp,
        flag: h.flag,
        properties: Some(properties::encode(
            props.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        )),
        reconsume_times: Some(h.reconsume_times),
        unit_mode: h.unit_mode,
        born_host: format!("{}:{}", conn.peer.ip(), conn.peer.port()),
        store_host: format!("{}:{}", store_host.ip(), store_host.port()),
        store_timestamp: now_ms(),
    };
    let mut request = RemotingCommand::new_request(request_code::PUSH_REPLY_MESSAGE_TO_CLIENT);
    header.write_to(&mut request);
    request.body = cmd.body.clone();
    match broker2client::call_client(shard, conn_id, request).await {
        Ok(answer) if answer.code == rc::SUCCESS => Ok(()),
        Ok(answer) => {
            tracing::warn!(requester, code = answer.code, remark = ?answer.remark, "push reply message refused");
            Err(failed())
        }
        Err(e) => {
            tracing::warn!(requester, error = %e, "push reply message failed");
            Err(failed())
        }
    }
}

/// Stores the reply as it was sent (its properties untouched) in its topic and queue.
async fn store_reply(
    shard: &Rc<Shard>,
    conn: &ConnInfo,
    h: &SendMessageRequestHeader,
    queue_id: i32,
    cmd: &RemotingCommand,
) -> Result<SendMessageResponseHeader, BrokerError> {
    let record = append::build_record(
        shard,
        Outgoing {
            topic: &h.topic,
            queue_id,
            flag: h.flag,
            sys_flag: h.sys_flag,
            born_timestamp: h.born_timestamp,
            born_host: conn.peer,
            reconsume_times: h.reconsume_times,
            body: &cmd.body,
            props: properties::parse(&h.properties),
        },
    )?;
    let wait_flush = properties::get(&h.properties, keys::WAIT) != Some("false");
    let outcome = append::append(shard, vec![record], wait_flush).await?;
    let phy = outcome.phy_offsets.first().copied().unwrap_or(0);
    Ok(SendMessageResponseHeader {
        msg_id: offset_msg_id(shard.ctx.store_host, phy as i64),
        queue_id,
        queue_offset: outcome.queue_offsets.first().copied().unwrap_or(0) as i64,
        transaction_id: None,
    })
}
