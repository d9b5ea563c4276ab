// Proves retry and dead-lettering with the real client: a push consumer whose listener returns
// RECONSUME_LATER gets the message again with reconsumeTimes + 1 after the retry delay of level
// `3 + reconsumeTimes`, and after maxReconsumeTimes failures the message sits in `%DLQ%<group>`
// with its original body and keys, where a lite pull consumer of that topic reads it.

use crate::common;

use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use common::*;
use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQPushConsumer, MQPushConsumer,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::MessageTrait;
use tokio::sync::mpsc;

/// The group's limit: deliveries with reconsumeTimes 0, 1, 2, then the dead-letter queue.
const MAX_RECONSUME: i32 = 2;
/// Level 3 (first retry, reconsumeTimes 0) is 1 s and level 4 (second retry) is 2 s, so the two
/// gaps tell whether the broker really picks level `3 + reconsumeTimes`.
const DELAY_LEVELS: &str = "1s 1s 1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";
const POISON_KEY: &str = "poison-key";
/// Slack allowed past the scheduled retry time (schedule tick + pull wake-up + client hop).
const LATE_SLACK: Duration = Duration::from_millis(2_500);

/// A push consumer of `topic` in `group` with maxReconsumeTimes = [`MAX_RECONSUME`]; its listener
/// forwards every message and fails (RECONSUME_LATER) those keyed [`POISON_KEY`].
async fn failing_consumer(ns: &str, group: &str, topic: &str) -> (DefaultMQPushConsumer, Inbox) {
    let mut consumer = DefaultMQPushConsumer::builder(client_runtime("retry-push"))
        .name_server_addr(ns.to_string())
        .consumer_group(group.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_thread_min(1)
        .consume_thread_max(4)
        // One message per listener call, so failing the poison one never fails a neighbour.
        .consume_message_batch_max_size(1)
        .max_reconsume_times(MAX_RECONSUME)
        .build();
    within(10, "subscribe", consumer.subscribe(topic, "*"))
        .await
        .expect("subscribe");
    let (tx, rx) = mpsc::unbounded_channel();
    consumer.register_message_listener_concurrently(
        move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
            let mut status = ConsumeConcurrentlyStatus::ConsumeSuccess;
            for m in msgs {
                let r = Received::from_ext(m, 0);
                if r.keys.as_deref() == Some(POISON_KEY) {
                    status = ConsumeConcurrentlyStatus::ReconsumeLater;
                }
                let _ = tx.send(r);
            }
            Ok(status)
        },
    );
    within(20, "push consumer start", consumer.start())
        .await
        .expect("push consumer start");
    (consumer, rx)
}

#[test]
fn reconsume_later_retries_then_dead_letters() {
    let broker = Broker::start_with(&[("messageDelayLevel", DELAY_LEVELS)]);
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("retry");
        let group = unique_group("retry");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;

        // Warm up: the consumer has rebalanced once it delivers the warm-up message.
        let (consumer, mut inbox) = failing_consumer(&ns, &group, &topic).await;
        wait_warmup(&mut inbox).await;

        let body = b"poison body \x00\x01 bytes".to_vec();
        let sent = within(
            15,
            "send poison",
            producer.send_with_timeout(message(&topic, "TagP", POISON_KEY, &body), 5_000),
        )
        .await
        .expect("send")
        .expect("no SendResult");
        let uniq = sent.msg_id.clone().expect("msgId").to_string();

        // Deliveries with reconsumeTimes 0..=MAX_RECONSUME, then silence (it went to the DLQ).
        let want = (MAX_RECONSUME + 1) as usize;
        let mut got = collect_until(&mut inbox, Duration::from_secs(20), |g| g.len() >= want).await;
        got.extend(drain_for(&mut inbox, Duration::from_secs(3)).await);
        let summary: Vec<(i32, String, String)> = got
            .iter()
            .map(|r| (r.reconsume_times, r.topic.clone(), r.body_str()))
            .collect();
        assert_eq!(
            got.len(),
            want,
            "expected exactly {want} deliveries (reconsumeTimes 0..={MAX_RECONSUME}), got {summary:?}"
        );
        for (i, r) in got.iter().enumerate() {
            assert_eq!(
                r.reconsume_times, i as i32,
                "delivery {i} has reconsumeTimes {}: {summary:?}",
                r.reconsume_times
            );
            assert_eq!(r.body, body, "delivery {i} changed the body");
            assert_eq!(
                r.keys.as_deref(),
                Some(POISON_KEY),
                "delivery {i} lost KEYS"
            );
            assert_eq!(r.msg_id, uniq, "delivery {i} has another UNIQ_KEY");
            // The client maps %RETRY%<group> back to the original topic via RETRY_TOPIC.
            assert_eq!(r.topic, topic, "delivery {i} topic");
        }
        // Retry delay = level 3 + reconsumeTimes: 1 s, then 2 s.
        for (i, expected) in [(1usize, 1_000u64), (2, 2_000)] {
            let gap = got[i].at.duration_since(got[i - 1].at);
            let expected = Duration::from_millis(expected);
            eprintln!("retry {i}: gap {gap:?} (delay {expected:?})");
            assert!(
                gap + Duration::from_millis(50) >= expected,
                "retry {i} came after {gap:?}, before its delay {expected:?}"
            );
            assert!(
                gap <= expected + LATE_SLACK,
                "retry {i} came after {gap:?}, far past its delay {expected:?}"
            );
        }
        shutdown_push(consumer).await;

        // The dead-letter queue: routed by the name server, and readable by a consumer.
        let dlq = format!("%DLQ%{group}");
        wait_route(&mut producer, &dlq).await;
        let reader = lite_pull_consumer(&ns, &unique_group("dlq-reader"), &dlq, "*").await;
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut dead = Vec::new();
        while dead.is_empty() && Instant::now() < deadline {
            for m in within(10, "poll DLQ", reader.poll_with_timeout(1_000)).await {
                let retry_topic =
                    MessageTrait::property(&m, &CheetahString::from_static_str("RETRY_TOPIC"))
                        .map(|t| t.to_string());
                dead.push((Received::from_ext(&m, 1), retry_topic));
            }
        }
        // Anything duplicated would show up in this extra poll.
        for m in within(10, "poll DLQ again", reader.poll_with_timeout(1_000)).await {
            dead.push((Received::from_ext(&m, 1), None));
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), reader.shutdown()).await;
        shutdown_producer(producer).await;

        assert_eq!(
            dead.len(),
            1,
            "expected one message in {dlq}, got {:?}",
            dead.iter().map(|(r, _)| r.body_str()).collect::<Vec<_>>()
        );
        let (r, retry_topic) = &dead[0];
        assert_eq!(r.topic, dlq);
        assert_eq!(r.body, body, "DLQ message body differs from the original");
        assert_eq!(r.keys.as_deref(), Some(POISON_KEY), "DLQ message lost KEYS");
        assert_eq!(r.tags.as_deref(), Some("TagP"), "DLQ message lost TAGS");
        assert_eq!(r.msg_id, uniq, "DLQ message has another UNIQ_KEY");
        assert_eq!(
            retry_topic.as_deref(),
            Some(topic.as_str()),
            "DLQ message must name its original topic in RETRY_TOPIC"
        );
    });
}
