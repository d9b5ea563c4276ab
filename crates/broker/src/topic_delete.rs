//! DELETE_TOPIC_IN_BROKER (215), as Java's `AdminBrokerProcessor.deleteTopic` does it: a
//! system topic is refused; otherwise the topic and its POP retry topics
//! (`%RETRY%<group>+<topic>` and `%RETRY%<group>_<topic>` of every group with offsets on it)
//! lose their config, their consume queues (units and files) and every consumer offset, and
//! their next queue offsets, so a topic created again under the same name starts empty at 0.
//!
//! Order per topic: shard 0 drops the config (publishes, persists, re-registers); the writer
//! forgets the queue offsets and reports back once every unit written before is dispatched
//! (under SYNC_FLUSH behind the group commit) and applied on every shard; then every shard drops the queues and offsets
//! it owns, wakes the pulls parked on them, and removes the queue files on a helper thread.
//! Sends racing with the deletion may still store into the topic (and re-create it from
//! TBW102 when auto-creation is on), as on Java.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::rc::Rc;

use crate::error::BrokerError;
use crate::metadata::topic_validator::{is_system_topic, RETRY_GROUP_TOPIC_PREFIX};
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::DeleteTopicRequestHeader;
use crate::protocol::RemotingCommand;
use crate::runtime;
use crate::shard::Shard;
use crate::topic_manager::topics_changed;
use crate::writer::ReplyTo;

pub async fn delete_topic(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = DeleteTopicRequestHeader::from_command(cmd)?;
    let topic = h.topic.trim().to_string();
    if topic.is_empty() {
        return Err(BrokerError::InvalidParameter(
            "The specified topic is blank.".into(),
        ));
    }
    if is_system_topic(&topic) {
        return Err(BrokerError::InvalidParameter(format!(
            "The topic[{topic}] is conflict with system topic."
        )));
    }
    let mut doomed = vec![topic.clone()];
    doomed.extend(pop_retry_topics(&shard, &topic).await?);
    for t in doomed {
        delete_one(&shard, t).await?;
    }
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// The POP retry topics of `topic` that exist: one per group holding offsets on it.
async fn pop_retry_topics(shard: &Rc<Shard>, topic: &str) -> Result<Vec<String>, BrokerError> {
    let mut groups = BTreeSet::new();
    for i in 0..shard.mesh.len() {
        let prefix = format!("{topic}@");
        let found: Vec<String> = shard
            .mesh
            .call(i, move |s| async move {
                s.offsets()
                    .keys()
                    .filter_map(|k| k.strip_prefix(&prefix).map(str::to_string))
                    .collect()
            })
            .await?;
        groups.extend(found);
    }
    let t = topic.to_string();
    Ok(shard
        .mesh
        .call(0, move |s0| async move {
            let m = s0.meta();
            groups
                .iter()
                .flat_map(|g| {
                    [
                        format!("{RETRY_GROUP_TOPIC_PREFIX}{g}+{t}"),
                        format!("{RETRY_GROUP_TOPIC_PREFIX}{g}_{t}"),
                    ]
                })
                .filter(|name| m.topics.contains_key(name))
                .collect::<Vec<_>>()
        })
        .await?)
}

pub(crate) async fn delete_one(shard: &Rc<Shard>, topic: String) -> Result<(), BrokerError> {
    tracing::info!(%topic, "deleting topic");
    let t = topic.clone();
    shard
        .mesh
        .call(0, move |s0| async move {
            let removed = {
                let mut m = s0.meta_mut();
                let removed = m.topics.remove(&t).is_some();
                if removed {
                    crate::metadata::bump(&mut m.topics_version);
                }
                removed
            };
            if removed {
                topics_changed(&s0);
            }
        })
        .await?;
    // Answered once every unit written before is applied on every shard.
    let completions = shard.completions();
    let token = completions.open();
    let done = ReplyTo::Shard {
        shard: shard.id as u16,
        token,
    };
    if shard
        .ctx
        .writer
        .try_drop_topic(topic.clone(), done)
        .is_err()
    {
        completions.cancel(token);
        return Err(BrokerError::Busy);
    }
    completions.wait(token).await?;
    for i in 0..shard.mesh.len() {
        let t = topic.clone();
        shard
            .mesh
            .call(i, move |s| async move { drop_owned(&s, &t).await })
            .await?;
    }
    // The topic's directory goes once empty; a queue already re-created keeps it.
    let dir = shard
        .ctx
        .cfg
        .store
        .store_path_root_dir
        .join("consumequeue")
        .join(&topic);
    runtime::spawn_blocking(move || {
        let _kept = std::fs::remove_dir(&dir);
    })
    .await;
    Ok(())
}

/// On each shard: move the topic's queue files aside, then forget its queues and offsets and
/// wake the pulls parked on them (they answer from the now-empty queue), and remove the files,
/// all file work on a helper thread. The files move first because a queue opened again under
/// this name (by a woken pull or a new message) loads whatever files its directory holds.
async fn drop_owned(s: &Rc<Shard>, topic: &str) {
    let root = s
        .ctx
        .cfg
        .store
        .store_path_root_dir
        .join("consumequeue")
        .join(topic);
    let dirs: Vec<PathBuf> = s
        .read_queues()
        .keys()
        .filter(|k| k.0 == topic)
        .map(|k| root.join(k.1.to_string()))
        .collect();
    let moved = runtime::spawn_blocking(move || {
        let stamp = crate::common::now_ms();
        dirs.into_iter()
            .filter_map(|d| {
                // Not a queue id any more: a crash before the removal leaves a directory that
                // start-up skips.
                let aside = d.with_extension(format!("deleted-{stamp}"));
                match std::fs::rename(&d, &aside) {
                    Ok(()) => Some(aside),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => {
                        tracing::warn!(dir = %d.display(), error = %e, "cannot move consume queue aside");
                        None
                    }
                }
            })
            .collect::<Vec<_>>()
    })
    .await;
    let queues: Vec<_> = {
        let mut map = s.queues_mut();
        let keys: Vec<(String, u32)> = map.keys().filter(|k| k.0 == topic).cloned().collect();
        keys.into_iter().filter_map(|k| map.remove(&k)).collect()
    };
    let prefix = format!("{topic}@");
    s.offsets_mut().retain(|k, _| !k.starts_with(&prefix));
    crate::metrics::pulled::forget_topic(topic);
    let mut cqs = Vec::with_capacity(queues.len());
    for q in queues {
        for w in &q.waiters {
            w.notify();
        }
        cqs.push(q.cq);
    }
    runtime::spawn_blocking(move || {
        drop(cqs);
        for d in moved {
            if let Err(e) = std::fs::remove_dir_all(&d) {
                tracing::warn!(dir = %d.display(), error = %e, "cannot remove consume queue files");
            }
        }
    })
    .await;
}
