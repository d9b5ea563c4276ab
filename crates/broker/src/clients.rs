//! Client registrations (HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP), queue locks
//! for orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ) and the NOTIFY_CONSUMER_IDS_CHANGED
//! push. All of it is shard 0's state: handlers on other shards forward with `Mesh::call`.

use std::rc::Rc;
use std::sync::Arc;

use crate::broker2client;
use crate::common::now_ms;
use crate::error::BrokerError;
use crate::metadata::topic_validator::RETRY_GROUP_TOPIC_PREFIX;
use crate::metadata::{topic_config, ClientChannel, LOCK_MAX_LIVE_MS, PERM_READ, PERM_WRITE};
use crate::protocol::body::{
    self, ConsumerListBody, HeartbeatData, LockBatchRequestBody, LockBatchResponseBody,
    MessageQueue, UnlockBatchRequestBody,
};
use crate::protocol::codes::request_code;
use crate::protocol::headers::{
    GetConsumerListByGroupRequestHeader, NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
};
use crate::protocol::RemotingCommand;
use crate::remoting::{encode_frame, ConnInfo, Outbound};
use crate::shard::Shard;

/// HEART_BEAT: registers producer and consumer groups against this connection.
pub async fn heart_beat(
    shard: Rc<Shard>,
    conn: &ConnInfo,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let hb: HeartbeatData = body::from_json(&cmd.body)?;
    let chan = ClientChannel {
        client_id: hb.client_id.clone(),
        conn_id: conn.id,
        last_update_ms: 0,
        client_addr: conn.peer.to_string(),
        language: cmd.language,
        version: cmd.version,
    };
    shard
        .mesh
        .call(
            0,
            move |s0| async move { register_heartbeat(&s0, hb, chan) },
        )
        .await?;
    Ok(RemotingCommand::response_for(cmd, 0, None))
}

/// Shard 0: apply a heartbeat, publish what changed, notify consumers of changed groups.
/// `chan` describes the sending connection; its timestamp is set here.
fn register_heartbeat(s0: &Rc<Shard>, hb: HeartbeatData, mut chan: ClientChannel) {
    let now = now_ms();
    chan.last_update_ms = now;
    let conn_id = chan.conn_id;
    let auto_group = s0.settings().auto_create_subscription_group;
    let mut changed_groups = Vec::new();
    let mut topics_changed = false;
    let mut subs_changed = false;
    {
        let mut m = s0.meta_mut();
        for p in &hb.producer_data_set {
            m.producers
                .entry(p.group_name.clone())
                .or_default()
                .insert(hb.client_id.clone(), chan.clone());
        }
        for c in &hb.consumer_data_set {
            let Some(group_cfg) = m.group_or_create(&c.group_name, auto_group) else {
                tracing::warn!(group = %c.group_name, "heartbeat for unknown subscription group");
                continue;
            };
            let retry = format!("{RETRY_GROUP_TOPIC_PREFIX}{}", c.group_name);
            if !m.topics.contains_key(&retry) {
                let q = group_cfg.retry_queue_nums.max(1);
                topics_changed |= m.upsert_topic(topic_config(&retry, q, PERM_READ | PERM_WRITE));
            }
            let info = m.consumers.entry(c.group_name.clone()).or_default();
            info.message_model = Some(c.message_model);
            info.consume_type = Some(c.consume_type);
            info.consume_from_where = Some(c.consume_from_where);
            let is_new = match info.clients.get_mut(&hb.client_id) {
                Some(ch) => {
                    let moved = ch.conn_id != conn_id;
                    *ch = chan.clone();
                    moved
                }
                None => {
                    info.clients.insert(hb.client_id.clone(), chan.clone());
                    true
                }
            };
            let mut subs_now = std::collections::HashMap::new();
            for s in &c.subscription_data_set {
                subs_now.insert(s.topic.clone(), s.clone());
            }
            if subs_now != info.subscriptions {
                info.subscriptions = subs_now;
                subs_changed = true;
                changed_groups.push(c.group_name.clone());
            } else if is_new {
                changed_groups.push(c.group_name.clone());
            }
        }
    }
    if subs_changed {
        publish_subscriptions(s0);
    }
    if topics_changed {
        crate::topic_manager::topics_changed(s0);
    }
    for g in changed_groups {
        notify_consumer_ids_changed(s0, &g);
    }
}

/// Shard 0: sends every shard the current subscription snapshot.
pub fn publish_subscriptions(s0: &Rc<Shard>) {
    let snap = Arc::new(s0.meta().subscription_snapshot());
    for i in 0..s0.mesh.len() {
        let snap = snap.clone();
        if i == s0.id {
            s0.set_subscriptions(snap);
            continue;
        }
        let _ = s0
            .mesh
            .post(i, Box::new(move |s: &Rc<Shard>| s.set_subscriptions(snap)));
    }
}

/// Shard 0: tells every consumer of `group` to rebalance now (oneway request code 40).
pub fn notify_consumer_ids_changed(s0: &Rc<Shard>, group: &str) {
    let targets: Vec<u64> = {
        let m = s0.meta();
        match m.consumers.get(group) {
            Some(info) => info.clients.values().map(|c| c.conn_id).collect(),
            None => return,
        }
    };
    let mut cmd = RemotingCommand::new_request(request_code::NOTIFY_CONSUMER_IDS_CHANGED);
    NotifyConsumerIdsChangedRequestHeader {
        consumer_group: group.to_string(),
    }
    .write_to(&mut cmd);
    cmd.set_oneway();
    let Some(Outbound::Frame(frame)) = encode_frame(&cmd) else {
        return;
    };
    for conn_id in targets {
        broker2client::send_oneway(s0, conn_id, frame.clone());
    }
}

/// Shard 0: a connection closed; drop its registrations and notify the groups it was in.
pub fn connection_closed(s0: &Rc<Shard>, conn_id: u64) {
    let changed = s0.meta_mut().remove_connection(conn_id);
    if !changed.is_empty() {
        publish_subscriptions(s0);
    }
    for g in changed {
        notify_consumer_ids_changed(s0, &g);
    }
}

/// Shard 0: periodic scan for channels that stopped sending heartbeats.
pub fn expire_channels(s0: &Rc<Shard>) {
    let changed = s0.meta_mut().expire_channels(now_ms());
    if !changed.is_empty() {
        publish_subscriptions(s0);
    }
    for g in changed {
        notify_consumer_ids_changed(s0, &g);
    }
}

/// UNREGISTER_CLIENT.
pub async fn unregister_client(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = UnregisterClientRequestHeader::from_command(cmd)?;
    shard
        .mesh
        .call(0, move |s0| async move {
            let mut changed = Vec::new();
            {
                let mut m = s0.meta_mut();
                if let Some(g) = &h.consumer_group {
                    if let Some(info) = m.consumers.get_mut(g) {
                        if info.clients.remove(&h.client_id).is_some() {
                            changed.push(g.clone());
                        }
                    }
                    m.consumers.retain(|_, i| !i.clients.is_empty());
                }
                if let Some(g) = &h.producer_group {
                    if let Some(p) = m.producers.get_mut(g) {
                        p.remove(&h.client_id);
                    }
                }
            }
            if !changed.is_empty() {
                publish_subscriptions(&s0);
            }
            for g in changed {
                notify_consumer_ids_changed(&s0, &g);
            }
        })
        .await?;
    Ok(RemotingCommand::response_for(cmd, 0, None))
}

/// GET_CONSUMER_LIST_BY_GROUP.
pub async fn consumer_list(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetConsumerListByGroupRequestHeader::from_command(cmd)?;
    let group = h.consumer_group.clone();
    let ids: Vec<String> = shard
        .mesh
        .call(0, move |s0| async move {
            let m = s0.meta();
            m.consumers
                .get(&group)
                .map(|i| i.clients.keys().cloned().collect())
                .unwrap_or_default()
        })
        .await?;
    if ids.is_empty() {
        return Err(BrokerError::System(format!(
            "no consumer for this group, {}",
            h.consumer_group
        )));
    }
    let body = body::to_json(&ConsumerListBody {
        consumer_id_list: ids,
    });
    Ok(RemotingCommand::response_for(cmd, 0, None).with_body(body))
}

/// LOCK_BATCH_MQ: grants each queue that is free, already this client's, or expired.
pub async fn lock_batch(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let req: LockBatchRequestBody = body::from_json(&cmd.body)?;
    let granted: Vec<MessageQueue> = shard
        .mesh
        .call(0, move |s0| async move {
            let now = now_ms();
            let mut m = s0.meta_mut();
            let table = m.locks.entry(req.consumer_group.clone()).or_default();
            let mut ok = Vec::new();
            for mq in req.mq_set {
                let key = (mq.topic.clone(), mq.broker_name.clone(), mq.queue_id);
                let free = match table.get(&key) {
                    None => true,
                    Some((owner, ts)) => owner == &req.client_id || now - ts > LOCK_MAX_LIVE_MS,
                };
                if free {
                    table.insert(key, (req.client_id.clone(), now));
                    ok.push(mq);
                }
            }
            ok
        })
        .await?;
    let body = body::to_json(&LockBatchResponseBody {
        lock_ok_mq_set: granted,
    });
    Ok(RemotingCommand::response_for(cmd, 0, None).with_body(body))
}

/// UNLOCK_BATCH_MQ: releases the queues this client holds.
pub async fn unlock_batch(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let req: UnlockBatchRequestBody = body::from_json(&cmd.body)?;
    shard
        .mesh
        .call(0, move |s0| async move {
            let mut m = s0.meta_mut();
            if let Some(table) = m.locks.get_mut(&req.consumer_group) {
                for mq in req.mq_set {
                    let key = (mq.topic, mq.broker_name, mq.queue_id);
                    if table.get(&key).map(|(c, _)| c == &req.client_id) == Some(true) {
                        table.remove(&key);
                    }
                }
            }
        })
        .await?;
    Ok(RemotingCommand::response_for(cmd, 0, None))
}
