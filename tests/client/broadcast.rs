// Proves broadcasting: two push consumers of one group in BROADCASTING mode each receive every
// message (not a share of them).

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;

const COUNT: usize = 20;

#[test]
fn every_broadcast_consumer_gets_every_message() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("bcast");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;

        let group = unique_group("bcast");
        let mut spec_a = PushSpec::new(&group, &topic);
        spec_a.broadcasting = true;
        spec_a.consumer_no = 1;
        let mut spec_b = spec_a.clone();
        spec_b.consumer_no = 2;
        let (consumer_a, mut inbox_a) = push_consumer_with(&ns, spec_a).await;
        let (consumer_b, mut inbox_b) = push_consumer_with(&ns, spec_b).await;

        for i in 0..COUNT {
            within(
                15,
                "send",
                producer.send_with_timeout(
                    message(&topic, "TagB", "", format!("bcast-{i}").as_bytes()),
                    5_000,
                ),
            )
            .await
            .expect("send failed")
            .expect("no SendResult");
        }
        let (got_a, got_b) = tokio::join!(
            collect_distinct(&mut inbox_a, COUNT, Duration::from_secs(30)),
            collect_distinct(&mut inbox_b, COUNT, Duration::from_secs(30)),
        );
        shutdown_push(consumer_a).await;
        shutdown_push(consumer_b).await;
        shutdown_producer(producer).await;

        let expected: HashSet<String> = (0..COUNT).map(|i| format!("bcast-{i}")).collect();
        for (name, got) in [("a", &got_a), ("b", &got_b)] {
            let bodies: HashSet<String> = got.iter().map(Received::body_str).collect();
            let missing: Vec<&String> = expected.difference(&bodies).collect();
            assert!(
                missing.is_empty(),
                "broadcast consumer {name} missed {missing:?}"
            );
        }
    });
}
