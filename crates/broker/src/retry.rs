//! CONSUMER_SEND_MSG_BACK (36): a consumer failed a message; store it again in
//! `%RETRY%<group>` with delay level `3 + reconsumeTimes` (or the requested level), or in
//! `%DLQ%<group>` once `maxReconsumeTimes` is reached or the level is negative (Java's
//! `SendMessageProcessor.consumerSendMsgBack`).

use std::rc::Rc;

use crate::append::{append, build_record, Outgoing};
use crate::error::BrokerError;
use crate::metadata::topic_validator::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::ConsumerSendMsgBackRequestHeader;
use crate::protocol::msg_id::offset_msg_id;
use crate::protocol::properties::{self, keys};
use crate::protocol::{message, RemotingCommand};
use crate::shard::Shard;
use crate::topic_manager::ensure_topic;

/// Smallest stored record: the fixed fields alone.
const MIN_RECORD: u32 = 91;

/// The subscription group's retryMaxTimes (shard 0 owns the groups).
pub async fn group_retry_max(shard: &Rc<Shard>, group: &str) -> Result<i32, BrokerError> {
    let g = group.to_string();
    let settings = shard.settings();
    let default = settings.max_reconsume_times;
    let auto = settings.auto_create_subscription_group;
    let max = shard
        .mesh
        .call(0, move |s0| async move {
            s0.meta_mut()
                .group_or_create(&g, auto)
                .map(|c| c.retry_max_times)
        })
        .await?;
    Ok(max.unwrap_or(default))
}

pub async fn send_msg_back(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = ConsumerSendMsgBackRequestHeader::from_command(cmd)?;
    if h.offset < 0 {
        return Err(BrokerError::InvalidParameter(format!(
            "offset {} is negative",
            h.offset
        )));
    }
    let phy = h.offset as u64;
    // Read the original record (its size is its first field).
    let original = {
        let mut reader = shard.reader();
        let head = reader.read(phy, 4)?;
        let size = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if size < MIN_RECORD || size as usize > shard.ctx.cfg.store.max_message_size + 64 * 1024 {
            return Err(BrokerError::System(format!(
                "look message by offset failed, {phy}"
            )));
        }
        let bytes = reader.read(phy, size)?;
        let r = message::decode(bytes, true).map_err(|e| {
            BrokerError::System(format!("look message by offset failed, {phy}: {e}"))
        })?;
        (
            r.topic.to_string(),
            r.body.to_vec(),
            r.flag,
            r.sys_flag,
            r.born_timestamp,
            r.born_host,
            r.reconsume_times,
            properties::parse(r.properties),
            offset_msg_id(r.store_host, phy as i64),
        )
    };
    let (orig_topic, body, flag, sys_flag, born_ts, born_host, reconsume, mut props, stored_id) =
        original;
    // The request's maxReconsumeTimes wins (clients send it since V3_4_9); otherwise the
    // group's retryMaxTimes, created with the broker default when the group is new.
    let max = match h.max_reconsume_times.filter(|m| *m >= 0) {
        Some(m) => m,
        None => group_retry_max(&shard, &h.group).await?,
    };
    let to_dlq = reconsume >= max || h.delay_level < 0;
    let (topic, queue_id) = if to_dlq {
        (format!("{DLQ_GROUP_TOPIC_PREFIX}{}", h.group), 0)
    } else {
        (format!("{RETRY_GROUP_TOPIC_PREFIX}{}", h.group), 0)
    };
    ensure_topic(&shard, &topic, "", 1).await?;
    if !props.iter().any(|(k, _)| k == keys::RETRY_TOPIC) {
        props.push((keys::RETRY_TOPIC.into(), orig_topic.clone()));
    }
    // Java keeps a non-blank ORIGIN_MESSAGE_ID and otherwise names the stored record itself
    // (its store host and offset), whatever id the request carries.
    let origin_blank = props
        .iter()
        .rev()
        .find(|(k, _)| k == keys::ORIGIN_MESSAGE_ID)
        .is_none_or(|(_, v)| v.trim().is_empty());
    if origin_blank {
        props.retain(|(k, _)| k != keys::ORIGIN_MESSAGE_ID);
        props.push((keys::ORIGIN_MESSAGE_ID.into(), stored_id));
    }
    props.retain(|(k, _)| k != keys::DELAY);
    if !to_dlq {
        let level = if h.delay_level == 0 {
            3 + reconsume
        } else {
            h.delay_level
        };
        props.push((keys::DELAY.into(), level.to_string()));
    }
    let record = build_record(
        &shard,
        Outgoing {
            topic: &topic,
            queue_id,
            flag,
            sys_flag,
            born_timestamp: born_ts,
            born_host,
            reconsume_times: reconsume + 1,
            body: &body,
            props,
        },
    )?;
    append(&shard, vec![record], true).await?;
    crate::metrics::record::sent_back(&format!("{orig_topic}@{}", h.group));
    if to_dlq {
        crate::metrics::record::sent_to_dlq(&h.group);
        tracing::info!(group = %h.group, topic = %orig_topic, reconsume, "message moved to the dead-letter queue");
    }
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}
