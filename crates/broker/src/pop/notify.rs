//! NOTIFICATION (200054): is there something to pop, waiting up to the poll time for it, without
//! popping (always SUCCESS, with `hasMsg` and `pollingFull`); POLLING_INFO (200055): how many
//! requests are parked on a queue. Both make the checks of Java's processors first.

use std::rc::Rc;
use std::time::Duration;

use crate::common::now_ms;
use crate::error::BrokerError;
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::{
    NotificationRequestHeader, NotificationResponseHeader, PollingInfoRequestHeader,
    PollingInfoResponseHeader,
};
use crate::protocol::RemotingCommand;
use crate::shard::Shard;

use super::queue;
use super::state::PopKey;
use super::{park_on_queues, readable, refuse_on_slave};

pub async fn notification(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = NotificationRequestHeader::from_command(cmd)?;
    refuse_on_slave(&shard)?;
    let (_, qids) = readable(&shard, &h.consumer_group, &h.topic, h.queue_id).await?;
    let mut keys: Vec<PopKey> = qids
        .iter()
        .map(|&q| PopKey {
            group: h.consumer_group.clone(),
            topic: h.topic.clone(),
            queue_id: q,
        })
        .collect();
    if !h.order {
        for t in super::retry_topics_read(&shard, &h.consumer_group, &h.topic) {
            let Some(tc) = shard.topics().get(&t).cloned() else {
                continue;
            };
            keys.extend((0..tc.read_queue_nums.max(0) as u32).map(|q| PopKey {
                group: h.consumer_group.clone(),
                topic: t.clone(),
                queue_id: q,
            }));
        }
    }
    let born = if h.born_time == 0 {
        now_ms()
    } else {
        h.born_time
    };
    let deadline = born.saturating_add(h.poll_time);
    let mut polling_full = false;
    let mut has_msg = any_message(&shard, &keys, h.order).await?;
    while !has_msg && !polling_full {
        let left = deadline - now_ms();
        if left <= 0 {
            break;
        }
        let queues: Vec<(String, u32)> =
            keys.iter().map(|k| (k.topic.clone(), k.queue_id)).collect();
        polling_full = !park_on_queues(&shard, &queues, Duration::from_millis(left as u64)).await;
        has_msg = any_message(&shard, &keys, h.order).await?;
    }
    let mut resp = RemotingCommand::response_for(cmd, rc::SUCCESS, None);
    NotificationResponseHeader {
        has_msg,
        polling_full,
    }
    .write_to(&mut resp);
    Ok(resp)
}

async fn any_message(shard: &Rc<Shard>, keys: &[PopKey], order: bool) -> Result<bool, BrokerError> {
    for k in keys {
        let owner = shard.owner(&k.topic, k.queue_id);
        let key = k.clone();
        let has = shard
            .mesh
            .call(owner, move |s| queue::has_message(s, key, order))
            .await??;
        if has {
            return Ok(true);
        }
    }
    Ok(false)
}

pub async fn polling_info(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = PollingInfoRequestHeader::from_command(cmd)?;
    refuse_on_slave(&shard)?;
    let (_, qids) = readable(&shard, &h.consumer_group, &h.topic, h.queue_id).await?;
    let mut n = 0usize;
    for q in qids {
        let topic = h.topic.clone();
        n += crate::offsets::on_owner(&shard, &h.topic, q, move |s| s.parked_on(&topic, q)).await?;
    }
    let mut resp = RemotingCommand::response_for(cmd, rc::SUCCESS, None);
    PollingInfoResponseHeader {
        polling_num: i32::try_from(n).unwrap_or(i32::MAX),
    }
    .write_to(&mut resp);
    Ok(resp)
}
