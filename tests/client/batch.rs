// Proves a batch send (SEND_BATCH_MESSAGE) is stored as individual messages at consecutive
// offsets of one queue, each consumed back with its own body, keys and msgId.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::*;
use rocketmq_client_rust::SendStatus;

const BATCHES: usize = 4;
const PER_BATCH: usize = 32;

#[test]
fn batch_messages_are_all_consumed() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("batch");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;

        // (queue, first offset, ids) per batch
        let mut batches = Vec::new();
        for b in 0..BATCHES {
            let msgs: Vec<_> = (0..PER_BATCH)
                .map(|i| {
                    message(
                        &topic,
                        "TagBatch",
                        &format!("kb-{b}-{i}"),
                        format!("batch-{b}-{i}").as_bytes(),
                    )
                })
                .collect();
            let result = within(
                15,
                "batch send",
                producer.send_batch_with_timeout(msgs, 5_000),
            )
            .await
            .expect("batch send failed");
            assert_eq!(result.send_status, SendStatus::SendOk, "{result:?}");
            let ids: Vec<String> = result
                .msg_id
                .as_ref()
                .expect("batch msgId")
                .as_str()
                .split(',')
                .map(str::to_string)
                .collect();
            assert_eq!(
                ids.len(),
                PER_BATCH,
                "batch SendResult must carry one msgId per message: {result:?}"
            );
            let queue = result.message_queue.as_ref().expect("queue").queue_id();
            batches.push((queue, result.queue_offset as i64, ids));
        }

        let group = unique_group("batch");
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let total = BATCHES * PER_BATCH;
        let got = collect_distinct(&mut inbox, total, Duration::from_secs(30)).await;
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let by_body: HashMap<String, &Received> = got.iter().map(|r| (r.body_str(), r)).collect();
        let distinct: HashSet<&str> = got.iter().map(|r| r.msg_id.as_str()).collect();
        assert_eq!(
            distinct.len(),
            total,
            "expected {total} distinct messages, got {}",
            distinct.len()
        );
        for (b, (queue, first_offset, ids)) in batches.iter().enumerate() {
            for (i, id) in ids.iter().enumerate() {
                let body = format!("batch-{b}-{i}");
                let r = by_body
                    .get(&body)
                    .unwrap_or_else(|| panic!("{body} not consumed"));
                assert_eq!(r.keys.as_deref(), Some(format!("kb-{b}-{i}").as_str()));
                assert_eq!(r.tags.as_deref(), Some("TagBatch"));
                assert_eq!(
                    &r.msg_id, id,
                    "msgId of {body} differs from the batch SendResult"
                );
                assert_eq!(r.queue_id, *queue, "a batch goes to one queue");
                assert_eq!(
                    r.queue_offset,
                    first_offset + i as i64,
                    "batch members occupy consecutive offsets from the SendResult's queueOffset"
                );
            }
        }
    });
}
