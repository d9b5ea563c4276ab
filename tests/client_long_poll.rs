// Proves long polling delivers promptly: with a push consumer parked on an empty queue, a message
// sent afterwards reaches the listener within a few hundred milliseconds of the send call.
#![recursion_limit = "256"]

mod common;

use std::time::{Duration, Instant};

use common::*;

const SAMPLES: usize = 5;

#[test]
fn parked_pull_delivers_new_message_quickly() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("lpoll");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        let group = unique_group("lpoll");
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;

        // Warm-up: the consumer has rebalanced and pulled once a first message has arrived.
        within(
            15,
            "warm-up send",
            producer.send_with_timeout(message(&topic, "Ready", "", b"ready"), 5_000),
        )
        .await
        .expect("send")
        .expect("no SendResult");
        let ready = collect_until(&mut inbox, Duration::from_secs(20), |got| {
            got.iter().any(|r| r.body_str() == "ready")
        })
        .await;
        assert!(
            ready.iter().any(|r| r.body_str() == "ready"),
            "consumer never received the warm-up message"
        );

        let mut samples = Vec::new();
        for i in 0..SAMPLES {
            // Idle long enough that every queue's pull is parked at the broker.
            tokio::time::sleep(Duration::from_millis(1_200)).await;
            while inbox.try_recv().is_ok() {}
            let body = format!("lp-{i}");
            let sent_at = Instant::now();
            within(
                15,
                "send",
                producer.send_with_timeout(message(&topic, "LP", "", body.as_bytes()), 5_000),
            )
            .await
            .expect("send")
            .expect("no SendResult");
            let got = collect_until(&mut inbox, Duration::from_secs(5), |got| {
                got.iter().any(|r| r.body_str() == body)
            })
            .await;
            let r = got
                .iter()
                .find(|r| r.body_str() == body)
                .unwrap_or_else(|| panic!("{body} not delivered within 5 s"));
            samples.push(r.at.duration_since(sent_at));
        }
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let mut sorted = samples.clone();
        sorted.sort();
        let median = sorted[SAMPLES / 2];
        eprintln!("send-to-receive latencies: {samples:?}");
        assert!(
            median < Duration::from_millis(200),
            "median send-to-receive {median:?} (samples {samples:?}): a parked pull must be answered when the message arrives"
        );
        assert!(
            sorted[SAMPLES - 1] < Duration::from_millis(1_000),
            "worst send-to-receive {:?} (samples {samples:?}) looks like short polling",
            sorted[SAMPLES - 1]
        );
    });
}
