// Proves SQL92 property filtering with the real client on a broker with enablePropertyFilter:
// a push consumer subscribed with `a > 5 AND region IN ('eu','us')` receives exactly the
// matching messages, and a malformed expression is rejected with a clear error.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQPushConsumer,
    MQClientException, MQPushConsumer, MessageSelector,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use tokio::sync::mpsc;

const FILTER: &str = "a > 5 AND region IN ('eu','us')";
const MALFORMED: &str = "a > AND region IN (";
/// RocketMQ's response code for an unparsable subscription expression.
const SUBSCRIPTION_PARSE_FAILED: i32 = 23;

/// A message with user properties `a` (when given) and `region`.
fn props_message(topic: &str, body: &str, a: Option<i64>, region: &str) -> Message {
    let mut b = Message::builder()
        .topic(topic)
        .tags("TagS")
        .body_slice(body.as_bytes());
    if let Some(a) = a {
        b = b.raw_property("a", a.to_string()).expect("user property a");
    }
    b.raw_property("region", region)
        .expect("user property region")
        .build_unchecked()
}

/// A push consumer built like [`push_consumer_with`] but subscribed through a SQL92
/// [`MessageSelector`]; `start()`'s result is returned, not unwrapped.
async fn sql_consumer(
    ns: &str,
    group: &str,
    topic: &str,
    sql: &str,
) -> (
    DefaultMQPushConsumer,
    Inbox,
    rocketmq_client_rust::ClientResult<()>,
) {
    let mut consumer = DefaultMQPushConsumer::builder(client_runtime("sql-push"))
        .name_server_addr(ns.to_string())
        .consumer_group(group.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_thread_min(1)
        .consume_thread_max(4)
        .pull_batch_size(32)
        .build();
    within(
        10,
        "subscribe_with_selector",
        consumer.subscribe_with_selector(topic, Some(MessageSelector::by_sql(sql))),
    )
    .await
    .expect("subscribe_with_selector");
    let (tx, rx) = mpsc::unbounded_channel();
    consumer.register_message_listener_concurrently(
        move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
            for m in msgs {
                let _ = tx.send(Received::from_ext(m, 0));
            }
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        },
    );
    let started = within(20, "push consumer start", consumer.start()).await;
    (consumer, rx, started)
}

#[test]
fn sql92_consumer_receives_exactly_the_matching_messages() {
    let broker = Broker::start_with(&[("enablePropertyFilter", "true")]);
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("sql");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;

        let regions = ["eu", "us", "cn", "EU"];
        let mut expected = BTreeSet::new();
        let mut sent = 0;
        for i in 0..40i64 {
            let a = i % 10;
            let region = regions[(i % 4) as usize];
            let body = format!("m{i}-a{a}-{region}");
            within(
                15,
                "send",
                producer.send_with_timeout(props_message(&topic, &body, Some(a), region), 5_000),
            )
            .await
            .expect("send")
            .expect("no SendResult");
            sent += 1;
            // String comparison is case-sensitive: "EU" is not in ('eu','us').
            if a > 5 && (region == "eu" || region == "us") {
                expected.insert(body);
            }
        }
        // Without `a` the comparison is unknown, never a match; the warm-up has no `a` either.
        for (i, region) in ["eu", "us"].iter().enumerate() {
            let body = format!("no-a-{i}-{region}");
            within(
                15,
                "send",
                producer.send_with_timeout(props_message(&topic, &body, None, region), 5_000),
            )
            .await
            .expect("send")
            .expect("no SendResult");
            sent += 1;
        }
        assert!(
            expected.len() >= 5 && expected.len() < sent,
            "the mix must hold both matches and non-matches"
        );

        let (consumer, mut inbox, started) =
            sql_consumer(&ns, &unique_group("sql"), &topic, FILTER).await;
        started.expect("SQL92 push consumer start");
        let mut got = collect_until(&mut inbox, Duration::from_secs(30), |g| {
            g.len() >= expected.len()
        })
        .await;
        // Any non-matching message that was going to leak arrives in this window.
        got.extend(drain_for(&mut inbox, Duration::from_secs(3)).await);
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let bodies: Vec<String> = got.iter().map(Received::body_str).collect();
        let distinct: BTreeSet<String> = bodies.iter().cloned().collect();
        let leaked: Vec<&String> = distinct.difference(&expected).collect();
        let missing: Vec<&String> = expected.difference(&distinct).collect();
        assert!(leaked.is_empty(), "`{FILTER}` let through {leaked:?}");
        assert!(missing.is_empty(), "`{FILTER}` never delivered {missing:?}");
        assert_eq!(
            bodies.len(),
            expected.len(),
            "duplicate deliveries: {bodies:?}"
        );
    });
}

#[test]
fn malformed_sql92_is_rejected() {
    let broker = Broker::start_with(&[("enablePropertyFilter", "true")]);
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("sqlbad");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        within(
            15,
            "send",
            producer.send_with_timeout(props_message(&topic, "a9", Some(9), "eu"), 5_000),
        )
        .await
        .expect("send")
        .expect("no SendResult");

        let (consumer, mut inbox, started) =
            sql_consumer(&ns, &unique_group("sqlbad"), &topic, MALFORMED).await;
        // Had start() wrongly succeeded, this is where the (unfiltered) message would show up.
        let got = drain_for(&mut inbox, Duration::from_secs(3)).await;
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        // The client accepts any text in MessageSelector::by_sql; the check is the broker's
        // CHECK_CLIENT_CONFIG at start(), whose failure the client surfaces as an
        // invalid-argument error carrying the broker's response code and remark (the top-level
        // Display redacts the remark, so read it from the MQClientException source).
        let err = started.expect_err("start() must fail for a malformed SQL92 expression");
        assert!(
            err.to_string().starts_with("core.argument.invalid"),
            "start() failed, but not as an invalid argument: {err:?}"
        );
        let cause = err
            .source_ref::<MQClientException>()
            .unwrap_or_else(|| panic!("no broker response behind {err:?}"));
        assert_eq!(
            cause.response_code(),
            SUBSCRIPTION_PARSE_FAILED,
            "CHECK_CLIENT_CONFIG answered {cause}"
        );
        let remark = cause.error_message().unwrap_or_default();
        assert!(
            remark.contains(MALFORMED),
            "the broker's remark does not name the bad expression: {remark:?}"
        );
        assert!(
            got.is_empty(),
            "a consumer with a malformed filter received {:?}",
            got.iter().map(Received::body_str).collect::<Vec<_>>()
        );
    });
}
