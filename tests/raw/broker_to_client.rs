//! The broker asking clients and relaying their answers, byte-level: GET_CONSUMER_RUNNING_INFO
//! (307) and CONSUME_MESSAGE_DIRECTLY (309) relayed for an admin caller, and request-reply's
//! SEND_REPLY_MESSAGE_V2 (325) pushed as PUSH_REPLY_MESSAGE_TO_CLIENT (326). The "clients" here
//! are raw connections that register by heartbeat and answer (or do not) by hand, so every
//! error path (unknown client, no answer, full pending table, closed connection) is reachable.
//! Brokers run two shards, so the asking and the answering connection are often on different
//! shards.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::{send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

const GROUP: &str = "relay_group";

fn start(extra: &[&str]) -> RawBroker {
    let mut opts = vec!["shardCount=2", "pinCores=false"];
    opts.extend_from_slice(extra);
    RawBroker::start(&opts)
}

/// Registers `conn` as client `client_id`: a consumer of GROUP, and a producer of group "pg".
fn register(conn: &mut Conn, client_id: &str) {
    let body = format!(
        r#"{{"clientID":"{client_id}","consumerDataSet":[{{"groupName":"{GROUP}",
        "consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
        "consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[]}}],
        "producerDataSet":[{{"groupName":"pg"}}]}}"#
    );
    let r = conn.call(RemotingCommand::new_request(request_code::HEART_BEAT).with_body(body));
    assert_eq!(r.code, 0, "heartbeat: {:?}", r.remark);
}

/// Reads frames until a request from the broker with `code` arrives (skipping the oneway
/// NOTIFY_CONSUMER_IDS_CHANGED a registration triggers).
fn next_request(conn: &mut Conn, code: i32) -> RemotingCommand {
    loop {
        let cmd = conn
            .read()
            .expect("connection closed before the broker's request");
        if !cmd.is_response() && cmd.code == code {
            return cmd;
        }
    }
}

fn running_info(client_id: &str) -> RemotingCommand {
    RemotingCommand::new_request(request_code::GET_CONSUMER_RUNNING_INFO)
        .with_ext("consumerGroup", GROUP)
        .with_ext("clientId", client_id)
        .with_ext("jstackEnable", false)
}

/// A 307 reaches the registered consumer with the admin's fields, and the consumer's answer
/// (code, remark, fields, body) is the admin's response, from several admin connections.
#[test]
fn running_info_is_relayed_both_ways() {
    let b = start(&[]);
    let mut client = Conn::connect(b.broker);
    register(&mut client, "client-A");
    for round in 0..4 {
        let mut admin = Conn::connect(b.broker);
        std::thread::scope(|s| {
            let asked = s.spawn(move || admin.call(running_info("client-A")));
            let req = next_request(&mut client, request_code::GET_CONSUMER_RUNNING_INFO);
            assert_eq!(req.ext("consumerGroup"), Some(GROUP));
            assert_eq!(req.ext("clientId"), Some("client-A"));
            let answer = RemotingCommand::response_for(&req, 0, Some(format!("round {round}")))
                .with_ext("fromClient", round)
                .with_body(format!("{{\"properties\":{{\"round\":\"{round}\"}}}}"));
            client.send_answer(answer);
            let got = asked.join().unwrap();
            assert_eq!(got.code, 0);
            assert_eq!(
                got.remark.as_deref(),
                Some(format!("round {round}").as_str())
            );
            assert_eq!(got.ext("fromClient"), Some(round.to_string().as_str()));
            assert!(String::from_utf8_lossy(&got.body).contains(&format!("\"{round}\"")));
        });
    }
}

/// A client nobody registered is Java's SYSTEM_ERROR "not online", at once.
#[test]
fn unknown_consumer_is_not_online() {
    let b = start(&[]);
    let mut admin = Conn::connect(b.broker);
    let r = admin.call(running_info("nobody"));
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(
        r.remark.as_deref(),
        Some(format!("The Consumer <{GROUP}> <nobody> not online").as_str())
    );
}

/// A consumer that does not answer gets the admin CONSUME_MSG_TIMEOUT after
/// `callClientTimeoutMills`; its late answer is dropped and its connection keeps working.
#[test]
fn silent_consumer_times_out_and_late_answer_is_dropped() {
    let b = start(&["callClientTimeoutMills=800"]);
    let mut client = Conn::connect(b.broker);
    register(&mut client, "client-S");
    let mut admin = Conn::connect(b.broker);
    let begun = Instant::now();
    let op = admin.send(running_info("client-S"));
    let req = next_request(&mut client, request_code::GET_CONSUMER_RUNNING_INFO);
    let r = admin.read().expect("admin response");
    assert_eq!(r.opaque, op);
    let waited = begun.elapsed();
    assert_eq!(r.code, response_code::CONSUME_MSG_TIMEOUT, "{:?}", r.remark);
    assert!(
        r.remark
            .as_deref()
            .unwrap_or("")
            .contains("<client-S> Timeout"),
        "{:?}",
        r.remark
    );
    assert!(
        waited >= Duration::from_millis(700) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    client.send_answer(RemotingCommand::response_for(&req, 0, None));
    register(&mut client, "client-S");
}

/// With `maxPendingCallsPerConnection=1`, a second request to a client that has not answered
/// the first fails at once with a clear error, and the first still gets its answer.
#[test]
fn pending_table_is_bounded() {
    let b = start(&["maxPendingCallsPerConnection=1"]);
    let mut client = Conn::connect(b.broker);
    register(&mut client, "client-B");
    let mut first = Conn::connect(b.broker);
    let mut second = Conn::connect(b.broker);
    let op = first.send(running_info("client-B"));
    let req = next_request(&mut client, request_code::GET_CONSUMER_RUNNING_INFO);
    let begun = Instant::now();
    let r = second.call(running_info("client-B"));
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    let remark = r.remark.unwrap_or_default();
    assert!(
        remark.starts_with("invoke consumer <relay_group> <client-B> Exception")
            && remark.contains("1 requests to this client already wait"),
        "{remark}"
    );
    assert!(begun.elapsed() < Duration::from_secs(3));
    client.send_answer(RemotingCommand::response_for(&req, 0, Some("first".into())));
    let r = first.read().expect("first admin response");
    assert_eq!((r.opaque, r.code), (op, 0));
    assert_eq!(r.remark.as_deref(), Some("first"));
}

/// A client whose connection closes while the broker waits on it fails the relayed request at
/// once, long before the timeout.
#[test]
fn closed_connection_fails_the_waiting_request() {
    let b = start(&[]);
    let mut client = Conn::connect(b.broker);
    register(&mut client, "client-C");
    let mut admin = Conn::connect(b.broker);
    let begun = Instant::now();
    admin.send(running_info("client-C"));
    next_request(&mut client, request_code::GET_CONSUMER_RUNNING_INFO);
    drop(client);
    let r = admin.read().expect("admin response");
    assert_eq!(r.code, response_code::SYSTEM_ERROR, "{:?}", r.remark);
    assert!(
        r.remark.as_deref().unwrap_or("").contains("closed"),
        "{:?}",
        r.remark
    );
    assert!(begun.elapsed() < Duration::from_secs(5));
}

/// A 309 carries the stored message named by its offset msgId, with the broker's name added;
/// the consumer's result is relayed.
#[test]
fn consume_message_directly_carries_the_stored_message() {
    let b = start(&[]);
    let mut producer = Conn::connect(b.broker);
    let sent = producer.call(send_cmd("DirectT", 0, b"consume me", "KEYS\u{1}k1\u{2}"));
    assert_eq!(sent.code, 0, "{:?}", sent.remark);
    let msg_id = sent.ext("msgId").unwrap().to_string();
    let mut client = Conn::connect(b.broker);
    register(&mut client, "client-D");
    let mut admin = Conn::connect(b.broker);
    std::thread::scope(|s| {
        let id = msg_id.clone();
        let asked = s.spawn(move || {
            admin.call(
                RemotingCommand::new_request(request_code::CONSUME_MESSAGE_DIRECTLY)
                    .with_ext("consumerGroup", GROUP)
                    .with_ext("clientId", "client-D")
                    .with_ext("msgId", id)
                    .with_ext("topic", "DirectT"),
            )
        });
        let req = next_request(&mut client, request_code::CONSUME_MESSAGE_DIRECTLY);
        assert_eq!(req.ext("brokerName"), Some("broker-a"));
        assert_eq!(req.ext("msgId"), Some(msg_id.as_str()));
        assert_eq!(req.ext("topicSysFlag"), Some("0"));
        let rec = ringmq::protocol::message::decode(&req.body, true).expect("stored record");
        assert_eq!((rec.topic, rec.body), ("DirectT", &b"consume me"[..]));
        assert_eq!(rec.total_size as usize, req.body.len());
        client.send_answer(
            RemotingCommand::response_for(&req, 0, None)
                .with_body(r#"{"consumeResult":"CR_SUCCESS","order":false}"#),
        );
        let got = asked.join().unwrap();
        assert_eq!(got.code, 0, "{:?}", got.remark);
        assert!(String::from_utf8_lossy(&got.body).contains("CR_SUCCESS"));
    });
    // An id that names no stored message is an error before anything is relayed.
    let mut admin = Conn::connect(b.broker);
    let r = admin.call(
        RemotingCommand::new_request(request_code::CONSUME_MESSAGE_DIRECTLY)
            .with_ext("consumerGroup", GROUP)
            .with_ext("clientId", "client-D")
            .with_ext("msgId", "not-a-message-id"),
    );
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(
        r.remark
            .as_deref()
            .unwrap_or("")
            .contains("cannot decode the message id"),
        "{:?}",
        r.remark
    );
}

fn reply_cmd(props: &str, body: &[u8]) -> RemotingCommand {
    let mut cmd = send_cmd("DefaultCluster_REPLY_TOPIC", -1, body, props);
    cmd.code = request_code::SEND_REPLY_MESSAGE_V2;
    cmd
}

/// A reply reaches the producer named by REPLY_TO_CLIENT as a 326 with Java's header, the
/// replier gets SUCCESS with the stored reply's position, and the reply is in the reply topic.
#[test]
fn reply_is_pushed_to_the_requester_and_stored() {
    let b = start(&[]);
    let mut requester = Conn::connect(b.broker);
    register(&mut requester, "requester-1");
    let mut replier = Conn::connect(b.broker);
    std::thread::scope(|s| {
        let props = "CORRELATION_ID\u{1}corr-1\u{2}REPLY_TO_CLIENT\u{1}requester-1\u{2}MSG_TYPE\u{1}reply\u{2}";
        let asked = s.spawn(move || replier.call(reply_cmd(props, b"the answer")));
        let push = next_request(&mut requester, request_code::PUSH_REPLY_MESSAGE_TO_CLIENT);
        assert_eq!(push.ext("topic"), Some("DefaultCluster_REPLY_TOPIC"));
        assert_eq!(push.ext("producerGroup"), Some("pg"));
        assert!(push.ext("bornHost").unwrap().starts_with("127.0.0.1:"));
        assert_eq!(push.ext("storeHost"), Some(b.broker.to_string().as_str()));
        let props = push.ext("properties").unwrap();
        assert!(
            props.contains("CORRELATION_ID\u{1}corr-1\u{2}"),
            "{props:?}"
        );
        assert!(props.contains("PUSH_REPLY_TIME\u{1}"), "{props:?}");
        assert_eq!(&push.body[..], b"the answer");
        requester.send_answer(RemotingCommand::response_for(&push, 0, None));
        let got = asked.join().unwrap();
        assert_eq!(got.code, 0, "{:?}", got.remark);
        assert_eq!(got.ext("queueId"), Some("0"));
        assert_eq!(got.ext("queueOffset"), Some("0"));
        assert_eq!(got.ext("msgId").map(str::len), Some(32), "offset msg id");
    });
    let mut reader = Conn::connect(b.broker);
    let pulled = reader.call(raw_support::pull_cmd("DefaultCluster_REPLY_TOPIC", 0, 0, 0));
    assert_eq!(pulled.code, 0, "{:?}", pulled.remark);
    let recs = raw_support::records(&pulled.body);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].body, b"the answer");
}

/// Java's remarks when the reply cannot be pushed: no REPLY_TO_CLIENT, a requester not
/// connected, and one that refuses the reply. The reply is still stored (msgId set).
#[test]
fn reply_push_failures_are_system_errors() {
    let b = start(&[]);
    let mut replier = Conn::connect(b.broker);
    let r = replier.call(reply_cmd("CORRELATION_ID\u{1}c\u{2}", b"x"));
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(
        r.remark.as_deref(),
        Some("reply message properties[REPLY_TO_CLIENT] is null")
    );
    let r = replier.call(reply_cmd("REPLY_TO_CLIENT\u{1}gone-1\u{2}", b"x"));
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(
        r.remark.as_deref(),
        Some("push reply message fail, channel of <gone-1> not found.")
    );
    assert_eq!(r.ext("msgId").map(str::len), Some(32), "stored anyway");
    let mut requester = Conn::connect(b.broker);
    register(&mut requester, "refuser-1");
    std::thread::scope(|s| {
        let asked =
            s.spawn(move || replier.call(reply_cmd("REPLY_TO_CLIENT\u{1}refuser-1\u{2}", b"x")));
        let push = next_request(&mut requester, request_code::PUSH_REPLY_MESSAGE_TO_CLIENT);
        requester.send_answer(RemotingCommand::response_for(&push, 1, Some("no".into())));
        let r = asked.join().unwrap();
        assert_eq!(r.code, response_code::SYSTEM_ERROR);
        assert_eq!(
            r.remark.as_deref(),
            Some("push reply message to refuser-1fail.")
        );
    });
}

/// With `storeReplyMessageEnable=false` a pushed reply answers msgId "0" and is not stored.
#[test]
fn reply_not_stored_when_disabled() {
    let b = start(&["storeReplyMessageEnable=false"]);
    let mut requester = Conn::connect(b.broker);
    register(&mut requester, "requester-2");
    let mut replier = Conn::connect(b.broker);
    std::thread::scope(|s| {
        let asked =
            s.spawn(move || replier.call(reply_cmd("REPLY_TO_CLIENT\u{1}requester-2\u{2}", b"y")));
        let push = next_request(&mut requester, request_code::PUSH_REPLY_MESSAGE_TO_CLIENT);
        requester.send_answer(RemotingCommand::response_for(&push, 0, None));
        let got = asked.join().unwrap();
        assert_eq!(got.code, 0, "{:?}", got.remark);
        assert_eq!(got.ext("msgId"), Some("0"));
    });
    let mut reader = Conn::connect(b.broker);
    let pulled = reader.call(raw_support::pull_cmd("DefaultCluster_REPLY_TOPIC", 0, 0, 0));
    assert_ne!(pulled.code, 0, "nothing stored, so nothing to pull");
}

/// A reply or a send to a queue the topic does not have is refused the same way, as Java's
/// `msgCheck` refuses it: INVALID_PARAMETER naming the queue.
#[test]
fn reply_and_send_refuse_a_queue_the_topic_lacks() {
    let b = start(&[]);
    let mut c = Conn::connect(b.broker);
    let ok = c.call(send_cmd("QueueCheckT", 0, b"x", ""));
    assert_eq!(ok.code, response_code::SUCCESS, "{:?}", ok.remark);
    let mut reply = reply_cmd("", b"r");
    reply.ext_fields.insert("e", "99");
    for cmd in [send_cmd("QueueCheckT", 99, b"y", ""), reply] {
        let r = c.call(cmd);
        assert_eq!(r.code, response_code::INVALID_PARAMETER, "{:?}", r.remark);
        let remark = r.remark.unwrap_or_default();
        assert!(remark.contains("queueId[99] is illegal"), "{remark}");
    }
}
