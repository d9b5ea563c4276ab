// Proves several brokers share one name server: a second `ringmq broker` (broker-b) registers, a
// topic created on broker-b only is routed to broker-b alone, and sends and consumption work.

use crate::common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use common::*;
use rocketmq_client_rust::{RouteAdmin, SendStatus, TopicAdmin};

const COUNT: usize = 10;

#[test]
fn topic_on_second_broker_is_served_by_it() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    let second = broker.start_second_broker("broker-b");
    let b_addr = second.broker_addr();
    run(async move {
        let admin = admin(&ns).await;

        // broker-b must appear in the name server's cluster info.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let info = tokio::time::timeout(
                Duration::from_secs(5),
                RouteAdmin::examine_broker_cluster_info(&admin),
            )
            .await;
            let names: Vec<String> = match &info {
                Ok(Ok(ci)) => ci
                    .broker_addr_table
                    .as_ref()
                    .map(|t| t.keys().map(|k| k.to_string()).collect())
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            if names.iter().any(|n| n == "broker-b") {
                assert!(
                    names.len() >= 2,
                    "expected the embedded broker and broker-b, got {names:?}"
                );
                break;
            }
            if Instant::now() >= deadline {
                panic!(
                    "broker-b never registered with the name server (last cluster info: {info:?})"
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }

        let topic = unique_topic("twob");
        create_topic(&admin, &b_addr, &topic, 2).await;

        let deadline = Instant::now() + Duration::from_secs(15);
        let route = loop {
            let r = tokio::time::timeout(
                Duration::from_secs(5),
                TopicAdmin::examine_topic_route_info(&admin, CheetahString::from(topic.as_str())),
            )
            .await;
            if let Ok(Ok(Some(route))) = &r {
                if !route.queue_datas.is_empty() {
                    break route.clone();
                }
            }
            if Instant::now() >= deadline {
                panic!("no route for {topic} within 15 s (last: {r:?})");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let names: HashSet<String> = route
            .queue_datas
            .iter()
            .map(|q| q.broker_name.to_string())
            .collect();
        assert_eq!(
            names,
            HashSet::from(["broker-b".to_string()]),
            "queues must be on broker-b only: {route:?}"
        );
        assert_eq!(route.broker_datas.len(), 1, "{route:?}");
        assert_eq!(route.broker_datas[0].broker_name().as_str(), "broker-b");
        let addrs: Vec<String> = route.broker_datas[0]
            .broker_addrs()
            .values()
            .map(|a| a.to_string())
            .collect();
        assert!(
            addrs.iter().any(|a| port_of(a) == port_of(&b_addr)),
            "broker-b's route address {addrs:?} does not match its listener {b_addr}"
        );

        let producer = producer(&ns).await;
        let mut sent = HashSet::new();
        for i in 0..COUNT {
            let r = within(
                15,
                "send",
                producer.send_with_timeout(
                    message(&topic, "TwoB", "", format!("twob-{i}").as_bytes()),
                    5_000,
                ),
            )
            .await
            .expect("send to broker-b's topic failed")
            .expect("no SendResult");
            assert_eq!(r.send_status, SendStatus::SendOk);
            assert_eq!(
                r.message_queue
                    .as_ref()
                    .map(|q| q.broker_name().to_string()),
                Some("broker-b".to_string()),
                "{r:?}"
            );
            let (port, _) = decode_offset_msg_id(r.offset_msg_id.as_deref().unwrap_or_default())
                .expect("offsetMsgId");
            assert_eq!(port, port_of(&b_addr), "message stored on the wrong broker");
            sent.insert(r.msg_id.expect("msgId").to_string());
        }

        let group = unique_group("twob");
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let got = collect_distinct(&mut inbox, COUNT, Duration::from_secs(25)).await;
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;
        let mut admin = admin;
        let _ = tokio::time::timeout(Duration::from_secs(10), admin.shutdown()).await;

        let ids: HashSet<String> = got.iter().map(|r| r.msg_id.clone()).collect();
        let missing: Vec<&String> = sent.difference(&ids).collect();
        assert!(
            missing.is_empty(),
            "not consumed from broker-b: {missing:?}"
        );
        drop(second);
    });
}
