//! Admin request codes on the store's queues, byte-level: QUERY_CONSUME_QUEUE (321),
//! CLEAN_EXPIRED_CONSUMEQUEUE (306) and CLEAN_UNUSED_TOPIC (316); and every admin code this
//! work added answered on the fast (VIP) port, listenPort - 2 by default, which the dashboard
//! and Java's admin tools use unless told otherwise.

use crate::raw_support;

use raw_support::controller::free_ports;
use raw_support::{create_topic_cmd, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code as req, response_code as rc};
use ringmq::protocol::RemotingCommand;
use serde_json::Value;

fn ok(r: &RemotingCommand, what: &str) {
    assert_eq!(r.code, rc::SUCCESS, "{what}: {:?}", r.remark);
}

fn query_cq(topic: &str, q: i32, index: i64, count: i32) -> RemotingCommand {
    RemotingCommand::new_request(req::QUERY_CONSUME_QUEUE)
        .with_ext("topic", topic)
        .with_ext("queueId", q)
        .with_ext("index", index)
        .with_ext("count", count)
}

fn max_offset(c: &mut Conn, topic: &str, q: i32) -> i64 {
    let r = c.call(
        RemotingCommand::new_request(req::GET_MAX_OFFSET)
            .with_ext("topic", topic)
            .with_ext("queueId", q),
    );
    ok(&r, "max offset");
    r.ext("offset").unwrap().parse().unwrap()
}

/// 321 lists a queue's units in Java's QueryConsumeQueueResponseBody / ConsumeQueueData shape,
/// with the group's subscription when one is named; an index past the end, an empty queue and
/// an unknown queue get Java's remarks; 306 succeeds and leaves live queues whole.
#[test]
fn query_consume_queue_and_clean_expired() {
    let b = RawBroker::start(&["shardCount=2", "pinCores=false"]);
    let mut c = Conn::connect(b.broker);
    ok(&c.call(create_topic_cmd("CqT", 2)), "create topic");
    for i in 0..3 {
        ok(
            &c.call(send_cmd(
                "CqT",
                0,
                format!("m{i}").as_bytes(),
                "TAGS\u{1}tagA\u{2}",
            )),
            "send",
        );
    }
    let r = c.call(query_cq("CqT", 0, 1, 10));
    ok(&r, "321");
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        (v["minQueueIndex"].as_i64(), v["maxQueueIndex"].as_i64()),
        (Some(0), Some(3))
    );
    let units = v["queueData"].as_array().unwrap();
    assert_eq!(units.len(), 2, "{v}");
    for u in units {
        assert!(u["physicOffset"].as_i64() >= Some(0), "{u}");
        assert!(u["physicSize"].as_i64() > Some(0), "{u}");
        assert!(u["tagsCode"].is_i64(), "{u}");
        assert_eq!(u["eval"], false);
    }
    assert!(units[1]["physicOffset"].as_i64() > units[0]["physicOffset"].as_i64());
    assert!(v.get("subscriptionData").is_none(), "{v}");
    // A group that is not online: Java's filterData remark.
    let r = c.call(query_cq("CqT", 0, 0, 1).with_ext("consumerGroup", "OffG"));
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["filterData"], "OffG@CqT is not online!");

    let r = c.call(query_cq("CqT", 0, 9, 1));
    ok(&r, "321 past the end");
    assert_eq!(r.remark.as_deref(), Some("Index 9 of 0@CqT is not exist!"));
    assert!(r.body.is_empty());
    let r = c.call(query_cq("CqT", 1, 0, 1));
    ok(&r, "321 on a queue that never had a message");
    assert_eq!(r.remark.as_deref(), Some("Index 0 of 1@CqT is not exist!"));
    let r = c.call(query_cq("NoSuchT", 5, 0, 1));
    assert_eq!(r.code, rc::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("5@NoSuchT is not exist!"));
    let r = c.call(RemotingCommand::new_request(req::QUERY_CONSUME_QUEUE).with_ext("queueId", 0));
    assert_eq!(r.code, rc::INVALID_PARAMETER, "topic is required");

    ok(
        &c.call(RemotingCommand::new_request(
            req::CLEAN_EXPIRED_CONSUMEQUEUE,
        )),
        "306",
    );
    assert_eq!(max_offset(&mut c, "CqT", 0), 3);
    let r = c.call(query_cq("CqT", 0, 0, 10));
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["queueData"].as_array().unwrap().len(), 3);
}

/// 316 deletes the queues of a topic whose config is gone (here: removed from topics.json
/// while the broker was down) and keeps those of configured topics.
#[test]
fn clean_unused_topic_drops_queues_without_config() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    for t in ["KeptT", "GoneT"] {
        ok(&c.call(create_topic_cmd(t, 1)), "create topic");
        ok(&c.call(send_cmd(t, 0, b"x", "")), "send");
    }
    drop(c);
    let dir = b.stop();
    let topics = dir.path().join("config").join("topics.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&topics).unwrap()).unwrap();
    v["topicConfigTable"]
        .as_object_mut()
        .unwrap()
        .remove("GoneT");
    std::fs::write(&topics, serde_json::to_vec(&v).unwrap()).unwrap();
    let _ = std::fs::remove_file(topics.with_extension("json.bak"));

    let b = RawBroker::start_in(dir, &[]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(
        max_offset(&mut c, "GoneT", 0),
        1,
        "the queue is still there"
    );
    ok(
        &c.call(RemotingCommand::new_request(req::CLEAN_UNUSED_TOPIC)),
        "316",
    );
    assert_eq!(max_offset(&mut c, "GoneT", 0), 0);
    assert!(!b
        .dir
        .path()
        .join("consumequeue")
        .join("GoneT")
        .join("0")
        .exists());
    assert_eq!(max_offset(&mut c, "KeptT", 0), 1);
}

/// Every admin code is answered on the fast port (none with REQUEST_CODE_NOT_SUPPORTED), and
/// with the same code as on the main port.
#[test]
fn admin_codes_are_served_on_the_fast_port() {
    let fast = free_ports(1)[0];
    let b = RawBroker::start(&[&format!("fastListenPort={fast}")]);
    let fast_addr = std::net::SocketAddr::from(([127, 0, 0, 1], fast));
    let mut main = Conn::connect(b.broker);
    let mut vip = Conn::connect(fast_addr);
    ok(
        &vip.call(create_topic_cmd("VipT", 1)),
        "create topic on the fast port",
    );
    let group = r#"{"groupName":"VipG"}"#;
    ok(
        &vip.call(
            RemotingCommand::new_request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(group),
        ),
        "create group",
    );
    let asks = [
        RemotingCommand::new_request(req::GET_TOPIC_CONFIG).with_ext("topic", "VipT"),
        RemotingCommand::new_request(req::GET_SUBSCRIPTIONGROUP_CONFIG).with_ext("group", "VipG"),
        RemotingCommand::new_request(req::QUERY_TOPIC_CONSUME_BY_WHO).with_ext("topic", "VipT"),
        RemotingCommand::new_request(req::GET_SYSTEM_TOPIC_LIST_FROM_BROKER),
        RemotingCommand::new_request(req::GET_BROKER_CONSUME_STATS).with_ext("isOrder", false),
        RemotingCommand::new_request(req::GET_ALL_PRODUCER_INFO),
        query_cq("VipT", 0, 0, 1),
        RemotingCommand::new_request(req::CLEAN_EXPIRED_CONSUMEQUEUE),
        RemotingCommand::new_request(req::CLEAN_UNUSED_TOPIC),
        RemotingCommand::new_request(req::DELETE_EXPIRED_COMMITLOG),
        RemotingCommand::new_request(req::UPDATE_BROKER_CONFIG),
        RemotingCommand::new_request(req::CLONE_GROUP_OFFSET)
            .with_ext("srcGroup", "VipG")
            .with_ext("destGroup", "VipG2"),
        RemotingCommand::new_request(req::INVOKE_BROKER_TO_RESET_OFFSET)
            .with_ext("group", "VipG")
            .with_ext("topic", "VipT")
            .with_ext("timestamp", -1)
            .with_ext("isForce", false),
        RemotingCommand::new_request(req::DELETE_SUBSCRIPTIONGROUP).with_ext("groupName", "VipG2"),
        // The admin codes served before this work, on the same port.
        RemotingCommand::new_request(req::GET_ALL_TOPIC_CONFIG),
        RemotingCommand::new_request(req::GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
        RemotingCommand::new_request(req::GET_ALL_CONSUMER_OFFSET),
        RemotingCommand::new_request(req::GET_ALL_DELAY_OFFSET),
        RemotingCommand::new_request(req::GET_BROKER_CONFIG),
        RemotingCommand::new_request(req::GET_BROKER_RUNTIME_INFO),
        RemotingCommand::new_request(req::GET_BROKER_HA_STATUS),
        RemotingCommand::new_request(req::GET_TOPIC_STATS_INFO).with_ext("topic", "VipT"),
        RemotingCommand::new_request(req::GET_CONSUME_STATS).with_ext("consumerGroup", "VipG"),
        RemotingCommand::new_request(req::GET_CONSUMER_CONNECTION_LIST)
            .with_ext("consumerGroup", "VipG"),
    ];
    for ask in asks {
        let code = ask.code;
        let on_vip = vip.call(ask.clone());
        assert_ne!(
            on_vip.code,
            rc::REQUEST_CODE_NOT_SUPPORTED,
            "code {code} on the fast port"
        );
        let on_main = main.call(ask);
        assert_eq!(
            on_vip.code, on_main.code,
            "code {code}: {:?} / {:?}",
            on_vip.remark, on_main.remark
        );
        // The group has no offsets on VipT: 222 answers Java's "not exist" on both ports; no
        // consumer of it is online for 203.
        let want = match code {
            req::INVOKE_BROKER_TO_RESET_OFFSET => rc::SYSTEM_ERROR,
            req::GET_CONSUMER_CONNECTION_LIST => rc::CONSUMER_NOT_ONLINE,
            _ => rc::SUCCESS,
        };
        assert_eq!(on_vip.code, want, "code {code}: {:?}", on_vip.remark);
    }
}
