//! REGISTER_BROKER and its companions through `NameServer::handle`: slaves learning their
//! master, data versions and QUERY_DATA_VERSION, the CRC check, the compressed body, the
//! slave-to-master switch, and bad input turning into error responses.

use serde_json::Value;

use super::register_body::encode_compressed_for_test;
use super::tests::{
    assert_ok, call, register_req, route_req, strict_route, ADDR_A, ADDR_A1, CLUSTER,
};
use super::*;
use crate::protocol::codes::request_code;

fn query_version(counter: i64, addr: &str) -> RemotingCommand {
    RemotingCommand::new_request(request_code::QUERY_DATA_VERSION)
        .with_ext("brokerName", "broker-a")
        .with_ext("brokerAddr", addr)
        .with_ext("clusterName", CLUSTER)
        .with_ext("brokerId", 0)
        .with_body(
            format!(r#"{{"counter":{counter},"stateVersion":0,"timestamp":1700000000000}}"#)
                .into_bytes(),
        )
}

/// A slave is told its master's address and HA address; a master and an orphan slave are not.
#[test]
fn slave_registration_gets_master_addr() {
    let mut ns = NameServer::new(None);
    let topics = [("T", 4, 4, 6)];
    let orphan = call(
        &mut ns,
        2,
        &register_req("broker-a", ADDR_A1, 1, &topics, 1),
        0,
    );
    assert_ok(&orphan);
    assert_eq!(orphan.ext("masterAddr"), None);
    // A slave's topic table does not create routes (only the master's does).
    assert_eq!(call(&mut ns, 9, &route_req("T", 479), 0).code, 17);

    let master = call(
        &mut ns,
        1,
        &register_req("broker-a", ADDR_A, 0, &topics, 1),
        0,
    );
    assert_ok(&master);
    assert_eq!(master.ext("masterAddr"), None);
    assert_eq!(master.ext("haServerAddr"), None);

    let slave = call(
        &mut ns,
        2,
        &register_req("broker-a", ADDR_A1, 1, &topics, 1),
        5,
    );
    assert_ok(&slave);
    assert_eq!(slave.ext("masterAddr"), Some(ADDR_A));
    assert_eq!(slave.ext("haServerAddr"), Some("10.0.0.1:10912"));
}

/// Queue routes follow the master's topic table only when its data version changes, and
/// QUERY_DATA_VERSION reports `changed` against the last registered version.
#[test]
fn data_version_gates_route_updates_and_query() {
    let mut ns = NameServer::new(None);
    assert_ok(&call(
        &mut ns,
        1,
        &register_req("broker-a", ADDR_A, 0, &[("T", 4, 4, 6)], 1),
        0,
    ));
    // Same version, different table: the name server trusts the version (Java semantics).
    assert_ok(&call(
        &mut ns,
        1,
        &register_req("broker-a", ADDR_A, 0, &[("T", 8, 8, 6)], 1),
        1,
    ));
    assert_eq!(
        strict_route(&mut ns, "T")["queueDatas"][0]["readQueueNums"],
        4
    );
    // New version: the route is rewritten.
    assert_ok(&call(
        &mut ns,
        1,
        &register_req("broker-a", ADDR_A, 0, &[("T", 8, 8, 6)], 2),
        2,
    ));
    assert_eq!(
        strict_route(&mut ns, "T")["queueDatas"][0]["readQueueNums"],
        8
    );

    let same = call(&mut ns, 1, &query_version(2, ADDR_A), 100_000);
    assert_ok(&same);
    assert_eq!(same.ext("changed"), Some("false"));
    let ours: Value = serde_json::from_slice(&same.body).unwrap();
    assert_eq!(ours["counter"], 2);
    assert_eq!(ours["timestamp"], 1_700_000_000_000i64);
    let newer = call(&mut ns, 1, &query_version(3, ADDR_A), 100_000);
    assert_eq!(newer.ext("changed"), Some("true"));
    let unknown = call(&mut ns, 1, &query_version(2, "9.9.9.9:1"), 100_000);
    assert_eq!(unknown.ext("changed"), Some("true"));
    assert!(unknown.body.is_empty());
    // The query counted as a sign of life: no expiry 120 s after registration.
    assert!(ns.scan_not_active_brokers(150_000).is_empty());
    assert_eq!(ns.scan_not_active_brokers(220_001), vec![ADDR_A.to_owned()]);
}

/// A slave promoted to master keeps one entry: its address moves from id 1 to id 0.
#[test]
fn slave_to_master_switch_moves_the_address() {
    let mut ns = NameServer::new(None);
    let topics = [("T", 4, 4, 6)];
    assert_ok(&call(
        &mut ns,
        1,
        &register_req("broker-a", ADDR_A, 0, &topics, 1),
        0,
    ));
    assert_ok(&call(
        &mut ns,
        2,
        &register_req("broker-a", ADDR_A1, 1, &topics, 1),
        0,
    ));
    ns.on_connection_closed(1);
    assert_ok(&call(
        &mut ns,
        2,
        &register_req("broker-a", ADDR_A1, 0, &topics, 2),
        1,
    ));
    let route = strict_route(&mut ns, "T");
    assert_eq!(
        route["brokerDatas"][0]["brokerAddrs"],
        serde_json::json!({"0": ADDR_A1})
    );
    ns.route_table().check_invariants();
}

/// A non-zero bodyCrc32 must match CRC32 of the body (Java masks the sign bit).
#[test]
fn crc_mismatch_is_rejected() {
    let mut ns = NameServer::new(None);
    let req = register_req("broker-a", ADDR_A, 0, &[("T", 4, 4, 6)], 1);
    let crc = (crc32fast::hash(&req.body) & 0x7FFF_FFFF) as i32;
    let bad = req.clone().with_ext("bodyCrc32", crc ^ 1);
    let resp = call(&mut ns, 1, &bad, 0);
    assert_eq!(resp.code, 1);
    assert_eq!(resp.remark.as_deref(), Some("crc32 not match"));
    assert_eq!(
        call(&mut ns, 9, &route_req("T", 479), 0).code,
        17,
        "nothing registered"
    );
    assert_ok(&call(&mut ns, 1, &req.with_ext("bodyCrc32", crc), 0));
    assert_ok(&call(&mut ns, 9, &route_req("T", 479), 0));
}

/// The zlib body form (compressed=true) registers the same routes as the JSON form.
#[test]
fn compressed_body_round_trip() {
    let mut ns = NameServer::new(None);
    let body = encode_compressed_for_test(
        r#"{"counter":3,"stateVersion":0,"timestamp":1700000000000}"#,
        &["Zipped 6 3 6 SINGLE_TAG", r#"TBW102 8 8 7 SINGLE_TAG {}"#],
        "[]",
        Some(&[]),
    );
    let mut req = register_req("broker-a", ADDR_A, 0, &[], 0)
        .with_ext("compressed", "true")
        .with_body(body.clone());
    req.ext_fields.insert(
        "bodyCrc32",
        &((crc32fast::hash(&body) & 0x7FFF_FFFF) as i32).to_string(),
    );
    assert_ok(&call(&mut ns, 1, &req, 0));
    let route = strict_route(&mut ns, "Zipped");
    assert_eq!(route["queueDatas"][0]["readQueueNums"], 6);
    assert_eq!(route["queueDatas"][0]["writeQueueNums"], 3);
    assert_eq!(strict_route(&mut ns, "TBW102")["queueDatas"][0]["perm"], 7);
    let q = call(&mut ns, 1, &query_version(3, ADDR_A), 0);
    assert_eq!(q.ext("changed"), Some("false"));
}

/// Bad headers, bodies and codes get error responses with a reason; nothing panics and the
/// name server keeps serving.
#[test]
fn bad_input_gets_error_responses() {
    let mut ns = NameServer::new(None);
    let cases = [
        // brokerId missing
        RemotingCommand::new_request(request_code::REGISTER_BROKER)
            .with_ext("brokerName", "b")
            .with_ext("brokerAddr", ADDR_A)
            .with_ext("clusterName", CLUSTER)
            .with_ext("haServerAddr", "x"),
        // brokerId not a number
        register_req("broker-a", ADDR_A, 0, &[], 1).with_ext("brokerId", "zero"),
        // body not JSON
        register_req("broker-a", ADDR_A, 0, &[], 1).with_body(&b"{\"topicConfigSe"[..]),
        // compressed flag on a JSON body
        register_req("broker-a", ADDR_A, 0, &[("T", 1, 1, 6)], 1).with_ext("compressed", "true"),
        RemotingCommand::new_request(request_code::GET_ROUTEINFO_BY_TOPIC),
        RemotingCommand::new_request(request_code::PUT_KV_CONFIG).with_ext("namespace", "n"),
        query_version(1, ADDR_A).with_body(&b"[1,2"[..]),
        RemotingCommand::new_request(request_code::REGISTER_TOPIC_IN_NAMESRV)
            .with_ext("topic", "T")
            .with_body(&b"\xff\xfe"[..]),
    ];
    for req in &cases {
        let resp = call(&mut ns, 1, req, 0);
        assert_eq!(resp.code, 1, "code {} gave {:?}", req.code, resp.remark);
        assert!(!resp.remark.as_deref().unwrap_or("").is_empty());
    }
    let missing = call(&mut ns, 1, &cases[0], 0);
    assert!(missing.remark.unwrap().contains("brokerId"));
    assert!(ns.route_table().broker_groups().is_empty());

    let unknown = call(&mut ns, 1, &RemotingCommand::new_request(9999), 0);
    assert_eq!(unknown.code, 3);
    assert_eq!(
        unknown.remark.as_deref(),
        Some(" request type 9999 not supported")
    );

    // Oneway requests are processed but not answered; stray responses are dropped.
    let mut oneway = register_req("broker-a", ADDR_A, 0, &[("T", 1, 1, 6)], 1);
    oneway.set_oneway();
    assert!(ns.handle(1, &oneway, 0).is_none());
    assert_ok(&call(&mut ns, 9, &route_req("T", 479), 0));
    let stray = RemotingCommand::response_for(&route_req("T", 479), 0, None);
    assert!(ns.handle(1, &stray, 0).is_none());
}

/// The legacy route is byte-for-byte fastjson's `TopicRouteData` output (sorted fields,
/// unquoted broker ids, empty filterServerTable); the strict form only quotes the ids.
#[test]
fn legacy_route_matches_spec_bytes() {
    let mut ns = NameServer::new(None);
    let topics = [("T", 4, 4, 6)];
    assert_ok(&call(
        &mut ns,
        1,
        &register_req("broker-a", ADDR_A, 0, &topics, 1),
        0,
    ));
    assert_ok(&call(
        &mut ns,
        2,
        &register_req("broker-a", ADDR_A1, 1, &topics, 1),
        0,
    ));
    let legacy = r#"{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
    let resp = call(&mut ns, 9, &route_req("T", 213), 0);
    assert_eq!(std::str::from_utf8(&resp.body).unwrap(), legacy);
    let resp = call(&mut ns, 9, &route_req("T", 401), 0);
    let strict = legacy.replace("{0:", "{\"0\":").replace(",1:", ",\"1\":");
    assert_eq!(std::str::from_utf8(&resp.body).unwrap(), strict);
}
