//! Finding the broker and queues of the benchmark topic, creating the topic when needed, and
//! reading queue offsets (GET_MAX_OFFSET / GET_MIN_OFFSET).
//!
//! Called once per run by main before any load starts. Invariants: the load goes to one
//! master broker (the first writable one in the route); every call here is a synchronous RPC
//! with the run's timeout; failures are returned as readable messages, never panics.

use std::time::{Duration, Instant};

use ringmq::protocol::body::{from_json, ClusterInfo, TopicRouteData};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::headers::{
    CreateTopicRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
};
use ringmq::protocol::RemotingCommand;

use crate::wire::RpcConn;

/// Where the load goes.
#[derive(Clone, Debug)]
pub struct Target {
    pub broker: String,
    pub queues: u32,
}

enum Lookup {
    Exists(Target),
    CreateOn(Vec<String>),
}

const PERM_READ_WRITE: i32 = 6;
/// How long a freshly created topic may take to show up in the name server's route.
const ROUTE_WAIT: Duration = Duration::from_secs(20);

fn remark(r: &RemotingCommand) -> String {
    r.remark.clone().unwrap_or_default()
}

/// Resolves the topic via the name server (creating it on the cluster's masters if missing)
/// or, with `--broker`, creates/updates it on that broker directly.
pub fn resolve(
    namesrv: Option<&str>,
    broker: Option<&str>,
    topic: &str,
    queues: u32,
    timeout: Duration,
) -> Result<Target, String> {
    if let Some(b) = broker {
        create_topic(b, topic, queues, timeout)?;
        return Ok(Target {
            broker: b.to_owned(),
            queues,
        });
    }
    let ns = namesrv.ok_or("give --namesrv HOST:PORT or --broker HOST:PORT")?;
    let mut conn = RpcConn::open(ns, timeout)?;
    // A name server or broker that just started may not be ready or registered yet: retry.
    let deadline = Instant::now() + ROUTE_WAIT;
    let masters = loop {
        let attempt = route(&mut conn, topic).and_then(|r| match r {
            Some(t) => Ok(Lookup::Exists(t)),
            None => masters_for_create(&mut conn).map(Lookup::CreateOn),
        });
        match attempt {
            Ok(Lookup::Exists(t)) => {
                if t.queues != queues {
                    eprintln!(
                        "note: topic {topic} already exists with {} queues (asked for {queues})",
                        t.queues
                    );
                }
                return Ok(t);
            }
            Ok(Lookup::CreateOn(m)) if !m.is_empty() => break m,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(250)),
            Ok(Lookup::CreateOn(_)) => {
                return Err(format!(
                    "name server {ns} knows no broker to create {topic} on"
                ))
            }
            Err(e) => return Err(e),
        }
    };
    for m in &masters {
        create_topic(m, topic, queues, timeout)?;
    }
    let deadline = Instant::now() + ROUTE_WAIT;
    loop {
        if let Some(t) = route(&mut conn, topic)? {
            return Ok(t);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "created {topic} on {masters:?} but the name server shows no route after {ROUTE_WAIT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Route of `topic`: Ok(None) when the name server says TOPIC_NOT_EXIST.
fn route(conn: &mut RpcConn, topic: &str) -> Result<Option<Target>, String> {
    let mut req = RemotingCommand::new_request(request_code::GET_ROUTEINFO_BY_TOPIC);
    GetRouteInfoRequestHeader {
        topic: topic.to_owned(),
        accept_standard_json_only: true,
    }
    .write_to(&mut req);
    let resp = conn.call(&req)?;
    match resp.code {
        response_code::SUCCESS => {}
        response_code::TOPIC_NOT_EXIST => return Ok(None),
        c => return Err(format!("route of {topic}: code {c} {}", remark(&resp))),
    }
    let rd: TopicRouteData = from_json(&resp.body).map_err(|e| format!("route of {topic}: {e}"))?;
    for qd in &rd.queue_datas {
        if qd.perm & 2 == 0 || qd.write_queue_nums <= 0 {
            continue;
        }
        let master = rd
            .broker_datas
            .iter()
            .find(|b| b.broker_name == qd.broker_name)
            .and_then(|b| b.broker_addrs.get(&0));
        if let Some(addr) = master {
            if rd.queue_datas.len() > 1 {
                eprintln!(
                    "note: {topic} spans {} brokers; loading only {}",
                    rd.queue_datas.len(),
                    qd.broker_name
                );
            }
            return Ok(Some(Target {
                broker: addr.clone(),
                queues: qd.write_queue_nums as u32,
            }));
        }
    }
    Ok(None)
}

/// Master addresses to create a topic on: TBW102's route, else the cluster info.
fn masters_for_create(conn: &mut RpcConn) -> Result<Vec<String>, String> {
    let mut req = RemotingCommand::new_request(request_code::GET_ROUTEINFO_BY_TOPIC);
    req.set_ext("topic", "TBW102");
    req.set_ext("acceptStandardJsonOnly", true);
    let resp = conn.call(&req)?;
    if resp.code == response_code::SUCCESS {
        let rd: TopicRouteData = from_json(&resp.body).map_err(|e| format!("TBW102 route: {e}"))?;
        let v: Vec<String> = rd
            .broker_datas
            .iter()
            .filter_map(|b| b.broker_addrs.get(&0).cloned())
            .collect();
        if !v.is_empty() {
            return Ok(v);
        }
    }
    let resp = conn.call(&RemotingCommand::new_request(
        request_code::GET_BROKER_CLUSTER_INFO,
    ))?;
    if resp.code != response_code::SUCCESS {
        return Err(format!(
            "cluster info: code {} {}",
            resp.code,
            remark(&resp)
        ));
    }
    let ci: ClusterInfo = from_json(&resp.body).map_err(|e| format!("cluster info: {e}"))?;
    Ok(ci
        .broker_addr_table
        .values()
        .filter_map(|b| b.broker_addrs.get(&0).cloned())
        .collect())
}

/// UPDATE_AND_CREATE_TOPIC (17) on one broker.
pub fn create_topic(
    broker: &str,
    topic: &str,
    queues: u32,
    timeout: Duration,
) -> Result<(), String> {
    let mut conn = RpcConn::open(broker, timeout)?;
    let mut req = RemotingCommand::new_request(request_code::UPDATE_AND_CREATE_TOPIC);
    CreateTopicRequestHeader {
        topic: topic.to_owned(),
        default_topic: "TBW102".to_owned(),
        read_queue_nums: queues as i32,
        write_queue_nums: queues as i32,
        perm: PERM_READ_WRITE,
        topic_filter_type: "SINGLE_TAG".to_owned(),
        topic_sys_flag: 0,
        order: false,
        attributes: None,
    }
    .write_to(&mut req);
    let resp = conn.call(&req)?;
    if resp.code != response_code::SUCCESS {
        return Err(format!(
            "create topic {topic} on {broker}: code {} {}",
            resp.code,
            remark(&resp)
        ));
    }
    Ok(())
}

/// GET_MAX_OFFSET (or GET_MIN_OFFSET with `min`) of every queue.
pub fn queue_offsets(
    broker: &str,
    topic: &str,
    queues: u32,
    min: bool,
    timeout: Duration,
) -> Result<Vec<i64>, String> {
    let mut conn = RpcConn::open(broker, timeout)?;
    (0..queues as i32)
        .map(|q| {
            let mut req;
            if min {
                req = RemotingCommand::new_request(request_code::GET_MIN_OFFSET);
                GetMinOffsetRequestHeader {
                    topic: topic.to_owned(),
                    queue_id: q,
                }
                .write_to(&mut req);
            } else {
                req = RemotingCommand::new_request(request_code::GET_MAX_OFFSET);
                GetMaxOffsetRequestHeader {
                    topic: topic.to_owned(),
                    queue_id: q,
                }
                .write_to(&mut req);
            }
            let resp = conn.call(&req)?;
            if resp.code != response_code::SUCCESS {
                return Err(format!(
                    "offset of {topic}/{q}: code {} {}",
                    resp.code,
                    remark(&resp)
                ));
            }
            resp.ext("offset")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("offset of {topic}/{q}: no offset in the response"))
        })
        .collect()
}
