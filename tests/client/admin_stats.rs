// Proves GET_TOPIC_STATS_INFO reports each queue's real min/max offsets and GET_CONSUME_STATS a
// push consumer's committed offsets against the queues' max, both read back by
// rocketmq-client-rust's admin from fastjson's MessageQueue-keyed maps.

use crate::common;

use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use common::*;
use rocketmq_client_rust::{ConsumerAdmin, SendStatus, TopicAdmin};

const QUEUES: i32 = 3;
const PER_QUEUE: i64 = 3;

/// Three messages sent to each of three queues show as min 0 / max 3 per queue in the topic's
/// stats, and once a push consumer has consumed them its group's stats show broker offset 3 and
/// consumer offset 3 on every queue.
#[test]
fn topic_and_consume_stats_match_sends_and_consumption() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    let broker_addr = broker.broker_addr();
    run(async move {
        let topic = unique_topic("stats");
        let group = unique_group("stats");
        let admin = admin(&ns).await;
        create_topic(&admin, &broker_addr, &topic, QUEUES as u32).await;
        let mut producer = producer(&ns).await;
        wait_route(&mut producer, &topic).await;
        let queues = publish_queues(&mut producer, &topic).await;
        assert_eq!(queues.len(), QUEUES as usize);
        for q in &queues {
            for i in 0..PER_QUEUE {
                let body = format!("q{}-{i}", q.queue_id());
                let msg = message(&topic, "S", "", body.as_bytes());
                let r = send_to_queue(&producer, msg, q, "send to queue").await;
                assert_eq!(r.send_status, SendStatus::SendOk);
            }
        }

        let stats = within(
            15,
            "topic stats",
            TopicAdmin::examine_topic_stats(
                &admin,
                CheetahString::from(topic.as_str()),
                Some(CheetahString::from(broker_addr.as_str())),
            ),
        )
        .await
        .expect("GET_TOPIC_STATS_INFO failed");
        let table = stats.get_offset_table();
        assert_eq!(table.len(), QUEUES as usize, "{table:?}");
        for (mq, o) in table {
            assert_eq!(mq.topic().as_str(), topic, "{table:?}");
            assert_eq!(o.get_min_offset(), 0, "{table:?}");
            assert_eq!(o.get_max_offset(), PER_QUEUE, "{table:?}");
        }
        let ids: std::collections::BTreeSet<i32> = table.keys().map(|m| m.queue_id()).collect();
        assert_eq!(ids, (0..QUEUES).collect(), "{table:?}");

        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let got = collect_distinct(
            &mut inbox,
            (QUEUES as i64 * PER_QUEUE) as usize,
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(
            got.len(),
            (QUEUES as i64 * PER_QUEUE) as usize,
            "all consumed"
        );

        // The consumer commits its offsets every few seconds: poll until every queue shows them.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = tokio::time::timeout(
                Duration::from_secs(10),
                ConsumerAdmin::examine_consume_stats(
                    &admin,
                    CheetahString::from(group.as_str()),
                    Some(CheetahString::from(topic.as_str())),
                    None,
                    Some(CheetahString::from(broker_addr.as_str())),
                    None,
                ),
            )
            .await;
            let text = format!("{r:?}");
            if let Ok(Ok(cs)) = r {
                let t = cs.get_offset_table();
                assert_eq!(t.len(), QUEUES as usize, "{t:?}");
                for (mq, w) in t {
                    assert_eq!(mq.topic().as_str(), topic, "{t:?}");
                    assert_eq!(w.get_broker_offset(), PER_QUEUE, "{t:?}");
                    assert!(w.get_consumer_offset() <= PER_QUEUE, "{t:?}");
                }
                if t.values().all(|w| w.get_consumer_offset() == PER_QUEUE) {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "consumer offsets not all {PER_QUEUE} within 30 s: {text}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }

        // Without a topic the broker reports every subscribed topic the group has offsets for.
        let all = within(
            10,
            "consume stats, all topics",
            ConsumerAdmin::examine_consume_stats(
                &admin,
                CheetahString::from(group.as_str()),
                None,
                None,
                Some(CheetahString::from(broker_addr.as_str())),
                None,
            ),
        )
        .await
        .expect("GET_CONSUME_STATS without topic failed");
        let t = all.get_offset_table();
        let mine: Vec<_> = t
            .iter()
            .filter(|(mq, _)| mq.topic().as_str() == topic)
            .collect();
        assert_eq!(mine.len(), QUEUES as usize, "{t:?}");
        assert!(
            mine.iter()
                .all(|(_, w)| w.get_consumer_offset() == PER_QUEUE),
            "{t:?}"
        );

        shutdown_push(consumer).await;
        shutdown_producer(producer).await;
    });
}
