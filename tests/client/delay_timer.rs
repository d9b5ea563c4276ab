// Proves scheduled delivery with the real client: a delay-level-2 message (default levels: 5 s)
// reaches a push consumer 5-6 s after it was sent and a TIMER_DELIVER_MS = now + 3 s message
// 3-4 s after, and both (plus a TIMER_DELAY_SEC one) survive a clean broker restart taken while
// they are pending: each is delivered exactly once, never early.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;
use rocketmq_model::common::message::message_single::Message;

/// Store timestamps are whole milliseconds, so a due time computed from one can sit up to 1 ms
/// before the exact instant; a few ms more cover `Instant` vs wall-clock rounding.
const EARLY_TOLERANCE: Duration = Duration::from_millis(10);

/// Delay level 2 through the client's builder (property DELAY=2).
fn delay_level_message(topic: &str, body: &str) -> Message {
    Message::builder()
        .topic(topic)
        .tags("TagD")
        .key(body)
        .body_slice(body.as_bytes())
        .delay_level(2)
        .build_unchecked()
}

/// Absolute delivery time through the client's builder (property TIMER_DELIVER_MS).
fn deliver_at_message(topic: &str, body: &str, at_ms: u64) -> Message {
    Message::builder()
        .topic(topic)
        .tags("TagT")
        .key(body)
        .body_slice(body.as_bytes())
        .deliver_time_ms(at_ms)
        .build_unchecked()
}

async fn send(producer: &rocketmq_client_rust::DefaultMQProducer, msg: Message) {
    within(15, "send", producer.send_with_timeout(msg, 5_000))
        .await
        .expect("send")
        .expect("no SendResult");
}

#[test]
fn delay_level_and_timer_arrive_on_time() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("delay");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        let (consumer, mut inbox) = push_consumer(&ns, &unique_group("delay"), &topic).await;
        wait_warmup(&mut inbox).await;

        // Delay level 2 = 5 s with the default messageDelayLevel.
        let t_delay = Instant::now();
        send(&producer, delay_level_message(&topic, "level-2")).await;
        let delay_sent = t_delay.elapsed();
        // TIMER_DELIVER_MS = now + 3 s.
        let t_timer = Instant::now();
        let at = now_ms() + 3_000;
        send(&producer, deliver_at_message(&topic, "timer-3s", at)).await;
        let timer_sent = t_timer.elapsed();

        let mut got = collect_until(&mut inbox, Duration::from_secs(12), |g| g.len() >= 2).await;
        got.extend(drain_for(&mut inbox, Duration::from_millis(1_500)).await);
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let bodies: Vec<String> = got.iter().map(Received::body_str).collect();
        assert_eq!(
            bodies.len(),
            2,
            "expected the two scheduled messages once each, got {bodies:?}"
        );
        let level2 = got
            .iter()
            .find(|r| r.body_str() == "level-2")
            .unwrap_or_else(|| panic!("delay-level-2 message not delivered: {bodies:?}"));
        let timer = got
            .iter()
            .find(|r| r.body_str() == "timer-3s")
            .unwrap_or_else(|| panic!("TIMER_DELIVER_MS message not delivered: {bodies:?}"));

        // Lower bound from the instant before the send (the broker cannot have stored it
        // earlier); upper bound from the instant the send returned.
        let waited = level2.at.duration_since(t_delay);
        eprintln!("delay level 2: delivered {waited:?} after send (send took {delay_sent:?})");
        assert!(
            waited + EARLY_TOLERANCE >= Duration::from_secs(5),
            "delay-level-2 message delivered early: {waited:?} after send"
        );
        assert!(
            waited <= Duration::from_secs(6) + delay_sent,
            "delay-level-2 message delivered late: {waited:?} after send"
        );
        let waited = timer.at.duration_since(t_timer);
        eprintln!("timer now+3s: delivered {waited:?} after send (send took {timer_sent:?})");
        assert!(
            now_ms() >= at && waited + EARLY_TOLERANCE >= Duration::from_secs(3),
            "TIMER_DELIVER_MS message delivered early: {waited:?} after send"
        );
        assert!(
            waited <= Duration::from_secs(4) + timer_sent,
            "TIMER_DELIVER_MS message delivered late: {waited:?} after send"
        );
        assert_eq!(level2.topic, topic);
        assert_eq!(timer.topic, topic);
        assert_eq!(level2.tags.as_deref(), Some("TagD"));
        assert_eq!(timer.keys.as_deref(), Some("timer-3s"));
    });
}

#[test]
fn scheduled_messages_survive_restart_once() {
    let mut broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("delayrs");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;

        let t0 = Instant::now();
        let at = now_ms() + 3_000;
        send(&producer, delay_level_message(&topic, "level-2")).await;
        send(&producer, deliver_at_message(&topic, "timer-3s", at)).await;
        // TIMER_DELAY_SEC through the client's builder as well.
        let delay_sec = Message::builder()
            .topic(topic.as_str())
            .tags("TagS")
            .body_slice(b"delay-sec-4")
            .delay_secs(4)
            .build_unchecked();
        send(&producer, delay_sec).await;
        shutdown_producer(producer).await;

        // Clean restart while all three are pending (the earliest is due 3 s after t0).
        tokio::task::block_in_place(|| broker.restart());
        let restarted = t0.elapsed();
        assert!(
            restarted < Duration::from_millis(2_900),
            "the restart took {restarted:?}: the messages were no longer pending during it, so \
             this run proves nothing about persistence"
        );
        let ns = broker.namesrv_addr();

        // A fresh consumer (the old clients knew the old ports) reads the topic from offset 0.
        let (consumer, mut inbox) = push_consumer(&ns, &unique_group("delayrs"), &topic).await;
        let due: HashMap<&str, Duration> = HashMap::from([
            ("level-2", Duration::from_secs(5)),
            ("timer-3s", Duration::from_secs(3)),
            ("delay-sec-4", Duration::from_secs(4)),
        ]);
        let mut got = collect_until(&mut inbox, Duration::from_secs(20), |g| {
            due.keys().all(|b| g.iter().any(|r| r.body_str() == *b))
        })
        .await;
        // A duplicate (re-delivered from the schedule after the restart) would arrive now.
        got.extend(drain_for(&mut inbox, Duration::from_secs(3)).await);
        shutdown_push(consumer).await;

        let bodies: Vec<String> = got.iter().map(Received::body_str).collect();
        for (body, delay) in &due {
            let copies: Vec<&Received> = got.iter().filter(|r| r.body_str() == *body).collect();
            assert_eq!(
                copies.len(),
                1,
                "{body}: expected exactly one delivery after the restart, got {} ({bodies:?})",
                copies.len()
            );
            let waited = copies[0].at.duration_since(t0);
            assert!(
                waited + EARLY_TOLERANCE >= *delay,
                "{body}: delivered {waited:?} after send, before its {delay:?} delay"
            );
        }
        assert_eq!(got.len(), due.len(), "unexpected messages: {bodies:?}");
    });
}
