//! ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151) and CHANGE_MESSAGE_INVISIBLETIME (200053)
//! on the connection's shard: Java's checks (the topic, the queue, the offset inside the queue),
//! the handle parsed, and the change made on the queue's owner (`queue`). A handle that matches
//! nothing in flight (acked before, already redelivered, of another pop) is answered SUCCESS and
//! changes nothing, as Java answers it; it is never applied to another message.

use std::rc::Rc;

use crate::common::now_ms;
use crate::error::BrokerError;
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
};
use crate::protocol::pop::{
    BatchAckMessageRequestBody, ExtraInfo, RetryFlag, POP_ORDER_REVIVE_QUEUE,
};
use crate::protocol::RemotingCommand;
use crate::shard::Shard;

use super::queue;
use super::state::PopKey;

/// Java's answer to a queue id outside the topic (MESSAGE_ILLEGAL for acks).
fn check_queue(shard: &Shard, topic: &str, queue_id: i32, group: &str) -> Result<u32, BrokerError> {
    let tc = shard.topics().get(topic).cloned().ok_or_else(|| {
        BrokerError::TopicNotExist(format!("topic[{topic}] not exist, apply first please!"))
    })?;
    if queue_id < 0 || queue_id >= tc.read_queue_nums {
        return Err(BrokerError::MessageIllegal(format!(
            "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[{group}]",
            tc.read_queue_nums
        )));
    }
    Ok(queue_id as u32)
}

/// The queue's [min, max] from its owner.
async fn bounds(shard: &Rc<Shard>, topic: &str, qid: u32) -> Result<(u64, u64), BrokerError> {
    let t = topic.to_string();
    crate::offsets::on_owner(shard, topic, qid, move |s| s.queue_bounds(&t, qid)).await
}

/// The message an ack or a change names: the queue checked, the offset inside the queue's
/// `[min, max]` (`[min, max)` when `below_max`), as Java checks them.
async fn target(
    shard: &Rc<Shard>,
    (group, topic, queue_id): (&str, &str, i32),
    offset: i64,
    below_max: bool,
) -> Result<PopKey, BrokerError> {
    let qid = check_queue(shard, topic, queue_id, group)?;
    let (min, max) = bounds(shard, topic, qid).await?;
    let past = if below_max {
        offset >= max as i64
    } else {
        offset > max as i64
    };
    if offset < min as i64 || past {
        return Err(BrokerError::NoMessage(format!(
            "offset is illegal, key:{topic}@{group}@{qid}, store:{min}~{max}"
        )));
    }
    Ok(PopKey {
        group: group.to_string(),
        topic: topic.to_string(),
        queue_id: qid,
    })
}

/// Acks `offsets` of `key`'s queue on the shard owning it (one hop, bounds checked there).
async fn ack_on_owner(
    shard: &Rc<Shard>,
    key: PopKey,
    offsets: Vec<u64>,
    pop_time: i64,
    orderly: bool,
) -> Result<usize, BrokerError> {
    let owner = shard.owner(&key.topic, key.queue_id);
    shard
        .mesh
        .call(owner, move |s| {
            queue::ack_offsets(s, key, offsets, pop_time, orderly)
        })
        .await?
}

fn parse_handle(raw: &str) -> Result<ExtraInfo, BrokerError> {
    ExtraInfo::parse(raw).map_err(|e| BrokerError::System(format!("bad receipt handle: {e}")))
}

pub async fn ack_message(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = AckMessageRequestHeader::from_command(cmd)?;
    super::refuse_on_slave(&shard)?;
    let handle = parse_handle(&h.extra_info)?;
    let at = (h.consumer_group.as_str(), h.topic.as_str(), h.queue_id);
    let key = target(&shard, at, h.offset, false).await?;
    let offset = h.offset as u64;
    ack_on_owner(
        &shard,
        key,
        vec![offset],
        handle.pop_time,
        handle.is_order(),
    )
    .await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

pub async fn batch_ack_message(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    super::refuse_on_slave(&shard)?;
    if cmd.body.is_empty() {
        return Err(BrokerError::NoMessage("the batch ack has no body".into()));
    }
    let body: BatchAckMessageRequestBody = serde_json::from_slice(&cmd.body)
        .map_err(|e| BrokerError::InvalidParameter(format!("batch ack body: {e}")))?;
    if body.acks.is_empty() {
        return Err(BrokerError::NoMessage("the batch ack has no acks".into()));
    }
    for a in &body.acks {
        let Some(flag) = RetryFlag::parse(&a.retry) else {
            continue;
        };
        let topic = flag.real_topic(&a.topic, &a.consumer_group);
        let Ok(qid) = u32::try_from(a.queue_id) else {
            continue;
        };
        let Some(tc) = shard.topics().get(&topic).cloned() else {
            continue;
        };
        if a.queue_id >= tc.read_queue_nums {
            continue;
        }
        let offsets = a
            .offsets()?
            .into_iter()
            .filter_map(|o| u64::try_from(o).ok());
        let key = PopKey {
            group: a.consumer_group.clone(),
            topic,
            queue_id: qid,
        };
        let orderly = a.revive_queue_id == POP_ORDER_REVIVE_QUEUE;
        ack_on_owner(&shard, key, offsets.collect(), a.pop_time, orderly).await?;
    }
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

pub async fn change_invisible_time(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = ChangeInvisibleTimeRequestHeader::from_command(cmd)?;
    super::refuse_on_slave(&shard)?;
    let handle = parse_handle(&h.extra_info)?;
    if h.invisible_time < 0 {
        return Err(BrokerError::InvalidParameter(format!(
            "invisibleTime {} is negative",
            h.invisible_time
        )));
    }
    let at = (h.consumer_group.as_str(), h.topic.as_str(), h.queue_id);
    let key = target(&shard, at, h.offset, true).await?;
    let (offset, pop_time, invisible) = (h.offset as u64, handle.pop_time, h.invisible_time);
    let order = handle.is_order();
    let now = now_ms();
    let owner = shard.owner(&key.topic, key.queue_id);
    let changed = shard
        .mesh
        .call(owner, move |s| {
            queue::change(s, key, offset, pop_time, invisible, order, now)
        })
        .await??;
    // A handle that matches nothing in flight is answered as Java answers it (SUCCESS, with the
    // times of a new handle); that handle matches nothing either.
    let (pop_time, invisible_time) = changed.unwrap_or((now, invisible));
    let mut resp = RemotingCommand::response_for(cmd, rc::SUCCESS, None);
    ChangeInvisibleTimeResponseHeader {
        pop_time,
        invisible_time,
        revive_qid: handle.revive_qid,
    }
    .write_to(&mut resp);
    Ok(resp)
}
