//! Proves delay levels, consumer send-back (retry then dead-letter) and message query by key and
//! by offset id, byte for byte over a real socket.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::msg_id::decode_offset_msg_id;
use ringmq::protocol::properties;
use ringmq::protocol::RemotingCommand;

/// Pulls queue `q` of `topic` from `offset` until a message arrives or `within` passes.
fn wait_for(c: &mut Conn, topic: &str, q: i32, within: Duration) -> Option<(Vec<u8>, String, i32)> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let r = c.call(pull_cmd(topic, q, 0, 0));
        if r.code == 0 {
            let recs = records(&r.body);
            let first = &recs[0];
            return Some((
                first.body.to_vec(),
                first.properties.to_string(),
                first.reconsume_times,
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn delay_level_one_arrives_after_one_second() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let t0 = Instant::now();
    let r = c.call(send_cmd("DelayT", 0, b"later", "DELAY\u{1}1\u{2}"));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let (body, props, _) =
        wait_for(&mut c, "DelayT", 0, Duration::from_secs(5)).expect("delayed message delivered");
    let waited = t0.elapsed();
    assert_eq!(body, b"later");
    assert!(
        waited >= Duration::from_millis(950),
        "delivered early: {waited:?}"
    );
    assert!(
        waited < Duration::from_millis(2500),
        "delivered late: {waited:?}"
    );
    assert!(properties::get(&props, "REAL_TOPIC").is_none());
    assert!(properties::get(&props, "DELAY").is_none());
}

fn send_back(c: &mut Conn, offset: i64, group: &str, level: i32, max: i32) -> RemotingCommand {
    c.call(
        RemotingCommand::new_request(request_code::CONSUMER_SEND_MSG_BACK)
            .with_ext("offset", offset)
            .with_ext("group", group)
            .with_ext("delayLevel", level)
            .with_ext("originTopic", "RetryT")
            .with_ext("unitMode", false)
            .with_ext("maxReconsumeTimes", max),
    )
}

#[test]
fn send_back_goes_to_retry_then_dead_letter() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd("RetryT", 0, b"poison", "KEYS\u{1}k9\u{2}"));
    assert_eq!(r.code, 0);
    let (_, phy) = decode_offset_msg_id(r.ext("msgId").unwrap()).unwrap();
    // First failure: retry topic, level 1 (1 s), reconsumeTimes 1, original topic kept.
    let r = send_back(&mut c, phy, "g1", 1, 16);
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let (body, props, times) =
        wait_for(&mut c, "%RETRY%g1", 0, Duration::from_secs(5)).expect("retried message");
    assert_eq!(body, b"poison");
    assert_eq!(times, 1);
    assert_eq!(properties::get(&props, "RETRY_TOPIC"), Some("RetryT"));
    assert_eq!(properties::get(&props, "KEYS"), Some("k9"));
    // Past maxReconsumeTimes: straight to the dead-letter queue with the original body and keys.
    let r = send_back(&mut c, phy, "g1", 0, 0);
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let (body, props, _) =
        wait_for(&mut c, "%DLQ%g1", 0, Duration::from_secs(2)).expect("dead-lettered message");
    assert_eq!(body, b"poison");
    assert_eq!(properties::get(&props, "KEYS"), Some("k9"));
}

/// QUERY_MESSAGE for `key` in `topic` over the last and next minute.
fn query_cmd(topic: &str, key: &str) -> RemotingCommand {
    let now = ringmq::common::now_ms();
    RemotingCommand::new_request(request_code::QUERY_MESSAGE)
        .with_ext("topic", topic)
        .with_ext("key", key)
        .with_ext("maxNum", 32)
        .with_ext("beginTimestamp", now - 60_000)
        .with_ext("endTimestamp", now + 60_000)
}

/// The bodies a query by `key` returns, sorted.
fn query_bodies(c: &mut Conn, topic: &str, key: &str) -> Vec<Vec<u8>> {
    let r = c.call(query_cmd(topic, key));
    let mut bodies: Vec<Vec<u8>> = records(&r.body).iter().map(|r| r.body.to_vec()).collect();
    bodies.sort();
    bodies
}

/// Polls until a query by `key` finds `n` messages or `within` passes (the writer indexes keys
/// after it answers the send).
fn wait_indexed(c: &mut Conn, topic: &str, key: &str, n: usize, within: Duration) {
    let deadline = Instant::now() + within;
    while query_bodies(c, topic, key).len() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn query_by_key_and_view_by_offset_id() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    for i in 0..5 {
        let props = format!("KEYS\u{1}order-{i} common\u{2}");
        let r = c.call(send_cmd("QueryT", 0, format!("m{i}").as_bytes(), &props));
        assert_eq!(r.code, 0);
    }
    let r = c.call(send_cmd("QueryT", 0, b"m-last", "KEYS\u{1}order-3\u{2}"));
    let last_id = r.ext("msgId").unwrap().to_string();
    // Keys are indexed after the send is answered (as RocketMQ's index is built by its reput
    // service); under SYNC_FLUSH only once the group commit made them durable.
    wait_indexed(&mut c, "QueryT", "order-3", 2, Duration::from_secs(10));
    let query = |c: &mut Conn, key: &str| c.call(query_cmd("QueryT", key));
    let r = query(&mut c, "order-3");
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let mut bodies: Vec<Vec<u8>> = records(&r.body).iter().map(|r| r.body.to_vec()).collect();
    bodies.sort();
    assert_eq!(bodies, vec![b"m-last".to_vec(), b"m3".to_vec()]);
    assert_eq!(records(&query(&mut c, "common").body).len(), 5);
    assert_eq!(query(&mut c, "nope").code, response_code::QUERY_NOT_FOUND);

    let (_, phy) = decode_offset_msg_id(&last_id).unwrap();
    let r = c.call(
        RemotingCommand::new_request(request_code::VIEW_MESSAGE_BY_ID).with_ext("offset", phy),
    );
    assert_eq!(r.code, 0);
    let recs = records(&r.body);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].body, b"m-last");
    let r = c
        .call(RemotingCommand::new_request(request_code::VIEW_MESSAGE_BY_ID).with_ext("offset", 3));
    assert_ne!(r.code, 0, "a bogus offset must not return a record");
}

/// Under SYNC_FLUSH the writer indexes keys once the group commit made the batch durable; the
/// keys of a plain send are byte ranges into its record, which must still be there by then.
#[test]
fn keys_are_indexed_under_sync_flush() {
    let b = RawBroker::start(&["flushDiskType=SYNC_FLUSH"]);
    let mut c = Conn::connect(b.broker);
    for i in 0..3 {
        let props = format!("KEYS\u{1}sync-{i} sync-all\u{2}");
        let r = c.call(send_cmd(
            "SyncQueryT",
            0,
            format!("s{i}").as_bytes(),
            &props,
        ));
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    let query = |c: &mut Conn, key: &str| query_bodies(c, "SyncQueryT", key);
    // Indexing follows the fdatasync, on the writer's next tick.
    wait_indexed(&mut c, "SyncQueryT", "sync-all", 3, Duration::from_secs(10));
    assert_eq!(query(&mut c, "sync-all").len(), 3);
    assert_eq!(query(&mut c, "sync-1"), vec![b"s1".to_vec()]);
}

#[test]
fn delayed_message_survives_restart_once() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd("DelayRestartT", 0, b"once", "DELAY\u{1}2\u{2}"));
    assert_eq!(r.code, 0);
    drop(c);
    let dir = b.stop();
    let b = RawBroker::start_in(dir, &[]);
    let mut c = Conn::connect(b.broker);
    let got = wait_for(&mut c, "DelayRestartT", 0, Duration::from_secs(10));
    assert_eq!(got.expect("delivered after restart").0, b"once");
    // Exactly once: after a while there is still only one message.
    std::thread::sleep(Duration::from_millis(1500));
    let r = c.call(pull_cmd("DelayRestartT", 0, 0, 0));
    assert_eq!(records(&r.body).len(), 1);
}

#[test]
fn timer_message_arrives_at_its_time_and_survives_restart() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let t0 = Instant::now();
    let at = ringmq::common::now_ms() + 2_500;
    let props = format!("TIMER_DELIVER_MS\u{1}{at}\u{2}");
    assert_eq!(c.call(send_cmd("TimerT", 0, b"timed", &props)).code, 0);
    let props = "TIMER_DELAY_SEC\u{1}1\u{2}";
    assert_eq!(c.call(send_cmd("TimerT2", 0, b"soon", props)).code, 0);
    // Not visible yet.
    assert_eq!(
        c.call(pull_cmd("TimerT", 0, 0, 0)).code,
        response_code::PULL_NOT_FOUND
    );
    let (body, props, _) =
        wait_for(&mut c, "TimerT2", 0, Duration::from_secs(5)).expect("TIMER_DELAY_SEC delivered");
    assert_eq!(body, b"soon");
    assert!(t0.elapsed() >= Duration::from_millis(950));
    assert!(properties::get(&props, "TIMER_DELAY_SEC").is_none());
    // Restart before the absolute one is due.
    drop(c);
    let dir = b.stop();
    let b = RawBroker::start_in(dir, &[]);
    let mut c = Conn::connect(b.broker);
    let got = wait_for(&mut c, "TimerT", 0, Duration::from_secs(10)).expect("timed delivered");
    assert_eq!(got.0, b"timed");
    assert!(ringmq::common::now_ms() >= at, "delivered before its time");
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(records(&c.call(pull_cmd("TimerT", 0, 0, 0)).body).len(), 1);
    assert_eq!(
        records(&c.call(pull_cmd("TimerT2", 0, 0, 0)).body).len(),
        1,
        "redelivered after restart"
    );
    // Beyond the 3-day maximum: refused.
    let far = ringmq::common::now_ms() + 4 * 24 * 3_600_000;
    let r = c.call(send_cmd(
        "TimerT",
        0,
        b"x",
        &format!("TIMER_DELIVER_MS\u{1}{far}\u{2}"),
    ));
    assert_eq!(r.code, response_code::MESSAGE_ILLEGAL);
}

#[test]
fn group_retry_max_times_applies_when_the_request_has_none() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let group = br#"{"groupName":"g0","retryMaxTimes":0,"retryQueueNums":1,"consumeEnable":true}"#;
    let r = c.call(
        RemotingCommand::new_request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(group.to_vec()),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let r = c.call(send_cmd("RetryG0", 0, b"once", ""));
    let (_, phy) = decode_offset_msg_id(r.ext("msgId").unwrap()).unwrap();
    let r = c.call(
        RemotingCommand::new_request(request_code::CONSUMER_SEND_MSG_BACK)
            .with_ext("offset", phy)
            .with_ext("group", "g0")
            .with_ext("delayLevel", 0)
            .with_ext("originTopic", "RetryG0")
            .with_ext("unitMode", false),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let got = wait_for(&mut c, "%DLQ%g0", 0, Duration::from_secs(2));
    assert_eq!(got.expect("dead-lettered by the group's limit").0, b"once");
}

/// Proves the keys of every message in a batch are indexed (each is read back from its own
/// record): KEYS entries of the 2nd and 4th messages find exactly them, a key shared by three
/// finds three, and a message without KEYS is still found by its UNIQ_KEY through the offset id.
#[test]
fn batch_messages_are_indexed_by_their_own_keys() {
    use ringmq::protocol::batch::{encode_batch, BatchEntry};
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let entries: Vec<BatchEntry> = (0..4)
        .map(|i| BatchEntry {
            flag: 0,
            body: bytes::Bytes::from(format!("batch-{i}")),
            properties: if i == 0 {
                String::new()
            } else {
                format!("KEYS\u{1}bk-{i} shared\u{2}")
            },
        })
        .collect();
    let mut body = bytes::BytesMut::new();
    encode_batch(&entries, &mut body).unwrap();
    let mut cmd = send_cmd("BatchQueryT", 0, &body, "");
    cmd.code = request_code::SEND_BATCH_MESSAGE;
    let cmd = cmd.with_ext("m", true);
    let r = c.call(cmd);
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let query = |c: &mut Conn, key: &str| query_bodies(c, "BatchQueryT", key);
    // The writer indexes a batch after answering it: give it a moment.
    wait_indexed(&mut c, "BatchQueryT", "shared", 3, Duration::from_secs(5));
    assert_eq!(query(&mut c, "bk-2"), vec![b"batch-2".to_vec()]);
    assert_eq!(query(&mut c, "bk-3"), vec![b"batch-3".to_vec()]);
    assert_eq!(query(&mut c, "shared").len(), 3);
    assert!(query(&mut c, "bk-0").is_empty());
}
