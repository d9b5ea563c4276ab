//! ReceiveMessage, AckMessage and ChangeInvisibleDuration (Java's `ReceiveMessageActivity`,
//! `AckMessageActivity`, `ChangeInvisibleDurationActivity`): a receive is a POP_MESSAGE of
//! every queue of this broker (queue -1, `initMode` MAX, orderly for a FIFO group), each popped
//! message handed out with its receipt handle (the broker's `POP_CK` form, built as Java's
//! client builds it from the pop's offset info, plus the commit-log offset); a message past
//! the client's max attempts goes to the dead-letter queue instead. Acks and changes are
//! ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME with the handle's fields.

use std::collections::HashMap;

use ringmq_protocol::codes::{request_code as req, response_code as rc};
use ringmq_protocol::headers::ConsumerSendMsgBackRequestHeader;
use ringmq_protocol::headers::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader, PopMessageResponseHeader,
};
use ringmq_protocol::message::{self, DecodedRecord};
use ringmq_protocol::pop::{
    parse_start_offset_info, BatchAck, BatchAckMessageRequestBody, ExtraInfo, RetryFlag,
    PROPERTY_POP_CK,
};
use ringmq_protocol::properties;
use ringmq_protocol::RemotingCommand;

use crate::clients::Client;
use crate::convert::{self, duration_ms};
use crate::endpoint::Endpoint;
use crate::pb::{self, Code, FilterType};
use crate::renewals::{RenewKey, Renewal};
use crate::route::{check_group, check_topic};
use crate::status::{self, GrpcError};

/// The most messages one receive pops (the broker's cap per POP).
pub const MAX_BATCH: i32 = 32;
/// Long polling bounds (`grpcClientConsumerMin/MaxLongPollingTimeoutMillis`).
pub const MIN_POLL_MS: i64 = 5_000;
pub const MAX_POLL_MS: i64 = 20_000;
/// A receive's invisible time bounds (`minInvisibleTimeMillsForRecv`, `maxInvisibleTimeMills`).
pub const MIN_INVISIBLE_MS: i64 = 10_000;
pub const MAX_INVISIBLE_MS: i64 = 12 * 3600 * 1000;
/// `ConsumeInitMode.MAX`: a new group starts at the end of each queue.
const INIT_MODE_MAX: i32 = 1;

/// What one receive asks of the broker.
struct Receive {
    group: String,
    topic: String,
    batch: i32,
    invisible_ms: i64,
    poll_ms: i64,
    fifo: bool,
    max_attempts: i32,
    filter: pb::FilterExpression,
    attempt_id: Option<String>,
    /// A push consumer's receive: the endpoint renews what it hands out.
    auto_renew: bool,
}

fn check_receive(
    ep: &Endpoint,
    s: &Client,
    r: &pb::ReceiveMessageRequest,
    deadline_ms: Option<i64>,
) -> Result<Receive, GrpcError> {
    let settings = s.require_settings()?;
    let group = check_group(r.group.as_ref())?;
    let mq = r.message_queue.as_ref();
    let topic = check_topic(mq.and_then(|q| q.topic.as_ref()))?;
    let sub = match &settings.pub_sub {
        Some(pb::settings::PubSub::Subscription(sub)) => sub.clone(),
        _ => {
            return Err(GrpcError::new(
                Code::UnrecognizedClientType,
                "this client's settings are not a consumer's",
            ))
        }
    };
    if r.batch_size <= 0 || r.batch_size > MAX_BATCH {
        return Err(GrpcError::bad_request(format!(
            "batch size {} is outside 1..={MAX_BATCH}",
            r.batch_size
        )));
    }
    let invisible_ms = if r.auto_renew {
        ep.cfg.renew.invisible_ms
    } else {
        let ms = r.invisible_duration.as_ref().map_or(0, duration_ms);
        if !(MIN_INVISIBLE_MS..=MAX_INVISIBLE_MS).contains(&ms) {
            return Err(GrpcError::new(
                Code::IllegalInvisibleTime,
                format!("invisible duration {ms} ms is outside {MIN_INVISIBLE_MS}..={MAX_INVISIBLE_MS} ms"),
            ));
        }
        ms
    };
    let asked = r
        .long_polling_timeout
        .as_ref()
        .or(sub.long_polling_timeout.as_ref())
        .map_or(MAX_POLL_MS, duration_ms);
    let mut poll_ms = asked.clamp(MIN_POLL_MS, MAX_POLL_MS);
    if let Some(left) = deadline_ms {
        if left < MIN_POLL_MS {
            return Err(GrpcError::new(
                Code::IllegalPollingTime,
                format!("the call's deadline ({left} ms) is shorter than the least polling time ({MIN_POLL_MS} ms)"),
            ));
        }
        // Answer before the client gives up on the call.
        poll_ms = poll_ms.min(left - left / 10);
    }
    let filter = r.filter_expression.clone().unwrap_or(pb::FilterExpression {
        r#type: FilterType::Tag as i32,
        expression: "*".into(),
    });
    Ok(Receive {
        group,
        topic,
        batch: r.batch_size,
        invisible_ms,
        poll_ms,
        fifo: sub.fifo.unwrap_or(false),
        max_attempts: settings
            .backoff_policy
            .as_ref()
            .map_or(0, |b| b.max_attempts),
        filter,
        attempt_id: r.attempt_id.clone(),
        auto_renew: r.auto_renew,
    })
}

fn pop_command(s: &Client, r: &Receive, now_ms: i64) -> Result<RemotingCommand, GrpcError> {
    let (exp_type, exp) = match FilterType::try_from(r.filter.r#type) {
        Ok(FilterType::Sql) => ("SQL92", r.filter.expression.clone()),
        Ok(FilterType::Tag) | Ok(FilterType::Unspecified) => {
            let e = r.filter.expression.trim();
            (
                "TAG",
                if e.is_empty() {
                    "*".into()
                } else {
                    e.to_string()
                },
            )
        }
        Err(_) => {
            return Err(GrpcError::new(
                Code::IllegalFilterExpression,
                format!("filter type {} is unknown", r.filter.r#type),
            ))
        }
    };
    let mut cmd = RemotingCommand::new_request(req::POP_MESSAGE);
    cmd.language = s.language;
    PopMessageRequestHeader {
        consumer_group: r.group.clone(),
        topic: r.topic.clone(),
        queue_id: -1,
        max_msg_nums: r.batch,
        invisible_time: r.invisible_ms,
        poll_time: r.poll_ms,
        born_time: now_ms,
        init_mode: INIT_MODE_MAX,
        exp_type: Some(exp_type.into()),
        exp: Some(exp),
        order: r.fifo,
        attempt_id: r.attempt_id.clone(),
    }
    .write_to(&mut cmd);
    Ok(cmd)
}

/// The frames of a receive's stream: status, messages, delivery timestamp (Java's order).
pub fn receive_frames(
    r: Result<Vec<pb::Message>, GrpcError>,
    now_ms: i64,
) -> Vec<pb::ReceiveMessageResponse> {
    use pb::receive_message_response::Content;
    let frame = |c| pb::ReceiveMessageResponse { content: Some(c) };
    let mut out = Vec::new();
    match r {
        Ok(msgs) if !msgs.is_empty() => {
            out.push(frame(Content::Status(status::ok())));
            out.extend(msgs.into_iter().map(|m| frame(Content::Message(m))));
        }
        Ok(_) => out.push(frame(Content::Status(
            GrpcError::new(Code::MessageNotFound, "no new message").status(),
        ))),
        Err(e) => out.push(frame(Content::Status(e.status()))),
    }
    out.push(frame(Content::DeliveryTimestamp(convert::timestamp(
        now_ms,
    ))));
    out
}

pub async fn receive(
    ep: &Endpoint,
    s: &Client,
    r: pb::ReceiveMessageRequest,
    deadline_ms: Option<i64>,
) -> Result<Vec<pb::Message>, GrpcError> {
    let rcv = check_receive(ep, s, &r, deadline_ms)?;
    let cmd = pop_command(s, &rcv, crate::now_ms())?;
    let answer = s.invoke(&ep.gateway, cmd).await?;
    match answer.code {
        rc::SUCCESS => {}
        rc::POLLING_TIMEOUT | rc::PULL_NOT_FOUND | rc::NO_MESSAGE => return Ok(Vec::new()),
        rc::POLLING_FULL => {
            return Err(GrpcError::new(
                Code::TooManyRequests,
                "polling full: too many receives wait",
            ))
        }
        code => return Err(GrpcError::from_remoting(code, answer.remark.as_deref())),
    }
    let h = PopMessageResponseHeader::from_command(&answer)
        .map_err(|e| GrpcError::internal(format!("pop answer: {e}")))?;
    let mut out = Vec::new();
    let mut dead = Vec::new();
    let handles = Handles::new(&ep.cfg.broker_name, &h)?;
    let mut body: &[u8] = &answer.body;
    while !body.is_empty() {
        let size = message::peek_total_size(body)
            .map_err(|e| GrpcError::internal(format!("popped record: {e}")))?
            as usize;
        let rec = message::decode(&body[..size.min(body.len())], false)
            .map_err(|e| GrpcError::internal(format!("popped record: {e}")))?;
        body = &body[size.min(body.len())..];
        let handle = handles.of(&rec);
        if rcv.max_attempts > 0 && rec.reconsume_times >= rcv.max_attempts {
            dead.push((
                handle,
                properties::get(rec.properties, "UNIQ_KEY")
                    .unwrap_or("")
                    .to_string(),
            ));
            continue;
        }
        let mut m = convert::incoming(&rec, &answer.body, &rcv.topic, Some(handle));
        if let (true, Some(sys)) = (rcv.fifo, m.system_properties.as_mut()) {
            if let Some(n) = handles.order_count(&rec) {
                sys.delivery_attempt = Some(n + 1);
            }
        }
        if let Some(sys) = m.system_properties.as_mut() {
            sys.invisible_duration = Some(convert::duration(rcv.invisible_ms));
        }
        out.push(m);
    }
    if rcv.auto_renew {
        track(ep, s, &rcv, &out);
    }
    for (handle, msg_id) in dead {
        // Past its max attempts: to the DLQ, not to the client (Java's PopMessageResultFilter).
        if let Err(e) = dead_letter(ep, s, &rcv, &handle, &msg_id).await {
            tracing::warn!(group = %rcv.group, error = %e, "message past its max attempts not moved to the DLQ; it comes back");
        }
    }
    Ok(out)
}

async fn dead_letter(
    ep: &Endpoint,
    s: &Client,
    rcv: &Receive,
    handle: &str,
    msg_id: &str,
) -> Result<(), GrpcError> {
    let h = handle_of(handle)?;
    let mut cmd = RemotingCommand::new_request(req::CONSUMER_SEND_MSG_BACK);
    ConsumerSendMsgBackRequestHeader {
        offset: h.commit_log_offset.unwrap_or(0),
        group: rcv.group.clone(),
        delay_level: -1,
        origin_msg_id: Some(msg_id.to_string()),
        origin_topic: Some(h.retry.real_topic(&rcv.topic, &rcv.group)),
        unit_mode: false,
        max_reconsume_times: Some(0),
    }
    .write_to(&mut cmd);
    s.invoke_ok(&ep.gateway, cmd).await?;
    ack_one(ep, s, &rcv.group, &rcv.topic, handle).await
}

/// Starts renewing what a push consumer's receive hands out.
fn track(ep: &Endpoint, s: &Client, rcv: &Receive, out: &[pb::Message]) {
    for m in out {
        let Some(sys) = &m.system_properties else {
            continue;
        };
        let Some(handle) = &sys.receipt_handle else {
            continue;
        };
        let Ok(h) = ExtraInfo::parse(handle) else {
            continue;
        };
        let key = RenewKey {
            client_id: s.client_id.clone(),
            group: rcv.group.clone(),
            message_id: sys.message_id.clone(),
        };
        let renewal = Renewal {
            topic: rcv.topic.clone(),
            handle: handle.clone(),
            next_visible_ms: h.next_visible_time(),
            since: std::time::Instant::now(),
        };
        if !ep.renewals.track(key, renewal) {
            tracing::debug!(client = %s.client_id, "renewal table full: a message comes back after its invisible time");
        }
    }
}

/// The handle to act on for a message a client names: the latest renewal of a push consumer's
/// message (no longer renewed from now on), else the client's own.
fn current_handle(ep: &Endpoint, s: &Client, group: &str, message_id: &str, given: &str) -> String {
    let key = RenewKey {
        client_id: s.client_id.clone(),
        group: group.to_string(),
        message_id: message_id.to_string(),
    };
    ep.renewals
        .take(&key)
        .map_or_else(|| given.to_string(), |r| r.handle)
}

/// Builds the receipt handles of one pop's messages, as Java's client does from the answer.
struct Handles<'a> {
    broker: &'a str,
    h: &'a PopMessageResponseHeader,
    start: HashMap<(RetryFlag, i32), i64>,
    counts: HashMap<String, i32>,
}

impl<'a> Handles<'a> {
    fn new(broker: &'a str, h: &'a PopMessageResponseHeader) -> Result<Handles<'a>, GrpcError> {
        let bad =
            |e: ringmq_protocol::ProtocolError| GrpcError::internal(format!("pop answer: {e}"));
        let start = parse_start_offset_info(h.start_offset_info.as_deref().unwrap_or(""))
            .map_err(bad)?
            .into_iter()
            .map(|e| ((e.retry, e.queue_id), e.value))
            .collect();
        // `orderCountInfo`: `flag key count` entries, the key `qo{queue}%{offset}` or a queue id.
        let counts = h
            .order_count_info
            .as_deref()
            .unwrap_or("")
            .split(';')
            .filter_map(|e| {
                let (key, count) = e.rsplit_once(' ')?;
                Some((key.to_string(), count.parse().ok()?))
            })
            .collect();
        Ok(Handles {
            broker,
            h,
            start,
            counts,
        })
    }

    /// The message's receipt handle: its `POP_CK` when the broker set one (retried messages),
    /// else built from the pop's start offsets; the commit-log offset appended.
    fn of(&self, r: &DecodedRecord<'_>) -> String {
        let base = match properties::get(r.properties, PROPERTY_POP_CK) {
            Some(ck) => ck.to_string(),
            None => {
                let retry = RetryFlag::of_topic(r.topic);
                let ck = self
                    .start
                    .get(&(retry, r.queue_id))
                    .copied()
                    .unwrap_or(r.queue_offset);
                ExtraInfo {
                    ck_queue_offset: ck,
                    pop_time: self.h.pop_time,
                    invisible_time: self.h.invisible_time,
                    revive_qid: self.h.revive_qid,
                    retry,
                    broker_name: self.broker.to_string(),
                    queue_id: r.queue_id,
                    queue_offset: Some(r.queue_offset),
                    commit_log_offset: None,
                }
                .to_string()
            }
        };
        format!("{base} {}", r.phy_offset)
    }

    /// An orderly pop's delivery count of the message (how often it was popped before).
    fn order_count(&self, r: &DecodedRecord<'_>) -> Option<i32> {
        let flag = RetryFlag::of_topic(r.topic).as_str();
        let per_message = format!("{flag} qo{}%{}", r.queue_id, r.queue_offset);
        let per_queue = format!("{flag} {}", r.queue_id);
        self.counts
            .get(&per_message)
            .or_else(|| self.counts.get(&per_queue))
            .copied()
            .filter(|c| *c > 0)
    }
}

/// Acks one message by its receipt handle.
pub async fn ack_one(
    ep: &Endpoint,
    s: &Client,
    group: &str,
    topic: &str,
    handle: &str,
) -> Result<(), GrpcError> {
    let cmd = ack_command(s, group, topic, handle)?;
    s.invoke_ok(&ep.gateway, cmd).await?;
    Ok(())
}

/// A handle an ack or a change can act on: parsed, with the message's queue offset.
fn handle_with_offset(handle: &str) -> Result<(ExtraInfo, i64), GrpcError> {
    let h = handle_of(handle)?;
    let offset = h.queue_offset.ok_or_else(|| {
        GrpcError::new(
            Code::InvalidReceiptHandle,
            "receipt handle has no queue offset",
        )
    })?;
    Ok((h, offset))
}

/// The ACK_MESSAGE of one receipt handle.
fn ack_command(
    s: &Client,
    group: &str,
    topic: &str,
    handle: &str,
) -> Result<RemotingCommand, GrpcError> {
    let (h, offset) = handle_with_offset(handle)?;
    let mut cmd = RemotingCommand::new_request(req::ACK_MESSAGE);
    cmd.language = s.language;
    AckMessageRequestHeader {
        consumer_group: group.to_string(),
        topic: h.retry.real_topic(topic, group),
        queue_id: h.queue_id,
        extra_info: handle.to_string(),
        offset,
    }
    .write_to(&mut cmd);
    Ok(cmd)
}

/// Acks every entry: one ACK_MESSAGE for a single entry (its own status back), one
/// BATCH_ACK_MESSAGE for several (the handles of each pop as a bit set, as Java's proxy does
/// with `enableBatchAck`: one state record for all of them, not one each); a handle that does
/// not parse gets INVALID_RECEIPT_HANDLE alone.
pub async fn ack(
    ep: &Endpoint,
    s: &Client,
    r: pb::AckMessageRequest,
) -> Result<Vec<pb::AckMessageResultEntry>, GrpcError> {
    let group = check_group(r.group.as_ref())?;
    let topic = check_topic(r.topic.as_ref())?;
    let mut r = r;
    for e in &mut r.entries {
        e.receipt_handle = current_handle(ep, s, &group, &e.message_id, &e.receipt_handle);
    }
    if r.entries.len() == 1 {
        let e = r.entries.into_iter().next().unwrap_or_default();
        let done = ack_one(ep, s, &group, &topic, &e.receipt_handle).await;
        return Ok(vec![pb::AckMessageResultEntry {
            message_id: e.message_id,
            receipt_handle: e.receipt_handle,
            status: Some(status::status_of(&done)),
        }]);
    }
    let handles: Vec<Result<ExtraInfo, GrpcError>> = r
        .entries
        .iter()
        .map(|e| handle_with_offset(&e.receipt_handle).map(|(h, _)| h))
        .collect();
    let valid: Vec<&ExtraInfo> = handles.iter().filter_map(|h| h.as_ref().ok()).collect();
    let batch = if valid.is_empty() {
        Ok(())
    } else {
        let cmd = batch_ack_command(s, &group, &topic, &valid);
        s.invoke(&ep.gateway, cmd).await.and_then(|a| ok_answer(&a))
    };
    Ok(r.entries
        .into_iter()
        .zip(handles)
        .map(|(e, h)| {
            let done = h.and_then(|_| batch.clone());
            pb::AckMessageResultEntry {
                message_id: e.message_id,
                receipt_handle: e.receipt_handle,
                status: Some(status::status_of(&done)),
            }
        })
        .collect())
}

/// BATCH_ACK_MESSAGE of `handles`: one entry per pop (same queue, checkpoint, pop time).
fn batch_ack_command(
    s: &Client,
    group: &str,
    topic: &str,
    handles: &[&ExtraInfo],
) -> RemotingCommand {
    let mut by_pop: Vec<(&ExtraInfo, Vec<i64>)> = Vec::new();
    for h in handles {
        let same = |p: &ExtraInfo| {
            (
                p.retry,
                p.queue_id,
                p.ck_queue_offset,
                p.pop_time,
                p.revive_qid,
                p.invisible_time,
            ) == (
                h.retry,
                h.queue_id,
                h.ck_queue_offset,
                h.pop_time,
                h.revive_qid,
                h.invisible_time,
            )
        };
        let offset = h.queue_offset.unwrap_or(h.ck_queue_offset);
        match by_pop.iter_mut().find(|(p, _)| same(p)) {
            Some((_, offsets)) => offsets.push(offset),
            None => by_pop.push((h, vec![offset])),
        }
    }
    let acks = by_pop
        .into_iter()
        .map(|(h, offsets)| {
            let start = offsets
                .iter()
                .copied()
                .min()
                .unwrap_or(h.ck_queue_offset)
                .min(h.ck_queue_offset);
            BatchAck {
                consumer_group: group.to_string(),
                topic: topic.to_string(),
                retry: h.retry.as_str().to_string(),
                start_offset: start,
                queue_id: h.queue_id,
                revive_queue_id: h.revive_qid,
                pop_time: h.pop_time,
                invisible_time: h.invisible_time,
                bit_set: BatchAck::bits_of(start, &offsets),
            }
        })
        .collect();
    let body = BatchAckMessageRequestBody {
        broker_name: Some(handles[0].broker_name.clone()),
        acks,
    };
    let mut cmd = RemotingCommand::new_request(req::BATCH_ACK_MESSAGE)
        .with_body(ringmq_protocol::body::to_json(&body));
    cmd.language = s.language;
    cmd
}

/// SUCCESS, or the broker's code as an error.
fn ok_answer(a: &RemotingCommand) -> Result<(), GrpcError> {
    if a.code == rc::SUCCESS {
        Ok(())
    } else {
        Err(GrpcError::from_remoting(a.code, a.remark.as_deref()))
    }
}

/// AckMessage's answer: the entries, and OK, their common status or MULTIPLE_RESULTS.
pub fn ack_answer(r: Result<Vec<pb::AckMessageResultEntry>, GrpcError>) -> pb::AckMessageResponse {
    match r {
        Err(e) => pb::AckMessageResponse {
            status: Some(e.status()),
            entries: Vec::new(),
        },
        Ok(entries) => {
            let code = |e: &pb::AckMessageResultEntry| e.status.as_ref().map_or(0, |s| s.code);
            let status = match entries.first() {
                None => Some(status::ok()),
                Some(f) if entries.iter().all(|e| code(e) == code(f)) => f.status.clone(),
                Some(_) => Some(pb::Status {
                    code: Code::MultipleResults as i32,
                    message: "the entries have different results".into(),
                }),
            };
            pb::AckMessageResponse { status, entries }
        }
    }
}

pub async fn change_invisible_duration(
    ep: &Endpoint,
    s: &Client,
    r: pb::ChangeInvisibleDurationRequest,
) -> Result<String, GrpcError> {
    let group = check_group(r.group.as_ref())?;
    let topic = check_topic(r.topic.as_ref())?;
    let ms = r.invisible_duration.as_ref().map_or(-1, duration_ms);
    if !(0..=MAX_INVISIBLE_MS).contains(&ms) {
        return Err(GrpcError::new(
            Code::IllegalInvisibleTime,
            format!("invisible duration {ms} ms is outside 0..={MAX_INVISIBLE_MS} ms"),
        ));
    }
    let handle = current_handle(ep, s, &group, &r.message_id, &r.receipt_handle);
    change(ep, s, &group, &topic, &handle, ms).await
}

/// CHANGE_MESSAGE_INVISIBLETIME of one handle; the new handle.
pub async fn change(
    ep: &Endpoint,
    s: &Client,
    group: &str,
    topic: &str,
    handle: &str,
    ms: i64,
) -> Result<String, GrpcError> {
    let (h, offset) = handle_with_offset(handle)?;
    let mut cmd = RemotingCommand::new_request(req::CHANGE_MESSAGE_INVISIBLETIME);
    cmd.language = s.language;
    ChangeInvisibleTimeRequestHeader {
        consumer_group: group.to_string(),
        topic: h.retry.real_topic(topic, group),
        queue_id: h.queue_id,
        extra_info: handle.to_string(),
        offset,
        invisible_time: ms,
    }
    .write_to(&mut cmd);
    let answer = s.invoke_ok(&ep.gateway, cmd).await?;
    let a = ChangeInvisibleTimeResponseHeader::from_command(&answer)
        .map_err(|e| GrpcError::internal(format!("change answer: {e}")))?;
    // The new handle: the message's own offset as its checkpoint (Java's client builds it so).
    let new = ExtraInfo {
        ck_queue_offset: offset,
        pop_time: a.pop_time,
        invisible_time: a.invisible_time,
        revive_qid: a.revive_qid,
        queue_offset: Some(offset),
        ..h
    };
    Ok(new.to_string())
}

/// The receipt handle of a request, parsed.
pub fn handle_of(raw: &str) -> Result<ExtraInfo, GrpcError> {
    ExtraInfo::parse(raw).map_err(|_| {
        GrpcError::new(
            Code::InvalidReceiptHandle,
            format!(
                "receipt handle {:?} is invalid",
                raw.chars().take(64).collect::<String>()
            ),
        )
    })
}

pub async fn forward_to_dlq(
    ep: &Endpoint,
    s: &Client,
    r: pb::ForwardMessageToDeadLetterQueueRequest,
) -> Result<(), GrpcError> {
    let topic = check_topic(r.topic.as_ref())?;
    let group = check_group(r.group.as_ref())?;
    let current = current_handle(ep, s, &group, &r.message_id, &r.receipt_handle);
    let handle = handle_of(&current)?;
    let commit_log_offset = handle.commit_log_offset.ok_or_else(|| {
        GrpcError::new(
            Code::InvalidReceiptHandle,
            "receipt handle has no commit-log offset",
        )
    })?;
    let mut cmd = RemotingCommand::new_request(req::CONSUMER_SEND_MSG_BACK);
    cmd.language = s.language;
    ConsumerSendMsgBackRequestHeader {
        offset: commit_log_offset,
        group: group.clone(),
        delay_level: -1,
        origin_msg_id: Some(r.message_id.clone()),
        origin_topic: Some(handle.retry.real_topic(&topic, &group)),
        unit_mode: false,
        max_reconsume_times: Some(0),
    }
    .write_to(&mut cmd);
    s.invoke_ok(&ep.gateway, cmd).await?;
    ack_one(ep, s, &group, &topic, &current).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_in_java_order() {
        use pb::receive_message_response::Content;
        let f = receive_frames(Ok(vec![pb::Message::default()]), 5);
        assert!(matches!(&f[0].content, Some(Content::Status(s)) if s.code == Code::Ok as i32));
        assert!(matches!(&f[1].content, Some(Content::Message(_))));
        assert!(matches!(&f[2].content, Some(Content::DeliveryTimestamp(_))));
        let f = receive_frames(Ok(vec![]), 5);
        assert!(
            matches!(&f[0].content, Some(Content::Status(s)) if s.code == Code::MessageNotFound as i32)
        );
        assert_eq!(f.len(), 2);
    }
}
