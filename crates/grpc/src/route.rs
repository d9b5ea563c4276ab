//! QueryRoute and QueryAssignment (Java's `RouteActivity`): a topic's queues as gRPC clients
//! see them, from the name servers' route (this broker's own topic config when no name server
//! answers), every broker's address rewritten to its host and this endpoint's port, as Java's
//! local mode does; and the queues a push consumer of a group reads (one per broker, id -1,
//! unless the group is orderly: then every read queue).

use std::net::{IpAddr, SocketAddr};

use ringmq_broker::local;
use ringmq_protocol::body::{QueueData, TopicConfig, TopicRouteData};
use ringmq_protocol::topics::is_system_topic;

use crate::clients::Client;
use crate::endpoint::Endpoint;
use crate::pb::{
    self, Address, AddressScheme, Assignment, Broker, Code, Endpoints, MessageQueue, MessageType,
    Permission, Resource,
};
use crate::status::GrpcError;

const PERM_WRITE: i32 = 2;
const PERM_READ: i32 = 4;
/// Broker id 0 is the master.
const MASTER_ID: i64 = 0;
/// The topic attribute naming which message types a topic takes.
const MESSAGE_TYPE_ATTRIBUTE: &str = "message.type";
const TOPIC_NAME_MAX: usize = 127;

/// Checks a topic name as `GrpcValidator` does.
pub fn check_topic(t: Option<&Resource>) -> Result<String, GrpcError> {
    let name = t.map(|r| r.name.as_str()).unwrap_or_default();
    let legal = !name.is_empty()
        && name.len() <= TOPIC_NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'-' | b'_' | b'|'));
    if !legal {
        return Err(GrpcError::new(
            Code::IllegalTopic,
            format!("topic name {name:?} is illegal"),
        ));
    }
    if is_system_topic(name) {
        return Err(GrpcError::new(
            Code::IllegalTopic,
            format!("cannot access system topic {name}"),
        ));
    }
    Ok(name.to_string())
}

/// Checks a consumer group name as `GrpcValidator` does.
pub fn check_group(g: Option<&Resource>) -> Result<String, GrpcError> {
    let name = g.map(|r| r.name.as_str()).unwrap_or_default();
    let legal = !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'-' | b'_' | b'|'));
    if !legal {
        return Err(GrpcError::new(
            Code::IllegalConsumerGroup,
            format!("consumer group name {name:?} is illegal"),
        ));
    }
    Ok(name.to_string())
}

/// The topic's route and this broker's config of it.
pub async fn topic_route(
    ep: &Endpoint,
    s: &Client,
    topic: &str,
) -> Result<(TopicRouteData, Option<TopicConfig>), GrpcError> {
    let t = topic.to_string();
    let (route, config) = ep
        .gateway
        .on(s.shard, move |sh| async move {
            let config = sh.topics().get(&t).cloned();
            (local::topic_route(sh, t).await, config)
        })
        .await?;
    match (route, &config) {
        (Some(r), _) if !r.queue_datas.is_empty() => Ok((r, config)),
        (_, Some(c)) => Ok((local_route(ep, c), config)),
        _ => Err(GrpcError::new(
            Code::TopicNotFound,
            format!("topic {topic} does not exist"),
        )),
    }
}

/// A route of this broker alone, from its own topic config.
fn local_route(ep: &Endpoint, c: &TopicConfig) -> TopicRouteData {
    let name = ep.cfg.broker_name.clone();
    TopicRouteData {
        broker_datas: vec![ringmq_protocol::body::BrokerData {
            broker_addrs: [(MASTER_ID, ep.cfg.advertised.to_string())].into(),
            broker_name: name.clone(),
            ..Default::default()
        }],
        queue_datas: vec![QueueData {
            broker_name: name,
            perm: c.perm,
            read_queue_nums: c.read_queue_nums,
            write_queue_nums: c.write_queue_nums,
            topic_sys_flag: c.topic_sys_flag,
        }],
        ..Default::default()
    }
}

/// The message types a topic takes (`message.type`; absent is NORMAL, MIXED is all four).
pub fn accepted_types(config: Option<&TopicConfig>) -> Vec<MessageType> {
    let attr = config.and_then(|c| {
        c.attributes
            .get(MESSAGE_TYPE_ATTRIBUTE)
            .or_else(|| c.attributes.get(&format!("+{MESSAGE_TYPE_ATTRIBUTE}")))
    });
    match attr.map(|v| v.to_ascii_uppercase()).as_deref() {
        Some("FIFO") => vec![MessageType::Fifo],
        Some("DELAY") => vec![MessageType::Delay],
        Some("TRANSACTION") => vec![MessageType::Transaction],
        Some("MIXED") => vec![
            MessageType::Normal,
            MessageType::Fifo,
            MessageType::Delay,
            MessageType::Transaction,
        ],
        _ => vec![MessageType::Normal],
    }
}

/// The gRPC address of the broker at Remoting address `addr`: its host and this endpoint's
/// port; this broker's advertised gRPC address for itself.
fn grpc_endpoints(ep: &Endpoint, broker_name: &str, addr: &str) -> Endpoints {
    let target = if broker_name == ep.cfg.broker_name {
        ep.cfg.advertised
    } else {
        let ip = addr
            .parse::<SocketAddr>()
            .map(|a| a.ip())
            .unwrap_or(ep.cfg.advertised.ip());
        SocketAddr::new(ip, ep.cfg.advertised.port())
    };
    Endpoints {
        scheme: match target.ip() {
            IpAddr::V4(_) => AddressScheme::IPv4,
            IpAddr::V6(_) => AddressScheme::IPv6,
        } as i32,
        addresses: vec![Address {
            host: target.ip().to_string(),
            port: i32::from(target.port()),
        }],
    }
}

/// The master of each broker in the route, by name.
fn masters(ep: &Endpoint, route: &TopicRouteData) -> Vec<(String, Broker)> {
    route
        .broker_datas
        .iter()
        .filter_map(|b| {
            let addr = b.broker_addrs.get(&MASTER_ID)?;
            Some((
                b.broker_name.clone(),
                Broker {
                    name: b.broker_name.clone(),
                    id: 0,
                    endpoints: Some(grpc_endpoints(ep, &b.broker_name, addr)),
                },
            ))
        })
        .collect()
}

fn permission(perm: i32) -> Permission {
    match (perm & PERM_READ != 0, perm & PERM_WRITE != 0) {
        (true, true) => Permission::ReadWrite,
        (true, false) => Permission::Read,
        (false, true) => Permission::Write,
        (false, false) => Permission::None,
    }
}

/// A broker's queues as Java's `genMessageQueueFromQueueData` numbers them: read-only first,
/// then write-only, then read-write; one NONE queue at least for a topic with no access.
fn queues_of(
    q: &QueueData,
    topic: &Resource,
    types: &[MessageType],
    broker: &Broker,
) -> Vec<MessageQueue> {
    let (readable, writable) = (q.perm & PERM_READ != 0, q.perm & PERM_WRITE != 0);
    let (r, w) = (q.read_queue_nums.max(0), q.write_queue_nums.max(0));
    let (mut ro, mut wo, mut rw, mut none) = (0, 0, 0, 0);
    match (readable, writable) {
        (true, true) => {
            rw = r.min(w);
            ro = r - rw;
            wo = w - rw;
        }
        (false, true) => wo = w,
        (true, false) => ro = r,
        (false, false) => none = r.max(w).max(1),
    }
    let kinds = [
        (ro, Permission::Read),
        (wo, Permission::Write),
        (rw, Permission::ReadWrite),
        (none, Permission::None),
    ];
    let mut id = 0;
    let mut out = Vec::new();
    for (n, p) in kinds {
        for _ in 0..n {
            out.push(MessageQueue {
                topic: Some(topic.clone()),
                id,
                permission: p as i32,
                broker: Some(broker.clone()),
                accept_message_types: types.iter().map(|t| *t as i32).collect(),
            });
            id += 1;
        }
    }
    out
}

pub async fn query_route(
    ep: &Endpoint,
    s: &Client,
    req: pb::QueryRouteRequest,
) -> Result<Vec<MessageQueue>, GrpcError> {
    let topic = check_topic(req.topic.as_ref())?;
    let (route, config) = topic_route(ep, s, &topic).await?;
    let types = accepted_types(config.as_ref());
    let resource = req.topic.unwrap_or_default();
    let brokers = masters(ep, &route);
    let mut out = Vec::new();
    for q in &route.queue_datas {
        if let Some((_, b)) = brokers.iter().find(|(n, _)| *n == q.broker_name) {
            out.extend(queues_of(q, &resource, &types, b));
        }
    }
    Ok(out)
}

pub async fn query_assignment(
    ep: &Endpoint,
    s: &Client,
    req: pb::QueryAssignmentRequest,
) -> Result<Vec<Assignment>, GrpcError> {
    let topic = check_topic(req.topic.as_ref())?;
    let group = check_group(req.group.as_ref())?;
    let (route, _) = topic_route(ep, s, &topic).await?;
    let g = group.clone();
    let orderly = ep
        .gateway
        .on(0, move |s0| async move {
            s0.meta()
                .groups
                .get(&g)
                .is_some_and(|c| c.consume_message_orderly)
        })
        .await?;
    let resource = req.topic.unwrap_or_default();
    let brokers = masters(ep, &route);
    let mut out = Vec::new();
    for q in route.queue_datas.iter() {
        if q.perm & PERM_READ == 0 || q.read_queue_nums <= 0 {
            continue;
        }
        let Some((_, b)) = brokers.iter().find(|(n, _)| *n == q.broker_name) else {
            continue;
        };
        let ids: Vec<i32> = if orderly {
            (0..q.read_queue_nums).collect()
        } else {
            vec![-1]
        };
        for id in ids {
            out.push(Assignment {
                message_queue: Some(MessageQueue {
                    topic: Some(resource.clone()),
                    id,
                    permission: permission(q.perm) as i32,
                    broker: Some(b.clone()),
                    accept_message_types: Vec::new(),
                }),
            });
        }
    }
    if out.is_empty() {
        return Err(GrpcError::new(Code::Forbidden, "no readable queue"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qd(perm: i32, r: i32, w: i32) -> QueueData {
        QueueData {
            broker_name: "b".into(),
            perm,
            read_queue_nums: r,
            write_queue_nums: w,
            topic_sys_flag: 0,
        }
    }

    fn perms(q: &QueueData) -> Vec<(i32, i32)> {
        queues_of(
            q,
            &Resource::default(),
            &[MessageType::Normal],
            &Broker::default(),
        )
        .iter()
        .map(|m| (m.id, m.permission))
        .collect()
    }

    #[test]
    fn queues_are_numbered_as_java_numbers_them() {
        let (r, w, rw, n) = (
            Permission::Read as i32,
            Permission::Write as i32,
            Permission::ReadWrite as i32,
            Permission::None as i32,
        );
        assert_eq!(perms(&qd(6, 3, 2)), vec![(0, r), (1, rw), (2, rw)]);
        assert_eq!(perms(&qd(6, 1, 2)), vec![(0, w), (1, rw)]);
        assert_eq!(perms(&qd(4, 2, 2)), vec![(0, r), (1, r)]);
        assert_eq!(perms(&qd(0, 0, 0)), vec![(0, n)]);
    }

    #[test]
    fn names_are_checked() {
        let r = |n: &str| Resource {
            resource_namespace: String::new(),
            name: n.into(),
        };
        assert!(check_topic(Some(&r("TopicA-1_x"))).is_ok());
        assert_eq!(
            check_topic(Some(&r("a b"))).unwrap_err().code,
            Code::IllegalTopic
        );
        assert_eq!(check_topic(None).unwrap_err().code, Code::IllegalTopic);
        assert_eq!(
            check_topic(Some(&r("RMQ_SYS_TRANS_HALF_TOPIC")))
                .unwrap_err()
                .code,
            Code::IllegalTopic
        );
        assert_eq!(
            check_group(Some(&r(""))).unwrap_err().code,
            Code::IllegalConsumerGroup
        );
    }

    #[test]
    fn message_type_attribute_decides_accepted_types() {
        let mut c = TopicConfig::default();
        assert_eq!(accepted_types(Some(&c)), vec![MessageType::Normal]);
        c.attributes.insert("+message.type".into(), "FIFO".into());
        assert_eq!(accepted_types(Some(&c)), vec![MessageType::Fifo]);
        c.attributes.insert("message.type".into(), "MIXED".into());
        assert_eq!(accepted_types(Some(&c)).len(), 4);
    }
}
