//! SendMessage, EndTransaction and ForwardMessageToDeadLetterQueue (Java's
//! `SendMessageActivity`, `EndTransactionActivity`, `ForwardMessageToDLQActivity`): each
//! becomes the Remoting request a producer or consumer would send, run on the client's virtual
//! connection. The server picks the queue: a message group hashes to one of the topic's
//! writable queues (Guava's consistent hash of Java's `String.hashCode`, as the proxy does),
//! anything else goes round robin. The producer group of a gRPC producer is its topic.

use bytes::Bytes;

use ringmq_protocol::codes::request_code as req;
use ringmq_protocol::headers::EndTransactionRequestHeader;
use ringmq_protocol::headers::{SendMessageRequestHeader, SendMessageResponseHeader};
use ringmq_protocol::java_hash::java_string_hash;
use ringmq_protocol::message::sys_flag;
use ringmq_protocol::msg_id::decode_offset_msg_id;
use ringmq_protocol::properties::{self, keys};
use ringmq_protocol::topics::TBW102;
use ringmq_protocol::RemotingCommand;

use crate::clients::Client;
use crate::convert::{self, Outgoing};
use crate::endpoint::{Endpoint, TransactionData};
use crate::pb::{
    self, Code, MessageType, SendResultEntry, TransactionResolution, TransactionSource,
};
use crate::route::{accepted_types, check_topic};
use crate::status::{self, GrpcError};

/// Guava's `Hashing.consistentHash`: the bucket in `0..buckets` for `input`, moving few inputs
/// when buckets are added (a linear congruential walk over candidate buckets).
pub fn consistent_hash(input: i64, buckets: i32) -> i32 {
    let mut state = input as u64;
    let mut candidate = 0i32;
    loop {
        state = state
            .wrapping_mul(2_862_933_555_777_941_757)
            .wrapping_add(1);
        let draw = f64::from(((state >> 33) as i32).wrapping_add(1)) / f64::from(1u32 << 31);
        let next = ((f64::from(candidate) + 1.0) / draw) as i32;
        if next >= 0 && next < buckets {
            candidate = next;
        } else {
            return candidate;
        }
    }
}

/// A request's answer: one entry per message, the overall status OK, the entries' common
/// status, or MULTIPLE_RESULTS.
pub fn send_answer(r: Result<Vec<SendResultEntry>, GrpcError>) -> pb::SendMessageResponse {
    let entries = match r {
        Ok(e) => e,
        Err(e) => {
            return pb::SendMessageResponse {
                status: Some(e.status()),
                entries: Vec::new(),
            }
        }
    };
    let codes: Vec<i32> = entries
        .iter()
        .map(|e| e.status.as_ref().map_or(0, |s| s.code))
        .collect();
    let status = match codes.first() {
        Some(first) if codes.iter().all(|c| c == first) => entries[0].status.clone(),
        Some(_) => Some(pb::Status {
            code: Code::MultipleResults as i32,
            message: "the messages have different results".into(),
        }),
        None => Some(status::ok()),
    };
    pb::SendMessageResponse { status, entries }
}

pub async fn send(
    ep: &Endpoint,
    s: &Client,
    r: pb::SendMessageRequest,
) -> Result<Vec<SendResultEntry>, GrpcError> {
    let first = r
        .messages
        .first()
        .ok_or_else(|| GrpcError::bad_request("no message to send"))?;
    let topic = check_topic(first.topic.as_ref())?;
    if r.messages
        .iter()
        .any(|m| m.topic.as_ref().map(|t| t.name.as_str()) != Some(topic.as_str()))
    {
        return Err(GrpcError::new(
            Code::MessageCorrupted,
            "messages of one request must share a topic",
        ));
    }
    let config = ep.topic_config(s.shard, &topic).await?.ok_or_else(|| {
        GrpcError::new(Code::TopicNotFound, format!("topic {topic} does not exist"))
    })?;
    let types = accepted_types(Some(&config));
    let now = crate::now_ms();
    let mut entries = Vec::with_capacity(r.messages.len());
    for m in r.messages {
        let sent = match convert::outgoing(&m, &ep.cfg.limits, now) {
            Ok(o) => send_one(ep, s, &topic, config.write_queue_nums, &types, o, m.body).await,
            Err(e) => Err(e),
        };
        entries.push(match sent {
            Ok(e) => e,
            Err(e) => SendResultEntry {
                status: Some(e.status()),
                ..Default::default()
            },
        });
    }
    Ok(entries)
}

/// The type the message's properties make it (what the topic must accept).
fn kind_of(o: &Outgoing) -> MessageType {
    if o.kind == MessageType::Transaction {
        MessageType::Transaction
    } else if properties::get(&o.properties, keys::TIMER_DELIVER_MS).is_some() {
        MessageType::Delay
    } else if o.message_group.is_some() {
        MessageType::Fifo
    } else {
        MessageType::Normal
    }
}

async fn send_one(
    ep: &Endpoint,
    s: &Client,
    topic: &str,
    write_queues: i32,
    types: &[MessageType],
    mut o: Outgoing,
    body: Bytes,
) -> Result<SendResultEntry, GrpcError> {
    let kind = kind_of(&o);
    if ep.cfg.check_message_type && !types.contains(&kind) {
        return Err(GrpcError::new(
            Code::MessagePropertyConflictWithType,
            format!(
                "topic {topic} takes {} messages, this one is {}",
                types
                    .iter()
                    .map(|t| t.as_str_name())
                    .collect::<Vec<_>>()
                    .join("/"),
                kind.as_str_name()
            ),
        ));
    }
    if write_queues <= 0 {
        return Err(GrpcError::new(
            Code::Forbidden,
            format!("topic {topic} has no writable queue"),
        ));
    }
    let queue_id = match &o.message_group {
        Some(g) => consistent_hash(i64::from(java_string_hash(g)), write_queues),
        None => (ep.next_round_robin() % write_queues as u64) as i32,
    };
    if kind == MessageType::Transaction {
        properties::append(&mut o.properties, keys::PGROUP, topic);
    }
    let mut cmd = RemotingCommand::new_request(req::SEND_MESSAGE_V2);
    cmd.language = s.language;
    SendMessageRequestHeader {
        producer_group: topic.to_string(),
        topic: topic.to_string(),
        default_topic: TBW102.to_string(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag: o.sys_flag,
        born_timestamp: o.born_timestamp,
        properties: o.properties,
        reconsume_times: o.reconsume_times,
        ..Default::default()
    }
    .write_to_v2(&mut cmd);
    let answer = s.invoke_ok(&ep.gateway, cmd.with_body(body)).await?;
    let h = SendMessageResponseHeader::from_command(&answer)
        .map_err(|e| GrpcError::internal(format!("send answer: {e}")))?;
    let mut transaction_id = String::new();
    if o.sys_flag & sys_flag::TRANSACTION_PREPARED != 0 {
        transaction_id = h
            .transaction_id
            .clone()
            .unwrap_or_else(|| o.message_id.clone());
        let (_, commit_log_offset) = decode_offset_msg_id(&h.msg_id)
            .map_err(|e| GrpcError::internal(format!("send answer's msgId: {e}")))?;
        let data = TransactionData {
            tran_state_table_offset: h.queue_offset,
            commit_log_offset,
        };
        ep.transactions.put(topic, &transaction_id, data);
    }
    Ok(SendResultEntry {
        status: Some(status::ok()),
        message_id: o.message_id,
        transaction_id,
        offset: h.queue_offset,
        recall_handle: String::new(),
    })
}

pub async fn end_transaction(
    ep: &Endpoint,
    s: &Client,
    r: pb::EndTransactionRequest,
) -> Result<(), GrpcError> {
    let topic = check_topic(r.topic.as_ref())?;
    if r.transaction_id.is_empty() {
        return Err(GrpcError::new(
            Code::InvalidTransactionId,
            "transaction id is empty",
        ));
    }
    let data = ep
        .transactions
        .get(&topic, &r.transaction_id)
        .ok_or_else(|| {
            GrpcError::new(
                Code::InvalidTransactionId,
                format!(
                    "no transaction {} of topic {topic} is known here",
                    r.transaction_id
                ),
            )
        })?;
    let commit_or_rollback = match TransactionResolution::try_from(r.resolution) {
        Ok(TransactionResolution::Commit) => sys_flag::TRANSACTION_COMMIT,
        Ok(TransactionResolution::Rollback) => sys_flag::TRANSACTION_ROLLBACK,
        _ => sys_flag::TRANSACTION_NOT_TYPE,
    };
    let mut cmd = RemotingCommand::new_request(req::END_TRANSACTION);
    cmd.language = s.language;
    EndTransactionRequestHeader {
        producer_group: topic.clone(),
        tran_state_table_offset: data.tran_state_table_offset,
        commit_log_offset: data.commit_log_offset,
        commit_or_rollback,
        from_transaction_check: r.source == TransactionSource::SourceServerCheck as i32,
        msg_id: r.message_id.clone(),
        transaction_id: Some(r.transaction_id.clone()),
        topic: Some(topic),
    }
    .write_to(&mut cmd);
    s.invoke_ok(&ep.gateway, cmd).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistent_hash_stays_in_range_and_moves_little() {
        for n in 1..20 {
            for i in -50i64..50 {
                let b = consistent_hash(i * 7919, n);
                assert!((0..n).contains(&b));
            }
        }
        // Going from n to n + 1 buckets moves about 1/(n+1) of the inputs, all to the new one.
        let moved = (0..1000i64)
            .filter(|i| consistent_hash(*i, 8) != consistent_hash(*i, 9))
            .inspect(|i| assert_eq!(consistent_hash(*i, 9), 8))
            .count();
        assert!(moved > 50 && moved < 200, "{moved}");
        assert_eq!(consistent_hash(12345, 1), 0);
    }
}
