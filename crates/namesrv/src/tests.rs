//! Name server behaviour through `NameServer::handle`: routes of several brokers, legacy and
//! strict route JSON, expiry, connection close, unregister, topic admin, KV config.
//! Requests are built from the wire spec (extFields + JSON text), not from our own encoders.

use serde_json::Value;

use super::*;
use crate::protocol::body::{self, TopicRouteData};
use crate::protocol::codes::request_code;

pub(super) const CLUSTER: &str = "DefaultCluster";
pub(super) const ADDR_A: &str = "10.0.0.1:10911";
pub(super) const ADDR_A1: &str = "10.0.0.2:10911";
pub(super) const ADDR_B: &str = "10.0.0.3:10911";

/// A RegisterBrokerBody in the JSON form Java brokers send; topics as (name, read, write, perm).
pub(super) fn register_body(topics: &[(&str, i32, i32, i32)], counter: i64) -> String {
    let table: Vec<String> = topics
        .iter()
        .map(|(t, r, w, p)| {
            format!(
                r#""{t}":{{"attributes":{{}},"order":false,"perm":{p},"readQueueNums":{r},"topicFilterType":"SINGLE_TAG","topicName":"{t}","topicSysFlag":0,"writeQueueNums":{w}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"filterServerList":[],"topicConfigSerializeWrapper":{{"dataVersion":{{"counter":{counter},"stateVersion":0,"timestamp":1700000000000}},"topicConfigTable":{{{}}}}}}}"#,
        table.join(",")
    )
}

pub(super) fn register_req(
    name: &str,
    addr: &str,
    id: i64,
    topics: &[(&str, i32, i32, i32)],
    counter: i64,
) -> RemotingCommand {
    RemotingCommand::new_request(request_code::REGISTER_BROKER)
        .with_ext("brokerName", name)
        .with_ext("brokerAddr", addr)
        .with_ext("clusterName", CLUSTER)
        .with_ext("haServerAddr", addr.replace("10911", "10912"))
        .with_ext("brokerId", id)
        .with_ext("compressed", "false")
        .with_ext("bodyCrc32", 0)
        .with_body(register_body(topics, counter).into_bytes())
}

pub(super) fn route_req(topic: &str, version: i32) -> RemotingCommand {
    let mut r =
        RemotingCommand::new_request(request_code::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic);
    r.version = version;
    r
}

pub(super) fn call(
    ns: &mut NameServer,
    conn: u64,
    req: &RemotingCommand,
    now: i64,
) -> RemotingCommand {
    let resp = ns
        .handle(conn, req, now)
        .expect("a two-way request gets a response");
    assert_eq!(resp.opaque, req.opaque);
    assert!(resp.is_response());
    resp
}

pub(super) fn assert_ok(resp: &RemotingCommand) {
    assert_eq!(resp.code, 0, "remark: {:?}", resp.remark);
}

/// Strict route of `topic` as a JSON value (fails the test if not strict JSON).
pub(super) fn strict_route(ns: &mut NameServer, topic: &str) -> Value {
    let resp = call(ns, 9, &route_req(topic, 479), 0);
    assert_ok(&resp);
    serde_json::from_slice(&resp.body).expect("version >= 401 gets strict JSON")
}

/// broker-a (master + slave) and broker-b register; "Shared" is on both.
fn two_brokers() -> NameServer {
    let mut ns = NameServer::new(None);
    let a = [("Shared", 4, 4, 6), ("OnlyA", 8, 8, 6)];
    let b = [("Shared", 2, 2, 6), ("OnlyB", 1, 1, 4)];
    assert_ok(&call(
        &mut ns,
        1,
        &register_req("broker-a", ADDR_A, 0, &a, 1),
        0,
    ));
    assert_ok(&call(
        &mut ns,
        2,
        &register_req("broker-a", ADDR_A1, 1, &a, 1),
        0,
    ));
    assert_ok(&call(
        &mut ns,
        3,
        &register_req("broker-b", ADDR_B, 0, &b, 1),
        0,
    ));
    ns.route_table().check_invariants();
    ns
}

/// A topic registered by two broker groups routes to both, with each group's queue counts.
#[test]
fn shared_topic_routes_to_both_brokers_in_strict_json() {
    let mut ns = two_brokers();
    let route = strict_route(&mut ns, "Shared");
    let queues = route["queueDatas"].as_array().unwrap();
    assert_eq!(queues.len(), 2);
    let q = |name: &str| {
        queues
            .iter()
            .find(|q| q["brokerName"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(q("broker-a")["readQueueNums"], 4);
    assert_eq!(q("broker-b")["writeQueueNums"], 2);
    assert_eq!(q("broker-a")["perm"], 6);
    let brokers = route["brokerDatas"].as_array().unwrap();
    assert_eq!(brokers.len(), 2);
    let a = brokers
        .iter()
        .find(|b| b["brokerName"] == "broker-a")
        .unwrap();
    assert_eq!(a["cluster"], CLUSTER);
    assert_eq!(a["brokerAddrs"]["0"], ADDR_A);
    assert_eq!(a["brokerAddrs"]["1"], ADDR_A1);

    let only_b = strict_route(&mut ns, "OnlyB");
    assert_eq!(only_b["queueDatas"].as_array().unwrap().len(), 1);
    assert_eq!(only_b["brokerDatas"][0]["brokerName"], "broker-b");
    assert_eq!(only_b["queueDatas"][0]["perm"], 4);
}

/// Clients older than V4_9_4 get fastjson's unquoted long keys, which strict JSON parsers
/// reject and the protocol's lenient parser reads back; acceptStandardJsonOnly overrides.
#[test]
fn old_clients_get_legacy_route_json() {
    let mut ns = two_brokers();
    let resp = call(&mut ns, 9, &route_req("OnlyA", 400), 0);
    assert_ok(&resp);
    let text = String::from_utf8(resp.body.to_vec()).unwrap();
    assert!(
        text.contains(r#"{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}"#),
        "{text}"
    );
    assert!(serde_json::from_slice::<Value>(&resp.body).is_err());
    let parsed: TopicRouteData = body::from_json(&resp.body).unwrap();
    assert_eq!(parsed.broker_datas.len(), 1);
    assert_eq!(
        parsed.broker_datas[0]
            .broker_addrs
            .get(&1)
            .map(String::as_str),
        Some(ADDR_A1)
    );
    assert_eq!(parsed.queue_datas[0].read_queue_nums, 8);

    let strict = route_req("OnlyA", 400).with_ext("acceptStandardJsonOnly", "true");
    let resp = call(&mut ns, 9, &strict, 0);
    let text = String::from_utf8(resp.body.to_vec()).unwrap();
    assert!(
        text.contains(r#"{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}"#),
        "{text}"
    );
}

/// An unknown topic is TOPIC_NOT_EXIST with Java's remark.
#[test]
fn unknown_topic_is_17() {
    let mut ns = two_brokers();
    let resp = call(&mut ns, 9, &route_req("Nope", 479), 0);
    assert_eq!(resp.code, 17);
    assert_eq!(
        resp.remark.as_deref(),
        Some("No topic route info in name server for the topic: Nope")
    );
    assert!(resp.body.is_empty());
}

/// A broker silent for more than 120 s is removed; exactly 120 s is still alive (Java's
/// strict comparison); BROKER_HEARTBEAT and re-registration keep it alive.
#[test]
fn brokers_expire_after_120_seconds() {
    let mut ns = two_brokers();
    assert!(ns.scan_not_active_brokers(120_000).is_empty());
    let hb = RemotingCommand::new_request(request_code::BROKER_HEARTBEAT)
        .with_ext("clusterName", CLUSTER)
        .with_ext("brokerAddr", ADDR_B)
        .with_ext("brokerName", "broker-b");
    assert_ok(&call(&mut ns, 3, &hb, 60_000));
    let removed = ns.scan_not_active_brokers(120_001);
    assert_eq!(removed, vec![ADDR_A.to_owned(), ADDR_A1.to_owned()]);
    ns.route_table().check_invariants();
    assert_eq!(call(&mut ns, 9, &route_req("OnlyA", 479), 0).code, 17);
    let shared = strict_route(&mut ns, "Shared");
    assert_eq!(shared["queueDatas"].as_array().unwrap().len(), 1);
    assert_eq!(shared["queueDatas"][0]["brokerName"], "broker-b");
    assert_eq!(ns.scan_not_active_brokers(180_001), vec![ADDR_B.to_owned()]);
    assert_eq!(call(&mut ns, 9, &route_req("Shared", 479), 0).code, 17);
    assert!(ns.route_table().broker_groups().is_empty());
    assert!(ns.route_table().clusters().is_empty());
}

/// heartbeatTimeoutMillis in the header replaces the 120 s default.
#[test]
fn custom_heartbeat_timeout() {
    let mut ns = NameServer::new(None);
    let req = register_req("broker-a", ADDR_A, 0, &[("T", 1, 1, 6)], 1)
        .with_ext("heartbeatTimeoutMillis", 10_000);
    assert_ok(&call(&mut ns, 1, &req, 1_000));
    assert!(ns.scan_not_active_brokers(11_000).is_empty());
    assert_eq!(ns.scan_not_active_brokers(11_001), vec![ADDR_A.to_owned()]);
}

/// Closing a connection removes exactly the brokers registered through it.
#[test]
fn connection_close_removes_its_brokers() {
    let mut ns = two_brokers();
    ns.on_connection_closed(42); // not a broker connection: no effect
    assert_eq!(
        strict_route(&mut ns, "Shared")["queueDatas"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    ns.on_connection_closed(3);
    ns.route_table().check_invariants();
    assert_eq!(call(&mut ns, 9, &route_req("OnlyB", 479), 0).code, 17);
    let shared = strict_route(&mut ns, "Shared");
    assert_eq!(shared["brokerDatas"].as_array().unwrap().len(), 1);
    // The master's connection closing leaves the slave: the group and its routes stay.
    ns.on_connection_closed(1);
    let only_a = strict_route(&mut ns, "OnlyA");
    assert_eq!(
        only_a["brokerDatas"][0]["brokerAddrs"],
        serde_json::json!({"1": ADDR_A1})
    );
}

/// UNREGISTER_BROKER removes one address; the last address takes the group's routes along.
#[test]
fn unregister_removes_address_then_group() {
    let mut ns = two_brokers();
    let unreg = |addr: &str, id: i64| {
        RemotingCommand::new_request(request_code::UNREGISTER_BROKER)
            .with_ext("brokerName", "broker-a")
            .with_ext("brokerAddr", addr)
            .with_ext("clusterName", CLUSTER)
            .with_ext("brokerId", id)
    };
    assert_ok(&call(&mut ns, 2, &unreg(ADDR_A1, 1), 0));
    let only_a = strict_route(&mut ns, "OnlyA");
    assert_eq!(
        only_a["brokerDatas"][0]["brokerAddrs"],
        serde_json::json!({"0": ADDR_A})
    );
    assert_ok(&call(&mut ns, 1, &unreg(ADDR_A, 0), 0));
    ns.route_table().check_invariants();
    assert_eq!(call(&mut ns, 9, &route_req("OnlyA", 479), 0).code, 17);
    assert!(!ns.route_table().broker_groups().contains_key("broker-a"));
    assert_eq!(ns.route_table().clusters()[CLUSTER].len(), 1);
    // Unregistering an unknown broker is harmless.
    assert_ok(&call(&mut ns, 1, &unreg("1.2.3.4:1", 0), 0));
}

/// Cluster info and topic lists reflect the registrations.
#[test]
fn cluster_info_and_topic_lists() {
    let mut ns = two_brokers();
    let resp = call(
        &mut ns,
        9,
        &RemotingCommand::new_request(request_code::GET_BROKER_CLUSTER_INFO),
        0,
    );
    assert_ok(&resp);
    let info: Value = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(
        info["clusterAddrTable"][CLUSTER],
        serde_json::json!(["broker-a", "broker-b"])
    );
    assert_eq!(
        info["brokerAddrTable"]["broker-b"]["brokerAddrs"]["0"],
        ADDR_B
    );

    let all = RemotingCommand::new_request(request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER);
    let list: Value = serde_json::from_slice(&call(&mut ns, 9, &all, 0).body).unwrap();
    let mut topics: Vec<&str> = list["topicList"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    topics.sort();
    assert_eq!(topics, ["OnlyA", "OnlyB", "Shared"]);

    let by_cluster = RemotingCommand::new_request(request_code::GET_TOPICS_BY_CLUSTER)
        .with_ext("cluster", "Other");
    let list: Value = serde_json::from_slice(&call(&mut ns, 9, &by_cluster, 0).body).unwrap();
    assert_eq!(list["topicList"], serde_json::json!([]));
}

/// REGISTER_TOPIC_IN_NAMESRV adds routes for known brokers only; DELETE removes them.
#[test]
fn register_and_delete_topic_in_namesrv() {
    let mut ns = two_brokers();
    let body = r#"{"brokerDatas":[],"queueDatas":[{"brokerName":"broker-b","perm":6,"readQueueNums":3,"topicSysFlag":0,"writeQueueNums":3}]}"#;
    let reg = RemotingCommand::new_request(request_code::REGISTER_TOPIC_IN_NAMESRV)
        .with_ext("topic", "Admin")
        .with_body(body.as_bytes().to_vec());
    assert_ok(&call(&mut ns, 9, &reg, 0));
    let route = strict_route(&mut ns, "Admin");
    assert_eq!(route["queueDatas"][0]["readQueueNums"], 3);

    let bad = RemotingCommand::new_request(request_code::REGISTER_TOPIC_IN_NAMESRV)
        .with_ext("topic", "Ghost")
        .with_body(body.replace("broker-b", "broker-z").into_bytes());
    assert_eq!(call(&mut ns, 9, &bad, 0).code, 29);
    assert_eq!(call(&mut ns, 9, &route_req("Ghost", 479), 0).code, 17);

    let del = RemotingCommand::new_request(request_code::DELETE_TOPIC_IN_NAMESRV)
        .with_ext("topic", "Shared");
    assert_ok(&call(&mut ns, 9, &del, 0));
    assert_eq!(call(&mut ns, 9, &route_req("Shared", 479), 0).code, 17);
    let del_other = RemotingCommand::new_request(request_code::DELETE_TOPIC_IN_NAMESRV)
        .with_ext("topic", "Admin")
        .with_ext("clusterName", "OtherCluster");
    assert_ok(&call(&mut ns, 9, &del_other, 0));
    assert_ok(&call(&mut ns, 9, &route_req("Admin", 479), 0));
}

/// KV config: put, get, list, delete, not-found codes, and a snapshot per change.
#[test]
fn kv_config_put_get_delete_list() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kvConfig.json");
    let mut ns = NameServer::new(Some(path.clone()));
    assert_eq!(ns.kv_config_path(), Some(path.as_path()));
    let put = |k: &str, v: &str| {
        RemotingCommand::new_request(request_code::PUT_KV_CONFIG)
            .with_ext("namespace", "NS")
            .with_ext("key", k)
            .with_ext("value", v)
    };
    let get = |k: &str| {
        RemotingCommand::new_request(request_code::GET_KV_CONFIG)
            .with_ext("namespace", "NS")
            .with_ext("key", k)
    };
    let list = RemotingCommand::new_request(request_code::GET_KVLIST_BY_NAMESPACE)
        .with_ext("namespace", "NS");
    assert_eq!(call(&mut ns, 9, &list, 0).code, 22);
    assert!(ns.take_kv_snapshot().is_none());
    assert_ok(&call(&mut ns, 9, &put("k1", "v1"), 0));
    assert_ok(&call(&mut ns, 9, &put("k2", "v2"), 0));
    let resp = call(&mut ns, 9, &get("k1"), 0);
    assert_ok(&resp);
    assert_eq!(resp.ext("value"), Some("v1"));
    let missing = call(&mut ns, 9, &get("nope"), 0);
    assert_eq!(missing.code, 22);
    assert_eq!(
        missing.remark.as_deref(),
        Some("No config item, Namespace: NS Key: nope")
    );
    let table: Value = serde_json::from_slice(&call(&mut ns, 9, &list, 0).body).unwrap();
    assert_eq!(
        table,
        serde_json::json!({"table": {"k1": "v1", "k2": "v2"}})
    );

    let snap = ns.take_kv_snapshot().expect("two puts");
    assert!(ns.take_kv_snapshot().is_none());
    kv_config::write_file(&path, &snap).unwrap();

    let del = RemotingCommand::new_request(request_code::DELETE_KV_CONFIG)
        .with_ext("namespace", "NS")
        .with_ext("key", "k1");
    assert_ok(&call(&mut ns, 9, &del, 0));
    assert_eq!(call(&mut ns, 9, &get("k1"), 0).code, 22);
    assert!(ns.take_kv_snapshot().is_some());

    // A restarted name server reads the persisted (pre-delete) snapshot.
    let mut again = NameServer::new(Some(path));
    assert_eq!(call(&mut again, 9, &get("k1"), 0).ext("value"), Some("v1"));
}
