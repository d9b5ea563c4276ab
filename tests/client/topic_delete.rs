// Proves topic deletion (DELETE_TOPIC_IN_BROKER) removes a topic's messages and consumer
// offsets, as Java does: after produce, consume, delete and re-create under the same name, new
// sends start again at queue offset 0, and both the old group and a new one receive exactly the
// new messages and nothing old, also after a clean restart (recovery does not rebuild the
// deleted queues from the records left in the commit log).

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use cheetah_string::CheetahString;
use common::*;
use rocketmq_client_rust::TopicAdmin;

const OLD: usize = 12;
const NEW: usize = 6;

/// Sends `n` messages `<prefix>-i`; returns each queue's highest queue offset.
async fn send_all(
    producer: &mut rocketmq_client_rust::DefaultMQProducer,
    topic: &str,
    prefix: &str,
    n: usize,
) -> HashMap<i32, i64> {
    let mut top = HashMap::new();
    for i in 0..n {
        let r = within(
            15,
            "send",
            producer.send_with_timeout(
                message(topic, "T", "", format!("{prefix}-{i}").as_bytes()),
                5_000,
            ),
        )
        .await
        .expect("send")
        .expect("no SendResult");
        let q = r.message_queue.as_ref().expect("queue").queue_id();
        let e = top.entry(q).or_insert(-1);
        *e = (*e).max(r.queue_offset as i64);
    }
    top
}

/// Everything `group` receives from `topic` within `dur`, by body.
async fn bodies(ns: &str, group: &str, topic: &str, want: usize) -> Vec<String> {
    let (consumer, mut inbox) = push_consumer(ns, group, topic).await;
    let mut got = collect_distinct(&mut inbox, want, Duration::from_secs(25)).await;
    // Anything old would arrive with or right after the new messages.
    got.extend(drain_for(&mut inbox, Duration::from_secs(2)).await);
    shutdown_push(consumer).await;
    got.iter().map(|r| r.body_str()).collect()
}

/// A topic deleted and created again holds only what was sent after, for old and new groups,
/// before and after a restart.
#[test]
fn deleted_topic_comes_back_empty() {
    let mut broker = Broker::start();
    let ns = broker.namesrv_addr();
    let broker_addr = broker.broker_addr();
    run(async move {
        let topic = unique_topic("deleted");
        let group = unique_group("deleted");
        let admin = admin(&ns).await;
        create_topic(&admin, &broker_addr, &topic, 2).await;
        let mut producer = producer(&ns).await;
        wait_route(&mut producer, &topic).await;
        send_all(&mut producer, &topic, "old", OLD).await;

        // Consume everything and let the client commit its offsets (every 5 s, and at shutdown).
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let got = collect_distinct(&mut inbox, OLD, Duration::from_secs(25)).await;
        assert_eq!(got.len(), OLD, "old messages not all consumed");
        tokio::time::sleep(Duration::from_millis(5_500)).await;
        shutdown_push(consumer).await;

        let addrs: HashSet<CheetahString> = [CheetahString::from(broker_addr.as_str())].into();
        within(
            15,
            "delete topic",
            TopicAdmin::delete_topic_in_broker(&admin, addrs, CheetahString::from(topic.as_str())),
        )
        .await
        .expect("DELETE_TOPIC_IN_BROKER");
        create_topic(&admin, &broker_addr, &topic, 2).await;
        wait_route(&mut producer, &topic).await;

        let top = send_all(&mut producer, &topic, "new", NEW).await;
        let stored: i64 = top.values().map(|o| o + 1).sum();
        assert_eq!(
            stored, NEW as i64,
            "new sends must start again at queue offset 0: highest offsets {top:?}"
        );
        shutdown_producer(producer).await;

        let want: Vec<String> = (0..NEW).map(|i| format!("new-{i}")).collect();
        for g in [group.clone(), unique_group("fresh")] {
            let mut got = bodies(&ns, &g, &topic, NEW).await;
            got.sort();
            got.dedup();
            let mut expected = want.clone();
            expected.sort();
            assert_eq!(got, expected, "group {g} must see exactly the new messages");
        }

        tokio::task::block_in_place(|| broker.restart());
        let ns = broker.namesrv_addr();
        let mut producer = common::producer(&ns).await;
        wait_route(&mut producer, &topic).await;
        shutdown_producer(producer).await;
        let g = unique_group("after_restart");
        let mut got = bodies(&ns, &g, &topic, NEW).await;
        got.sort();
        got.dedup();
        let mut expected = want.clone();
        expected.sort();
        assert_eq!(
            got, expected,
            "after a restart, group {g} must see exactly the new messages"
        );
    });
}
