// Proves tag filtering: a consumer subscribed with `TagA || TagB` (and `TagA||TagB`) receives
// every TagA and TagB message and no TagC message.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;

const PER_TAG: usize = 10;

/// As the requirement writes it. rocketmq-client-rust 1.0.0 trims each tag for its tag set but
/// hashes the UNtrimmed pieces ("TagA ", " TagB") into the heartbeat's codeSet, so a broker
/// that trusts the client's codeSet matches nothing; the broker has to derive the codes from
/// the tags themselves.
#[test]
fn subscription_with_spaces_selects_tags() {
    check_tag_subscription("TagA || TagB");
}

/// The same without spaces, where the client's codeSet is right.
#[test]
fn subscription_without_spaces_selects_tags() {
    check_tag_subscription("TagA||TagB");
}

fn check_tag_subscription(expression: &str) {
    let expression = expression.to_string();
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("tags");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        for i in 0..PER_TAG {
            for tag in ["TagA", "TagB", "TagC"] {
                within(
                    15,
                    "send",
                    producer.send_with_timeout(
                        message(&topic, tag, "", format!("{tag}-{i}").as_bytes()),
                        5_000,
                    ),
                )
                .await
                .expect("send")
                .expect("no SendResult");
            }
        }

        let group = unique_group("tags");
        let mut spec = PushSpec::new(&group, &topic);
        spec.expression = expression.clone();
        let (consumer, mut inbox) = push_consumer_with(&ns, spec).await;
        let mut got = collect_distinct(&mut inbox, 2 * PER_TAG, Duration::from_secs(30)).await;
        // Anything else that was going to arrive (a TagC leak) arrives in this window.
        got.extend(drain_for(&mut inbox, Duration::from_secs(2)).await);
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let leaked: Vec<String> = got
            .iter()
            .filter(|r| !matches!(r.tags.as_deref(), Some("TagA") | Some("TagB")))
            .map(|r| format!("{} (tags {:?})", r.body_str(), r.tags))
            .collect();
        assert!(
            leaked.is_empty(),
            "received messages outside `{expression}`: {leaked:?}"
        );
        let bodies: HashSet<String> = got.iter().map(Received::body_str).collect();
        let missing: Vec<String> = (0..PER_TAG)
            .flat_map(|i| [format!("TagA-{i}"), format!("TagB-{i}")])
            .filter(|b| !bodies.contains(b))
            .collect();
        assert!(
            missing.is_empty(),
            "`{expression}`: TagA/TagB messages not received: {missing:?}"
        );
        for r in &got {
            assert!(
                r.body_str().starts_with(r.tags.as_deref().unwrap_or("?")),
                "tag/body mismatch: {r:?}"
            );
        }
    });
}
