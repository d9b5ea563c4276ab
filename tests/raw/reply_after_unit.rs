//! Proves that a send is never answered before its consume-queue unit is readable on the shard
//! that answers it: with three shards, sends from six connections at once (so the answering
//! shard is often not the queue's owner, and writer batches carry several connections' sends),
//! each SEND_OK is followed at once, on the same connection, by GET_MAX_OFFSET and a pull of
//! that queue, which must already see the message. Under ASYNC_FLUSH and SYNC_FLUSH.

use crate::raw_support;

use raw_support::{create_topic_cmd, pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::request_code;
use ringmq::protocol::RemotingCommand;

const CONNECTIONS: usize = 6;
const SENDS: usize = 300;
const QUEUES: i32 = 8;

fn check(flush: &'static str) {
    let flush_opt = format!("flushDiskType={flush}");
    let b = RawBroker::start(&["shardCount=3", "pinCores=false", &flush_opt]);
    let topic = format!("ReplyAfterUnit{flush}");
    let r = Conn::connect(b.broker).call(create_topic_cmd(&topic, QUEUES));
    assert_eq!(r.code, 0, "create topic: {:?}", r.remark);
    let threads: Vec<_> = (0..CONNECTIONS)
        .map(|t| {
            let addr = b.broker;
            let topic = topic.clone();
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr);
                for i in 0..SENDS {
                    let q = ((t + i) % QUEUES as usize) as i32;
                    let body = format!("{t}-{i}");
                    let r = c.call(send_cmd(&topic, q, body.as_bytes(), ""));
                    assert_eq!(r.code, 0, "{flush} send {t}/{i}: {:?}", r.remark);
                    let off: i64 = r.ext("queueOffset").unwrap().parse().unwrap();
                    let m = c.call(
                        RemotingCommand::new_request(request_code::GET_MAX_OFFSET)
                            .with_ext("topic", topic.as_str())
                            .with_ext("queueId", q),
                    );
                    let max: i64 = m.ext("offset").unwrap().parse().unwrap();
                    assert!(
                        max > off,
                        "{flush} send {t}/{i}: answered at queue offset {off} of queue {q}, \
                         but the queue's max offset read right after is {max}"
                    );
                    let p = c.call(pull_cmd(&topic, q, off, 0));
                    assert_eq!(p.code, 0, "{flush} pull {t}/{i} at {off}: {:?}", p.remark);
                    assert_eq!(records(&p.body)[0].body, body.as_bytes());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("sender thread");
    }
}

/// ASYNC_FLUSH: a reply goes out right after its group is written and dispatched.
#[test]
fn async_flush_replies_follow_their_units() {
    check("ASYNC_FLUSH");
}

/// SYNC_FLUSH: a reply goes out once its group's fdatasync completed and it is dispatched.
#[test]
fn sync_flush_replies_follow_their_units() {
    check("SYNC_FLUSH");
}
