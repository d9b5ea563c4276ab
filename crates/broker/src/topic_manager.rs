//! Topic configs on the running broker, as Java's `TopicConfigManager` keeps them: what
//! follows a change on shard 0 (publish the snapshot to every shard, persist topics.json,
//! re-register with the name servers), and topics created on use: by a send from their
//! template (TBW102), a retry or dead-letter topic, or a system topic a service writes to.

use std::rc::Rc;
use std::sync::Arc;

use crate::common::config_file;
use crate::error::BrokerError;
use crate::metadata::topic_validator::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use crate::metadata::{topic_config, PERM_INHERIT, PERM_READ, PERM_WRITE};
use crate::protocol::body::TopicConfig;
use crate::runtime;
use crate::shard::Shard;

/// Shard 0, after any topic change: publish to every shard, persist, re-register.
pub fn topics_changed(s0: &Rc<Shard>) {
    let (snap, bytes, path) = {
        let m = s0.meta();
        (
            Arc::new(m.topic_snapshot()),
            m.topics_file_bytes(),
            m.topics_path(),
        )
    };
    for i in 0..s0.mesh.len() {
        let snap = snap.clone();
        if i == s0.id {
            s0.set_topics(snap);
        } else {
            let _ = s0
                .mesh
                .post(i, Box::new(move |s: &Rc<Shard>| s.set_topics(snap)));
        }
    }
    persist_in_background(path, bytes);
    crate::register::register_soon(s0);
}

/// Writes a config file on a helper thread; failures are logged with the path.
pub fn persist_in_background(path: std::path::PathBuf, bytes: Vec<u8>) {
    runtime::spawn(async move {
        let p = path.clone();
        if let Err(e) = runtime::spawn_blocking(move || config_file::write(&p, &bytes)).await {
            tracing::error!(path = %path.display(), error = %e, "cannot persist config file");
        }
    });
}

/// The queue a send goes to (Java's `msgCheck`): the one asked for, or round robin over the
/// write queues when the producer left it to the broker (a negative id); a queue the topic does
/// not have is INVALID_PARAMETER.
pub fn send_queue(
    shard: &Shard,
    tc: &TopicConfig,
    topic: &str,
    asked: i32,
) -> Result<i32, BrokerError> {
    let queues = tc.read_queue_nums.max(tc.write_queue_nums);
    let queue_id = if asked < 0 {
        (shard.next_round_robin() % tc.write_queue_nums.max(1) as u64) as i32
    } else {
        asked
    };
    if queue_id >= queues {
        return Err(BrokerError::InvalidParameter(format!(
            "request queueId[{queue_id}] is illegal, topic {topic} has {queues} queues"
        )));
    }
    Ok(queue_id)
}

/// Finds the topic, creating it through shard 0 from its template (TBW102) when allowed.
pub async fn ensure_topic(
    shard: &Rc<Shard>,
    topic: &str,
    default_topic: &str,
    default_queue_nums: i32,
) -> Result<TopicConfig, BrokerError> {
    if let Some(tc) = shard.topics().get(topic) {
        return Ok(tc.clone());
    }
    let wanted = topic.to_string();
    let topic = topic.to_string();
    let default_topic = default_topic.to_string();
    let created = shard
        .mesh
        .call(0, move |s0| async move {
            let (tc, changed) = {
                let mut m = s0.meta_mut();
                if let Some(tc) = m.topics.get(&topic) {
                    return Some(tc.clone());
                }
                let tc = if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
                    || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
                {
                    topic_config(&topic, 1, PERM_READ | PERM_WRITE)
                } else {
                    let template = m.topics.get(&default_topic)?;
                    if !s0.settings().auto_create_topic_enable || template.perm & PERM_INHERIT == 0
                    {
                        return None;
                    }
                    let q = default_queue_nums.clamp(1, template.write_queue_nums.max(1));
                    topic_config(&topic, q, PERM_READ | PERM_WRITE)
                };
                let changed = m.upsert_topic(tc.clone());
                (tc, changed)
            };
            if changed {
                topics_changed(&s0);
            }
            Some(tc)
        })
        .await?;
    created.ok_or(BrokerError::TopicNotExist(wanted))
}

/// Creates a topic the service writes to and consumers may read (TRANS_CHECK_MAX_TIME_TOPIC).
pub async fn ensure_system_topic(
    shard: &Rc<Shard>,
    topic: &'static str,
) -> Result<(), BrokerError> {
    if shard.topics().get(topic).is_some() {
        return Ok(());
    }
    shard
        .mesh
        .call(0, move |s0| async move {
            let changed =
                s0.meta_mut()
                    .upsert_topic(topic_config(topic, 1, PERM_READ | PERM_WRITE));
            if changed {
                topics_changed(&s0);
            }
        })
        .await?;
    Ok(())
}
