//! Consumer groups: `GET /api/groups` (every subscription group of every master, with its
//! total lag, consume rate and online clients), `GET /api/groups/NAME` (its lag per queue from
//! GET_CONSUME_STATS, its clients and subscriptions from GET_CONSUMER_CONNECTION_LIST) and
//! `POST /api/groups/NAME/reset-offset` (its offsets on a topic moved to a time).

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{json, Value};

use super::super::error::ConsoleError;
use super::super::Console;
use crate::{AdminClient, AdminError, BrokerRef};

/// Groups every RocketMQ broker keeps for its own tools (Java's `SubscriptionGroupManager`
/// defaults), besides those named with `CID_RMQ_SYS_`.
const SYSTEM_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "__MONITOR_CONSUMER",
    "CLIENT_INNER_PRODUCER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_ONSAPI_PULL",
    "CID_SYS_RMQ_TRANS",
];

fn is_system_group(group: &str) -> bool {
    SYSTEM_GROUPS.contains(&group) || group.starts_with("CID_RMQ_SYS_")
}

/// A group's progress over every master: its queues, total lag and consume rate.
struct Progress {
    queues: Vec<Value>,
    lag: i64,
    tps: f64,
}

fn progress(
    admin: &AdminClient,
    masters: &[BrokerRef],
    group: &str,
) -> Result<Progress, AdminError> {
    let mut p = Progress {
        queues: Vec::new(),
        lag: 0,
        tps: 0.0,
    };
    for b in masters {
        let stats = match admin.consume_stats(&b.addr, group, None) {
            Ok(s) => s,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        };
        p.tps += stats.consume_tps;
        for q in &stats.offset_table {
            p.lag += q.diff();
            p.queues.push(json!({
                "topic": q.message_queue.topic,
                "brokerName": q.message_queue.broker_name,
                "queueId": q.message_queue.queue_id,
                "brokerOffset": q.offset.broker_offset,
                "consumerOffset": q.offset.consumer_offset,
                "lag": q.diff(),
                "lastTimestamp": q.offset.last_timestamp,
            }));
        }
    }
    Ok(p)
}

/// The group's online clients (asked of the first master that knows them) and what they
/// subscribe to; none online is empty.
fn clients(admin: &AdminClient, masters: &[BrokerRef], group: &str) -> Result<Value, AdminError> {
    for b in masters {
        match admin.consumer_connection(&b.addr, group) {
            Ok(c) => {
                let clients: Vec<Value> = c
                    .connection_set
                    .iter()
                    .map(|x| {
                        json!({
                            "clientId": x.client_id,
                            "clientAddr": x.client_addr,
                            "language": x.language,
                            "version": x.version,
                        })
                    })
                    .collect();
                let subs: Vec<Value> = c
                    .subscription_table
                    .values()
                    .map(|s| json!({ "topic": s.topic, "expression": s.sub_string }))
                    .collect();
                return Ok(json!({
                    "clients": clients,
                    "subscriptions": subs,
                    "messageModel": c.message_model,
                    "consumeType": c.consume_type,
                }));
            }
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(json!({ "clients": [], "subscriptions": [] }))
}

/// Every subscription group the masters keep.
fn group_names(admin: &AdminClient, masters: &[BrokerRef]) -> Result<BTreeSet<String>, AdminError> {
    let mut names = BTreeSet::new();
    for b in masters {
        names.extend(
            admin
                .all_subscription_groups(&b.addr)?
                .subscription_group_table
                .into_keys(),
        );
    }
    Ok(names)
}

pub fn list(c: &Console) -> Result<Value, ConsoleError> {
    let masters = c.admin.masters(None)?;
    let names = group_names(&c.admin, &masters)?;
    let groups: Vec<Value> = names
        .iter()
        .map(|g| {
            let system = is_system_group(g);
            let figures = progress(&c.admin, &masters, g).and_then(|p| {
                let online = clients(&c.admin, &masters, g)?;
                Ok((p, online["clients"].as_array().map_or(0, Vec::len)))
            });
            match figures {
                Ok((p, n)) => json!({
                    "group": g, "system": system, "totalLag": p.lag,
                    "consumeTps": p.tps, "clients": n,
                }),
                Err(e) => json!({
                    "group": g, "system": system, "totalLag": null,
                    "consumeTps": null, "clients": null, "error": e.to_string(),
                }),
            }
        })
        .collect();
    Ok(json!({ "groups": groups }))
}

pub fn detail(c: &Console, group: &str) -> Result<Value, ConsoleError> {
    let masters = c.admin.masters(None)?;
    let p = progress(&c.admin, &masters, group)?;
    let mut online = clients(&c.admin, &masters, group)?;
    let has_clients = online["clients"].as_array().is_some_and(|a| !a.is_empty());
    if p.queues.is_empty() && !has_clients && !group_names(&c.admin, &masters)?.contains(group) {
        return Err(ConsoleError::NotFound(format!(
            "Consumer group {group} does not exist: no broker knows it"
        )));
    }
    online["group"] = group.into();
    online["system"] = is_system_group(group).into();
    online["queues"] = p.queues.into();
    online["totalLag"] = p.lag.into();
    online["consumeTps"] = p.tps.into();
    Ok(online)
}

/// The reset-offset form: the topic, and the time (ms since the epoch) to go back (or forward)
/// to.
#[derive(Deserialize)]
pub struct ResetForm {
    topic: String,
    timestamp: i64,
}

/// Moves `group`'s offsets on the topic to the first message stored at or after the time, on
/// every master of the topic (forward as well as back, as the dashboard's reset does).
pub fn reset_offset(c: &Console, group: &str, f: ResetForm) -> Result<Value, ConsoleError> {
    if f.topic.is_empty() || f.timestamp < 0 {
        return Err(ConsoleError::BadRequest(
            "give the topic and a time to reset to".into(),
        ));
    }
    let body = c.admin.reset_offset(&f.topic, group, f.timestamp, true)?;
    let queues: Vec<Value> = body
        .offset_table
        .iter()
        .map(|q| {
            json!({
                "brokerName": q.message_queue.broker_name,
                "queueId": q.message_queue.queue_id,
                "offset": q.offset,
            })
        })
        .collect();
    Ok(json!({ "group": group, "topic": f.topic, "queues": queues }))
}

#[cfg(test)]
mod tests {
    /// RocketMQ's own groups are system groups; an application's is not.
    #[test]
    fn system_groups() {
        assert!(super::is_system_group("TOOLS_CONSUMER"));
        assert!(super::is_system_group("CID_RMQ_SYS_TRANS"));
        assert!(!super::is_system_group("orders-consumer"));
    }
}
