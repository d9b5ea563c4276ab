//! The name server's admin request codes, byte-level: GET_SYSTEM_TOPIC_LIST_FROM_NS (304),
//! WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327) seen in the routes,
//! GET_NAMESRV_CONFIG (319) and UPDATE_NAMESRV_CONFIG (318), and their bad input.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::{create_topic_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code as req, response_code as rc};
use ringmq::protocol::RemotingCommand;
use serde_json::Value;

const BROKER_NAME: &str = "adm-broker";

/// The perm of the route of `topic` on BROKER_NAME, once the name server has one.
fn route_perm(ns: &mut Conn, topic: &str) -> Option<i64> {
    let r =
        ns.call(RemotingCommand::new_request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic));
    if r.code != rc::SUCCESS {
        return None;
    }
    let v: Value = serde_json::from_slice(&r.body).ok()?;
    v["queueDatas"]
        .as_array()?
        .iter()
        .find(|q| q["brokerName"] == BROKER_NAME)?["perm"]
        .as_i64()
}

/// 304 lists the cluster and broker names with a broker address (Java's TopicList); 205 wipes
/// the write permission of every route of the broker and 327 gives it back, each answering the
/// topic count in Java's response header; a missing brokerName is an error, not a panic.
#[test]
fn system_topics_and_write_permission() {
    let b = RawBroker::start(&[&format!("brokerName={BROKER_NAME}")]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(create_topic_cmd("PermT", 2)).code, rc::SUCCESS);
    let mut ns = Conn::connect(b.namesrv);
    let deadline = Instant::now() + Duration::from_secs(10);
    while route_perm(&mut ns, "PermT") != Some(6) {
        assert!(
            Instant::now() < deadline,
            "the topic's route never reached the name server"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let r = ns.call(RemotingCommand::new_request(
        req::GET_SYSTEM_TOPIC_LIST_FROM_NS,
    ));
    assert_eq!(r.code, rc::SUCCESS);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    let topics: Vec<&str> = v["topicList"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(topics.contains(&"DefaultCluster"), "{v}");
    assert!(topics.contains(&BROKER_NAME), "{v}");
    assert_eq!(v["brokerAddr"], b.broker.to_string());

    let wipe = RemotingCommand::new_request(req::WIPE_WRITE_PERM_OF_BROKER)
        .with_ext("brokerName", BROKER_NAME);
    let r = ns.call(wipe);
    assert_eq!(r.code, rc::SUCCESS);
    let wiped: i64 = r
        .ext("wipeTopicCount")
        .expect("wipeTopicCount")
        .parse()
        .unwrap();
    assert!(wiped >= 2, "PermT and the broker's own topics: {wiped}");
    assert_eq!(route_perm(&mut ns, "PermT"), Some(4), "read only");

    let add = RemotingCommand::new_request(req::ADD_WRITE_PERM_OF_BROKER)
        .with_ext("brokerName", BROKER_NAME);
    let r = ns.call(add);
    assert_eq!(r.code, rc::SUCCESS);
    assert_eq!(r.ext("addTopicCount"), Some(wiped.to_string().as_str()));
    assert_eq!(route_perm(&mut ns, "PermT"), Some(6));

    let r = ns.call(
        RemotingCommand::new_request(req::WIPE_WRITE_PERM_OF_BROKER)
            .with_ext("brokerName", "nobody"),
    );
    assert_eq!(r.ext("wipeTopicCount"), Some("0"));
    let r = ns.call(RemotingCommand::new_request(req::WIPE_WRITE_PERM_OF_BROKER));
    assert_eq!(r.code, rc::SYSTEM_ERROR);
    assert!(r.remark.unwrap_or_default().contains("brokerName"));
}

/// 319 answers the name server's keys as Properties text; 318 refuses Java's black-listed keys
/// with NO_PERMISSION and names any other key it cannot change; an empty update succeeds.
#[test]
fn namesrv_config_get_and_update() {
    let b = RawBroker::start(&[]);
    let mut ns = Conn::connect(b.namesrv);
    let r = ns.call(RemotingCommand::new_request(req::GET_NAMESRV_CONFIG));
    assert_eq!(r.code, rc::SUCCESS);
    let text = String::from_utf8_lossy(&r.body).into_owned();
    assert!(
        text.contains(&format!("listenPort={}\n", b.namesrv.port())),
        "{text}"
    );
    assert!(text.contains("kvConfigPath="), "{text}");

    let update = |body: &str| {
        RemotingCommand::new_request(req::UPDATE_NAMESRV_CONFIG).with_body(body.to_owned())
    };
    let r = ns.call(update("kvConfigPath=/tmp/elsewhere.json\n"));
    assert_eq!(r.code, rc::NO_PERMISSION);
    assert_eq!(
        r.remark.as_deref(),
        Some("Can not update config in black list.")
    );
    let r = ns.call(update("orderMessageEnable=true\nclusterTest=true\n"));
    assert_eq!(r.code, rc::INVALID_PARAMETER);
    let remark = r.remark.unwrap_or_default();
    assert!(
        remark.contains("orderMessageEnable, clusterTest"),
        "{remark}"
    );
    assert_eq!(ns.call(update("")).code, rc::SUCCESS);
    let again = ns.call(RemotingCommand::new_request(req::GET_NAMESRV_CONFIG));
    assert_eq!(
        String::from_utf8_lossy(&again.body),
        text,
        "nothing changed"
    );
}
