//! One function per name-server request code: parse the header and body with the protocol
//! crate's types, apply the change to the route table or KV config, build the response.
//!
//! Called only by `NameServer::handle` (through `dispatch`). The translation between wire
//! types (`protocol::body`) and the route table's own types happens here and nowhere else.
//! Every failure is returned as `NamesrvError` so `handle` maps it to a response in one place.

use crate::protocol::body::{
    self, BrokerData, ClusterInfo, DataVersion, KvTable, QueueData, RegisterBrokerBody,
    TopicConfigSerializeWrapper, TopicList, TopicRouteData,
};
use crate::protocol::codes::{request_code, response_code};
use crate::protocol::headers::{
    BrokerHeartbeatRequestHeader, DeleteKvConfigRequestHeader, DeleteTopicFromNamesrvRequestHeader,
    GetKvConfigRequestHeader, GetKvConfigResponseHeader, GetKvListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader, PutKvConfigRequestHeader, QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
    RegisterTopicRequestHeader, UnregisterBrokerRequestHeader,
};
use crate::protocol::{ProtocolError, RemotingCommand};

use super::register_body::{self, RegisterBody};
use super::route_table::{
    QueueRoute, Registration, TopicConfigVersion, TopicRoute, DEFAULT_HEARTBEAT_TIMEOUT_MS,
};
use super::{NameServer, NamesrvError};

/// `MQVersion.Version.V3_0_11`: brokers from here on wrap the topic table in RegisterBrokerBody.
const V3_0_11: i32 = 37;
/// `MQVersion.Version.V4_9_4`: clients from here on get routes with quoted numeric keys.
const V4_9_4: i32 = 401;
/// extField with the broker's zone (`MixAll.ZONE_NAME`), set by brokers in zone mode.
const ZONE_NAME_FIELD: &str = "__ZONE_NAME";
/// Optional RegisterBrokerRequestHeader field not in the protocol's header type.
const ENABLE_ACTING_MASTER_FIELD: &str = "enableActingMaster";
/// `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`: returned to brokers on registration.
const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

type Reply = Result<RemotingCommand, NamesrvError>;

fn ok(req: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_for(req, response_code::SUCCESS, None)
}

impl NameServer {
    pub(super) fn dispatch(&mut self, conn_id: u64, req: &RemotingCommand, now_ms: i64) -> Reply {
        match req.code {
            request_code::REGISTER_BROKER => self.register_broker(conn_id, req, now_ms),
            request_code::UNREGISTER_BROKER => self.unregister_broker(req),
            request_code::QUERY_DATA_VERSION => self.query_data_version(req, now_ms),
            request_code::BROKER_HEARTBEAT => self.broker_heartbeat(req, now_ms),
            request_code::GET_ROUTEINFO_BY_TOPIC => self.route_info(req),
            request_code::GET_BROKER_CLUSTER_INFO => Ok(ok(req).with_body(self.cluster_info())),
            request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {
                let topics = self.routes.topics().map(str::to_owned).collect();
                Ok(ok(req).with_body(topic_list_json(topics)))
            }
            request_code::GET_TOPICS_BY_CLUSTER => {
                let cluster = required_ext(req, "cluster")?;
                let topics = self.routes.topics_by_cluster(cluster);
                Ok(ok(req).with_body(topic_list_json(topics)))
            }
            request_code::REGISTER_TOPIC_IN_NAMESRV => self.register_topic(req),
            request_code::DELETE_TOPIC_IN_NAMESRV => {
                let h = DeleteTopicFromNamesrvRequestHeader::from_command(req)?;
                let cluster = h.cluster_name.as_deref().filter(|c| !c.is_empty());
                self.routes.delete_topic(&h.topic, cluster);
                Ok(ok(req))
            }
            request_code::PUT_KV_CONFIG => {
                let h = PutKvConfigRequestHeader::from_command(req)?;
                self.kv.put(&h.namespace, &h.key, &h.value);
                Ok(ok(req))
            }
            request_code::GET_KV_CONFIG => self.get_kv_config(req),
            request_code::DELETE_KV_CONFIG => {
                let h = DeleteKvConfigRequestHeader::from_command(req)?;
                self.kv.delete(&h.namespace, &h.key);
                Ok(ok(req))
            }
            request_code::GET_KVLIST_BY_NAMESPACE => {
                let h = GetKvListByNamespaceRequestHeader::from_command(req)?;
                match self.kv_table_json(&h.namespace) {
                    Some(json) => Ok(ok(req).with_body(json)),
                    None => Ok(RemotingCommand::response_for(
                        req,
                        response_code::QUERY_NOT_FOUND,
                        Some(format!("No config item, Namespace: {}", h.namespace)),
                    )),
                }
            }
            request_code::GET_SYSTEM_TOPIC_LIST_FROM_NS => Ok(self.system_topic_list(req)),
            request_code::WIPE_WRITE_PERM_OF_BROKER => self.operate_write_perm(req, true),
            request_code::ADD_WRITE_PERM_OF_BROKER => self.operate_write_perm(req, false),
            request_code::GET_NAMESRV_CONFIG => Ok(self.config_text(req)),
            request_code::UPDATE_NAMESRV_CONFIG => Ok(self.update_config(req)),
            other => Err(NamesrvError::NotSupported(other)),
        }
    }

    fn register_broker(&mut self, conn_id: u64, req: &RemotingCommand, now_ms: i64) -> Reply {
        let h = RegisterBrokerRequestHeader::from_command(req)?;
        if h.body_crc32 != 0 {
            let computed = crc32fast::hash(&req.body);
            // Java masks the sign bit (`UtilAll.crc32`); a sender that did not mask is accepted
            // too, since both name the same checksum.
            if (computed & 0x7FFF_FFFF) as i32 != h.body_crc32 && computed as i32 != h.body_crc32 {
                return Err(NamesrvError::CrcMismatch {
                    header: h.body_crc32,
                    computed,
                });
            }
        }
        let body = decode_register_body(req, h.compressed)?;
        let enable_acting_master = req
            .ext(ENABLE_ACTING_MASTER_FIELD)
            .map(|v| v.eq_ignore_ascii_case("true"));
        let reg = Registration {
            cluster: h.cluster_name,
            broker_addr: h.broker_addr,
            broker_name: h.broker_name,
            broker_id: h.broker_id,
            ha_server_addr: h.ha_server_addr,
            zone_name: req.ext(ZONE_NAME_FIELD).map(str::to_owned),
            enable_acting_master,
            heartbeat_timeout_ms: h
                .heartbeat_timeout_millis
                .filter(|t| *t > 0)
                .unwrap_or(DEFAULT_HEARTBEAT_TIMEOUT_MS),
            data_version: body.data_version,
            topics: body.topics,
            filter_servers: body.filter_servers,
            conn_id,
        };
        tracing::debug!(broker = %reg.broker_addr, name = %reg.broker_name, id = reg.broker_id,
            cluster = %reg.cluster, topics = reg.topics.len(), "register broker");
        let outcome = self.routes.register(reg, now_ms);
        let mut resp = ok(req);
        RegisterBrokerResponseHeader {
            ha_server_addr: outcome.ha_server_addr,
            master_addr: outcome.master_addr,
        }
        .write_to(&mut resp);
        if let Some(json) = self.kv_table_json(NAMESPACE_ORDER_TOPIC_CONFIG) {
            resp.body = json.into();
        }
        Ok(resp)
    }

    fn unregister_broker(&mut self, req: &RemotingCommand) -> Reply {
        let h = UnregisterBrokerRequestHeader::from_command(req)?;
        tracing::info!(broker = %h.broker_addr, name = %h.broker_name, "unregister broker");
        self.routes
            .unregister(&h.cluster_name, &h.broker_addr, &h.broker_name);
        Ok(ok(req))
    }

    fn query_data_version(&mut self, req: &RemotingCommand, now_ms: i64) -> Reply {
        let h = QueryDataVersionRequestHeader::from_command(req)?;
        let theirs: DataVersion = body::from_json(&req.body)?;
        let theirs = version_from_wire(&theirs);
        let changed =
            self.routes
                .is_broker_topic_config_changed(&h.cluster_name, &h.broker_addr, &theirs);
        self.routes.touch(&h.cluster_name, &h.broker_addr, now_ms);
        let mut resp = ok(req);
        QueryDataVersionResponseHeader { changed }.write_to(&mut resp);
        if let Some(ours) = self.routes.data_version(&h.cluster_name, &h.broker_addr) {
            resp.body = body::to_json(&version_to_wire(&ours)).into();
        }
        Ok(resp)
    }

    fn broker_heartbeat(&mut self, req: &RemotingCommand, now_ms: i64) -> Reply {
        let h = BrokerHeartbeatRequestHeader::from_command(req)?;
        if !self.routes.touch(&h.cluster_name, &h.broker_addr, now_ms) {
            tracing::debug!(broker = %h.broker_addr, "heartbeat from an unregistered broker");
        }
        Ok(ok(req))
    }

    fn route_info(&self, req: &RemotingCommand) -> Reply {
        let h = GetRouteInfoRequestHeader::from_command(req)?;
        let Some(route) = self.routes.pickup_route(&h.topic) else {
            return Ok(RemotingCommand::response_for(
                req,
                response_code::TOPIC_NOT_EXIST,
                Some(format!(
                    "No topic route info in name server for the topic: {}",
                    h.topic
                )),
            ));
        };
        let data = route_to_wire(&route);
        let json = if req.version >= V4_9_4 || h.accept_standard_json_only {
            body::to_json(&data)
        } else {
            body::to_fastjson_legacy(&data)
        };
        Ok(ok(req).with_body(json))
    }

    /// Always strict JSON: fastjson clients parse quoted numeric keys, and strict JSON keeps
    /// serde-based clients (rocketmq-rust admin) working.
    fn cluster_info(&self) -> Vec<u8> {
        let info = ClusterInfo {
            broker_addr_table: self
                .routes
                .broker_groups()
                .iter()
                .map(|(name, g)| (name.clone(), broker_data_to_wire(g)))
                .collect(),
            cluster_addr_table: self
                .routes
                .clusters()
                .iter()
                .map(|(c, names)| (c.clone(), names.iter().cloned().collect()))
                .collect(),
        };
        body::to_json(&info)
    }

    fn register_topic(&mut self, req: &RemotingCommand) -> Reply {
        let h = RegisterTopicRequestHeader::from_command(req)?;
        if req.body.is_empty() {
            return Ok(ok(req));
        }
        let data: TopicRouteData = body::from_json(&req.body)?;
        let routes: Vec<(String, QueueRoute)> = data
            .queue_datas
            .iter()
            .map(|q| (q.broker_name.clone(), queue_route_from_wire(q)))
            .collect();
        self.routes
            .register_topic(&h.topic, &routes)
            .map_err(|name| {
                NamesrvError::InvalidParameter(format!(
                    "register topic {}: broker {name} is not registered",
                    h.topic
                ))
            })?;
        Ok(ok(req))
    }

    fn get_kv_config(&self, req: &RemotingCommand) -> Reply {
        let h = GetKvConfigRequestHeader::from_command(req)?;
        match self.kv.get(&h.namespace, &h.key) {
            Some(value) => {
                let mut resp = ok(req);
                GetKvConfigResponseHeader {
                    value: Some(value.to_owned()),
                }
                .write_to(&mut resp);
                Ok(resp)
            }
            None => Ok(RemotingCommand::response_for(
                req,
                response_code::QUERY_NOT_FOUND,
                Some(format!(
                    "No config item, Namespace: {} Key: {}",
                    h.namespace, h.key
                )),
            )),
        }
    }

    fn kv_table_json(&self, namespace: &str) -> Option<Vec<u8>> {
        let table = self.kv.namespace(namespace)?;
        Some(body::to_json(&KvTable {
            table: table.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }))
    }
}

fn required_ext<'a>(
    req: &'a RemotingCommand,
    name: &'static str,
) -> Result<&'a str, ProtocolError> {
    req.ext(name).ok_or(ProtocolError::MissingField(name))
}

/// The body of REGISTER_BROKER in any of its three forms: empty (a fresh version, no topics),
/// zlib (`compressed=true`), JSON RegisterBrokerBody, or, from brokers older than V3_0_11, a
/// bare TopicConfigSerializeWrapper.
fn decode_register_body(
    req: &RemotingCommand,
    compressed: bool,
) -> Result<RegisterBody, NamesrvError> {
    if req.body.is_empty() {
        return Ok(RegisterBody::default());
    }
    if compressed {
        return register_body::decode_compressed(&req.body, req.version)
            .map_err(|e| NamesrvError::Protocol(ProtocolError::BadBody(e)));
    }
    let (wrapper, filter_servers) = if req.version >= V3_0_11 {
        let b: RegisterBrokerBody = body::from_json(&req.body)?;
        (b.topic_config_serialize_wrapper, b.filter_server_list)
    } else {
        let w: TopicConfigSerializeWrapper = body::from_json(&req.body)?;
        (w, Vec::new())
    };
    let topics = wrapper
        .topic_config_table
        .iter()
        .map(|(name, tc)| {
            let route = QueueRoute {
                read_queue_nums: tc.read_queue_nums,
                write_queue_nums: tc.write_queue_nums,
                perm: tc.perm,
                topic_sys_flag: tc.topic_sys_flag,
            };
            (name.clone(), route)
        })
        .collect();
    Ok(RegisterBody {
        data_version: version_from_wire(&wrapper.data_version),
        topics,
        filter_servers,
    })
}

fn version_from_wire(v: &DataVersion) -> TopicConfigVersion {
    TopicConfigVersion {
        counter: v.counter,
        state_version: v.state_version,
        timestamp: v.timestamp,
    }
}

fn version_to_wire(v: &TopicConfigVersion) -> DataVersion {
    DataVersion {
        counter: v.counter,
        state_version: v.state_version,
        timestamp: v.timestamp,
    }
}

fn queue_route_from_wire(q: &QueueData) -> QueueRoute {
    QueueRoute {
        read_queue_nums: q.read_queue_nums,
        write_queue_nums: q.write_queue_nums,
        perm: q.perm,
        topic_sys_flag: q.topic_sys_flag,
    }
}

fn broker_data_to_wire(g: &super::route_table::BrokerGroup) -> BrokerData {
    BrokerData {
        cluster: g.cluster.clone(),
        broker_name: g.broker_name.clone(),
        broker_addrs: g.addrs.clone(),
        zone_name: g.zone_name.clone(),
        enable_acting_master: g.enable_acting_master,
    }
}

fn route_to_wire(route: &TopicRoute<'_>) -> TopicRouteData {
    TopicRouteData {
        queue_datas: route
            .queue_datas
            .iter()
            .map(|(name, q)| QueueData {
                broker_name: (*name).to_owned(),
                read_queue_nums: q.read_queue_nums,
                write_queue_nums: q.write_queue_nums,
                perm: q.perm,
                topic_sys_flag: q.topic_sys_flag,
            })
            .collect(),
        broker_datas: route
            .broker_datas
            .iter()
            .map(|g| broker_data_to_wire(g))
            .collect(),
        filter_server_table: route
            .filter_servers
            .iter()
            .map(|(addr, list)| ((*addr).to_owned(), list.to_vec()))
            .collect(),
        ..Default::default()
    }
}

fn topic_list_json(topics: Vec<String>) -> Vec<u8> {
    body::to_json(&TopicList {
        topic_list: topics.into_iter().collect(),
        ..Default::default()
    })
}
