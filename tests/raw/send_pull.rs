//! Proves, byte for byte over a real socket, that a sent message comes back from a pull as
//! RocketMQ's stored-record layout with the offsets the send reported, that pull bodies are
//! carried by sendfile (no user-space copy), and that a parked pull wakes on arrival.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

fn runtime_info(c: &mut Conn) -> serde_json::Value {
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_BROKER_RUNTIME_INFO,
    ));
    assert_eq!(r.code, 0);
    serde_json::from_slice(&r.body).unwrap()
}

fn counter(v: &serde_json::Value, key: &str) -> u64 {
    v["table"][key].as_str().unwrap().parse().unwrap()
}

#[test]
fn send_then_pull_round_trip_zero_copy() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let props = "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}";
    let mut sent = Vec::new();
    for i in 0..50 {
        let body = format!("hello-{i}-{}", "x".repeat(i * 10));
        let r = c.call(send_cmd("RawT", 1, body.as_bytes(), props));
        assert_eq!(r.code, 0, "send failed: {:?}", r.remark);
        let qo: i64 = r.ext("queueOffset").unwrap().parse().unwrap();
        assert_eq!(qo, i as i64);
        assert_eq!(r.ext("queueId"), Some("1"));
        assert_eq!(r.ext("msgId").unwrap().len(), 32);
        sent.push(body);
    }
    let before = runtime_info(&mut c);
    let mut got = Vec::new();
    let mut offset = 0i64;
    let mut body_bytes = 0u64;
    while got.len() < sent.len() {
        let r = c.call(pull_cmd("RawT", 1, offset, 0));
        assert_eq!(r.code, 0, "pull: {:?}", r.remark);
        body_bytes += r.body.len() as u64;
        for rec in records(&r.body) {
            assert_eq!(rec.topic, "RawT");
            assert_eq!(rec.queue_id, 1);
            assert_eq!(rec.queue_offset, got.len() as i64);
            assert!(rec.properties.contains("TAGS\u{1}TagA\u{2}"));
            got.push(String::from_utf8(rec.body.to_vec()).unwrap());
        }
        offset = r.ext("nextBeginOffset").unwrap().parse().unwrap();
        assert_eq!(r.ext("maxOffset"), Some("50"));
    }
    assert_eq!(got, sent);
    // Caught up: PULL_NOT_FOUND with nextBeginOffset == maxOffset.
    let r = c.call(pull_cmd("RawT", 1, 50, 0));
    assert_eq!(r.code, response_code::PULL_NOT_FOUND);
    assert_eq!(r.ext("nextBeginOffset"), Some("50"));
    // Too far: OFFSET_MOVED back to maxOffset.
    let r = c.call(pull_cmd("RawT", 1, 99, 0));
    assert_eq!(r.code, response_code::PULL_OFFSET_MOVED);
    assert_eq!(r.ext("nextBeginOffset"), Some("50"));
    // Every pulled body byte went through sendfile.
    let after = runtime_info(&mut c);
    let zc = counter(&after, "sendfileBytes") - counter(&before, "sendfileBytes");
    let copied =
        counter(&after, "sendfileFallbackBytes") - counter(&before, "sendfileFallbackBytes");
    assert_eq!(
        zc + copied,
        body_bytes,
        "pull bodies not carried by sendfile"
    );
    assert!(
        copied * 100 <= body_bytes,
        "too many fallback bytes: {copied}"
    );
}

#[test]
fn parked_pull_wakes_on_arrival() {
    let b = RawBroker::start(&[]);
    let mut producer = Conn::connect(b.broker);
    let r = producer.call(send_cmd("LongPollT", 0, b"first", ""));
    assert_eq!(r.code, 0);
    let mut consumer = Conn::connect(b.broker);
    let op = consumer.send(pull_cmd("LongPollT", 0, 1, 15_000));
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let r = producer.call(send_cmd("LongPollT", 0, b"second", ""));
    assert_eq!(r.code, 0);
    let resp = consumer.read().expect("pull response");
    let waited = t0.elapsed();
    assert_eq!(resp.opaque, op);
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    let recs = records(&resp.body);
    assert_eq!(recs[0].body, b"second");
    assert!(waited < Duration::from_millis(200), "woke after {waited:?}");
}

#[test]
fn parked_pull_times_out_with_not_found() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(send_cmd("IdleT", 0, b"x", "")).code, 0);
    let t0 = Instant::now();
    let r = c.call(pull_cmd("IdleT", 0, 1, 500));
    assert_eq!(r.code, response_code::PULL_NOT_FOUND);
    assert!(t0.elapsed() >= Duration::from_millis(450));
}

/// Two queues written in turn: each record of queue 1 sits apart from the next in the commit
/// log, so a pull answers with one sendfile per record (the corked path). Pulls are pipelined,
/// with a small response queued between them, so responses leave back to back on the wire.
/// Every response must still frame and decode byte for byte, in request order.
#[test]
fn scattered_records_pipelined_pulls_frame_exactly() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let mut sent = Vec::new();
    for i in 0..64 {
        for q in [1, 2] {
            let body = format!("q{q}-{i}-{}", "y".repeat(i * 37 % 900));
            let r = c.call(send_cmd("ScatT", q, body.as_bytes(), ""));
            assert_eq!(r.code, 0, "send failed: {:?}", r.remark);
            if q == 1 {
                sent.push(body);
            }
        }
    }
    // Queue 1 from offsets 0 and 32 (32 records each), and a heartbeat-sized request between.
    let first = c.send(pull_cmd("ScatT", 1, 0, 0));
    let middle = c.send(RemotingCommand::new_request(
        request_code::GET_BROKER_RUNTIME_INFO,
    ));
    let second = c.send(pull_cmd("ScatT", 1, 32, 0));
    let mut got = Vec::new();
    let mut order = Vec::new();
    while order.len() < 3 {
        let r = c.read().expect("connection closed");
        assert!(r.is_response());
        order.push(r.opaque);
        if r.opaque == middle {
            assert_eq!(r.code, 0);
            continue;
        }
        assert_eq!(r.code, 0, "pull: {:?}", r.remark);
        let recs = records(&r.body);
        assert_eq!(recs.len(), 32, "a full batch of scattered records");
        for rec in recs {
            assert_eq!((rec.topic, rec.queue_id), ("ScatT", 1));
            assert_eq!(rec.queue_offset, got.len() as i64);
            got.push(String::from_utf8(rec.body.to_vec()).unwrap());
        }
    }
    assert_eq!(order, vec![first, middle, second]);
    assert_eq!(got, sent);
}

/// A consumer whose socket is full stalls its response inside the pipe write and keeps the
/// shard's pipe; another consumer's scattered pull must then go out by sendfile (under
/// TCP_CORK) and arrive whole. Once the first consumer reads, its stalled responses resume and
/// arrive whole and in order too.
#[test]
fn a_stalled_consumer_holding_the_pipe_does_not_corrupt_others() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let body = |q: i32, i: i64| vec![(i * 7 + i64::from(q)) as u8; 16 * 1024];
    const N: i64 = 200;
    for i in 0..N {
        for q in [1, 2] {
            let r = c.call(send_cmd("StallPipeT", q, &body(q, i), ""));
            assert_eq!(r.code, 0, "send failed: {:?}", r.remark);
        }
    }
    // ~10 MB of scattered responses to a reader that does not read yet: more than its receive
    // buffer, the broker's send buffer (at most 4 MiB) and the pipe together, so the broker's
    // writer for it stalls mid-response. (A tiny SO_RCVBUF would not do: the loopback MSS is
    // 64 KiB, and a window below it leaves the sender on zero-window probes for minutes.)
    let mut slow = Conn::connect(b.broker);
    let starts: Vec<i64> = (0..3).flat_map(|_| (0..N).step_by(15)).collect();
    for &o in &starts {
        slow.send(pull_cmd("StallPipeT", 1, o, 0));
    }
    std::thread::sleep(Duration::from_millis(300));
    let r = c.call(pull_cmd("StallPipeT", 2, 0, 0));
    assert_eq!(r.code, 0, "pull next to a stalled consumer: {:?}", r.remark);
    let recs = records(&r.body);
    assert!(!recs.is_empty());
    for (i, rec) in recs.iter().enumerate() {
        assert_eq!((rec.queue_id, rec.queue_offset), (2, i as i64));
        assert_eq!(rec.body, &body(2, i as i64)[..]);
    }
    for &o in &starts {
        let r = slow.read().expect("stalled consumer's response");
        assert_eq!(r.code, 0, "stalled pull: {:?}", r.remark);
        let recs = records(&r.body);
        assert!(!recs.is_empty());
        for (k, rec) in recs.iter().enumerate() {
            let qo = o + k as i64;
            assert_eq!((rec.queue_id, rec.queue_offset), (1, qo));
            assert_eq!(rec.body, &body(1, qo)[..]);
        }
    }
}

/// Read your writes: once SEND_OK is back, a pull without suspend (on any connection, to any
/// queue) finds the message. The units travel writer -> owner shard apart from the reply, so
/// this holds only if the owner applies them before it answers a later pull.
#[test]
fn a_pull_right_after_send_ok_finds_the_message() {
    read_your_writes(&[], 4000);
}

/// The same across shards: the pull may arrive at a connection's shard, which asks the owner.
#[test]
fn a_pull_right_after_send_ok_finds_the_message_across_shards() {
    read_your_writes(&["shardCount=3", "pinCores=false"], 2000);
}

fn read_your_writes(opts: &[&str], n: i64) {
    let b = RawBroker::start(opts);
    let mut c = Conn::connect(b.broker);
    let mut other = Conn::connect(b.broker);
    for i in 0..n {
        let q = (i % 4) as i32;
        let body = format!("m{i}");
        let r = c.call(send_cmd("RywT", q, body.as_bytes(), ""));
        assert_eq!(r.code, 0, "send {i}: {:?}", r.remark);
        let off: i64 = r.ext("queueOffset").unwrap().parse().unwrap();
        let puller = if i % 2 == 0 { &mut c } else { &mut other };
        let r = puller.call(pull_cmd("RywT", q, off, 0));
        assert_eq!(r.code, 0, "pull {i} at {off}: {:?}", r.remark);
        assert_eq!(records(&r.body)[0].body, body.as_bytes());
    }
}
