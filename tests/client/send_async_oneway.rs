// Proves async sends complete through their callbacks with SEND_OK and distinct msgIds, and that
// oneway sends (no reply) are stored too: a consumer gets back every async and oneway message.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use rocketmq_client_rust::SendStatus;
use tokio::sync::mpsc;

const ASYNC_COUNT: usize = 20;
const ONEWAY_COUNT: usize = 20;

#[test]
fn async_callbacks_and_oneway_messages_are_stored() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("async");
        let mut producer = producer(&ns).await;
        // Oneway sends get no answer, so the topic must exist before them.
        create_topic_by_send(&mut producer, &topic).await;

        let (tx, mut results) =
            mpsc::unbounded_channel::<(usize, Result<(SendStatus, String), String>)>();
        for i in 0..ASYNC_COUNT {
            let tx = tx.clone();
            let body = format!("async-{i}");
            within(
                10,
                "async send submission",
                producer.send_with_callback_timeout(
                    message(&topic, "TagAsync", &format!("ka{i}"), body.as_bytes()),
                    move |result, error| {
                        let outcome = match (result, error) {
                            (Some(r), None) => Ok((
                                r.send_status,
                                r.msg_id.as_ref().map(|m| m.to_string()).unwrap_or_default(),
                            )),
                            (_, Some(e)) => Err(e.to_string()),
                            (None, None) => Err("callback with neither result nor error".into()),
                        };
                        let _ = tx.send((i, outcome));
                    },
                    5_000,
                ),
            )
            .await
            .expect("async send submission failed");
        }
        drop(tx);

        let mut async_ids = HashSet::new();
        let mut callbacks = HashSet::new();
        while callbacks.len() < ASYNC_COUNT {
            let (i, outcome) = within(15, "async send callbacks", results.recv())
                .await
                .expect("callback channel closed before every callback ran");
            assert!(callbacks.insert(i), "callback for message {i} ran twice");
            let (status, id) = outcome.unwrap_or_else(|e| panic!("async send {i} failed: {e}"));
            assert_eq!(status, SendStatus::SendOk, "async send {i}");
            assert!(!id.is_empty(), "async send {i} has an empty msgId");
            assert!(async_ids.insert(id), "duplicate msgId from async send {i}");
        }

        for i in 0..ONEWAY_COUNT {
            let body = format!("oneway-{i}");
            within(
                10,
                "oneway send",
                producer.send_oneway(message(
                    &topic,
                    "TagOneway",
                    &format!("ko{i}"),
                    body.as_bytes(),
                )),
            )
            .await
            .expect("oneway send failed");
            // Paced: a oneway flood past capacity may be dropped by design; this test is about
            // oneway being stored at all.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }

        let group = unique_group("async");
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let total = ASYNC_COUNT + ONEWAY_COUNT;
        let got = collect_distinct(&mut inbox, total, Duration::from_secs(30)).await;
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let bodies: HashSet<String> = got.iter().map(|r| r.body_str()).collect();
        let missing: Vec<String> = (0..ASYNC_COUNT)
            .map(|i| format!("async-{i}"))
            .chain((0..ONEWAY_COUNT).map(|i| format!("oneway-{i}")))
            .filter(|b| !bodies.contains(b))
            .collect();
        assert!(missing.is_empty(), "not consumed: {missing:?}");
        for r in &got {
            if r.body_str().starts_with("async-") {
                assert!(
                    async_ids.contains(&r.msg_id),
                    "consumed msgId {} was not returned by a callback",
                    r.msg_id
                );
                assert_eq!(r.tags.as_deref(), Some("TagAsync"));
            } else {
                assert_eq!(r.tags.as_deref(), Some("TagOneway"));
                let n = r.body_str().trim_start_matches("oneway-").to_string();
                assert_eq!(r.keys.as_deref(), Some(format!("ko{n}").as_str()));
            }
        }
    });
}
