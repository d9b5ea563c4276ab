// Proves consumer offsets survive a broker restart: offsets committed before a clean restart are
// read back unchanged afterwards, and a new consumer in the same group resumes past them instead
// of re-reading the topic (at-least-once slack allowed).

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::*;
use rocketmq_model::common::message::message_queue::MessageQueue;

const PHASE1: usize = 40;
const PHASE2: usize = 20;

/// Committed offset of `group` for each queue, read from the broker by a fresh assign-mode lite
/// pull consumer (its memory is empty, so `committed` asks the broker). -1 = none.
async fn committed_offsets(ns: &str, group: &str, queues: &[MessageQueue]) -> HashMap<i32, i64> {
    let reader = lite_pull_consumer_assign(ns, group).await;
    // Gives the reader's client instance the topic route (broker address) first.
    let topic = queues[0].topic().to_string();
    // Retried: just after a restart the broker's registration may not have reached the fresh
    // name server yet.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        match within(
            10,
            "reader fetch queues",
            reader.fetch_message_queues(&topic),
        )
        .await
        {
            Ok(q) if !q.is_empty() => break,
            other => {
                if std::time::Instant::now() >= deadline {
                    panic!("reader fetch_message_queues({topic}) kept failing: {other:?}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut out = HashMap::new();
    for q in queues {
        // Ok(-1) = the broker has no offset; Err = the query itself failed (retried once).
        let mut offset = within(10, "committed()", reader.committed(q)).await;
        if offset.is_err() {
            tokio::time::sleep(Duration::from_millis(500)).await;
            offset = within(10, "committed()", reader.committed(q)).await;
        }
        let offset =
            offset.unwrap_or_else(|e| panic!("QUERY_CONSUMER_OFFSET for {q:?} failed: {e}"));
        out.insert(q.queue_id(), offset);
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), reader.shutdown()).await;
    out
}

#[test]
fn offsets_survive_restart_and_consumer_resumes() {
    let mut broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("offsets");
        let group = unique_group("offsets");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;

        // Phase 1: send, consume everything, let the client persist its offsets.
        let mut end1: HashMap<i32, i64> = HashMap::new(); // queue -> one past the last offset
        let mut phase1_ids = HashSet::new();
        for i in 0..PHASE1 {
            let r = within(
                15,
                "send",
                producer.send_with_timeout(
                    message(&topic, "P1", "", format!("p1-{i}").as_bytes()),
                    5_000,
                ),
            )
            .await
            .expect("send")
            .expect("no SendResult");
            let q = r.message_queue.as_ref().expect("queue").queue_id();
            let e = end1.entry(q).or_insert(0);
            *e = (*e).max(r.queue_offset as i64 + 1);
            phase1_ids.insert(r.msg_id.expect("msgId").to_string());
        }
        let queues = publish_queues(&mut producer, &topic).await;
        shutdown_producer(producer).await;

        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let got1 = collect_distinct(&mut inbox, PHASE1, Duration::from_secs(25)).await;
        let distinct1: HashSet<&str> = got1.iter().map(|r| r.msg_id.as_str()).collect();
        assert_eq!(distinct1.len(), PHASE1, "phase 1 consumption incomplete");
        // The client persists offsets every 5 s and again at shutdown.
        tokio::time::sleep(Duration::from_millis(5_500)).await;
        shutdown_push(consumer).await;

        let before = committed_offsets(&ns, &group, &queues).await;
        let committed_total: i64 = before.values().filter(|&&o| o > 0).sum();
        let end_total: i64 = end1.values().sum();
        for (q, &end) in &end1 {
            let c = before.get(q).copied().unwrap_or(-1);
            assert!(
                c <= end,
                "queue {q}: committed {c} beyond the queue end {end}"
            );
        }
        assert!(
            committed_total * 10 >= end_total * 9,
            "before restart only {committed_total} of {end_total} consumed messages are committed: {before:?} vs ends {end1:?}"
        );

        // Clean restart on the same store; addresses change.
        tokio::task::block_in_place(|| broker.restart());
        let ns = broker.namesrv_addr();

        let after = committed_offsets(&ns, &group, &queues).await;
        assert_eq!(
            after, before,
            "committed offsets changed across a clean restart"
        );

        // Phase 2: new messages, and a new consumer in the same group. It starts at the first
        // offset if the broker has no offset for it, so lost offsets would show as redelivery.
        let mut producer = common::producer(&ns).await;
        wait_route(&mut producer, &topic).await;
        let mut phase2_ids = HashSet::new();
        for i in 0..PHASE2 {
            let r = within(
                15,
                "send after restart",
                producer.send_with_timeout(
                    message(&topic, "P2", "", format!("p2-{i}").as_bytes()),
                    5_000,
                ),
            )
            .await
            .expect("send after restart")
            .expect("no SendResult");
            phase2_ids.insert(r.msg_id.expect("msgId").to_string());
        }
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let mut seen2 = HashSet::new();
        let mut got2 = collect_until(&mut inbox, Duration::from_secs(25), |got| {
            if let Some(last) = got.last() {
                if phase2_ids.contains(&last.msg_id) {
                    seen2.insert(last.msg_id.clone());
                }
            }
            seen2.len() >= PHASE2
        })
        .await;
        got2.extend(drain_for(&mut inbox, Duration::from_secs(2)).await);
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let received2: HashSet<&str> = got2.iter().map(|r| r.msg_id.as_str()).collect();
        let missing: Vec<&String> = phase2_ids
            .iter()
            .filter(|id| !received2.contains(id.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "phase-2 messages not consumed after restart: {missing:?}"
        );
        let redelivered: HashSet<&str> = got2
            .iter()
            .filter(|r| phase1_ids.contains(&r.msg_id))
            .map(|r| r.msg_id.as_str())
            .collect();
        assert!(
            redelivered.len() * 10 <= PHASE1,
            "{} of {PHASE1} already-consumed messages were delivered again after restart",
            redelivered.len()
        );
        for r in &got2 {
            let c = before.get(&r.queue_id).copied().unwrap_or(-1);
            assert!(
                r.queue_offset >= c,
                "queue {}: consumer restarted at offset {} below the committed offset {c}",
                r.queue_id,
                r.queue_offset
            );
        }
    });
}
