// Proves selector sends put each order key on the queue the selector picked, and an orderly push
// consumer receives every key's messages in send order (per-queue order kept).

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use rocketmq_client_rust::SendStatus;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;

const KEYS: usize = 4;
const PER_KEY: usize = 25;

#[test]
fn orderly_consumer_keeps_per_queue_order() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("order");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;

        let mut queue_of_key: HashMap<usize, i32> = HashMap::new();
        // Interleave keys so order can only survive if the broker keeps per-queue order.
        for seq in 0..PER_KEY {
            for key in 0..KEYS {
                let body = format!("order-{key}-{seq}");
                let result = within(
                    15,
                    "selector send",
                    producer.send_with_selector_timeout(
                        message(&topic, "TagOrder", &format!("order-{key}"), body.as_bytes()),
                        |queues: &[MessageQueue], _msg: &Message, arg: &usize| {
                            queues.get(arg % queues.len()).cloned()
                        },
                        key,
                        5_000,
                    ),
                )
                .await
                .expect("selector send failed")
                .expect("no SendResult");
                assert_eq!(result.send_status, SendStatus::SendOk);
                let q = result.message_queue.as_ref().expect("queue").queue_id();
                let expected = *queue_of_key.entry(key).or_insert(q);
                assert_eq!(
                    q, expected,
                    "order key {key} moved from queue {expected} to {q}"
                );
            }
        }
        let mut distinct_queues: Vec<i32> = queue_of_key.values().copied().collect();
        distinct_queues.sort();
        distinct_queues.dedup();
        assert_eq!(
            distinct_queues.len(),
            KEYS,
            "selector spread {KEYS} keys over queues {distinct_queues:?}"
        );

        let group = unique_group("order");
        let mut spec = PushSpec::new(&group, &topic);
        spec.orderly = true;
        let (consumer, mut inbox) = push_consumer_with(&ns, spec).await;
        let got = collect_distinct(&mut inbox, KEYS * PER_KEY, Duration::from_secs(40)).await;
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let mut seqs: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut last_offset: HashMap<i32, i64> = HashMap::new();
        for r in &got {
            let body = r.body_str();
            let mut parts = body.trim_start_matches("order-").split('-');
            let key: usize = parts
                .next()
                .and_then(|p| p.parse().ok())
                .expect("key in body");
            let seq: usize = parts
                .next()
                .and_then(|p| p.parse().ok())
                .expect("seq in body");
            assert_eq!(
                r.queue_id, queue_of_key[&key],
                "{body} consumed from the wrong queue"
            );
            let prev = last_offset.insert(r.queue_id, r.queue_offset);
            if let Some(prev) = prev {
                assert!(
                    r.queue_offset > prev,
                    "queue {} delivered offset {} after {prev}",
                    r.queue_id,
                    r.queue_offset
                );
            }
            seqs.entry(key).or_default().push(seq);
        }
        for key in 0..KEYS {
            let s = seqs.get(&key).cloned().unwrap_or_default();
            assert_eq!(
                s,
                (0..PER_KEY).collect::<Vec<_>>(),
                "order key {key} was consumed out of order or incompletely"
            );
        }
    });
}
