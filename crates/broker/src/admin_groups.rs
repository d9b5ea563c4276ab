//! Admin requests about consumer and producer groups: DELETE_SUBSCRIPTIONGROUP (207),
//! GET_SUBSCRIPTIONGROUP_CONFIG (352), QUERY_TOPIC_CONSUME_BY_WHO (300), its inverse
//! QUERY_TOPICS_BY_CONSUMER (343), QUERY_SUBSCRIPTION_BY_CONSUMER (345) and
//! GET_ALL_PRODUCER_INFO (328), as Java's `AdminBrokerProcessor` answers them.
//!
//! Group configs and client registrations are shard 0's; committed offsets live on each queue's
//! owner shard, so a group's offsets are found (and, for 207 with `cleanOffset`, dropped) by
//! asking every shard.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde::Serialize;

use crate::error::BrokerError;
use crate::protocol::body;
use crate::protocol::codes::{language_name, response_code as rc};
use crate::protocol::headers::{
    DeleteSubscriptionGroupRequestHeader, GetSubscriptionGroupConfigRequestHeader,
    QuerySubscriptionByConsumerRequestHeader, QueryTopicConsumeByWhoRequestHeader,
    QueryTopicsByConsumerRequestHeader,
};
use crate::protocol::RemotingCommand;
use crate::shard::Shard;
use crate::topic_manager::persist_in_background;

/// Java's `GroupList`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupList {
    group_list: BTreeSet<String>,
}

/// Java's `ProducerInfo`, fields in fastjson's order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProducerInfo {
    client_id: String,
    language: &'static str,
    last_update_timestamp: i64,
    #[serde(rename = "remoteIP")]
    remote_ip: String,
    version: i32,
}

/// Java's `ProducerTableInfo`: producer group -> its clients.
#[derive(Serialize)]
struct ProducerTableInfo {
    data: BTreeMap<String, Vec<ProducerInfo>>,
}

/// DELETE_SUBSCRIPTIONGROUP: the group's config goes (persisted); with `cleanOffset` its
/// committed offsets and its pull offsets on every topic too. As on Java, an unknown group is not an error.
pub async fn delete_subscription_group(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = DeleteSubscriptionGroupRequestHeader::from_command(cmd)?;
    if h.group_name.is_empty() {
        return Err(BrokerError::InvalidParameter("groupName is empty".into()));
    }
    let group = h.group_name.clone();
    shard
        .mesh
        .call(0, move |s0| async move {
            let (bytes, path) = {
                let mut m = s0.meta_mut();
                if m.groups.remove(&group).is_none() {
                    tracing::warn!(%group, "delete subscription group: no such group");
                    return;
                }
                crate::metadata::bump(&mut m.groups_version);
                (m.groups_file_bytes(), m.groups_path())
            };
            persist_in_background(path, bytes);
        })
        .await?;
    if h.clean_offset {
        let suffix = format!("@{}", h.group_name);
        for i in 0..shard.mesh.len() {
            let (sfx, group) = (suffix.clone(), h.group_name.clone());
            let drop_offsets = move |s: &Shard| {
                s.offsets_mut().retain(|k, _| !k.ends_with(&sfx));
                crate::metrics::pulled::forget_group(&group);
            };
            if i == shard.id {
                drop_offsets(&shard);
            } else {
                shard
                    .mesh
                    .call(i, move |s| async move { drop_offsets(&s) })
                    .await?;
            }
        }
    }
    tracing::info!(group = %h.group_name, clean_offset = h.clean_offset, "subscription group deleted");
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// GET_SUBSCRIPTIONGROUP_CONFIG: the group's `SubscriptionGroupConfig`;
/// SUBSCRIPTION_GROUP_NOT_EXIST with Java's remark for a group this broker lacks.
pub async fn subscription_group_config(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetSubscriptionGroupConfigRequestHeader::from_command(cmd)?;
    let group = h.group.clone();
    let found = shard
        .mesh
        .call(
            0,
            move |s0| async move { s0.meta().groups.get(&group).cloned() },
        )
        .await?;
    match found {
        Some(g) => {
            Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body::to_json(&g)))
        }
        None => Ok(RemotingCommand::response_for(
            cmd,
            rc::SUBSCRIPTION_GROUP_NOT_EXIST,
            Some("No group in this broker".into()),
        )),
    }
}

/// QUERY_TOPIC_CONSUME_BY_WHO: the online groups subscribed to the topic and every group with
/// committed offsets on it (Java's `GroupList`).
pub async fn topic_consume_by_who(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = QueryTopicConsumeByWhoRequestHeader::from_command(cmd)?;
    let mut groups: BTreeSet<String> = shard
        .subscriptions()
        .iter()
        .filter(|(_, subs)| subs.contains_key(&h.topic))
        .map(|(g, _)| g.clone())
        .collect();
    let prefix = format!("{}@", h.topic);
    for i in 0..shard.mesh.len() {
        let p = prefix.clone();
        let pick = move |s: &Shard| -> Vec<String> {
            s.offsets()
                .keys()
                .filter_map(|k| k.strip_prefix(p.as_str()).map(str::to_owned))
                .collect()
        };
        let found = if i == shard.id {
            pick(&shard)
        } else {
            shard.mesh.call(i, move |s| async move { pick(&s) }).await?
        };
        groups.extend(found);
    }
    let list = GroupList { group_list: groups };
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body::to_json(&list)))
}

/// QUERY_TOPICS_BY_CONSUMER (343): the topics `group` has committed offsets for on this broker
/// (Java's `whichTopicByConsumer`), as a `TopicList` with this broker's address.
pub async fn topics_by_consumer(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = QueryTopicsByConsumerRequestHeader::from_command(cmd)?;
    let topics = crate::admin_stats::topics_of_group(&shard, &h.group).await?;
    let list = body::TopicList {
        broker_addr: Some(shard.ctx.store_host.to_string()),
        topic_list: topics,
    };
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body::to_json(&list)))
}

/// QUERY_SUBSCRIPTION_BY_CONSUMER (345): what the group's online consumers subscribe to on the
/// topic (Java's `findSubscriptionData`), `null` when none does.
pub async fn subscription_by_consumer(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = QuerySubscriptionByConsumerRequestHeader::from_command(cmd)?;
    // Asked of shard 0's registrations, as Java asks its ConsumerManager: the snapshots the
    // other shards hold may not have a heartbeat answered a moment ago yet.
    let (group, topic) = (h.group.clone(), h.topic.clone());
    let subscription_data = shard
        .mesh
        .call(0, move |s0| async move {
            let m = s0.meta();
            m.consumers
                .get(&group)
                .and_then(|g| g.subscriptions.get(&topic))
                .cloned()
        })
        .await?;
    let answer = body::QuerySubscriptionResponseBody {
        subscription_data,
        group: h.group,
        topic: h.topic,
    };
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body::to_json(&answer)))
}

/// GET_ALL_PRODUCER_INFO: every registered producer, by group (Java's `ProducerTableInfo`).
pub async fn all_producer_info(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let table = shard
        .mesh
        .call(0, |s0| async move {
            let m = s0.meta();
            let data = m
                .producers
                .iter()
                .map(|(group, clients)| {
                    let infos = clients
                        .values()
                        .map(|c| ProducerInfo {
                            client_id: c.client_id.clone(),
                            language: language_name(c.language),
                            last_update_timestamp: c.last_update_ms,
                            remote_ip: c.client_addr.clone(),
                            version: c.version,
                        })
                        .collect();
                    (group.clone(), infos)
                })
                .collect();
            ProducerTableInfo { data }
        })
        .await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body::to_json(&table)))
}
