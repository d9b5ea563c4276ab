// Proves the lite pull consumer works against ringmq: in subscribe mode it polls every message of
// the topic in per-queue offset order, and in assign mode a seek to offset 0 of one queue reads
// that queue's messages again.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::*;

const COUNT: usize = 30;

#[test]
fn lite_pull_subscribe_and_assign() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("lite");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        let mut sent_queue: HashMap<String, i32> = HashMap::new();
        for i in 0..COUNT {
            let body = format!("lite-{i}");
            let r = within(
                15,
                "send",
                producer.send_with_timeout(message(&topic, "TagL", "", body.as_bytes()), 5_000),
            )
            .await
            .expect("send")
            .expect("no SendResult");
            sent_queue.insert(body, r.message_queue.expect("queue").queue_id());
        }

        // Subscribe mode.
        let group = unique_group("lite");
        let consumer = lite_pull_consumer(&ns, &group, &topic, "*").await;
        let mut bodies = HashSet::new();
        let mut last_offset: HashMap<i32, i64> = HashMap::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while bodies.len() < COUNT && Instant::now() < deadline {
            let msgs = within(10, "poll", consumer.poll_with_timeout(1_000)).await;
            for m in &msgs {
                let r = Received::from_ext(m, 0);
                if r.is_warmup() {
                    continue;
                }
                assert_eq!(r.topic, topic);
                if let Some(prev) = last_offset.insert(r.queue_id, r.queue_offset) {
                    assert!(
                        r.queue_offset > prev,
                        "queue {} polled offset {} after {prev}",
                        r.queue_id,
                        r.queue_offset
                    );
                }
                assert_eq!(
                    Some(&r.queue_id),
                    sent_queue.get(&r.body_str()),
                    "{} from the wrong queue",
                    r.body_str()
                );
                bodies.insert(r.body_str());
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), consumer.shutdown()).await;
        let missing: Vec<&String> = sent_queue.keys().filter(|b| !bodies.contains(*b)).collect();
        assert!(
            missing.is_empty(),
            "lite pull (subscribe) never polled {missing:?}"
        );

        // Assign mode: one queue, seek to 0, read it all again.
        let queues = publish_queues(&mut producer, &topic).await;
        let mq = queues
            .iter()
            .find(|q| sent_queue.values().any(|&id| id == q.queue_id()))
            .expect("a queue with messages")
            .clone();
        let expected: HashSet<String> = sent_queue
            .iter()
            .filter(|(_, &q)| q == mq.queue_id())
            .map(|(b, _)| b.clone())
            .collect();
        let assigned = lite_pull_consumer_assign(&ns, &unique_group("lite-assign")).await;
        // Queues come from the consumer itself (as in Java's assign flow), which also gives its
        // client instance the topic's broker address for the offset queries behind seek().
        let own = within(
            10,
            "consumer fetch queues",
            assigned.fetch_message_queues(&topic),
        )
        .await
        .expect("lite consumer fetch_message_queues");
        assert!(own.contains(&mq), "consumer's queues {own:?} lack {mq:?}");
        within(10, "assign", assigned.assign(vec![mq.clone()]))
            .await
            .expect("assign");
        let min = within(10, "min offset", assigned.min_offset(&mq)).await;
        let max = within(10, "max offset", assigned.max_offset(&mq)).await;
        let assignment = within(10, "assignment", assigned.assignment()).await;
        within(10, "seek", assigned.seek(&mq, 0))
            .await
            .unwrap_or_else(|e| {
                panic!("seek to 0 failed: {e} (min offset {min:?}, max offset {max:?}, assignment {assignment:?})")
            });
        let mut again = HashSet::new();
        let deadline = Instant::now() + Duration::from_secs(15);
        while !expected.is_subset(&again) && Instant::now() < deadline {
            for m in within(10, "poll", assigned.poll_with_timeout(1_000)).await {
                let r = Received::from_ext(&m, 0);
                assert_eq!(
                    r.queue_id,
                    mq.queue_id(),
                    "assign mode returned another queue's message"
                );
                if !r.is_warmup() {
                    again.insert(r.body_str());
                }
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), assigned.shutdown()).await;
        shutdown_producer(producer).await;
        let missing: Vec<&String> = expected.difference(&again).collect();
        assert!(
            missing.is_empty(),
            "assign mode after seek(0) missed {missing:?}"
        );
    });
}
