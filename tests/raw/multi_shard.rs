//! Proves the cross-shard paths: with three shards, connections land on different shards
//! (SO_REUSEPORT) while each queue has one owner, so sends, pulls, long polls and consumer
//! offsets from any connection must reach the owner and come back right.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::request_code;
use ringmq::protocol::RemotingCommand;

#[test]
fn every_connection_reaches_every_queue_owner() {
    let b = RawBroker::start(&["shardCount=3", "pinCores=false"]);
    let mut conns: Vec<Conn> = (0..8).map(|_| Conn::connect(b.broker)).collect();
    // Each connection sends one message to each of the 4 auto-created queues.
    for (ci, c) in conns.iter_mut().enumerate() {
        for q in 0..4 {
            let body = format!("c{ci}-q{q}");
            let r = c.call(send_cmd("MultiT", q, body.as_bytes(), ""));
            assert_eq!(r.code, 0, "{:?}", r.remark);
        }
    }
    // Every connection pulls every queue back in full, in send order.
    for c in conns.iter_mut() {
        for q in 0..4 {
            let r = c.call(pull_cmd("MultiT", q, 0, 0));
            assert_eq!(r.code, 0, "pull q{q}: {:?}", r.remark);
            let got: Vec<String> = records(&r.body)
                .iter()
                .map(|m| String::from_utf8(m.body.to_vec()).unwrap())
                .collect();
            let want: Vec<String> = (0..8).map(|ci| format!("c{ci}-q{q}")).collect();
            assert_eq!(got, want);
        }
    }
    // Consumer offsets written through one connection are read through all the others.
    for q in 0..4 {
        let r = conns[q as usize].call(
            RemotingCommand::new_request(request_code::UPDATE_CONSUMER_OFFSET)
                .with_ext("consumerGroup", "mg")
                .with_ext("topic", "MultiT")
                .with_ext("queueId", q)
                .with_ext("commitOffset", q + 1),
        );
        assert_eq!(r.code, 0);
    }
    for c in conns.iter_mut() {
        for q in 0..4 {
            let r = c.call(
                RemotingCommand::new_request(request_code::QUERY_CONSUMER_OFFSET)
                    .with_ext("consumerGroup", "mg")
                    .with_ext("topic", "MultiT")
                    .with_ext("queueId", q),
            );
            assert_eq!(r.code, 0);
            assert_eq!(r.ext("offset"), Some((q + 1).to_string().as_str()));
        }
    }
    // A parked pull on one connection wakes for a send on another, whatever the shards.
    for q in 0..4 {
        let (a, rest) = conns.split_at_mut(1);
        let waiter = &mut a[0];
        let sender = &mut rest[q as usize % 7];
        let op = waiter.send(pull_cmd("MultiT", q, 8, 10_000));
        std::thread::sleep(Duration::from_millis(50));
        let t0 = Instant::now();
        assert_eq!(sender.call(send_cmd("MultiT", q, b"late", "")).code, 0);
        let resp = loop {
            let r = waiter.read().expect("pull response");
            if r.opaque == op {
                break r;
            }
        };
        assert_eq!(resp.code, 0, "{:?}", resp.remark);
        assert_eq!(records(&resp.body)[0].body, b"late");
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "woke after {:?}",
            t0.elapsed()
        );
    }
}
