//! Admin request codes on groups and offsets, byte-level: GET_SUBSCRIPTIONGROUP_CONFIG (352),
//! GET_TOPIC_CONFIG (351), QUERY_TOPIC_CONSUME_BY_WHO (300), GET_SYSTEM_TOPIC_LIST_FROM_BROKER
//! (305), GET_BROKER_CONSUME_STATS (317), CLONE_GROUP_OFFSET (314), DELETE_SUBSCRIPTIONGROUP
//! (207), GET_ALL_PRODUCER_INFO (328) and INVOKE_BROKER_TO_RESET_OFFSET (222) with its push of
//! RESET_CONSUMER_CLIENT_OFFSET (220). Bodies are checked field by field against the Java
//! classes named at each check; the "clients" are raw connections registered by heartbeat.

use crate::raw_support;

use std::time::Duration;

use raw_support::admin::{commit_on, committed_on};
use raw_support::{create_topic_cmd, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code as req, response_code as rc};
use ringmq::protocol::RemotingCommand;
use serde_json::Value;

fn start() -> RawBroker {
    RawBroker::start(&["shardCount=2", "pinCores=false"])
}

fn ok(r: &RemotingCommand, what: &str) {
    assert_eq!(r.code, rc::SUCCESS, "{what}: {:?}", r.remark);
}

fn json(r: &RemotingCommand) -> Value {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&r.body)))
}

fn text(r: &RemotingCommand) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn create_group(c: &mut Conn, group: &str) {
    let body = format!(r#"{{"groupName":"{group}","retryMaxTimes":5}}"#);
    let r = c.call(
        RemotingCommand::new_request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(body),
    );
    ok(&r, "create group");
}

/// Registers `c` as a consumer of `group` subscribed to `topic`, and a producer of "admin_pg".
fn register(c: &mut Conn, client_id: &str, group: &str, topic: &str) {
    let body = format!(
        r#"{{"clientID":"{client_id}","consumerDataSet":[{{"groupName":"{group}",
        "consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
        "consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{{"topic":"{topic}",
        "subString":"*","tagsSet":[],"codeSet":[],"subVersion":1}}]}}],
        "producerDataSet":[{{"groupName":"admin_pg"}}]}}"#
    );
    let r = c.call(RemotingCommand::new_request(req::HEART_BEAT).with_body(body));
    ok(&r, "heartbeat");
}

/// 352 and 351 answer a group's and a topic's config with Java's field names, and Java's codes
/// and remarks for unknown ones and for a missing header field; 305 lists the system topics;
/// 300 names the groups with offsets on a topic; 317 reports every group's lag.
#[test]
fn group_and_topic_configs_and_listings() {
    let b = start();
    let mut c = Conn::connect(b.broker);
    ok(&c.call(create_topic_cmd("AdmT", 4)), "create topic");
    create_group(&mut c, "AdmG");
    for i in 0..3 {
        ok(
            &c.call(send_cmd("AdmT", 1, format!("m{i}").as_bytes(), "")),
            "send",
        );
    }
    commit_on(&mut c, "AdmG", "AdmT", 1, 1);

    // Java's SubscriptionGroupConfig.
    let r = c.call(
        RemotingCommand::new_request(req::GET_SUBSCRIPTIONGROUP_CONFIG).with_ext("group", "AdmG"),
    );
    ok(&r, "352");
    let g = json(&r);
    assert_eq!(g["groupName"], "AdmG");
    assert_eq!(g["retryMaxTimes"], 5);
    for field in [
        "consumeEnable",
        "consumeBroadcastEnable",
        "retryQueueNums",
        "brokerId",
    ] {
        assert!(!g[field].is_null(), "SubscriptionGroupConfig.{field}: {g}");
    }
    let r = c.call(
        RemotingCommand::new_request(req::GET_SUBSCRIPTIONGROUP_CONFIG).with_ext("group", "Nope"),
    );
    assert_eq!(r.code, rc::SUBSCRIPTION_GROUP_NOT_EXIST);
    assert_eq!(r.remark.as_deref(), Some("No group in this broker"));
    let r = c.call(RemotingCommand::new_request(
        req::GET_SUBSCRIPTIONGROUP_CONFIG,
    ));
    assert_eq!(r.code, rc::INVALID_PARAMETER);
    assert!(r.remark.unwrap_or_default().contains("group"));

    // Java's TopicConfigAndQueueMapping: the TopicConfig fields, no mappingDetail.
    let r = c.call(RemotingCommand::new_request(req::GET_TOPIC_CONFIG).with_ext("topic", "AdmT"));
    ok(&r, "351");
    let t = json(&r);
    assert_eq!(t["topicName"], "AdmT");
    assert_eq!(
        (t["readQueueNums"].as_i64(), t["writeQueueNums"].as_i64()),
        (Some(4), Some(4))
    );
    assert_eq!(t["perm"], 6);
    assert_eq!(t["topicFilterType"], "SINGLE_TAG");
    assert!(t.get("mappingDetail").is_none(), "{t}");
    let r = c.call(RemotingCommand::new_request(req::GET_TOPIC_CONFIG).with_ext("topic", "Nope"));
    assert_eq!(r.code, rc::TOPIC_NOT_EXIST);
    assert_eq!(
        r.remark.as_deref(),
        Some("No topic in this broker. topic: Nope")
    );

    // Java's TopicList from TopicValidator's system topic set.
    let r = c.call(RemotingCommand::new_request(
        req::GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
    ));
    ok(&r, "305");
    let list = json(&r)["topicList"].clone();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for sys in [
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "rmq_sys_wheel_timer",
    ] {
        assert!(names.contains(&sys), "{names:?}");
    }
    assert!(!names.contains(&"AdmT"));

    // Java's GroupList.
    let r = c.call(
        RemotingCommand::new_request(req::QUERY_TOPIC_CONSUME_BY_WHO).with_ext("topic", "AdmT"),
    );
    ok(&r, "300");
    assert_eq!(json(&r)["groupList"], serde_json::json!(["AdmG"]));
    let r = c.call(
        RemotingCommand::new_request(req::QUERY_TOPIC_CONSUME_BY_WHO).with_ext("topic", "Other"),
    );
    assert_eq!(json(&r)["groupList"], serde_json::json!([]));

    // Java's ConsumeStatsList: AdmG is 2 behind on queue 1 (3 stored, 1 consumed).
    let r = c.call(
        RemotingCommand::new_request(req::GET_BROKER_CONSUME_STATS).with_ext("isOrder", false),
    );
    ok(&r, "317");
    let s = text(&r);
    assert!(s.starts_with(&format!("{{\"brokerAddr\":\"{}\",\"consumeStatsList\":[{{\"AdmG\":[{{\"consumeTps\":0.0,\"offsetTable\":{{", b.broker)), "{s}");
    assert!(
        s.contains("{\"brokerName\":\"")
            && s.contains(
                "\"queueId\":1,\"topic\":\"AdmT\"}:{\"brokerOffset\":3,\"consumerOffset\":1,"
            ),
        "{s}"
    );
    assert!(
        s.ends_with("\"totalDiff\":2,\"totalInflightDiff\":0}"),
        "{s}"
    );
    // Only ordered topics: AdmT is not one.
    let r = c.call(
        RemotingCommand::new_request(req::GET_BROKER_CONSUME_STATS).with_ext("isOrder", true),
    );
    assert!(text(&r).contains("{\"AdmG\":[]}"), "{}", text(&r));
}

/// 314 copies a group's offsets to another group; 207 with cleanOffset removes the group from
/// 201 and its offsets from 43 while the clone keeps its own; 207 of an unknown group
/// succeeds as on Java; 328 lists producers in Java's ProducerTableInfo.
#[test]
fn clone_delete_group_and_producer_table() {
    let b = start();
    let mut c = Conn::connect(b.broker);
    ok(&c.call(create_topic_cmd("CloneT", 2)), "create topic");
    create_group(&mut c, "SrcG");
    commit_on(&mut c, "SrcG", "CloneT", 0, 5);
    commit_on(&mut c, "SrcG", "CloneT", 1, 7);
    let r = c.call(
        RemotingCommand::new_request(req::CLONE_GROUP_OFFSET)
            .with_ext("srcGroup", "SrcG")
            .with_ext("destGroup", "DstG")
            .with_ext("offline", true),
    );
    ok(&r, "314");
    assert_eq!(committed_on(&mut c, "DstG", "CloneT", 0), Some(5));
    assert_eq!(committed_on(&mut c, "DstG", "CloneT", 1), Some(7));
    let r =
        c.call(RemotingCommand::new_request(req::CLONE_GROUP_OFFSET).with_ext("srcGroup", "SrcG"));
    assert_eq!(r.code, rc::INVALID_PARAMETER, "destGroup is required");

    let r = c.call(
        RemotingCommand::new_request(req::DELETE_SUBSCRIPTIONGROUP)
            .with_ext("groupName", "SrcG")
            .with_ext("cleanOffset", true),
    );
    ok(&r, "207");
    let groups = text(&c.call(RemotingCommand::new_request(
        req::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    )));
    assert!(!groups.contains("\"SrcG\""), "{groups}");
    let offsets = text(&c.call(RemotingCommand::new_request(req::GET_ALL_CONSUMER_OFFSET)));
    assert!(!offsets.contains("CloneT@SrcG"), "{offsets}");
    assert!(offsets.contains("\"CloneT@DstG\":{0:5,1:7}"), "{offsets}");
    let r = c.call(
        RemotingCommand::new_request(req::DELETE_SUBSCRIPTIONGROUP)
            .with_ext("groupName", "NoSuchG"),
    );
    ok(&r, "207 of an unknown group");
    let r = c.call(RemotingCommand::new_request(req::DELETE_SUBSCRIPTIONGROUP));
    assert_eq!(r.code, rc::INVALID_PARAMETER);

    // Java's ProducerTableInfo / ProducerInfo.
    let mut client = Conn::connect(b.broker);
    register(&mut client, "prod-1", "SomeConsumerG", "CloneT");
    let r = c.call(RemotingCommand::new_request(req::GET_ALL_PRODUCER_INFO));
    ok(&r, "328");
    let p = &json(&r)["data"]["admin_pg"][0];
    assert_eq!(p["clientId"], "prod-1");
    assert_eq!(
        p["remoteIP"],
        client.stream.local_addr().unwrap().to_string()
    );
    assert!(p["language"].is_string(), "{p}");
    assert!(p["version"].is_i64(), "{p}");
    assert!(p["lastUpdateTimestamp"].as_i64() > Some(0), "{p}");
}

/// 222 with no consumer online answers Java's CONSUMER_NOT_ONLINE and changes nothing; with
/// one online it commits the offsets of the timestamp, pushes 220 with Java's ResetOffsetBody to
/// the consumer's connection and answers the same table; without isForce it never moves a group
/// forward; unknown topics and offsets outside the queue get Java's codes.
#[test]
fn reset_offset_by_timestamp_reaches_consumers() {
    let b = start();
    let mut c = Conn::connect(b.broker);
    ok(&c.call(create_topic_cmd("ResetT", 2)), "create topic");
    create_group(&mut c, "ResetG");
    let before = ringmq::common::now_ms() - 1;
    std::thread::sleep(Duration::from_millis(5));
    for i in 0..6 {
        ok(
            &c.call(send_cmd("ResetT", 0, format!("m{i}").as_bytes(), "")),
            "send",
        );
    }
    commit_on(&mut c, "ResetG", "ResetT", 0, 6);
    commit_on(&mut c, "ResetG", "ResetT", 1, 0);
    let reset = |ts: i64, force: bool| {
        RemotingCommand::new_request(req::INVOKE_BROKER_TO_RESET_OFFSET)
            .with_ext("group", "ResetG")
            .with_ext("topic", "ResetT")
            .with_ext("timestamp", ts)
            .with_ext("isForce", force)
    };

    let r = c.call(reset(before, false));
    assert_eq!(r.code, rc::CONSUMER_NOT_ONLINE, "{:?}", r.remark);
    assert_eq!(
        r.remark.as_deref(),
        Some(format!("Consumer not online, so can not reset offset, Group: ResetG Topic: ResetT Timestamp: {before}").as_str())
    );
    assert_eq!(committed_on(&mut c, "ResetG", "ResetT", 0), Some(6));

    let mut consumer = Conn::connect(b.broker);
    register(&mut consumer, "cons-1", "ResetG", "ResetT");
    let r = c.call(reset(before, false));
    ok(&r, "222");
    let body = text(&r);
    assert!(body.starts_with("{\"offsetTable\":{"), "{body}");
    assert!(
        body.contains("\"queueId\":0,\"topic\":\"ResetT\"}:0"),
        "{body}"
    );
    assert!(
        body.contains("\"queueId\":1,\"topic\":\"ResetT\"}:0"),
        "{body}"
    );
    assert_eq!(committed_on(&mut c, "ResetG", "ResetT", 0), Some(0));
    let pushed = loop {
        let cmd = consumer.read().expect("consumer connection closed");
        if !cmd.is_response() && cmd.code == req::RESET_CONSUMER_CLIENT_OFFSET {
            break cmd;
        }
    };
    assert!(pushed.is_oneway());
    assert_eq!(pushed.ext("group"), Some("ResetG"));
    assert_eq!(pushed.ext("topic"), Some("ResetT"));
    assert_eq!(pushed.ext("timestamp"), Some(before.to_string().as_str()));
    assert_eq!(
        text(&pushed),
        body,
        "the consumer gets the table the admin gets"
    );

    // To the max offsets (-1): not forward without isForce, forward with it.
    let r = c.call(reset(-1, false));
    ok(&r, "222 to max, not forced");
    assert_eq!(committed_on(&mut c, "ResetG", "ResetT", 0), Some(0));
    let r = c.call(reset(-1, true));
    ok(&r, "222 to max, forced");
    assert_eq!(committed_on(&mut c, "ResetG", "ResetT", 0), Some(6));

    // One queue to an explicit offset; outside the queue is refused.
    let one = |off: i64| {
        reset(0, true)
            .with_ext("queueId", 0)
            .with_ext("offset", off)
    };
    ok(&c.call(one(2)), "222 one queue");
    assert_eq!(committed_on(&mut c, "ResetG", "ResetT", 0), Some(2));
    let r = c.call(one(99));
    assert_eq!(r.code, rc::SYSTEM_ERROR);
    assert_eq!(
        r.remark.as_deref(),
        Some("Target offset 99 not in consume queue range [0-6]")
    );

    let r = c.call(reset(0, false).with_ext("topic", "NoSuchT"));
    assert_eq!(r.code, rc::TOPIC_NOT_EXIST);
    let r = c.call(reset(0, false).with_ext("group", "NeverConsumed"));
    assert_eq!(r.code, rc::SYSTEM_ERROR);
    assert_eq!(
        r.remark.as_deref(),
        Some("THe consumer group <NeverConsumed> not exist")
    );
    let r = c.call(
        RemotingCommand::new_request(req::INVOKE_BROKER_TO_RESET_OFFSET)
            .with_ext("group", "ResetG"),
    );
    assert_eq!(
        r.code,
        rc::INVALID_PARAMETER,
        "topic and timestamp are required"
    );
}

/// UPDATE_AND_CREATE_TOPIC_LIST (18) and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225), as
/// provisioning scripts send them: every topic and group of the list is created with what it
/// says (queues, attribute changes, group settings); a list with one bad entry is refused and
/// none of it applied.
#[test]
fn topic_and_group_lists_create_every_entry_or_none() {
    let b = start();
    let mut c = Conn::connect(b.broker);
    let topics = r#"{"topicConfigList":[
        {"topicName":"ListT1","readQueueNums":4,"writeQueueNums":4,"perm":6,
         "attributes":{"+message.type":"FIFO"}},
        {"topicName":"ListT2","readQueueNums":2,"writeQueueNums":2,"perm":4}]}"#;
    let r =
        c.call(RemotingCommand::new_request(req::UPDATE_AND_CREATE_TOPIC_LIST).with_body(topics));
    ok(&r, "18");
    let all = json(&c.call(RemotingCommand::new_request(req::GET_ALL_TOPIC_CONFIG)));
    let table = &all["topicConfigTable"];
    assert_eq!(table["ListT1"]["readQueueNums"], 4, "{all}");
    assert_eq!(
        table["ListT1"]["attributes"]["message.type"], "FIFO",
        "{all}"
    );
    assert_eq!(table["ListT2"]["writeQueueNums"], 2, "{all}");
    assert_eq!(table["ListT2"]["perm"], 4, "{all}");
    let bad = r#"{"topicConfigList":[
        {"topicName":"ListT3","readQueueNums":1,"writeQueueNums":1,"perm":6},
        {"topicName":"bad topic","readQueueNums":1,"writeQueueNums":1,"perm":6}]}"#;
    let r = c.call(RemotingCommand::new_request(req::UPDATE_AND_CREATE_TOPIC_LIST).with_body(bad));
    assert_eq!(r.code, rc::INVALID_PARAMETER, "{:?}", r.remark);
    assert!(r.remark.unwrap_or_default().contains("illegal character"));
    let all = text(&c.call(RemotingCommand::new_request(req::GET_ALL_TOPIC_CONFIG)));
    assert!(!all.contains("ListT3"), "{all}");

    let groups = r#"{"groupConfigList":[
        {"groupName":"ListG1","retryMaxTimes":3,"consumeMessageOrderly":true},
        {"groupName":"ListG2","consumeEnable":false}]}"#;
    let r = c.call(
        RemotingCommand::new_request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST)
            .with_body(groups),
    );
    ok(&r, "225");
    let all = json(&c.call(RemotingCommand::new_request(
        req::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    )));
    let table = &all["subscriptionGroupTable"];
    assert_eq!(table["ListG1"]["retryMaxTimes"], 3, "{all}");
    assert_eq!(table["ListG1"]["consumeMessageOrderly"], true, "{all}");
    assert_eq!(table["ListG2"]["consumeEnable"], false, "{all}");
    let bad = r#"{"groupConfigList":[{"groupName":"ListG3"},{"groupName":""}]}"#;
    let r = c.call(
        RemotingCommand::new_request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST).with_body(bad),
    );
    assert_eq!(r.code, rc::INVALID_PARAMETER, "{:?}", r.remark);
    let all = text(&c.call(RemotingCommand::new_request(
        req::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    )));
    assert!(!all.contains("ListG3"), "{all}");
}

/// QUERY_TOPICS_BY_CONSUMER (343) lists the topics a group committed offsets for, with the
/// broker's address (Java's `TopicList`), on whichever shards own them; QUERY_SUBSCRIPTION_BY_
/// CONSUMER (345) answers the online group's subscription to a topic, and `null` for a topic it
/// does not subscribe to.
#[test]
fn topics_and_subscription_by_consumer() {
    let b = start();
    let mut c = Conn::connect(b.broker);
    for t in ["ByCT1", "ByCT2"] {
        ok(&c.call(create_topic_cmd(t, 4)), "create topic");
    }
    for (t, q) in [("ByCT1", 0), ("ByCT1", 3), ("ByCT2", 1)] {
        commit_on(&mut c, "ByCG", t, q, 5);
    }
    commit_on(&mut c, "OtherG", "ByCT1", 0, 1);
    let r = c.call(
        RemotingCommand::new_request(req::QUERY_TOPICS_BY_CONSUMER).with_ext("group", "ByCG"),
    );
    ok(&r, "343");
    let j = json(&r);
    assert_eq!(j["topicList"], serde_json::json!(["ByCT1", "ByCT2"]), "{j}");
    assert_eq!(j["brokerAddr"], b.broker.to_string(), "{j}");
    let mut client = Conn::connect(b.broker);
    register(&mut client, "sub-1", "ByCG", "ByCT1");
    let ask = |c: &mut Conn, topic: &str| {
        json(
            &c.call(
                RemotingCommand::new_request(req::QUERY_SUBSCRIPTION_BY_CONSUMER)
                    .with_ext("group", "ByCG")
                    .with_ext("topic", topic),
            ),
        )
    };
    let j = ask(&mut c, "ByCT1");
    assert_eq!(j["group"], "ByCG", "{j}");
    assert_eq!(j["subscriptionData"]["topic"], "ByCT1", "{j}");
    assert_eq!(j["subscriptionData"]["subString"], "*", "{j}");
    let j = ask(&mut c, "ByCT2");
    assert!(j["subscriptionData"].is_null(), "{j}");
    let r = c.call(RemotingCommand::new_request(req::QUERY_TOPICS_BY_CONSUMER));
    assert_eq!(r.code, rc::INVALID_PARAMETER, "{:?}", r.remark);
}
