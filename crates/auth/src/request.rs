//! What a broker request touches, for authorization: the (resource, actions) pairs Java's
//! `DefaultAuthorizationContextBuilder` derives for each remoting request, by its special cases
//! (sends, pulls, heartbeats, offsets, queue locks) and by the `@RocketMQAction` and
//! `@RocketMQResource` annotations on the request header classes (a header field that names a
//! topic or a group; a retry topic counts as its group).
//!
//! Where Java derives nothing, ringmq is stricter in one way: a request code with no header
//! class in Java (so never authorized there, e.g. UPDATE_BROKER_CONFIG or
//! UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) needs the cluster resource, Get to read and Update to
//! change, so only users granted the cluster (or Super users) run admin requests. Codes Java
//! annotates without a resource field (GET_ALL_TOPIC_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
//! and CHECK_CLIENT_CONFIG need authentication only, as in Java.

use std::borrow::Cow;

use super::model::{is_retry_topic, Action, Requested, ResourceType};
use crate::protocol::body::{self, HeartbeatData, LockBatchRequestBody};
use crate::protocol::codes::request_code as rc;
use crate::protocol::command::RemotingCommand;
use crate::protocol::ProtocolError;

/// One thing a request does: on this resource, one of these actions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check<'a> {
    pub kind: ResourceType,
    pub name: Cow<'a, str>,
    pub actions: &'static [Action],
}

impl Check<'_> {
    pub fn requested(&self) -> Requested<'_> {
        match self.kind {
            ResourceType::Group => Requested::group(&self.name),
            kind => Requested {
                kind,
                name: &self.name,
            },
        }
    }
}

const PUB: &[Action] = &[Action::Pub];
const SUB: &[Action] = &[Action::Sub];
const GET: &[Action] = &[Action::Get];
const UPDATE: &[Action] = &[Action::Update];
const CREATE: &[Action] = &[Action::Create];
const DELETE: &[Action] = &[Action::Delete];
const SUB_GET: &[Action] = &[Action::Sub, Action::Get];
const SUB_UPDATE: &[Action] = &[Action::Sub, Action::Update];

/// The checks for one request to a broker of cluster `cluster`. An empty list means the
/// request needs authentication only. A body that cannot be parsed is an error (the request
/// is refused, as Java refuses with "parse authorization context error").
pub fn checks<'a>(
    cmd: &'a RemotingCommand,
    cluster: &'a str,
) -> Result<Vec<Check<'a>>, ProtocolError> {
    let mut out = Vec::with_capacity(2);
    let ext = |k: &str| cmd.ext(k).filter(|v| !v.trim().is_empty());
    let field = |out: &mut Vec<Check<'a>>, kind: ResourceType, key: &str, actions| {
        if let Some(v) = cmd.ext(key).filter(|v| !v.trim().is_empty()) {
            push_named(out, kind, Cow::Borrowed(v), actions);
        }
    };
    let cluster_check = |out: &mut Vec<Check<'a>>, actions| {
        out.push(Check {
            kind: ResourceType::Cluster,
            name: Cow::Borrowed(cluster),
            actions,
        })
    };
    use ResourceType::{Group, Topic};
    match cmd.code {
        rc::SEND_MESSAGE | rc::SEND_REPLY_MESSAGE => send(&mut out, ext("topic"), ext("group")),
        rc::SEND_MESSAGE_V2 | rc::SEND_BATCH_MESSAGE | rc::SEND_REPLY_MESSAGE_V2 => {
            send(&mut out, ext("b"), ext("a"))
        }
        rc::RECALL_MESSAGE => field(&mut out, Topic, "topic", PUB),
        rc::END_TRANSACTION => field(&mut out, Topic, "topic", PUB),
        rc::CONSUMER_SEND_MSG_BACK => field(&mut out, Group, "group", SUB),
        rc::PULL_MESSAGE | rc::LITE_PULL_MESSAGE => {
            if let Some(t) = ext("topic").filter(|t| !is_retry_topic(t)) {
                push_named(&mut out, Topic, Cow::Borrowed(t), SUB);
            }
            field(&mut out, Group, "consumerGroup", SUB);
        }
        rc::POP_MESSAGE
        | rc::PEEK_MESSAGE
        | rc::ACK_MESSAGE
        | rc::CHANGE_MESSAGE_INVISIBLETIME
        | rc::NOTIFICATION
        | rc::POLLING_INFO => {
            if let Some(t) = ext("topic").filter(|t| !is_retry_topic(t)) {
                push_named(&mut out, Topic, Cow::Borrowed(t), SUB);
            }
            field(&mut out, Group, "consumerGroup", SUB);
        }
        rc::QUERY_ASSIGNMENT => {
            let b: crate::protocol::assignment::QueryAssignmentRequestBody =
                body::from_json(&cmd.body)?;
            push_named(&mut out, Group, Cow::Owned(b.consumer_group), SUB);
            if !is_retry_topic(&b.topic) {
                push_named(&mut out, Topic, Cow::Owned(b.topic), SUB);
            }
        }
        rc::BATCH_ACK_MESSAGE => {
            let b: crate::protocol::pop::BatchAckMessageRequestBody = body::from_json(&cmd.body)?;
            for a in b.acks {
                push_named(&mut out, Group, Cow::Owned(a.consumer_group), SUB);
                if !is_retry_topic(&a.topic) {
                    push_named(&mut out, Topic, Cow::Owned(a.topic), SUB);
                }
            }
        }
        rc::QUERY_MESSAGE => field(&mut out, Topic, "topic", SUB_GET),
        rc::HEART_BEAT => {
            let hb: HeartbeatData = body::from_json(&cmd.body)?;
            for c in hb.consumer_data_set {
                push_named(&mut out, Group, Cow::Owned(c.group_name), SUB);
                for s in c.subscription_data_set {
                    if !is_retry_topic(&s.topic) {
                        push_named(&mut out, Topic, Cow::Owned(s.topic), SUB);
                    }
                }
            }
        }
        rc::UNREGISTER_CLIENT => field(&mut out, Group, "consumerGroup", SUB),
        rc::GET_CONSUMER_LIST_BY_GROUP => field(&mut out, Group, "consumerGroup", SUB_GET),
        rc::QUERY_CONSUMER_OFFSET | rc::UPDATE_CONSUMER_OFFSET => {
            let actions = if cmd.code == rc::QUERY_CONSUMER_OFFSET {
                SUB_GET
            } else {
                SUB_UPDATE
            };
            if let Some(t) = ext("topic").filter(|t| !is_retry_topic(t)) {
                push_named(&mut out, Topic, Cow::Borrowed(t), actions);
            }
            field(&mut out, Group, "consumerGroup", actions);
        }
        rc::LOCK_BATCH_MQ | rc::UNLOCK_BATCH_MQ => {
            // The unlock body has the lock body's fields.
            let b: LockBatchRequestBody = body::from_json(&cmd.body)?;
            push_named(&mut out, Group, Cow::Owned(b.consumer_group), SUB);
            for mq in b.mq_set {
                if !is_retry_topic(&mq.topic) {
                    push_named(&mut out, Topic, Cow::Owned(mq.topic), SUB);
                }
            }
        }
        // By the header annotations.
        rc::SEARCH_OFFSET_BY_TIMESTAMP
        | rc::GET_MAX_OFFSET
        | rc::GET_MIN_OFFSET
        | rc::GET_EARLIEST_MSG_STORETIME
        | rc::VIEW_MESSAGE_BY_ID
        | rc::GET_TOPIC_STATS_INFO
        | rc::QUERY_TOPIC_CONSUME_BY_WHO
        | rc::GET_TOPIC_CONFIG => field(&mut out, Topic, "topic", GET),
        rc::UPDATE_AND_CREATE_TOPIC => field(&mut out, Topic, "topic", CREATE),
        rc::DELETE_TOPIC_IN_BROKER => field(&mut out, Topic, "topic", DELETE),
        rc::DELETE_SUBSCRIPTIONGROUP => field(&mut out, Group, "groupName", DELETE),
        rc::GET_CONSUME_STATS => {
            field(&mut out, Group, "consumerGroup", GET);
            field(&mut out, Topic, "topic", GET);
            if let Some(list) = ext("topicList") {
                for t in list.split(';').filter(|t| !t.trim().is_empty()) {
                    push_named(&mut out, Topic, Cow::Borrowed(t), GET);
                }
            }
        }
        rc::GET_CONSUMER_CONNECTION_LIST | rc::GET_CONSUMER_RUNNING_INFO => {
            field(&mut out, Group, "consumerGroup", GET)
        }
        rc::GET_SUBSCRIPTIONGROUP_CONFIG | rc::QUERY_TOPICS_BY_CONSUMER => {
            field(&mut out, Group, "group", GET)
        }
        rc::QUERY_SUBSCRIPTION_BY_CONSUMER => {
            field(&mut out, Group, "group", GET);
            field(&mut out, Topic, "topic", GET);
        }
        rc::INVOKE_BROKER_TO_RESET_OFFSET => {
            field(&mut out, Group, "group", UPDATE);
            field(&mut out, Topic, "topic", UPDATE);
        }
        rc::INVOKE_BROKER_TO_GET_CONSUMER_STATUS | rc::QUERY_CONSUME_TIME_SPAN => {
            field(&mut out, Topic, "topic", GET);
            field(&mut out, Group, "group", GET);
        }
        rc::QUERY_CORRECTION_OFFSET => {
            if let Some(list) = ext("filterGroups") {
                for g in list.split(',').filter(|g| !g.trim().is_empty()) {
                    push_named(&mut out, Group, Cow::Borrowed(g), GET);
                }
            }
            field(&mut out, Group, "compareGroup", GET);
            field(&mut out, Topic, "topic", GET);
        }
        rc::CLONE_GROUP_OFFSET => {
            field(&mut out, Group, "destGroup", UPDATE);
            field(&mut out, Topic, "topic", UPDATE);
        }
        rc::QUERY_CONSUME_QUEUE => {
            field(&mut out, Topic, "topic", GET);
            field(&mut out, Group, "consumerGroup", GET);
        }
        rc::CONSUME_MESSAGE_DIRECTLY => {
            field(&mut out, Group, "consumerGroup", SUB);
            field(&mut out, Topic, "topic", SUB);
        }
        // Annotated in Java with a type but no field: authentication only.
        rc::GET_ALL_TOPIC_CONFIG
        | rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG
        | rc::CHECK_CLIENT_CONFIG => {}
        // The cluster, to read.
        rc::GET_PRODUCER_CONNECTION_LIST
        | rc::VIEW_BROKER_STATS_DATA
        | rc::GET_BROKER_CONSUME_STATS
        | rc::GET_ALL_PRODUCER_INFO
        | rc::AUTH_GET_USER
        | rc::AUTH_LIST_USER
        | rc::AUTH_GET_ACL
        | rc::AUTH_LIST_ACL
        | rc::QUERY_DATA_VERSION
        | rc::QUERY_BROKER_OFFSET
        | rc::GET_TOPIC_CONFIG_LIST
        | rc::GET_TOPIC_NAME_LIST
        | rc::GET_BROKER_CONFIG
        | rc::GET_BROKER_RUNTIME_INFO
        | rc::GET_ALL_CONSUMER_OFFSET
        | rc::GET_ALL_DELAY_OFFSET
        | rc::GET_TIMER_CHECK_POINT
        | rc::GET_TIMER_METRICS
        | rc::GET_SYSTEM_TOPIC_LIST_FROM_BROKER
        | rc::GET_BROKER_HA_STATUS
        | rc::GET_BROKER_EPOCH_CACHE => cluster_check(&mut out, GET),
        // Anything else changes the broker: the cluster, to update.
        _ => cluster_check(&mut out, UPDATE),
    }
    Ok(out)
}

/// Java's send rule: a send to a retry topic is a consume of its group (named by the header's
/// group field, or by the retry topic); any other send publishes to its topic.
fn send<'a>(out: &mut Vec<Check<'a>>, topic: Option<&'a str>, group: Option<&'a str>) {
    match topic {
        Some(t) if is_retry_topic(t) => push_named(
            out,
            ResourceType::Group,
            Cow::Borrowed(group.unwrap_or(t)),
            SUB,
        ),
        Some(t) => push_named(out, ResourceType::Topic, Cow::Borrowed(t), PUB),
        None => {}
    }
}

/// A named resource; a topic named by a retry topic is its group.
fn push_named<'a>(
    out: &mut Vec<Check<'a>>,
    kind: ResourceType,
    name: Cow<'a, str>,
    actions: &'static [Action],
) {
    let kind = if kind == ResourceType::Topic && is_retry_topic(&name) {
        ResourceType::Group
    } else {
        kind
    };
    out.push(Check {
        kind,
        name,
        actions,
    });
}

#[cfg(test)]
mod tests;
