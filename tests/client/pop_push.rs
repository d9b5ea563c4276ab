// Proves POP with a real RocketMQ client: a group set to POP mode (setConsumeMode through the
// admin library) and a push consumer that leaves the rebalance to the broker
// (`clientRebalance=false`) gets POP assignments from QUERY_ASSIGNMENT, pops every message of a
// 4-queue topic exactly as sent, acks them, and the group's offsets move past them.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use ringmq::admin::AdminClient;
use ringmq::protocol::assignment::{MessageRequestMode, SetMessageRequestModeRequestBody};
use ringmq::protocol::body::SubscriptionGroupConfig;

const COUNT: usize = 100;

#[test]
fn push_consumer_in_pop_mode_receives_every_message() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    let addr = broker.broker_addr();
    run(async move {
        let topic = unique_topic("pop");
        let group = unique_group("pop");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        let (ns2, addr2, topic2, group2) = (ns.clone(), addr.clone(), topic.clone(), group.clone());
        tokio::task::spawn_blocking(move || {
            let admin = AdminClient::new(&ns2).expect("admin client");
            let config = SubscriptionGroupConfig {
                group_name: group2.clone(),
                ..SubscriptionGroupConfig::default()
            };
            admin
                .create_subscription_group(&addr2, &config)
                .expect("create group");
            let mode = SetMessageRequestModeRequestBody {
                consumer_group: group2,
                mode: MessageRequestMode::Pop,
                pop_share_queue_num: 0,
                topic: topic2,
            };
            admin
                .set_message_request_mode(&addr2, &mode)
                .expect("set POP mode");
        })
        .await
        .unwrap();
        let mut spec = PushSpec::new(&group, &topic);
        spec.broker_rebalance = true;
        let (consumer, mut inbox) = push_consumer_with(&ns, spec).await;
        let mut sent = BTreeSet::new();
        for i in 0..COUNT {
            let body = format!("pop-{i}");
            producer
                .send_with_timeout(message(&topic, "T", "", body.as_bytes()), 5_000)
                .await
                .expect("send");
            sent.insert(body);
        }
        let got = collect_distinct(&mut inbox, COUNT, Duration::from_secs(60)).await;
        let bodies: BTreeSet<String> = got.iter().map(|r| r.body_str()).collect();
        assert_eq!(bodies, sent, "every message popped, none other");
        // Popped, not pulled: each carries the receipt handle the client built (8 fields).
        for r in &got {
            let ck = r
                .pop_ck
                .as_deref()
                .expect("a popped message has a POP_CK handle");
            assert_eq!(ck.split(' ').count(), 8, "{ck}");
        }
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;
    });
}
