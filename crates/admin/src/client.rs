//! [`AdminClient`]: the name server's and brokers' admin requests as typed, blocking calls.
//!
//! The client holds only the name-server list and a timeout. Name-server calls try each
//! server in turn until one answers; broker calls go to the address given, or to the brokers
//! resolved from GET_BROKER_CLUSTER_INFO (a cluster's masters) or from a topic's route (the
//! masters serving it). Each call opens its own connection (see `transport`), so one client can
//! be shared by any number of threads.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::bodies::{
    parse_properties, properties_text, ClusterInfo, ConsumeStats, ConsumerConnection, GroupList,
    KvTable, ProducerConnection, ResetOffsetBody, SubscriptionGroupConfig, TopicConfig, TopicList,
    TopicRouteData, TopicStatsTable,
};
use super::transport::{invoke, invoke_ok};
use super::AdminError;
use crate::protocol::body::{
    from_json, to_json, SubscriptionGroupWrapper, TopicConfigSerializeWrapper, MASTER_ID,
};
use crate::protocol::codes::{request_code as req, response_code as rc};
use crate::protocol::RemotingCommand;
use ringmq_auth::signature::sign_request;

/// mqadmin's name server when neither `-n` nor `NAMESRV_ADDR` names one.
pub const DEFAULT_NAMESRV: &str = "127.0.0.1:9876";
/// Connect, write and read timeout of one call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// One broker as the name server knows it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerRef {
    pub cluster: String,
    pub broker_name: String,
    /// 0 for a master.
    pub broker_id: i64,
    pub addr: String,
}

/// An access key and its secret key: a user's name and password under ACL 2.0.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
}

impl std::fmt::Debug for Credentials {
    /// The secret is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, <secret>)", self.access_key)
    }
}

/// A blocking admin client of one RocketMQ (or ringmq) deployment.
#[derive(Clone, Debug)]
pub struct AdminClient {
    namesrv: Vec<String>,
    timeout: Duration,
    /// When set, every request is signed with them (Java's `AclClientRPCHook`).
    credentials: Option<Credentials>,
    /// TLS for every connection (`ringmq admin --tls`); plain when None.
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl AdminClient {
    /// A client of the name servers `addrs` (`host:port`, several separated by `;`, as
    /// `namesrvAddr` is written), with [`DEFAULT_TIMEOUT`].
    pub fn new(addrs: &str) -> Result<AdminClient, AdminError> {
        let namesrv: Vec<String> = addrs
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        if namesrv.is_empty() {
            return Err(AdminError::InvalidArgument(format!(
                "no name server address in {addrs:?}"
            )));
        }
        Ok(AdminClient {
            namesrv,
            timeout: DEFAULT_TIMEOUT,
            credentials: None,
            tls: None,
        })
    }

    /// The same client signing every request it sends with these credentials.
    pub fn with_credentials(mut self, credentials: Credentials) -> AdminClient {
        self.credentials = Some(credentials);
        self
    }

    /// The request as it goes out: signed when the client has credentials, after every
    /// header field and the body are in place.
    fn outgoing<'a>(
        &self,
        cmd: &'a RemotingCommand,
    ) -> Result<Cow<'a, RemotingCommand>, AdminError> {
        let Some(c) = &self.credentials else {
            return Ok(Cow::Borrowed(cmd));
        };
        let mut signed = cmd.clone();
        sign_request(&mut signed, &c.access_key, &c.secret_key).map_err(|e| {
            AdminError::InvalidArgument(format!("the request cannot be signed: {e}"))
        })?;
        Ok(Cow::Owned(signed))
    }

    /// The same client speaking TLS to name servers and brokers.
    pub fn with_tls(mut self, config: std::sync::Arc<rustls::ClientConfig>) -> AdminClient {
        self.tls = Some(config);
        self
    }

    /// The same client with another per-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> AdminClient {
        self.timeout = timeout;
        self
    }

    pub fn namesrv_addrs(&self) -> &[String] {
        &self.namesrv
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends any request to `addr` and returns the reply whatever its code (for requests this
    /// client has no method for).
    pub fn invoke(&self, addr: &str, cmd: &RemotingCommand) -> Result<RemotingCommand, AdminError> {
        invoke(addr, &*self.outgoing(cmd)?, self.timeout, self.tls.as_ref())
    }

    /// Sends a request to `addr`; any code but SUCCESS is `Refused`.
    pub fn call(
        &self,
        addr: &str,
        cmd: &RemotingCommand,
        what: &str,
    ) -> Result<RemotingCommand, AdminError> {
        invoke_ok(
            addr,
            &*self.outgoing(cmd)?,
            what,
            self.timeout,
            self.tls.as_ref(),
        )
    }

    /// Sends a request (built afresh per attempt) to the name servers in turn; the first that
    /// answers decides. Every one unreachable: the last one's error.
    fn call_namesrv(
        &self,
        build: impl Fn() -> RemotingCommand,
        what: &str,
    ) -> Result<(String, RemotingCommand), AdminError> {
        let mut last = None;
        for addr in &self.namesrv {
            match invoke_ok(
                addr,
                &*self.outgoing(&build())?,
                what,
                self.timeout,
                self.tls.as_ref(),
            ) {
                Err(e) if e.is_unreachable() => last = Some(e),
                other => return other.map(|r| (addr.clone(), r)),
            }
        }
        Err(last.unwrap_or_else(|| AdminError::InvalidArgument("no name server".into())))
    }

    // ---- name server ----

    /// GET_BROKER_CLUSTER_INFO (106).
    pub fn cluster_info(&self) -> Result<ClusterInfo, AdminError> {
        let (addr, r) = self.call_namesrv(
            || RemotingCommand::new_request(req::GET_BROKER_CLUSTER_INFO),
            "GET_BROKER_CLUSTER_INFO",
        )?;
        body(&addr, &r.body)
    }

    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206).
    pub fn topic_list(&self) -> Result<TopicList, AdminError> {
        let (addr, r) = self.call_namesrv(
            || RemotingCommand::new_request(req::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
            "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
        )?;
        body(&addr, &r.body)
    }

    /// GET_ROUTEINFO_BY_TOPIC (105); a topic without a route is `Refused` with TOPIC_NOT_EXIST.
    pub fn topic_route(&self, topic: &str) -> Result<TopicRouteData, AdminError> {
        let (addr, r) = self.call_namesrv(
            || RemotingCommand::new_request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic),
            &format!("the route of topic {topic}"),
        )?;
        body(&addr, &r.body)
    }

    /// DELETE_TOPIC_IN_NAMESRV (216) on every name server, as Java's admin does.
    pub fn delete_topic_in_namesrv(&self, topic: &str) -> Result<(), AdminError> {
        for addr in &self.namesrv {
            let cmd =
                RemotingCommand::new_request(req::DELETE_TOPIC_IN_NAMESRV).with_ext("topic", topic);
            self.call(addr, &cmd, &format!("deleting topic {topic}"))?;
        }
        Ok(())
    }

    // ---- resolution ----

    /// Every broker of the cluster (of every cluster when `None`), masters and slaves, sorted.
    /// An unknown cluster is `NotFound`.
    pub fn brokers(&self, cluster: Option<&str>) -> Result<Vec<BrokerRef>, AdminError> {
        let info = self.cluster_info()?;
        let names: Vec<(String, String)> = match cluster {
            Some(c) => {
                let set = info.cluster_addr_table.get(c).ok_or_else(|| {
                    AdminError::NotFound(format!("cluster {c} is not known to the name server"))
                })?;
                set.iter().map(|b| (c.to_owned(), b.clone())).collect()
            }
            None => info
                .cluster_addr_table
                .iter()
                .flat_map(|(c, set)| set.iter().map(move |b| (c.clone(), b.clone())))
                .collect(),
        };
        let mut out = Vec::new();
        for (cluster, name) in names {
            if let Some(bd) = info.broker_addr_table.get(&name) {
                for (id, addr) in &bd.broker_addrs {
                    out.push(BrokerRef {
                        cluster: cluster.clone(),
                        broker_name: name.clone(),
                        broker_id: *id,
                        addr: addr.clone(),
                    });
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// The masters of the cluster (of every cluster when `None`); none is `NotFound`.
    pub fn masters(&self, cluster: Option<&str>) -> Result<Vec<BrokerRef>, AdminError> {
        let masters: Vec<BrokerRef> = self
            .brokers(cluster)?
            .into_iter()
            .filter(|b| b.broker_id == MASTER_ID)
            .collect();
        if masters.is_empty() {
            return Err(AdminError::NotFound(
                "no master broker is registered".into(),
            ));
        }
        Ok(masters)
    }

    /// The masters serving `topic`, from its route.
    pub fn route_masters(&self, topic: &str) -> Result<Vec<BrokerRef>, AdminError> {
        let route = self.topic_route(topic)?;
        let out: Vec<BrokerRef> = route
            .broker_datas
            .iter()
            .filter_map(|bd| {
                bd.broker_addrs.get(&MASTER_ID).map(|addr| BrokerRef {
                    cluster: bd.cluster.clone(),
                    broker_name: bd.broker_name.clone(),
                    broker_id: MASTER_ID,
                    addr: addr.clone(),
                })
            })
            .collect();
        if out.is_empty() {
            return Err(AdminError::NotFound(format!(
                "topic {topic} has no master broker in its route"
            )));
        }
        Ok(out)
    }

    /// The master address of the broker named `broker_name`.
    pub fn master_addr_of(&self, broker_name: &str) -> Result<String, AdminError> {
        let info = self.cluster_info()?;
        info.broker_addr_table
            .get(broker_name)
            .and_then(|bd| bd.broker_addrs.get(&MASTER_ID).cloned())
            .ok_or_else(|| AdminError::NotFound(format!("broker {broker_name} has no master")))
    }

    // ---- topics ----

    /// UPDATE_AND_CREATE_TOPIC (17) on the broker at `addr`.
    pub fn create_topic(&self, addr: &str, config: &TopicConfig) -> Result<(), AdminError> {
        let filter = serde_json::to_value(config.topic_filter_type)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "SINGLE_TAG".into());
        let mut cmd = RemotingCommand::new_request(req::UPDATE_AND_CREATE_TOPIC)
            .with_ext("topic", &config.topic_name)
            .with_ext("defaultTopic", "TBW102")
            .with_ext("readQueueNums", config.read_queue_nums)
            .with_ext("writeQueueNums", config.write_queue_nums)
            .with_ext("perm", config.perm)
            .with_ext("topicFilterType", filter)
            .with_ext("topicSysFlag", config.topic_sys_flag)
            .with_ext("order", config.order);
        if !config.attributes.is_empty() {
            let attrs: Vec<String> = config
                .attributes
                .iter()
                .map(|(k, v)| format!("+{k}={v}"))
                .collect();
            cmd.set_ext("attributes", attrs.join(","));
        }
        self.call(addr, &cmd, &format!("creating topic {}", config.topic_name))
            .map(drop)
    }

    /// DELETE_TOPIC_IN_BROKER (215).
    pub fn delete_topic_in_broker(&self, addr: &str, topic: &str) -> Result<(), AdminError> {
        let cmd =
            RemotingCommand::new_request(req::DELETE_TOPIC_IN_BROKER).with_ext("topic", topic);
        self.call(addr, &cmd, &format!("deleting topic {topic}"))
            .map(drop)
    }

    /// GET_ALL_TOPIC_CONFIG (21).
    pub fn all_topic_config(&self, addr: &str) -> Result<TopicConfigSerializeWrapper, AdminError> {
        let cmd = RemotingCommand::new_request(req::GET_ALL_TOPIC_CONFIG);
        let r = self.call(addr, &cmd, "GET_ALL_TOPIC_CONFIG")?;
        body(addr, &r.body)
    }

    /// GET_TOPIC_CONFIG (351).
    pub fn topic_config(&self, addr: &str, topic: &str) -> Result<TopicConfig, AdminError> {
        let cmd = RemotingCommand::new_request(req::GET_TOPIC_CONFIG).with_ext("topic", topic);
        let r = self.call(addr, &cmd, &format!("the config of topic {topic}"))?;
        body(addr, &r.body)
    }

    /// GET_TOPIC_STATS_INFO (202) on one broker.
    pub fn topic_stats(&self, addr: &str, topic: &str) -> Result<TopicStatsTable, AdminError> {
        let cmd = RemotingCommand::new_request(req::GET_TOPIC_STATS_INFO).with_ext("topic", topic);
        let r = self.call(addr, &cmd, &format!("the status of topic {topic}"))?;
        TopicStatsTable::from_wire(&r.body).map_err(|reason| malformed(addr, reason))
    }

    /// GET_TOPIC_STATS_INFO on every master of the topic's route, merged.
    pub fn topic_status(&self, topic: &str) -> Result<TopicStatsTable, AdminError> {
        let mut all = TopicStatsTable::default();
        for b in self.route_masters(topic)? {
            all.offset_table
                .extend(self.topic_stats(&b.addr, topic)?.offset_table);
        }
        all.offset_table
            .sort_by(|a, b| a.message_queue.cmp(&b.message_queue));
        Ok(all)
    }

    /// QUERY_TOPIC_CONSUME_BY_WHO (300).
    pub fn topic_consumed_by(&self, addr: &str, topic: &str) -> Result<GroupList, AdminError> {
        let cmd =
            RemotingCommand::new_request(req::QUERY_TOPIC_CONSUME_BY_WHO).with_ext("topic", topic);
        let r = self.call(addr, &cmd, &format!("the groups consuming {topic}"))?;
        body(addr, &r.body)
    }

    /// UPDATE_AND_CREATE_TOPIC_LIST (18): `configs` in one request; their `attributes` are
    /// changes (`+key` to set, `-key` to remove).
    pub fn create_topic_list(&self, addr: &str, configs: &[TopicConfig]) -> Result<(), AdminError> {
        let body = serde_json::json!({ "topicConfigList": configs });
        let cmd = RemotingCommand::new_request(req::UPDATE_AND_CREATE_TOPIC_LIST)
            .with_body(body.to_string());
        let what = format!("creating {} topics", configs.len());
        self.call(addr, &cmd, &what).map(drop)
    }

    // ---- subscription groups ----

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225): `configs` in one request.
    pub fn create_subscription_group_list(
        &self,
        addr: &str,
        configs: &[SubscriptionGroupConfig],
    ) -> Result<(), AdminError> {
        let body = serde_json::json!({ "groupConfigList": configs });
        let cmd = RemotingCommand::new_request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST)
            .with_body(body.to_string());
        let what = format!("updating {} groups", configs.len());
        self.call(addr, &cmd, &what).map(drop)
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200).
    pub fn create_subscription_group(
        &self,
        addr: &str,
        config: &SubscriptionGroupConfig,
    ) -> Result<(), AdminError> {
        let cmd = RemotingCommand::new_request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(to_json(config));
        self.call(addr, &cmd, &format!("updating group {}", config.group_name))
            .map(drop)
    }

    /// SET_MESSAGE_REQUEST_MODE (401): how a group reads a topic on the broker at `addr`.
    pub fn set_message_request_mode(
        &self,
        addr: &str,
        body: &crate::protocol::assignment::SetMessageRequestModeRequestBody,
    ) -> Result<(), AdminError> {
        let cmd =
            RemotingCommand::new_request(req::SET_MESSAGE_REQUEST_MODE).with_body(to_json(body));
        let what = format!(
            "setting the consume mode of {}@{}",
            body.topic, body.consumer_group
        );
        self.call(addr, &cmd, &what).map(drop)
    }

    /// DELETE_SUBSCRIPTIONGROUP (207); `clean_offset` also drops the group's offsets.
    pub fn delete_subscription_group(
        &self,
        addr: &str,
        group: &str,
        clean_offset: bool,
    ) -> Result<(), AdminError> {
        let cmd = RemotingCommand::new_request(req::DELETE_SUBSCRIPTIONGROUP)
            .with_ext("groupName", group)
            .with_ext("cleanOffset", clean_offset);
        self.call(addr, &cmd, &format!("deleting group {group}"))
            .map(drop)
    }

    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201).
    pub fn all_subscription_groups(
        &self,
        addr: &str,
    ) -> Result<SubscriptionGroupWrapper, AdminError> {
        let cmd = RemotingCommand::new_request(req::GET_ALL_SUBSCRIPTIONGROUP_CONFIG);
        let r = self.call(addr, &cmd, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG")?;
        body(addr, &r.body)
    }

    /// GET_SUBSCRIPTIONGROUP_CONFIG (352).
    pub fn subscription_group(
        &self,
        addr: &str,
        group: &str,
    ) -> Result<SubscriptionGroupConfig, AdminError> {
        let cmd = RemotingCommand::new_request(req::GET_SUBSCRIPTIONGROUP_CONFIG)
            .with_ext("group", group);
        let r = self.call(addr, &cmd, &format!("the config of group {group}"))?;
        body(addr, &r.body)
    }

    /// GET_CONSUME_STATS (208) on one broker; without `topic`, every topic of the group.
    pub fn consume_stats(
        &self,
        addr: &str,
        group: &str,
        topic: Option<&str>,
    ) -> Result<ConsumeStats, AdminError> {
        let mut cmd =
            RemotingCommand::new_request(req::GET_CONSUME_STATS).with_ext("consumerGroup", group);
        if let Some(t) = topic {
            cmd.set_ext("topic", t);
        }
        let r = self.call(addr, &cmd, &format!("the progress of group {group}"))?;
        ConsumeStats::from_wire(&r.body).map_err(|reason| malformed(addr, reason))
    }

    /// GET_CONSUMER_CONNECTION_LIST (203).
    pub fn consumer_connection(
        &self,
        addr: &str,
        group: &str,
    ) -> Result<ConsumerConnection, AdminError> {
        let cmd = RemotingCommand::new_request(req::GET_CONSUMER_CONNECTION_LIST)
            .with_ext("consumerGroup", group);
        let r = self.call(addr, &cmd, &format!("the connections of group {group}"))?;
        body(addr, &r.body)
    }

    /// GET_PRODUCER_CONNECTION_LIST (204).
    pub fn producer_connection(
        &self,
        addr: &str,
        group: &str,
    ) -> Result<ProducerConnection, AdminError> {
        let cmd = RemotingCommand::new_request(req::GET_PRODUCER_CONNECTION_LIST)
            .with_ext("producerGroup", group);
        let r = self.call(
            addr,
            &cmd,
            &format!("the connections of producer group {group}"),
        )?;
        body(addr, &r.body)
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET (222): the group's offsets on `topic` moved to the first
    /// message stored at or after `timestamp` (ms). Returns the queues' new offsets.
    pub fn reset_offset_by_time(
        &self,
        addr: &str,
        topic: &str,
        group: &str,
        timestamp: i64,
        force: bool,
    ) -> Result<ResetOffsetBody, AdminError> {
        let cmd = RemotingCommand::new_request(req::INVOKE_BROKER_TO_RESET_OFFSET)
            .with_ext("topic", topic)
            .with_ext("group", group)
            .with_ext("timestamp", timestamp)
            .with_ext("isForce", force)
            .with_ext("offset", -1);
        let r = self.call(
            addr,
            &cmd,
            &format!("resetting the offsets of {group} on {topic}"),
        )?;
        ResetOffsetBody::from_wire(&r.body).map_err(|reason| malformed(addr, reason))
    }

    /// UPDATE_CONSUMER_OFFSET (15): one queue's committed offset for a group.
    pub fn update_consumer_offset(
        &self,
        addr: &str,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> Result<(), AdminError> {
        let cmd = RemotingCommand::new_request(req::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", group)
            .with_ext("topic", topic)
            .with_ext("queueId", queue_id)
            .with_ext("commitOffset", offset);
        self.call(addr, &cmd, &format!("updating the offset of {group}"))
            .map(drop)
    }

    // ---- brokers ----

    /// GET_BROKER_RUNTIME_INFO (28).
    pub fn broker_runtime_info(&self, addr: &str) -> Result<KvTable, AdminError> {
        let cmd = RemotingCommand::new_request(req::GET_BROKER_RUNTIME_INFO);
        let r = self.call(addr, &cmd, "GET_BROKER_RUNTIME_INFO")?;
        body(addr, &r.body)
    }

    /// GET_BROKER_CONFIG (26): the broker's configuration, key by key.
    pub fn broker_config(&self, addr: &str) -> Result<BTreeMap<String, String>, AdminError> {
        let cmd = RemotingCommand::new_request(req::GET_BROKER_CONFIG);
        let r = self.call(addr, &cmd, "GET_BROKER_CONFIG")?;
        let text = std::str::from_utf8(&r.body).map_err(|e| malformed(addr, e.to_string()))?;
        Ok(parse_properties(text))
    }

    /// UPDATE_BROKER_CONFIG (25): the keys given, as a Properties body.
    pub fn update_broker_config(
        &self,
        addr: &str,
        props: &BTreeMap<String, String>,
    ) -> Result<(), AdminError> {
        let cmd = RemotingCommand::new_request(req::UPDATE_BROKER_CONFIG)
            .with_body(properties_text(props).into_bytes());
        self.call(addr, &cmd, "UPDATE_BROKER_CONFIG").map(drop)
    }
}

/// A JSON body read as fastjson writes it.
fn body<T: serde::de::DeserializeOwned>(addr: &str, bytes: &[u8]) -> Result<T, AdminError> {
    from_json(bytes).map_err(|e| malformed(addr, e.to_string()))
}

pub(super) fn malformed(addr: &str, reason: impl Into<String>) -> AdminError {
    AdminError::Malformed {
        addr: addr.to_owned(),
        reason: reason.into(),
    }
}

/// The response code that means a broker does not serve a request.
pub(super) const NOT_SUPPORTED: i32 = rc::REQUEST_CODE_NOT_SUPPORTED;

#[cfg(test)]
mod tests {
    use super::*;

    /// `namesrvAddr`'s `a;b` form gives both servers; an empty list is refused.
    #[test]
    fn namesrv_list() {
        let c = AdminClient::new("a:1; b:2;").unwrap();
        assert_eq!(c.namesrv_addrs(), ["a:1", "b:2"]);
        assert!(matches!(
            AdminClient::new(" ; "),
            Err(AdminError::InvalidArgument(_))
        ));
    }

    /// With every name server down, the error is `Unreachable` and names the last one tried.
    #[test]
    fn every_namesrv_down_is_unreachable() {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        drop((a, b));
        let c = AdminClient::new(&format!("{aa};{ba}")).unwrap();
        let e = c.cluster_info().unwrap_err();
        assert!(e.is_unreachable(), "{e}");
        assert!(e.to_string().contains(&ba.to_string()), "{e}");
    }

    /// The client can be shared by threads.
    #[test]
    fn client_is_send_and_sync() {
        fn check<T: Send + Sync + 'static>() {}
        check::<AdminClient>();
        check::<AdminError>();
    }
}
