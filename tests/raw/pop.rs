//! POP consumption over real sockets, request by request: 32-message pops acked one by one,
//! queue id -1 across 8 queues, a changed invisible time (the new handle acks, the old one does
//! not), an un-acked message coming back from the group's retry topic with its handle, a parked
//! pop answered by a send, POLLING_TIMEOUT and POLLING_FULL, tag filters, PEEK, BATCH_ACK,
//! NOTIFICATION and POLLING_INFO, and bad input with Java's codes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::raw_support;
use raw_support::pop::{ack_cmd, change_cmd, changed_handle, pop_cmd, popped, Popped, GROUP};
use raw_support::{create_topic_cmd, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code as rc};
use ringmq::protocol::pop::{BatchAck, BatchAckMessageRequestBody, RetryFlag};
use ringmq::protocol::RemotingCommand;

fn setup(topic: &str, queues: i32) -> (RawBroker, Conn) {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(create_topic_cmd(topic, queues)).code, 0);
    (b, c)
}

fn send(c: &mut Conn, topic: &str, qid: i32, body: &str, tag: &str) {
    let props = format!("TAGS\u{1}{tag}\u{2}");
    let r = c.call(send_cmd(topic, qid, body.as_bytes(), &props));
    assert_eq!(r.code, 0, "send: {:?}", r.remark);
}

fn ack(c: &mut Conn, m: &Popped) {
    let r = c.call(ack_cmd(m, &m.handle));
    assert_eq!(r.code, 0, "ack: {:?}", r.remark);
}

fn consumer_offset(c: &mut Conn, topic: &str, qid: i32) -> i64 {
    let r = c.call(
        RemotingCommand::new_request(request_code::QUERY_CONSUMER_OFFSET)
            .with_ext("consumerGroup", GROUP)
            .with_ext("topic", topic)
            .with_ext("queueId", qid),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    r.ext("offset").unwrap().parse().unwrap()
}

/// Pops until `want` messages came or `within` passed.
fn pop_until(
    c: &mut Conn,
    topic: &str,
    want: usize,
    invisible: i64,
    within: Duration,
) -> Vec<Popped> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        let r = c.call(pop_cmd(topic, -1, 32, invisible, 300));
        match r.code {
            0 => got.extend(popped(&r)),
            rc::POLLING_TIMEOUT => {}
            other => panic!("pop answered {other}: {:?}", r.remark),
        }
    }
    got
}

#[test]
fn pops_of_32_acked_one_by_one_move_the_consumer_offset() {
    let (_b, mut c) = setup("PopA", 1);
    for i in 0..64 {
        send(&mut c, "PopA", 0, &format!("m{i}"), "T");
    }
    for round in 0..2 {
        let r = c.call(pop_cmd("PopA", 0, 32, 60_000, 0));
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let base = round * 32;
        assert_eq!(
            r.ext("startOffsetInfo"),
            Some(format!("0 0 {base}").as_str())
        );
        let offsets: Vec<String> = (base..base + 32).map(|o| o.to_string()).collect();
        assert_eq!(
            r.ext("msgOffsetInfo"),
            Some(format!("0 0 {}", offsets.join(",")).as_str())
        );
        assert_eq!(r.ext("restNum"), Some(if round == 0 { "32" } else { "0" }));
        let ms = popped(&r);
        assert_eq!(ms.len(), 32);
        for (i, m) in ms.iter().enumerate() {
            assert_eq!(m.offset, (base + i) as i64);
            assert_eq!(m.body, format!("m{}", base + i));
            assert_eq!(m.topic, "PopA");
            ack(&mut c, m);
        }
    }
    // Non-orderly pops commit as they pop (Java's PopBufferMergeService).
    assert_eq!(consumer_offset(&mut c, "PopA", 0), 64);
    let r = c.call(pop_cmd("PopA", 0, 32, 60_000, 0));
    assert_eq!(r.code, rc::POLLING_TIMEOUT);
}

#[test]
fn queue_minus_one_pops_across_eight_queues() {
    let (_b, mut c) = setup("Pop8", 8);
    for q in 0..8 {
        for i in 0..4 {
            send(&mut c, "Pop8", q, &format!("q{q}-{i}"), "T");
        }
    }
    let r = c.call(pop_cmd("Pop8", -1, 32, 60_000, 0));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let ms = popped(&r);
    assert_eq!(ms.len(), 32);
    let queues: BTreeSet<i32> = ms.iter().map(|m| m.queue_id).collect();
    assert_eq!(queues.len(), 8);
    assert_eq!(r.ext("startOffsetInfo").unwrap().split(';').count(), 8);
    for q in 0..8 {
        let mine: Vec<&Popped> = ms.iter().filter(|m| m.queue_id == q).collect();
        let bodies: Vec<String> = mine.iter().map(|m| m.body.clone()).collect();
        assert_eq!(
            bodies,
            (0..4).map(|i| format!("q{q}-{i}")).collect::<Vec<_>>()
        );
    }
    for m in &ms {
        ack(&mut c, m);
    }
    assert_eq!(
        c.call(pop_cmd("Pop8", -1, 32, 60_000, 0)).code,
        rc::POLLING_TIMEOUT
    );
}

/// Two messages get a new invisible time; one is acked with its new handle, the other with its
/// old one, which acks nothing: only that one comes back, from the retry topic, as Java hands
/// it out (the topic asked for, its handle in POP_CK, reconsumed once).
#[test]
fn changed_invisible_time_new_handle_acks_old_one_does_not() {
    let (_b, mut c) = setup("PopC", 1);
    send(&mut c, "PopC", 0, "m0", "T");
    send(&mut c, "PopC", 0, "m1", "T");
    let r = c.call(pop_cmd("PopC", 0, 2, 60_000, 0));
    let ms = popped(&r);
    assert_eq!(ms.len(), 2);
    let mut handles = Vec::new();
    for m in &ms {
        let r = c.call(change_cmd(m, 1_500));
        assert_eq!(r.code, 0, "{:?}", r.remark);
        assert_eq!(r.ext("invisibleTime"), Some("1500"));
        let h = changed_handle(m, &r);
        assert!(h.pop_time > m.handle.pop_time);
        handles.push(h);
    }
    assert_eq!(c.call(ack_cmd(&ms[0], &handles[0])).code, 0);
    // The old handle: SUCCESS, as Java answers it, and nothing acked.
    assert_eq!(c.call(ack_cmd(&ms[1], &ms[1].handle)).code, 0);
    let back = pop_until(&mut c, "PopC", 1, 60_000, Duration::from_secs(10));
    assert_eq!(
        back.len(),
        1,
        "only the message acked with an old handle returns"
    );
    let m = &back[0];
    assert_eq!(m.body, "m1");
    assert_eq!(m.topic, "PopC");
    assert_eq!(m.reconsume_times, 1);
    assert_eq!(m.handle.retry, RetryFlag::RetryV1);
    assert!(m.properties.contains("1ST_POP_TIME\u{1}"));
    assert_eq!(m.ack_topic(), format!("%RETRY%{GROUP}_PopC"));
    ack(&mut c, m);
    std::thread::sleep(Duration::from_millis(2_000));
    assert!(pop_until(&mut c, "PopC", 1, 60_000, Duration::from_millis(600)).is_empty());
}

#[test]
fn unacked_message_returns_after_its_invisible_time() {
    let (_b, mut c) = setup("PopR", 1);
    send(&mut c, "PopR", 0, "again", "T");
    let popped_at = Instant::now();
    let first = popped(&c.call(pop_cmd("PopR", 0, 1, 1_000, 0)));
    assert_eq!(first.len(), 1);
    let back = pop_until(&mut c, "PopR", 1, 1_000, Duration::from_secs(10));
    assert!(popped_at.elapsed() >= Duration::from_millis(1_000));
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].body, "again");
    // Not acked again: it comes back a second time, counted.
    let third = pop_until(&mut c, "PopR", 1, 60_000, Duration::from_secs(10));
    assert_eq!(third[0].reconsume_times, 2);
    ack(&mut c, &third[0]);
}

#[test]
fn parked_pop_is_answered_by_a_send() {
    let (b, mut c) = setup("PopP", 1);
    let addr = b.broker;
    let waiter = std::thread::spawn(move || {
        let mut c2 = Conn::connect(addr);
        let started = Instant::now();
        let r = c2.call(pop_cmd("PopP", -1, 32, 60_000, 10_000));
        (r.code, popped(&r).len(), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(400));
    send(&mut c, "PopP", 0, "wake", "T");
    let (code, n, took) = waiter.join().unwrap();
    assert_eq!((code, n), (0, 1));
    assert!(
        took < Duration::from_secs(9),
        "the send did not wake the pop: {took:?}"
    );
}

#[test]
fn polling_timeout_and_polling_full() {
    let b = RawBroker::start(&["popPollingSize=1"]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(create_topic_cmd("PopF", 1)).code, 0);
    let t = Instant::now();
    let r = c.call(pop_cmd("PopF", 0, 1, 60_000, 300));
    assert_eq!(r.code, rc::POLLING_TIMEOUT);
    assert!(t.elapsed() >= Duration::from_millis(250));
    // Too late already: POLLING_TIMEOUT at once.
    let mut late = pop_cmd("PopF", 0, 1, 60_000, 100);
    late.set_ext("bornTime", raw_support::pop::now_ms() - 5_000);
    assert_eq!(c.call(late).code, rc::POLLING_TIMEOUT);
    let addr = b.broker;
    let parked = std::thread::spawn(move || {
        Conn::connect(addr)
            .call(pop_cmd("PopF", 0, 1, 60_000, 3_000))
            .code
    });
    std::thread::sleep(Duration::from_millis(500));
    let r = c.call(pop_cmd("PopF", 0, 1, 60_000, 3_000));
    assert_eq!(r.code, rc::POLLING_FULL, "{:?}", r.remark);
    assert_eq!(parked.join().unwrap(), rc::POLLING_TIMEOUT);
}

#[test]
fn tag_filter_pops_only_matching_messages_and_skips_the_rest() {
    let (_b, mut c) = setup("PopTag", 1);
    for i in 0..10 {
        send(
            &mut c,
            "PopTag",
            0,
            &format!("m{i}"),
            if i % 2 == 0 { "A" } else { "B" },
        );
    }
    let mut cmd = pop_cmd("PopTag", 0, 32, 60_000, 0);
    cmd.set_ext("exp", "A");
    let ms = popped(&c.call(cmd));
    let bodies: Vec<&str> = ms.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, vec!["m0", "m2", "m4", "m6", "m8"]);
    assert_eq!(consumer_offset(&mut c, "PopTag", 0), 10);
}

#[test]
fn peek_batch_ack_notification_and_polling_info() {
    let (b, mut c) = setup("PopN", 1);
    let notify = |c: &mut Conn, poll: i64| {
        c.call(
            RemotingCommand::new_request(request_code::NOTIFICATION)
                .with_ext("consumerGroup", GROUP)
                .with_ext("topic", "PopN")
                .with_ext("queueId", -1)
                .with_ext("pollTime", poll)
                .with_ext("bornTime", raw_support::pop::now_ms()),
        )
    };
    let r = notify(&mut c, 200);
    assert_eq!((r.code, r.ext("hasMsg")), (0, Some("false")));
    for i in 0..5 {
        send(&mut c, "PopN", 0, &format!("m{i}"), "T");
    }
    assert_eq!(notify(&mut c, 0).ext("hasMsg"), Some("true"));
    let peek = c.call(
        RemotingCommand::new_request(request_code::PEEK_MESSAGE)
            .with_ext("consumerGroup", GROUP)
            .with_ext("topic", "PopN")
            .with_ext("queueId", 0)
            .with_ext("maxMsgNums", 3),
    );
    assert_eq!(peek.code, 0, "{:?}", peek.remark);
    assert_eq!(raw_support::records(&peek.body).len(), 3);
    // A peek changes nothing: the pop gets all five.
    let r = c.call(pop_cmd("PopN", 0, 32, 2_000, 0));
    let ms = popped(&r);
    assert_eq!(ms.len(), 5);
    let offsets: Vec<i64> = ms.iter().map(|m| m.offset).collect();
    let body = BatchAckMessageRequestBody {
        broker_name: Some("b".into()),
        acks: vec![BatchAck {
            consumer_group: GROUP.into(),
            topic: "PopN".into(),
            retry: "0".into(),
            start_offset: 0,
            queue_id: 0,
            revive_queue_id: ms[0].handle.revive_qid,
            pop_time: ms[0].handle.pop_time,
            invisible_time: 2_000,
            bit_set: BatchAck::bits_of(0, &offsets),
        }],
    };
    let r = c.call(
        RemotingCommand::new_request(request_code::BATCH_ACK_MESSAGE)
            .with_body(serde_json::to_vec(&body).unwrap()),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let empty = RemotingCommand::new_request(request_code::BATCH_ACK_MESSAGE);
    assert_eq!(c.call(empty).code, rc::NO_MESSAGE);
    // All acked: nothing comes back after the invisible time.
    std::thread::sleep(Duration::from_millis(2_500));
    assert!(pop_until(&mut c, "PopN", 1, 60_000, Duration::from_millis(600)).is_empty());
    // One parked pop shows in POLLING_INFO.
    let addr = b.broker;
    let parked = std::thread::spawn(move || {
        Conn::connect(addr)
            .call(pop_cmd("PopN", 0, 1, 60_000, 2_000))
            .code
    });
    std::thread::sleep(Duration::from_millis(500));
    let info = c.call(
        RemotingCommand::new_request(request_code::POLLING_INFO)
            .with_ext("consumerGroup", GROUP)
            .with_ext("topic", "PopN")
            .with_ext("queueId", 0),
    );
    assert_eq!((info.code, info.ext("pollingNum")), (0, Some("1")));
    assert_eq!(parked.join().unwrap(), rc::POLLING_TIMEOUT);
}

#[test]
fn bad_input_gets_java_codes_and_changes_nothing() {
    let (_b, mut c) = setup("PopBad", 2);
    send(&mut c, "PopBad", 0, "m0", "T");
    let ms = popped(&c.call(pop_cmd("PopBad", 0, 1, 1_500, 0)));
    let m = &ms[0];
    assert_eq!(
        c.call(pop_cmd("PopBad", 0, 33, 60_000, 0)).code,
        rc::INVALID_PARAMETER
    );
    assert_eq!(
        c.call(pop_cmd("PopBad", 5, 1, 60_000, 0)).code,
        rc::INVALID_PARAMETER
    );
    assert_eq!(
        c.call(pop_cmd("NoSuchTopic", 0, 1, 60_000, 0)).code,
        rc::TOPIC_NOT_EXIST
    );
    assert_eq!(
        c.call(pop_cmd("PopBad", 0, 1, -5, 0)).code,
        rc::INVALID_PARAMETER
    );
    let mut sql = pop_cmd("PopBad", 0, 1, 60_000, 0);
    sql.set_ext("expType", "SQL92");
    sql.set_ext("exp", "a >");
    assert_ne!(c.call(sql).code, 0);
    // Malformed handles.
    for raw in ["", "1 2 3", "x 1 1 1 0 b 0 0", "1 2 3 4 9 b 0 0"] {
        let r = c.call(ack_cmd(m, &m.handle).with_ext("extraInfo", raw));
        assert_eq!(r.code, rc::SYSTEM_ERROR, "handle {raw:?}");
    }
    // Offsets and queues out of range.
    let r = c.call(ack_cmd(m, &m.handle).with_ext("offset", 99));
    assert_eq!(r.code, rc::NO_MESSAGE);
    let r = c.call(ack_cmd(m, &m.handle).with_ext("queueId", 7));
    assert_eq!(r.code, rc::MESSAGE_ILLEGAL);
    let r = c.call(change_cmd(m, 1_000).with_ext("offset", 1));
    assert_eq!(
        r.code,
        rc::NO_MESSAGE,
        "change needs an offset below the queue's end"
    );
    let r = c.call(change_cmd(m, -1));
    assert_eq!(r.code, rc::INVALID_PARAMETER);
    // A handle of another group acks nothing of this one.
    let r = c.call(ack_cmd(m, &m.handle).with_ext("consumerGroup", "other-g"));
    assert_eq!(r.code, 0);
    // None of that touched the message: it comes back after its invisible time.
    let back = pop_until(&mut c, "PopBad", 1, 60_000, Duration::from_secs(10));
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].body, "m0");
}

/// SIGKILL with pops in flight: what was acked (answered SUCCESS) never comes back, what was
/// not comes back once, and the pop offset survives (nothing is popped twice from the topic).
#[test]
fn pop_state_survives_sigkill() {
    let (b, mut c) = setup("PopK", 1);
    for i in 0..10 {
        send(&mut c, "PopK", 0, &format!("m{i}"), "T");
    }
    let ms = popped(&c.call(pop_cmd("PopK", 0, 10, 3_000, 0)));
    assert_eq!(ms.len(), 10);
    for m in ms.iter().filter(|m| m.offset % 2 == 0) {
        ack(&mut c, m);
    }
    let dir = b.kill9();
    let b = RawBroker::start_in(dir, &[]);
    let mut c = Conn::connect(b.broker);
    let back = pop_until(&mut c, "PopK", 5, 60_000, Duration::from_secs(15));
    let mut bodies: Vec<String> = back.iter().map(|m| m.body.clone()).collect();
    bodies.sort();
    assert_eq!(bodies, vec!["m1", "m3", "m5", "m7", "m9"]);
    assert!(back.iter().all(|m| m.reconsume_times == 1));
    for m in &back {
        ack(&mut c, m);
    }
    assert!(pop_until(&mut c, "PopK", 1, 60_000, Duration::from_secs(4)).is_empty());
}

/// Orderly pops: a queue is blocked while its popped messages are invisible and un-acked; the
/// same attempt id gets the same messages; acks move the consumer offset over the acked run;
/// an expired block hands its un-acked messages out again with their delivery count.
#[test]
fn orderly_pop_blocks_retries_and_counts_deliveries() {
    use raw_support::pop::pop_order_cmd;
    let (_b, mut c) = setup("PopO", 1);
    for i in 0..4 {
        send(&mut c, "PopO", 0, &format!("m{i}"), "T");
    }
    let r = c.call(pop_order_cmd("PopO", 0, 2, 60_000, "a1"));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert_eq!(r.ext("reviveQid"), Some("999"));
    let ms = popped(&r);
    assert_eq!(
        ms.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["m0", "m1"]
    );
    assert!(r.ext("orderCountInfo").unwrap().contains("0 qo0%0 0"));
    // Another attempt: blocked. The same attempt: the same messages.
    assert_eq!(
        c.call(pop_order_cmd("PopO", 0, 2, 60_000, "a2")).code,
        rc::POLLING_TIMEOUT
    );
    let again = popped(&c.call(pop_order_cmd("PopO", 0, 2, 60_000, "a1")));
    assert_eq!(again.iter().map(|m| m.offset).collect::<Vec<_>>(), [0, 1]);
    // Acks in order: the offset moves over the acked run; the block ends with the last ack.
    ack(&mut c, &ms[0]);
    assert_eq!(consumer_offset(&mut c, "PopO", 0), 1);
    assert_eq!(
        c.call(pop_order_cmd("PopO", 0, 2, 60_000, "a3")).code,
        rc::POLLING_TIMEOUT
    );
    ack(&mut c, &ms[1]);
    assert_eq!(consumer_offset(&mut c, "PopO", 0), 2);
    let r = c.call(pop_order_cmd("PopO", 0, 2, 800, "a4"));
    let next = popped(&r);
    assert_eq!(
        next.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["m2", "m3"]
    );
    // Not acked: after its invisible time the block's messages come again, counted.
    std::thread::sleep(Duration::from_millis(1_000));
    let r = c.call(pop_order_cmd("PopO", 0, 2, 60_000, "a5"));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let redelivered = popped(&r);
    assert_eq!(
        redelivered.iter().map(|m| m.offset).collect::<Vec<_>>(),
        [2, 3]
    );
    let info = r.ext("orderCountInfo").unwrap();
    assert!(
        info.contains("0 qo0%2 1") && info.contains("0 qo0%3 1"),
        "{info}"
    );
    // The old pop's handle acks nothing; the new one does.
    assert_eq!(c.call(ack_cmd(&next[0], &next[0].handle)).code, 0);
    assert_eq!(consumer_offset(&mut c, "PopO", 0), 2);
    for m in &redelivered {
        ack(&mut c, m);
    }
    assert_eq!(consumer_offset(&mut c, "PopO", 0), 4);
}

/// A parked orderly pop is answered when the block's last message is acked.
#[test]
fn parked_orderly_pop_wakes_on_the_ack_that_ends_the_block() {
    use raw_support::pop::pop_order_cmd;
    let (b, mut c) = setup("PopOW", 1);
    for i in 0..2 {
        send(&mut c, "PopOW", 0, &format!("m{i}"), "T");
    }
    let ms = popped(&c.call(pop_order_cmd("PopOW", 0, 1, 60_000, "x")));
    assert_eq!(ms.len(), 1);
    let addr = b.broker;
    let waiter = std::thread::spawn(move || {
        let mut cmd = pop_order_cmd("PopOW", 0, 1, 60_000, "y");
        cmd.set_ext("pollTime", 10_000);
        let started = Instant::now();
        let r = Conn::connect(addr).call(cmd);
        (
            r.code,
            popped(&r).first().map(|m| m.body.clone()),
            started.elapsed(),
        )
    });
    std::thread::sleep(Duration::from_millis(400));
    ack(&mut c, &ms[0]);
    let (code, body, took) = waiter.join().unwrap();
    assert_eq!((code, body.as_deref()), (0, Some("m1")));
    assert!(took < Duration::from_secs(9), "{took:?}");
}

/// One sample of the Prometheus text whose line holds every one of `parts`.
fn sample(text: &str, name: &str, parts: &[&str]) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name) && parts.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn scrape(addr: std::net::SocketAddr) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Messages in flight show as the group's `rocketmq_consumer_inflight_messages`, and a
/// redelivery as `rocketmq_pop_revive_retry_messages_total`.
#[test]
fn pop_metrics_show_inflight_and_redeliveries() {
    let b = RawBroker::start(&["metricsExporterType=PROM", "metricsPromExporterPort=0"]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(create_topic_cmd("PopM", 1)).code, 0);
    for i in 0..3 {
        send(&mut c, "PopM", 0, &format!("m{i}"), "T");
    }
    let ms = popped(&c.call(pop_cmd("PopM", 0, 3, 1_000, 0)));
    assert_eq!(ms.len(), 3);
    ack(&mut c, &ms[0]);
    let metrics = b.metrics.expect("metrics address");
    let group = format!("consumer_group=\"{GROUP}\"");
    let text = scrape(metrics);
    let inflight = sample(
        &text,
        "rocketmq_consumer_inflight_messages{",
        &[&group, "topic=\"PopM\""],
    );
    assert_eq!(inflight, Some(2.0), "{text}");
    let back = pop_until(&mut c, "PopM", 2, 60_000, Duration::from_secs(10));
    assert_eq!(back.len(), 2);
    let text = scrape(metrics);
    let retried = sample(
        &text,
        "rocketmq_pop_revive_retry_messages_total{",
        &[&group, "topic=\"PopM\""],
    );
    assert_eq!(retried, Some(2.0), "{text}");
}

/// An SQL92 expression selects what a pop hands out, by the messages' properties.
#[test]
fn sql92_filter_pops_only_matching_messages() {
    let b = RawBroker::start(&["enablePropertyFilter=true"]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(create_topic_cmd("PopSql", 1)).code, 0);
    for i in 0..10 {
        let props = format!("n\u{1}{i}\u{2}TAGS\u{1}T\u{2}");
        let r = c.call(send_cmd("PopSql", 0, format!("m{i}").as_bytes(), &props));
        assert_eq!(r.code, 0);
    }
    let mut cmd = pop_cmd("PopSql", 0, 32, 60_000, 0);
    cmd.set_ext("expType", "SQL92");
    cmd.set_ext("exp", "n >= 7");
    let ms = popped(&c.call(cmd));
    let bodies: Vec<&str> = ms.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, vec!["m7", "m8", "m9"]);
}

/// The dead-letter decision is the consumer's, as in Java: a message that keeps coming back
/// is sent back by the consumer once its reconsume times reach the maximum
/// (CONSUMER_SEND_MSG_BACK with maxReconsumeTimes), lands in `%DLQ%{group}`, and acked, never
/// comes back.
#[test]
fn message_past_max_attempts_goes_to_the_dlq_by_the_consumer() {
    const MAX: i32 = 2;
    let (_b, mut c) = setup("PopD", 1);
    send(&mut c, "PopD", 0, "poison", "T");
    let mut m = popped(&c.call(pop_cmd("PopD", 0, 1, 500, 0))).remove(0);
    while m.reconsume_times < MAX {
        let back = pop_until(&mut c, "PopD", 1, 500, Duration::from_secs(10));
        assert_eq!(back.len(), 1, "the un-acked message returns");
        m = back.into_iter().next().unwrap();
    }
    assert_eq!(m.reconsume_times, MAX);
    let r = c.call(
        RemotingCommand::new_request(request_code::CONSUMER_SEND_MSG_BACK)
            .with_ext("offset", m.phy_offset)
            .with_ext("group", GROUP)
            .with_ext("delayLevel", 0)
            .with_ext("originTopic", "PopD")
            .with_ext("maxReconsumeTimes", MAX),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    ack(&mut c, &m);
    let dlq = format!("%DLQ%{GROUP}");
    let pulled = c.call(raw_support::pull_cmd(&dlq, 0, 0, 0));
    assert_eq!(pulled.code, 0, "{:?}", pulled.remark);
    let recs = raw_support::records(&pulled.body);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].body, b"poison");
    assert!(pop_until(&mut c, "PopD", 1, 60_000, Duration::from_millis(1_500)).is_empty());
}

/// A flood of parked pops: past `maxPopPollingSize` (per shard here: one shard) every further
/// pop is answered POLLING_FULL at once, the parked ones still end in POLLING_TIMEOUT, and the
/// broker serves pops normally afterwards.
#[test]
fn flood_of_parked_pops_is_bounded_by_max_pop_polling_size() {
    let b = RawBroker::start(&["maxPopPollingSize=4", "shardCount=1"]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(create_topic_cmd("PopFlood", 8)).code, 0);
    let addr = b.broker;
    let parked: Vec<_> = (0..4)
        .map(|q| {
            std::thread::spawn(move || {
                Conn::connect(addr)
                    .call(pop_cmd("PopFlood", q, 1, 60_000, 3_000))
                    .code
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(600));
    for q in 4..8 {
        let t = Instant::now();
        let r = c.call(pop_cmd("PopFlood", q, 1, 60_000, 3_000));
        assert_eq!(r.code, rc::POLLING_FULL, "{:?}", r.remark);
        assert!(t.elapsed() < Duration::from_secs(1), "refused at once");
    }
    for p in parked {
        assert_eq!(p.join().unwrap(), rc::POLLING_TIMEOUT);
    }
    send(&mut c, "PopFlood", 0, "after", "T");
    let back = pop_until(&mut c, "PopFlood", 1, 60_000, Duration::from_secs(5));
    assert_eq!(back.len(), 1);
}
