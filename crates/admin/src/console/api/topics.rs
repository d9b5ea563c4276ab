//! Topics: `GET /api/topics` (every topic the name servers route, system ones marked),
//! `GET /api/topics/NAME` (its brokers with their queue counts and permission, and every
//! queue's min and max offsets from GET_TOPIC_STATS_INFO) and `POST /api/topics` (create or
//! update a topic on every master, UPDATE_AND_CREATE_TOPIC, then wait for its route).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

use super::super::error::ConsoleError;
use super::super::Console;
use crate::bodies::TopicConfig;
use crate::protocol::topics::{
    is_system_topic, reply_topic, DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX,
};

/// The most queues the form may ask for (Java's dashboard takes any; brokers cap it themselves).
const QUEUES_MAX: i32 = 1024;
/// Topic names RocketMQ takes: at most this long...
const TOPIC_NAME_MAX: usize = 127;
/// How long a created topic's route may take to reach the name server.
const ROUTE_WAIT: Duration = Duration::from_secs(5);

/// True for a topic the broker owns or a group's retry or dead-letter topic.
pub fn is_system(topic: &str) -> bool {
    is_system_topic(topic)
        || topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
        || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
}

pub fn list(c: &Console) -> Result<Value, ConsoleError> {
    // Every broker also routes topics named for its cluster and itself, and its cluster's reply
    // topic: the broker's, not an application's.
    let mut own = BTreeSet::new();
    for b in c.admin.brokers(None)? {
        own.insert(reply_topic(&b.cluster));
        own.insert(b.cluster);
        own.insert(b.broker_name);
    }
    let topics: Vec<Value> = c
        .admin
        .topic_list()?
        .topic_list
        .iter()
        .map(|t| json!({ "topic": t, "system": is_system(t) || own.contains(t) }))
        .collect();
    Ok(json!({ "topics": topics }))
}

pub fn detail(c: &Console, topic: &str) -> Result<Value, ConsoleError> {
    let route = c
        .admin
        .topic_route(topic)
        .map_err(|e| ConsoleError::not_found_as(e, || format!("Topic {topic} does not exist")))?;
    let brokers: Vec<Value> = route
        .queue_datas
        .iter()
        .map(|q| {
            let addr = route
                .broker_datas
                .iter()
                .find(|b| b.broker_name == q.broker_name)
                .and_then(|b| b.broker_addrs.get(&0))
                .cloned();
            json!({
                "brokerName": q.broker_name,
                "addr": addr,
                "readQueueNums": q.read_queue_nums,
                "writeQueueNums": q.write_queue_nums,
                "perm": q.perm,
            })
        })
        .collect();
    let stats = c.admin.topic_status(topic)?;
    let mut total = 0i64;
    let queues: Vec<Value> = stats
        .offset_table
        .iter()
        .map(|q| {
            total += (q.offset.max_offset - q.offset.min_offset).max(0);
            json!({
                "brokerName": q.message_queue.broker_name,
                "queueId": q.message_queue.queue_id,
                "minOffset": q.offset.min_offset,
                "maxOffset": q.offset.max_offset,
                "lastUpdateTimestamp": q.offset.last_update_timestamp,
            })
        })
        .collect();
    Ok(json!({
        "topic": topic,
        "system": is_system(topic),
        "brokers": brokers,
        "queues": queues,
        "totalMessages": total,
    }))
}

/// The create-topic form.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicForm {
    topic: String,
    read_queue_nums: i32,
    write_queue_nums: i32,
    perm: i32,
}

pub fn create(c: &Console, f: TopicForm) -> Result<Value, ConsoleError> {
    check_topic_name(&f.topic)?;
    for (what, n) in [
        ("read queues", f.read_queue_nums),
        ("write queues", f.write_queue_nums),
    ] {
        if !(1..=QUEUES_MAX).contains(&n) {
            return Err(ConsoleError::BadRequest(format!(
                "{what} must be between 1 and {QUEUES_MAX}, not {n}"
            )));
        }
    }
    if ![2, 4, 6].contains(&f.perm) {
        return Err(ConsoleError::BadRequest(format!(
            "permission {} is not 2 (write), 4 (read) or 6 (both)",
            f.perm
        )));
    }
    let config = TopicConfig {
        topic_name: f.topic.clone(),
        read_queue_nums: f.read_queue_nums,
        write_queue_nums: f.write_queue_nums,
        perm: f.perm,
        ..TopicConfig::default()
    };
    let mut brokers = Vec::new();
    for b in c.admin.masters(None)? {
        c.admin.create_topic(&b.addr, &config)?;
        brokers.push(b.broker_name);
    }
    wait_for_route(c, &f.topic, &brokers);
    Ok(json!({ "topic": f.topic, "brokers": brokers }))
}

/// Waits (at most `ROUTE_WAIT`) until the name servers route `topic` to every broker in
/// `brokers`, so the page the form moves to finds it; a route still missing then is the page's
/// to report.
fn wait_for_route(c: &Console, topic: &str, brokers: &[String]) {
    let deadline = Instant::now() + ROUTE_WAIT;
    while Instant::now() < deadline {
        if let Ok(route) = c.admin.topic_route(topic) {
            let routed = |b: &String| route.queue_datas.iter().any(|q| &q.broker_name == b);
            if brokers.iter().all(routed) {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// RocketMQ's topic-name rule (Java's `TopicValidator.validateTopic`): 1 to 127 characters of
/// letters, digits, `%`, `-`, `_` and `|`.
fn check_topic_name(topic: &str) -> Result<(), ConsoleError> {
    let legal = |ch: char| ch.is_ascii_alphanumeric() || "%-_|".contains(ch);
    if topic.is_empty() || topic.len() > TOPIC_NAME_MAX || !topic.chars().all(legal) {
        return Err(ConsoleError::BadRequest(format!(
            "{topic:?} is not a topic name: 1 to {TOPIC_NAME_MAX} letters, digits, %, -, _ or |"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names RocketMQ takes pass; empty, too long or with other characters do not.
    #[test]
    fn topic_names() {
        assert!(check_topic_name("Orders_2-a|b%c").is_ok());
        for bad in ["", "a b", "a/b", "t\u{e9}", &"x".repeat(128)] {
            assert!(check_topic_name(bad).is_err(), "{bad:?}");
        }
    }

    /// Retry and dead-letter topics, and the broker's own, are system topics; others are not.
    #[test]
    fn system_topics() {
        for t in ["%RETRY%G", "%DLQ%G", "TBW102", "rmq_sys_wheel"] {
            assert!(is_system(t), "{t}");
        }
        assert!(!is_system("Orders"));
    }
}
