//! Server-side assignment (Java's `QueryAssignmentProcessor` and `MessageRequestModeManager`):
//! QUERY_ASSIGNMENT (400) tells a client of a group which queues to read and whether to pull or
//! pop them, SET_MESSAGE_REQUEST_MODE (401) sets a (topic, group)'s mode, kept by shard 0 in
//! `config/messageRequestMode.json`, and GET_ALL_MESSAGE_REQUEST_MODE (402) lists the modes.
//!
//! The queues are the topic's readable queues on every broker of its route (asked of a name
//! server; this broker's own topic config when there is none or none answers), sorted as Java
//! sorts `MessageQueue`s; the clients are the group's registered clients, sorted. Pull mode
//! divides the queues with the client's strategy (`AVG`, `AVG_BY_CIRCLE`); pop mode gives every
//! client queue -1 of each broker (all its queues), unless `popShareQueueNum` asks each client to
//! share its own queues with that many others.

use std::collections::BTreeSet;
use std::rc::Rc;

use crate::constants::BROKER_RPC_TIMEOUT;
use crate::error::BrokerError;
use crate::metadata::PERM_READ;
use crate::protocol::assignment::{
    MessageQueueAssignment, MessageRequestMode, QueryAssignmentRequestBody,
    QueryAssignmentResponseBody, SetMessageRequestModeRequestBody,
};
use crate::protocol::body::{self, MessageQueue, TopicRouteData};
use crate::protocol::codes::{request_code as req, response_code as rc};
use crate::protocol::topics::RETRY_GROUP_TOPIC_PREFIX;
use crate::protocol::RemotingCommand;
use crate::remoting::client::Client;
use crate::shard::Shard;

/// `MessageModel.BROADCASTING`: every client reads every queue.
const BROADCASTING: &str = "BROADCASTING";

pub async fn query_assignment(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let b: QueryAssignmentRequestBody = body::from_json(&cmd.body)
        .map_err(|e| BrokerError::System(format!("QueryAssignmentRequestBody: {e}")))?;
    let (topic, group) = (b.topic.clone(), b.consumer_group.clone());
    let (mode, clients) = shard
        .mesh
        .call(0, move |s0| async move {
            let m = s0.meta();
            let mode = m.request_mode(&topic, &group);
            let clients: Vec<String> = m
                .consumers
                .get(&group)
                .map(|g| g.clients.keys().cloned().collect())
                .unwrap_or_default();
            (mode, clients)
        })
        .await?;
    let queues = route_queues(&shard, &b.topic).await;
    let assigned = if b.message_model.as_deref() == Some(BROADCASTING) {
        Some(queues)
    } else {
        allocate(&b, &mode, &queues, &clients)
    };
    let body = QueryAssignmentResponseBody {
        message_queue_assignments: assigned.map(|qs| {
            qs.into_iter()
                .map(|mq| MessageQueueAssignment {
                    attachments: None,
                    message_queue: mq,
                    mode: mode.mode,
                })
                .collect()
        }),
    };
    let mut resp = RemotingCommand::response_for(cmd, rc::SUCCESS, None);
    resp.body = body::to_json(&body).into();
    Ok(resp)
}

/// The queues the client reads; `None` for an unknown strategy (Java logs it and answers `{}`).
fn allocate(
    b: &QueryAssignmentRequestBody,
    mode: &SetMessageRequestModeRequestBody,
    queues: &[MessageQueue],
    clients: &[String],
) -> Option<Vec<MessageQueue>> {
    let Some(index) = clients.iter().position(|c| *c == b.client_id) else {
        return Some(Vec::new());
    };
    if mode.mode == MessageRequestMode::Pull {
        return strategy(&b.strategy_name, queues, clients.len(), index);
    }
    let share = mode.pop_share_queue_num;
    if share <= 0 || share as usize >= clients.len().saturating_sub(1) {
        let brokers: BTreeSet<&str> = queues.iter().map(|q| q.broker_name.as_str()).collect();
        return Some(
            brokers
                .into_iter()
                .map(|broker| MessageQueue {
                    broker_name: broker.to_string(),
                    queue_id: -1,
                    topic: b.topic.clone(),
                })
                .collect(),
        );
    }
    if clients.len() > queues.len() {
        return queues
            .get(index % queues.len().max(1))
            .cloned()
            .map(|q| vec![q]);
    }
    let mut out = BTreeSet::new();
    for i in 0..=share as usize {
        let who = (index + i) % clients.len();
        out.extend(strategy(&b.strategy_name, queues, clients.len(), who)?);
    }
    Some(out.into_iter().collect())
}

/// Java's `AllocateMessageQueueAveragely` (`AVG`) and `...AveragelyByCircle` (`AVG_BY_CIRCLE`)
/// for the client at `index` of `n`.
fn strategy(
    name: &str,
    queues: &[MessageQueue],
    n: usize,
    index: usize,
) -> Option<Vec<MessageQueue>> {
    let mq = queues.len();
    match name {
        "AVG" => {
            let rem = mq % n;
            let size = if mq <= n {
                1
            } else if rem > 0 && index < rem {
                mq / n + 1
            } else {
                mq / n
            };
            let start = if rem > 0 && index < rem {
                index * size
            } else {
                index * size + rem
            };
            let range = size.min(mq.saturating_sub(start));
            Some(
                (0..range)
                    .map(|i| queues[(start + i) % mq].clone())
                    .collect(),
            )
        }
        "AVG_BY_CIRCLE" => Some(
            queues
                .iter()
                .enumerate()
                .filter(|(i, _)| i % n == index)
                .map(|(_, q)| q.clone())
                .collect(),
        ),
        other => {
            tracing::warn!(
                strategy = other,
                "QUERY_ASSIGNMENT with an unknown allocation strategy"
            );
            None
        }
    }
}

/// The topic's readable queues on every broker of its route, sorted.
async fn route_queues(shard: &Rc<Shard>, topic: &str) -> Vec<MessageQueue> {
    let mut queues: Vec<MessageQueue> = match route(shard, topic).await {
        Some(r) => r
            .queue_datas
            .iter()
            .filter(|q| q.perm & PERM_READ != 0)
            .flat_map(|q| {
                (0..q.read_queue_nums.max(0)).map(|i| MessageQueue {
                    broker_name: q.broker_name.clone(),
                    queue_id: i,
                    topic: topic.to_string(),
                })
            })
            .collect(),
        None => {
            let n = shard
                .topics()
                .get(topic)
                .filter(|tc| tc.perm & PERM_READ != 0)
                .map_or(0, |tc| tc.read_queue_nums);
            (0..n.max(0))
                .map(|i| MessageQueue {
                    broker_name: shard.ctx.cfg.broker_name.clone(),
                    queue_id: i,
                    topic: topic.to_string(),
                })
                .collect()
        }
    };
    queues.sort();
    queues
}

/// The topic's route from the first name server that answers.
pub async fn route(shard: &Rc<Shard>, topic: &str) -> Option<TopicRouteData> {
    for addr in shard.ctx.cfg.namesrv_addr.clone() {
        let Ok(mut client) = Client::connect_with(addr, BROKER_RPC_TIMEOUT, &shard.ctx.tls).await
        else {
            continue;
        };
        let cmd =
            RemotingCommand::new_request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic);
        match client.invoke(cmd, BROKER_RPC_TIMEOUT).await {
            Ok(r) if r.code == rc::SUCCESS => return body::from_json(&r.body).ok(),
            _ => continue,
        }
    }
    None
}

pub async fn set_message_request_mode(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let b: SetMessageRequestModeRequestBody = body::from_json(&cmd.body)
        .map_err(|e| BrokerError::System(format!("SetMessageRequestModeRequestBody: {e}")))?;
    if b.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        return Err(BrokerError::NoPermission(
            "retry topic is not allowed to set mode".into(),
        ));
    }
    shard
        .mesh
        .call(0, move |s0| async move {
            let mut m = s0.meta_mut();
            if !m.topics.contains_key(&b.topic) {
                return Err(BrokerError::TopicNotExist(format!(
                    "topic[{}] not exist",
                    b.topic
                )));
            }
            if !m.groups.contains_key(&b.consumer_group) {
                return Err(BrokerError::SubscriptionGroupNotExist(
                    "subscription group does not exist".into(),
                ));
            }
            m.request_modes
                .message_request_mode_map
                .entry(b.topic.clone())
                .or_default()
                .insert(b.consumer_group.clone(), b);
            let bytes = body::to_json(&m.request_modes);
            crate::topic_manager::persist_in_background(m.request_modes_path(), bytes);
            Ok(())
        })
        .await??;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

pub async fn all_message_request_modes(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let bytes = shard
        .mesh
        .call(
            0,
            |s0| async move { body::to_json(&s0.meta().request_modes) },
        )
        .await?;
    let mut resp = RemotingCommand::response_for(cmd, rc::SUCCESS, None);
    resp.body = bytes.into();
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mqs(n: i32) -> Vec<MessageQueue> {
        (0..n)
            .map(|i| MessageQueue {
                broker_name: "b".into(),
                queue_id: i,
                topic: "T".into(),
            })
            .collect()
    }

    fn ids(v: Option<Vec<MessageQueue>>) -> Vec<i32> {
        v.unwrap().iter().map(|q| q.queue_id).collect()
    }

    /// AVG gives contiguous blocks, the first clients one more; AVG_BY_CIRCLE deals round.
    #[test]
    fn pull_strategies() {
        let q = mqs(8);
        assert_eq!(ids(strategy("AVG", &q, 3, 0)), vec![0, 1, 2]);
        assert_eq!(ids(strategy("AVG", &q, 3, 1)), vec![3, 4, 5]);
        assert_eq!(ids(strategy("AVG", &q, 3, 2)), vec![6, 7]);
        assert_eq!(ids(strategy("AVG", &mqs(2), 3, 2)), Vec::<i32>::new());
        assert_eq!(ids(strategy("AVG_BY_CIRCLE", &q, 3, 1)), vec![1, 4, 7]);
        assert!(strategy("NOPE", &q, 3, 1).is_none());
    }

    /// POP without sharing: queue -1 of each broker; with sharing: the client's own queues and
    /// its neighbours'.
    #[test]
    fn pop_assignment() {
        let body = QueryAssignmentRequestBody {
            client_id: "c1".into(),
            strategy_name: "AVG".into(),
            topic: "T".into(),
            ..Default::default()
        };
        let clients: Vec<String> = ["c0", "c1", "c2", "c3"].map(String::from).to_vec();
        let mut mode = SetMessageRequestModeRequestBody {
            mode: MessageRequestMode::Pop,
            pop_share_queue_num: 0,
            ..Default::default()
        };
        assert_eq!(ids(allocate(&body, &mode, &mqs(8), &clients)), vec![-1]);
        mode.pop_share_queue_num = 1;
        assert_eq!(
            ids(allocate(&body, &mode, &mqs(8), &clients)),
            vec![2, 3, 4, 5]
        );
        let stranger = QueryAssignmentRequestBody {
            client_id: "zz".into(),
            ..body
        };
        assert_eq!(
            ids(allocate(&stranger, &mode, &mqs(8), &clients)),
            Vec::<i32>::new()
        );
    }
}
