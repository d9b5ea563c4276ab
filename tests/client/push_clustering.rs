// Proves clustering: two push consumers in one group split the topic's queues between them and
// together receive every message exactly once (accounted by msgId, after a rebalance warm-up).

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::*;
use rocketmq_model::common::message::message_queue::MessageQueue;

const COUNT: usize = 100;

/// Queue id -> consumer number, from one round of probe messages (one per queue).
async fn probe_round(
    producer: &rocketmq_client_rust::DefaultMQProducer,
    topic: &str,
    queues: &[MessageQueue],
    round: usize,
    inboxes: &mut [Inbox; 2],
) -> HashMap<i32, usize> {
    for q in queues {
        let body = format!("probe-{round}-{}", q.queue_id());
        producer
            .send_to_queue_with_timeout(
                message(topic, "Probe", "", body.as_bytes()),
                q.clone(),
                5_000,
            )
            .await
            .expect("probe send");
    }
    let mut owner = HashMap::new();
    let deadline = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < deadline && owner.len() < queues.len() {
        for inbox in inboxes.iter_mut() {
            while let Ok(r) = inbox.try_recv() {
                if r.body_str().starts_with(&format!("probe-{round}-")) {
                    owner.insert(r.queue_id, r.consumer_no);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    owner
}

#[test]
fn two_consumers_share_queues_and_receive_each_message_once() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("cluster");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        let queues = publish_queues(&mut producer, &topic).await;
        assert!(
            queues.len() >= 2,
            "need at least 2 queues to share, got {}",
            queues.len()
        );

        let group = unique_group("cluster");
        let mut spec_a = PushSpec::new(&group, &topic);
        spec_a.consumer_no = 1;
        let mut spec_b = PushSpec::new(&group, &topic);
        spec_b.consumer_no = 2;
        let (consumer_a, inbox_a) = push_consumer_with(&ns, spec_a).await;
        let (consumer_b, inbox_b) = push_consumer_with(&ns, spec_b).await;
        let mut inboxes = [inbox_a, inbox_b];

        // Warm-up: probe every queue until two consecutive rounds agree on a complete ownership
        // map in which both consumers own queues (the rebalance has settled).
        let mut previous: Option<HashMap<i32, usize>> = None;
        let mut settled = None;
        for round in 0..20 {
            let owner = probe_round(&producer, &topic, &queues, round, &mut inboxes).await;
            let complete = owner.len() == queues.len();
            let both = owner.values().any(|&c| c == 1) && owner.values().any(|&c| c == 2);
            if complete && both && previous.as_ref() == Some(&owner) {
                settled = Some(owner);
                break;
            }
            previous = Some(owner);
        }
        let ownership = settled.unwrap_or_else(|| {
            panic!(
                "rebalance did not settle with both consumers owning queues; last map {previous:?}"
            )
        });
        // Forget stragglers from the warm-up.
        for inbox in inboxes.iter_mut() {
            while inbox.try_recv().is_ok() {}
        }

        let mut sent_ids = HashSet::new();
        for i in 0..COUNT {
            let r = producer
                .send_with_timeout(
                    message(
                        &topic,
                        "TagCluster",
                        &format!("kc{i}"),
                        format!("cluster-{i}").as_bytes(),
                    ),
                    5_000,
                )
                .await
                .expect("send")
                .expect("no SendResult");
            sent_ids.insert(r.msg_id.expect("msgId").to_string());
        }

        let mut got: Vec<Received> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        let is_test = |r: &Received| r.body_str().starts_with("cluster-");
        while Instant::now() < deadline {
            for inbox in inboxes.iter_mut() {
                while let Ok(r) = inbox.try_recv() {
                    if is_test(&r) {
                        got.push(r);
                    }
                }
            }
            let distinct: HashSet<&str> = got.iter().map(|r| r.msg_id.as_str()).collect();
            if distinct.len() >= COUNT {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A short grace period to catch duplicates arriving late.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        for inbox in inboxes.iter_mut() {
            while let Ok(r) = inbox.try_recv() {
                if is_test(&r) {
                    got.push(r);
                }
            }
        }
        shutdown_push(consumer_a).await;
        shutdown_push(consumer_b).await;
        shutdown_producer(producer).await;

        let mut times: HashMap<&str, usize> = HashMap::new();
        for r in &got {
            *times.entry(r.msg_id.as_str()).or_default() += 1;
        }
        let missing: Vec<&String> = sent_ids
            .iter()
            .filter(|id| !times.contains_key(id.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "{} of {COUNT} messages never consumed: {missing:?}",
            missing.len()
        );
        let dups: Vec<(&&str, &usize)> = times.iter().filter(|(_, &n)| n > 1).collect();
        assert!(
            dups.is_empty(),
            "messages consumed more than once: {dups:?}"
        );
        let by_a = got.iter().filter(|r| r.consumer_no == 1).count();
        let by_b = got.iter().filter(|r| r.consumer_no == 2).count();
        assert!(
            by_a > 0 && by_b > 0,
            "both consumers must take part: a={by_a} b={by_b}"
        );
        for r in &got {
            assert_eq!(
                ownership.get(&r.queue_id),
                Some(&r.consumer_no),
                "queue {} delivered to consumer {} but owned by {:?}",
                r.queue_id,
                r.consumer_no,
                ownership.get(&r.queue_id)
            );
        }
    });
}
