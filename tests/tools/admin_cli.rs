//! `ringmq admin` against a real `ringmq serve`: cluster, topic, group and broker commands,
//! table and `--json` output checked against the broker's state, and the exit codes of bad
//! input (2 usage, 1 not found, 3 unreachable).

use crate::raw_support;

use raw_support::admin::{
    admin, admin_raw, admin_until_ok, commit_offset, create_topic, dead_addr, groups_of,
};
use raw_support::{Conn, RawBroker};
use ringmq::protocol::codes::request_code;
use ringmq::protocol::RemotingCommand;

fn start() -> RawBroker {
    RawBroker::start(&["shardCount=2", "pinCores=false"])
}

/// clusterList lists the broker by cluster, name, id and address, in the table and in JSON.
#[test]
fn cluster_list_shows_the_broker() {
    let b = start();
    let addr = b.broker.to_string();
    let t = admin(b.namesrv, &["clusterList"]).ok();
    let line = t
        .stdout
        .lines()
        .find(|l| l.contains(&addr))
        .unwrap_or_else(|| panic!("no row for {addr}: {t:?}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        &cells[..4],
        ["DefaultCluster", "broker-a", "0", addr.as_str()],
        "{t:?}"
    );
    assert!(t.stdout.starts_with("#Cluster Name"), "{t:?}");
    let j = admin(b.namesrv, &["clusterList", "--json"]).ok().json();
    assert_eq!(j[0]["addr"], addr.as_str(), "{j}");
    assert_eq!(j[0]["cluster"], "DefaultCluster", "{j}");
    assert_eq!(j[0]["runtime"]["brokerVersionDesc"], "V5_3_3", "{j}");
    let none = admin(b.namesrv, &["clusterList", "-c", "NoSuchCluster"]);
    assert_eq!(none.code, 1, "{none:?}");
    assert!(none.stderr.contains("NoSuchCluster"), "{none:?}");
}

/// updateTopic creates the topic with the queues asked; topicRoute, topicList and
/// topicStatus then show it, and a message sent moves its queue's max offset.
#[test]
fn update_topic_then_route_list_and_status() {
    let b = start();
    let ns = b.namesrv;
    admin(
        ns,
        &[
            "updateTopic",
            "-b",
            &b.broker.to_string(),
            "-t",
            "AdmT",
            "-r",
            "3",
            "-w",
            "3",
            "-p",
            "6",
        ],
    )
    .ok();
    let route = admin_until_ok(ns, &["topicRoute", "-t", "AdmT", "--json"]).json();
    assert_eq!(route["queueDatas"][0]["readQueueNums"], 3, "{route}");
    assert_eq!(route["queueDatas"][0]["writeQueueNums"], 3, "{route}");
    assert_eq!(route["queueDatas"][0]["perm"], 6, "{route}");
    assert_eq!(
        route["brokerDatas"][0]["brokerAddrs"]["0"],
        b.broker.to_string(),
        "{route}"
    );
    let table = admin(ns, &["topicRoute", "-t", "AdmT"]).ok();
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["broker-a", "3", "3", "RW"]),
        "{table:?}"
    );
    let list = admin(ns, &["topicList"]).ok();
    assert!(list.stdout.lines().any(|l| l == "AdmT"), "{list:?}");
    let list = admin(ns, &["topicList", "--json"]).ok().json();
    assert!(
        list["topicList"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "AdmT"),
        "{list}"
    );

    admin(ns, &["sendMessage", "-t", "AdmT", "-p", "x", "-i", "1"]).ok();
    let st = admin(ns, &["topicStatus", "-t", "AdmT", "--json"])
        .ok()
        .json();
    let queues = st["offsetTable"].as_array().unwrap();
    assert_eq!(queues.len(), 3, "{st}");
    let max: Vec<i64> = queues
        .iter()
        .map(|q| q["maxOffset"].as_i64().unwrap())
        .collect();
    assert_eq!(max, [0, 1, 0], "{st}");
    let st = admin(ns, &["topicStatus", "-t", "AdmT"]).ok();
    let row: Vec<&str> = st
        .stdout
        .lines()
        .nth(2)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], ["broker-a", "1", "0", "1"], "{st:?}");

    admin(
        ns,
        &[
            "updateTopic",
            "-c",
            "DefaultCluster",
            "-t",
            "AdmT2",
            "-r",
            "2",
            "-w",
            "2",
        ],
    )
    .ok();
    let route = admin_until_ok(ns, &["topicRoute", "-t", "AdmT2", "--json"]).json();
    assert_eq!(route["queueDatas"][0]["readQueueNums"], 2, "{route}");
}

/// deleteTopic removes the topic from broker and name server: its route is gone (exit 1).
#[test]
fn delete_topic_removes_the_route() {
    let b = start();
    let ns = b.namesrv;
    create_topic(ns, b.broker, "AdmDel", 2);
    let out = admin(ns, &["deleteTopic", "-t", "AdmDel"]).ok();
    assert!(out.stdout.contains("from NameServer success"), "{out:?}");
    let gone = admin(ns, &["topicRoute", "-t", "AdmDel"]);
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(gone.stderr.contains("AdmDel"), "{gone:?}");
    let again = admin(ns, &["deleteTopic", "-t", "AdmDel", "--json"]);
    assert_eq!(again.code, 1, "{again:?}");
    assert!(again.stderr.contains("AdmDel"), "{again:?}");
}

/// updateSubGroup creates the group with the flags given, on the broker named by -b and on
/// every master of the cluster named by -c.
#[test]
fn update_sub_group_creates_the_group() {
    let b = start();
    let out = admin(
        b.namesrv,
        &[
            "updateSubGroup",
            "-b",
            &b.broker.to_string(),
            "-g",
            "AdmG",
            "-r",
            "5",
            "-o",
            "true",
        ],
    )
    .ok();
    assert!(out.stdout.contains("AdmG"), "{out:?}");
    let g = &groups_of(b.broker).subscription_group_table["AdmG"];
    assert_eq!(g.retry_max_times, 5);
    assert!(g.consume_message_orderly);
    let j = admin(
        b.namesrv,
        &[
            "updateSubGroup",
            "-c",
            "DefaultCluster",
            "-g",
            "AdmG2",
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(j["brokerAddrs"][0], b.broker.to_string(), "{j}");
    assert_eq!(j["subscriptionGroupConfig"]["groupName"], "AdmG2", "{j}");
    assert!(groups_of(b.broker)
        .subscription_group_table
        .contains_key("AdmG2"));
}

/// updateTopicList and updateSubGroupList send a file's configs in one request each: the topics
/// and groups exist afterwards with what the file says, mqadmin's line is printed per broker;
/// a file that is not a JSON array is a usage error naming it, and a refused entry exits 1.
#[test]
fn list_commands_create_what_the_file_says() {
    let b = start();
    let dir = tempfile::tempdir().unwrap();
    let topics = dir.path().join("topics.json");
    std::fs::write(
        &topics,
        r#"[{"topicName":"FileT1","readQueueNums":3,"writeQueueNums":3,"perm":6,
             "attributes":{"+message.type":"NORMAL"}},
            {"topicName":"FileT2","readQueueNums":1,"writeQueueNums":1,"perm":6}]"#,
    )
    .unwrap();
    let file = topics.display().to_string();
    let addr = b.broker.to_string();
    let out = admin(b.namesrv, &["updateTopicList", "-b", &addr, "-f", &file]).ok();
    assert_eq!(
        out.stdout.trim(),
        format!("submit batch of topic config to {addr} success, please check the result later."),
        "{out:?}"
    );
    let mut c = Conn::connect(b.broker);
    let all = c.call(RemotingCommand::new_request(
        request_code::GET_ALL_TOPIC_CONFIG,
    ));
    let all: serde_json::Value = serde_json::from_slice(&all.body).unwrap();
    assert_eq!(
        all["topicConfigTable"]["FileT1"]["readQueueNums"], 3,
        "{all}"
    );
    assert_eq!(
        all["topicConfigTable"]["FileT2"]["readQueueNums"], 1,
        "{all}"
    );
    let groups = dir.path().join("groups.json");
    std::fs::write(
        &groups,
        r#"[{"groupName":"FileG1","retryMaxTimes":2},{"groupName":"FileG2"}]"#,
    )
    .unwrap();
    let gfile = groups.display().to_string();
    let j = admin(
        b.namesrv,
        &[
            "updateSubGroupList",
            "-c",
            "DefaultCluster",
            "-f",
            &gfile,
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(j["brokerAddrs"][0], addr.as_str(), "{j}");
    assert_eq!(j["configs"][0]["groupName"], "FileG1", "{j}");
    let table = groups_of(b.broker).subscription_group_table;
    assert_eq!(table["FileG1"].retry_max_times, 2);
    assert!(table.contains_key("FileG2"));
    std::fs::write(&groups, r#"{"groupName":"NotAList"}"#).unwrap();
    let r = admin(
        b.namesrv,
        &["updateSubGroupList", "-b", &addr, "-f", &gfile],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("groups.json"), "{r:?}");
    std::fs::write(
        &topics,
        r#"[{"topicName":"bad topic","readQueueNums":1,"writeQueueNums":1}]"#,
    )
    .unwrap();
    let r = admin(b.namesrv, &["updateTopicList", "-b", &addr, "-f", &file]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("illegal character"), "{r:?}");
}

/// consumerProgress shows a group's committed offsets against the broker's, and
/// resetOffsetByTime moves them back to the time given.
#[test]
fn consumer_progress_and_reset_offset_by_time() {
    let b = start();
    let ns = b.namesrv;
    create_topic(ns, b.broker, "AdmP", 1);
    for body in ["a", "b", "c"] {
        admin(ns, &["sendMessage", "-t", "AdmP", "-p", body, "-i", "0"]).ok();
    }
    commit_offset(b.broker, "AdmPG", "AdmP", 0, 2);
    let j = admin(ns, &["consumerProgress", "-g", "AdmPG", "--json"])
        .ok()
        .json();
    let q = &j["offsetTable"][0];
    assert_eq!(
        (q["brokerOffset"].as_i64(), q["consumerOffset"].as_i64()),
        (Some(3), Some(2)),
        "{j}"
    );
    assert_eq!(q["messageQueue"]["topic"], "AdmP", "{j}");
    let t = admin(ns, &["consumerProgress", "-g", "AdmPG", "-t", "AdmP"]).ok();
    let row = t.first_row();
    assert_eq!(&row[..6], ["AdmP", "broker-a", "0", "3", "2", "1"], "{t:?}");
    assert!(t.stdout.contains("Consume Diff Total:"), "{t:?}");

    let r = admin(
        ns,
        &[
            "resetOffsetByTime",
            "-g",
            "AdmPG",
            "-t",
            "AdmP",
            "-s",
            "0",
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(r["offsetTable"][0]["offset"], 0, "{r}");
    let j = admin(ns, &["consumerProgress", "-g", "AdmPG", "--json"])
        .ok()
        .json();
    assert_eq!(j["offsetTable"][0]["consumerOffset"], 0, "{j}");
    let r = admin(
        ns,
        &[
            "resetOffsetByTime",
            "-g",
            "AdmPG",
            "-t",
            "AdmP",
            "-s",
            "now",
        ],
    )
    .ok();
    let none = admin(
        ns,
        &[
            "resetOffsetByTime",
            "-g",
            "NoSuchGroup",
            "-t",
            "AdmP",
            "-s",
            "now",
        ],
    );
    assert_eq!(none.code, 1, "{none:?}");
    assert!(none.stderr.contains("NoSuchGroup"), "{none:?}");
    assert!(r.stdout.contains("#brokerName"), "{r:?}");
    let j = admin(ns, &["consumerProgress", "-g", "AdmPG", "--json"])
        .ok()
        .json();
    assert_eq!(j["offsetTable"][0]["consumerOffset"], 3, "{j}");
}

/// consumerConnection and producerConnection list a client registered by heartbeat, with its
/// subscription; a group with no client is exit 1.
#[test]
fn consumer_and_producer_connections() {
    let b = start();
    let ns = b.namesrv;
    create_topic(ns, b.broker, "AdmC", 1);
    let mut conn = Conn::connect(b.broker);
    let hb = r#"{"clientID":"adm-client@1","consumerDataSet":[{"groupName":"AdmCG",
        "consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
        "consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"topic":"AdmC",
        "subString":"tagA","expressionType":"TAG","tagsSet":["tagA"],"codeSet":[],"subVersion":1}]}],
        "producerDataSet":[{"groupName":"AdmPG"}]}"#;
    let r = conn.call(RemotingCommand::new_request(request_code::HEART_BEAT).with_body(hb));
    assert_eq!(r.code, 0, "{:?}", r.remark);

    let j = admin(ns, &["consumerConnection", "-g", "AdmCG", "--json"])
        .ok()
        .json();
    assert_eq!(j["connectionSet"][0]["clientId"], "adm-client@1", "{j}");
    assert_eq!(j["subscriptionTable"]["AdmC"]["subString"], "tagA", "{j}");
    let t = admin(
        ns,
        &[
            "consumerConnection",
            "-g",
            "AdmCG",
            "-b",
            &b.broker.to_string(),
        ],
    )
    .ok();
    assert!(t.stdout.contains("adm-client@1"), "{t:?}");
    assert!(
        t.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["AdmC", "tagA"]),
        "{t:?}"
    );
    assert!(t.stdout.contains("CLUSTERING"), "{t:?}");

    let p = admin(ns, &["producerConnection", "-g", "AdmPG", "-t", "AdmC"]).ok();
    assert!(p.stdout.contains("adm-client@1"), "{p:?}");
    let p = admin(
        ns,
        &["producerConnection", "-g", "AdmPG", "-t", "AdmC", "--json"],
    )
    .ok()
    .json();
    assert_eq!(p["connectionSet"][0]["clientId"], "adm-client@1", "{p}");

    let none = admin(ns, &["consumerConnection", "-g", "NoSuchGroup"]);
    assert_eq!(none.code, 1, "{none:?}");
    assert!(none.stderr.contains("NoSuchGroup"), "{none:?}");
    drop(conn);
}

/// brokerStatus and getBrokerConfig show the broker's runtime table and configuration, by
/// address and by cluster.
#[test]
fn broker_status_and_config() {
    let b = start();
    let ns = b.namesrv;
    let addr = b.broker.to_string();
    let s = admin(ns, &["brokerStatus", "-b", &addr]).ok();
    assert!(
        s.stdout
            .lines()
            .any(|l| l.starts_with("brokerVersionDesc:") && l.ends_with("V5_3_3")),
        "{s:?}"
    );
    let j = admin(ns, &["brokerStatus", "-c", "DefaultCluster", "--json"])
        .ok()
        .json();
    assert_eq!(j[&addr]["brokerVersionDesc"], "V5_3_3", "{j}");
    let c = admin(ns, &["getBrokerConfig", "-b", &addr]).ok();
    assert!(
        c.stdout
            .contains(&format!("============{addr}============")),
        "{c:?}"
    );
    assert!(
        c.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["brokerName", "=", "broker-a"]),
        "{c:?}"
    );
    let j = admin(ns, &["getBrokerConfig", "-b", &addr, "--json"])
        .ok()
        .json();
    assert_eq!(j[&addr]["brokerClusterName"], "DefaultCluster", "{j}");
}

/// An unknown command or flag is exit 2 with clap's message; a missing topic or group exit 1
/// naming it; an unreachable name server exit 3 naming its address; NAMESRV_ADDR is the
/// default name server.
#[test]
fn bad_input_and_exit_codes() {
    let b = start();
    let ns = b.namesrv;
    let r = admin(ns, &["noSuchCommand"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("unrecognized subcommand 'noSuchCommand'"),
        "{r:?}"
    );
    let r = admin(ns, &["topicList", "--noSuchFlag"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("unexpected argument '--noSuchFlag'"),
        "{r:?}"
    );
    let r = admin(ns, &["topicStatus"]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = admin(ns, &["updateTopic", "-t", "X"]);
    assert_eq!(r.code, 2, "no -b nor -c: {r:?}");
    assert!(r.stderr.contains("-b") && r.stderr.contains("-c"), "{r:?}");

    let r = admin(ns, &["topicStatus", "-t", "NoSuchTopic"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("NoSuchTopic"), "{r:?}");
    assert_eq!(r.stderr.lines().count(), 1, "{r:?}");
    let r = admin(ns, &["consumerProgress", "-g", "NoSuchGroup"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("NoSuchGroup"), "{r:?}");

    let dead = dead_addr();
    let r = admin(dead, &["clusterList"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains(&dead.to_string()), "{r:?}");
    assert_eq!(r.stderr.lines().count(), 1, "{r:?}");
    let r = admin(ns, &["brokerStatus", "-b", &dead.to_string()]);
    assert_eq!(r.code, 3, "an unreachable broker: {r:?}");
    assert!(r.stderr.contains(&dead.to_string()), "{r:?}");

    let r = admin_raw(&["topicList".to_owned()], Some(&ns.to_string()));
    assert_eq!(r.code, 0, "NAMESRV_ADDR names the name server: {r:?}");
    assert!(r.stdout.lines().any(|l| l == "TBW102"), "{r:?}");
}
