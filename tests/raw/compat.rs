//! Proves, over a real socket against a real broker, the answers where ringmq follows Java
//! RocketMQ 5.3 byte for byte: the send response's TRACE_ON switch, send checks (forbidden
//! system topics, MULTI_TAG records, bad queue ids), a new group's start offset, an empty
//! queue's earliest store time, GET_BROKER_CONFIG and GET_BROKER_RUNTIME_INFO, topic creation
//! with attributes and perm 0, system-topic deletion, and the send-back origin message id.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::message::sys_flag;
use ringmq::protocol::msg_id::decode_offset_msg_id;
use ringmq::protocol::properties;
use ringmq::protocol::RemotingCommand;

fn create_topic(
    c: &mut Conn,
    topic: &str,
    perm: i32,
    filter: &str,
    attributes: &str,
) -> RemotingCommand {
    c.call(
        RemotingCommand::new_request(request_code::UPDATE_AND_CREATE_TOPIC)
            .with_ext("topic", topic)
            .with_ext("defaultTopic", "TBW102")
            .with_ext("readQueueNums", 2)
            .with_ext("writeQueueNums", 2)
            .with_ext("perm", perm)
            .with_ext("topicFilterType", filter)
            .with_ext("topicSysFlag", 0)
            .with_ext("order", false)
            .with_ext("attributes", attributes),
    )
}

fn query_offset(c: &mut Conn, group: &str, topic: &str, queue: i32) -> RemotingCommand {
    c.call(
        RemotingCommand::new_request(request_code::QUERY_CONSUMER_OFFSET)
            .with_ext("consumerGroup", group)
            .with_ext("topic", topic)
            .with_ext("queueId", queue),
    )
}

fn runtime_table(c: &mut Conn) -> serde_json::Value {
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_BROKER_RUNTIME_INFO,
    ));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["table"].clone()
}

/// The first element of a "a b c" TPS figure, parsed as Java's dashboard parses it.
fn tps10(t: &serde_json::Value, key: &str) -> f64 {
    let text = t[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} missing: {t}"));
    let parts: Vec<&str> = text.split(' ').collect();
    assert_eq!(parts.len(), 3, "{key}={text}");
    parts[0].parse().unwrap_or_else(|_| panic!("{key}={text}"))
}

/// Send responses carry TRACE_ON=true (Java's `traceOn` default), and a broker started with
/// `traceOn=false` says false.
#[test]
fn trace_on_follows_the_broker_key() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd("TraceT", 0, b"x", ""));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.ext("TRACE_ON"), Some("true"));
    let off = RawBroker::start(&["traceOn=false"]);
    let mut c = Conn::connect(off.broker);
    let r = c.call(send_cmd("TraceT", 0, b"x", ""));
    assert_eq!(r.ext("TRACE_ON"), Some("false"));
}

/// A send to a topic no client may write (the schedule topic) is NO_PERMISSION and stores
/// nothing; a queue id past the topic's queues is INVALID_PARAMETER (Java 5.3.2 and later).
#[test]
fn send_checks_refuse_like_java() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd("SCHEDULE_TOPIC_XXXX", 0, b"sneak", ""));
    assert_eq!(r.code, response_code::NO_PERMISSION, "{:?}", r.remark);
    assert!(r.remark.unwrap_or_default().contains("forbidden"));
    let r = c.call(pull_cmd("SCHEDULE_TOPIC_XXXX", 0, 0, 0));
    assert!(r.body.is_empty(), "nothing stored in the schedule topic");
    assert_eq!(create_topic(&mut c, "QidT", 6, "SINGLE_TAG", "").code, 0);
    let r = c.call(send_cmd("QidT", 7, b"x", ""));
    assert_eq!(r.code, response_code::INVALID_PARAMETER, "{:?}", r.remark);
}

/// Records sent to a MULTI_TAG topic carry the MULTI_TAGS sys flag; a SINGLE_TAG topic's do not.
#[test]
fn multi_tag_topic_marks_its_records() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    for (topic, filter) in [("MultiT", "MULTI_TAG"), ("SingleT", "SINGLE_TAG")] {
        assert_eq!(create_topic(&mut c, topic, 6, filter, "").code, 0);
        let r = c.call(send_cmd(topic, 1, b"tagged", "TAGS\u{1}a\u{2}"));
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let r = c.call(pull_cmd(topic, 1, 0, 0));
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let recs = records(&r.body);
        let multi = recs[0].sys_flag & sys_flag::MULTI_TAGS != 0;
        assert_eq!(multi, filter == "MULTI_TAG", "{topic}");
    }
}

/// A new group on a queue whose first message is within the in-memory share of the log starts
/// at 0; with `accessMessageInMemoryMaxRatio=0` no message is in memory and the answer is
/// QUERY_NOT_FOUND, so a CONSUME_FROM_LAST_OFFSET group starts at the tail.
#[test]
fn new_group_start_offset_depends_on_memory() {
    for (ratio, code) in [
        ("40", response_code::SUCCESS),
        ("0", response_code::QUERY_NOT_FOUND),
    ] {
        let b = RawBroker::start(&[&format!("accessMessageInMemoryMaxRatio={ratio}")]);
        let mut c = Conn::connect(b.broker);
        for i in 0..3 {
            let r = c.call(send_cmd("StartT", 0, format!("m{i}").as_bytes(), ""));
            assert_eq!(r.code, 0, "{:?}", r.remark);
        }
        let r = query_offset(&mut c, "fresh", "StartT", 0);
        assert_eq!(r.code, code, "ratio {ratio}: {:?}", r.remark);
        if code == response_code::SUCCESS {
            assert_eq!(r.ext("offset"), Some("0"));
        }
        // A queue that never held a message has no first message in memory either.
        let r = query_offset(&mut c, "fresh", "StartT", 3);
        assert_eq!(r.code, response_code::QUERY_NOT_FOUND, "{:?}", r.remark);
    }
}

/// GET_EARLIEST_MSG_STORETIME on an empty queue is SUCCESS with -1; on a queue with a message
/// it is that message's store time.
#[test]
fn earliest_store_time_of_an_empty_queue_is_minus_one() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let ask = |c: &mut Conn, q: i32| {
        c.call(
            RemotingCommand::new_request(request_code::GET_EARLIEST_MSG_STORETIME)
                .with_ext("topic", "EarlyT")
                .with_ext("queueId", q),
        )
    };
    assert_eq!(c.call(send_cmd("EarlyT", 0, b"x", "")).code, 0);
    let r = ask(&mut c, 1);
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.ext("timestamp"), Some("-1"));
    let r = ask(&mut c, 0);
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let ts: i64 = r.ext("timestamp").unwrap().parse().unwrap();
    assert!(ts > 1_700_000_000_000, "{ts}");
}

/// GET_BROKER_CONFIG prints Java's enum names and every broker and store key, with the port
/// actually bound.
#[test]
fn broker_config_prints_every_key_in_java_form() {
    let b = RawBroker::start(&["flushDiskType=SYNC_FLUSH"]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_BROKER_CONFIG,
    ));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"flushDiskType=SYNC_FLUSH"), "{text}");
    assert!(lines.contains(&"brokerIP1=127.0.0.1"), "{text}");
    assert!(
        lines.contains(&format!("listenPort={}", b.broker.port()).as_str()),
        "{text}"
    );
    for key in [
        "brokerClusterName=",
        "maxMessageSize=",
        "deleteWhen=04",
        "fileReservedTime=72",
        "mappedFileSizeCommitLog=16777216",
        "traceOn=true",
        "messageDelayLevel=1s 5s",
        "frameMaxLength=",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(key)),
            "{key} missing:\n{text}"
        );
    }
    assert!(lines.len() >= 45, "{} keys:\n{text}", lines.len());
}

/// GET_BROKER_RUNTIME_INFO has the keys the dashboard and mqadmin read, in Java's formats, and
/// put/get rates that follow real traffic.
#[test]
fn runtime_info_has_java_keys_and_real_rates() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let t = runtime_table(&mut c);
    for key in [
        "getTotalTps",
        "getTransferredTps",
        "getTransferedTps",
        "putTps",
        "brokerActive",
        "msgPutTotalTodayNow",
        "msgPutTotalTodayMorning",
        "msgPutTotalYesterdayMorning",
        "msgGetTotalTodayNow",
        "msgGetTotalTodayMorning",
        "msgGetTotalYesterdayMorning",
        "earliestMessageTimeStamp",
        "commitLogDiskRatio",
        "commitLogMaxOffset",
        "bootTimestamp",
    ] {
        assert!(t[key].is_string(), "{key} missing: {t}");
    }
    assert_eq!(t["earliestMessageTimeStamp"], "-1");
    assert_eq!(tps10(&t, "putTps"), 0.0);
    // Two seconds of traffic: 200 sends and 200 pulls that each find one message.
    let start = Instant::now();
    for i in 0..200i64 {
        assert_eq!(c.call(send_cmd("RateT", 0, b"r", "")).code, 0);
        let r = c.call(pull_cmd("RateT", 0, i, 0).with_ext("maxMsgNums", 1));
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    let pause = Duration::from_millis(2200).saturating_sub(start.elapsed());
    std::thread::sleep(pause);
    let t = runtime_table(&mut c);
    assert_eq!(t["msgPutTotalTodayNow"], "200", "{t}");
    assert_eq!(t["msgGetTotalTodayNow"], "200", "{t}");
    for key in [
        "putTps",
        "getTotalTps",
        "getTransferredTps",
        "getTransferedTps",
    ] {
        assert!(tps10(&t, key) > 5.0, "{key}: {t}");
    }
    let earliest: i64 = t["earliestMessageTimeStamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(earliest > 1_700_000_000_000, "{t}");
    // Measured by the sampler every second: a share of the disk, as Java's double.
    let ratio: f64 = t["commitLogDiskRatio"].as_str().unwrap().parse().unwrap();
    assert!(ratio > 0.0 && ratio <= 1.0, "{t}");
}

/// A created topic keeps its 5.x attributes (signs stripped) and perm 0 as sent: such a topic
/// refuses sends. Malformed attributes, and changes to a system topic, are refused.
#[test]
fn create_topic_keeps_attributes_and_perm_zero() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let r = create_topic(&mut c, "AttrT", 6, "SINGLE_TAG", "+message.type=FIFO");
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let r = create_topic(&mut c, "ClosedT", 0, "SINGLE_TAG", "");
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let r = create_topic(&mut c, "BadAttrT", 6, "SINGLE_TAG", "message.type=FIFO");
    assert_eq!(r.code, response_code::INVALID_PARAMETER, "{:?}", r.remark);
    // The broker's own topics are not an admin's to change (Java's validateSystemTopicWhenUpdateTopic).
    let r = create_topic(&mut c, "TBW102", 0, "SINGLE_TAG", "");
    assert_eq!(r.code, response_code::INVALID_PARAMETER, "{:?}", r.remark);
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_ALL_TOPIC_CONFIG,
    ));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let table = &v["topicConfigTable"];
    assert_eq!(table["AttrT"]["attributes"]["message.type"], "FIFO", "{v}");
    assert_eq!(table["ClosedT"]["perm"], 0, "{v}");
    assert!(table["BadAttrT"].is_null(), "{v}");
    assert_eq!(table["TBW102"]["perm"], 7, "{v}");
    let r = c.call(send_cmd("ClosedT", 0, b"x", ""));
    assert_eq!(r.code, response_code::NO_PERMISSION, "{:?}", r.remark);
}

/// Deleting a system topic (TBW102) or a blank name is refused and the topic stays.
#[test]
fn system_topics_cannot_be_deleted() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    for topic in ["TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", " "] {
        let r = c.call(
            RemotingCommand::new_request(request_code::DELETE_TOPIC_IN_BROKER)
                .with_ext("topic", topic),
        );
        assert_eq!(
            r.code,
            response_code::INVALID_PARAMETER,
            "{topic}: {:?}",
            r.remark
        );
    }
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_ALL_TOPIC_CONFIG,
    ));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert!(v["topicConfigTable"]["TBW102"].is_object(), "{v}");
}

/// A message sent back names the stored record (its offset msg id) as ORIGIN_MESSAGE_ID,
/// whatever originMsgId the request carries.
#[test]
fn send_back_origin_id_is_the_stored_record() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd("BackT", 0, b"failed", ""));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let msg_id = r.ext("msgId").unwrap().to_string();
    let (_, phy) = decode_offset_msg_id(&msg_id).unwrap();
    // Delay level -1: straight to the dead-letter queue, no delay to wait for.
    let r = c.call(
        RemotingCommand::new_request(request_code::CONSUMER_SEND_MSG_BACK)
            .with_ext("offset", phy)
            .with_ext("group", "gb")
            .with_ext("delayLevel", -1)
            .with_ext("originMsgId", "0A0000010000000000000000DEADBEEF")
            .with_ext("originTopic", "BackT")
            .with_ext("unitMode", false)
            .with_ext("maxReconsumeTimes", 16),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let deadline = Instant::now() + Duration::from_secs(5);
    let props = loop {
        let r = c.call(pull_cmd("%DLQ%gb", 0, 0, 0));
        if r.code == 0 {
            break records(&r.body)[0].properties.to_string();
        }
        assert!(Instant::now() < deadline, "nothing dead-lettered");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        properties::get(&props, "ORIGIN_MESSAGE_ID"),
        Some(msg_id.as_str())
    );
}

/// Without `brokerIP1` a broker listening on loopback announces loopback (not the host's LAN
/// address, where nothing listens) in its config and msg ids, start-up says so without a
/// warning about it, and one start-up warning names the ignored keys: those ringmq does not
/// implement and the unknown ones.
#[test]
fn default_broker_ip_and_ignored_keys_warning() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    /// Kills the broker however the test ends.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args([
            "serve",
            "--console-listen",
            "off",
            "--namesrv-listen",
            "127.0.0.1:0",
            "--broker-listen",
            "127.0.0.1:0",
        ])
        .arg("--store-dir")
        .arg(dir.path())
        .args(["-o", "mappedFileSizeCommitLog=16777216"])
        .args([
            "-o",
            "authenticationProvider=x.Y",
            "-o",
            "enableDLegerCommitLog=true",
            "-o",
            "noSuchKey=1",
        ])
        .env("RINGMQ_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringmq");
    let stderr = child.stderr.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let _reap = Reap(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut broker = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("stdout");
        if let Some(a) = line.strip_prefix("broker listening on ") {
            broker = Some(a.trim().parse::<std::net::SocketAddr>().unwrap());
            break;
        }
    }
    let broker = broker.expect("ringmq printed its broker address");
    let warning = rx
        .iter()
        .find(|l| l.contains("configuration keys ignored"))
        .expect("a warning about ignored keys");
    assert!(
        warning
            .contains("not implemented by ringmq: authenticationProvider, enableDLegerCommitLog"),
        "{warning}"
    );
    assert!(warning.contains("unknown: noSuchKey"), "{warning}");
    let mut c = Conn::connect(broker);
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_BROKER_CONFIG,
    ));
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    assert!(text.lines().any(|l| l == "brokerIP1=127.0.0.1"), "{text}");
    let r = c.call(send_cmd("IpT", 0, b"x", ""));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let id = r.ext("msgId").unwrap();
    let hex = format!("7F000001{:08X}", broker.port());
    assert!(
        id.starts_with(&hex),
        "msgId {id} names 127.0.0.1:{}",
        broker.port()
    );
}

/// Deleting a topic spread over three shards removes every queue's units, files and consumer
/// offsets on its owner shard, and the POP retry topic of a group with offsets on it (not
/// another group's); the next sends after re-creation start at offset 0 with nothing old.
#[test]
fn topic_deletion_reaches_every_owner_shard() {
    let b = RawBroker::start(&["shardCount=3", "pinCores=false"]);
    let mut c = Conn::connect(b.broker);
    let create_named = |c: &mut Conn, topic: &str| {
        let r = c.call(
            RemotingCommand::new_request(request_code::UPDATE_AND_CREATE_TOPIC)
                .with_ext("topic", topic)
                .with_ext("defaultTopic", "TBW102")
                .with_ext("readQueueNums", 4)
                .with_ext("writeQueueNums", 4)
                .with_ext("perm", 6)
                .with_ext("topicFilterType", "SINGLE_TAG")
                .with_ext("order", false),
        );
        assert_eq!(r.code, 0, "{:?}", r.remark);
    };
    let create = |c: &mut Conn| create_named(c, "SpreadT");
    create(&mut c);
    // POP retry topics (Java's V1 naming, %RETRY%<group>_<topic>): sg has offsets, og none.
    create_named(&mut c, "%RETRY%sg_SpreadT");
    create_named(&mut c, "%RETRY%og_SpreadT");
    for q in 0..4 {
        for i in 0..3 {
            let r = c.call(send_cmd(
                "SpreadT",
                q,
                format!("old-{q}-{i}").as_bytes(),
                "",
            ));
            assert_eq!(r.code, 0, "{:?}", r.remark);
        }
        let r = c.call(
            RemotingCommand::new_request(request_code::UPDATE_CONSUMER_OFFSET)
                .with_ext("consumerGroup", "sg")
                .with_ext("topic", "SpreadT")
                .with_ext("queueId", q)
                .with_ext("commitOffset", 3),
        );
        assert_eq!(r.code, 0);
    }
    let cq_dir = b.dir.path().join("consumequeue").join("SpreadT");
    assert!(cq_dir.exists());
    let r = c.call(
        RemotingCommand::new_request(request_code::DELETE_TOPIC_IN_BROKER)
            .with_ext("topic", "SpreadT"),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert!(!cq_dir.exists(), "consume queue files left behind");
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_ALL_TOPIC_CONFIG,
    ));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let table = &v["topicConfigTable"];
    assert!(table["SpreadT"].is_null(), "{v}");
    assert!(table["%RETRY%sg_SpreadT"].is_null(), "{v}");
    assert!(table["%RETRY%og_SpreadT"].is_object(), "{v}");
    for q in 0..4 {
        let r = c.call(
            RemotingCommand::new_request(request_code::GET_MAX_OFFSET)
                .with_ext("topic", "SpreadT")
                .with_ext("queueId", q),
        );
        assert_eq!(r.ext("offset"), Some("0"), "queue {q}");
        let r = query_offset(&mut c, "sg", "SpreadT", q);
        assert_eq!(
            r.code,
            response_code::QUERY_NOT_FOUND,
            "queue {q}: offset kept"
        );
    }
    create(&mut c);
    for q in 0..4 {
        let r = c.call(send_cmd("SpreadT", q, format!("new-{q}").as_bytes(), ""));
        assert_eq!(r.code, 0, "{:?}", r.remark);
        assert_eq!(r.ext("queueOffset"), Some("0"), "queue {q}");
        let r = c.call(pull_cmd("SpreadT", q, 0, 0));
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let bodies: Vec<Vec<u8>> = records(&r.body).iter().map(|m| m.body.to_vec()).collect();
        assert_eq!(bodies, vec![format!("new-{q}").into_bytes()], "queue {q}");
    }
}
