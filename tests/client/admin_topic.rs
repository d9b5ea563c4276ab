// Proves a topic created through the admin API (UPDATE_AND_CREATE_TOPIC) with 3 queues is routed
// by the name server with exactly 3 read/write queues, and a send to queue 2 lands there.

use crate::common;

use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use common::*;
use rocketmq_client_rust::{SendStatus, TopicAdmin};

#[test]
fn admin_created_topic_has_three_queues() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    let broker_addr = broker.broker_addr();
    run(async move {
        let topic = unique_topic("admin");
        let admin = admin(&ns).await;
        create_topic(&admin, &broker_addr, &topic, 3).await;

        // The broker registers the new topic with the name server; wait for the route.
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
                panic!("no route for admin-created topic {topic} within 15 s (last: {r:?})");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(
            route.queue_datas.len(),
            1,
            "one broker serves the topic: {route:?}"
        );
        let qd = &route.queue_datas[0];
        assert_eq!(qd.read_queue_nums, 3, "{route:?}");
        assert_eq!(qd.write_queue_nums, 3, "{route:?}");
        assert_eq!(
            qd.perm & 0x6,
            0x6,
            "topic must be readable and writable: {route:?}"
        );
        assert_eq!(route.broker_datas.len(), 1, "{route:?}");
        let addrs: Vec<String> = route.broker_datas[0]
            .broker_addrs()
            .values()
            .map(|a| a.to_string())
            .collect();
        assert!(
            addrs.iter().any(|a| port_of(a) == port_of(&broker_addr)),
            "route names broker {addrs:?}, expected port of {broker_addr}"
        );

        let mut producer = producer(&ns).await;
        let queues = publish_queues(&mut producer, &topic).await;
        let mut ids: Vec<i32> = queues.iter().map(|q| q.queue_id()).collect();
        ids.sort();
        assert_eq!(
            ids,
            vec![0, 1, 2],
            "publish queues of the admin-created topic"
        );
        let q2 = queue_by_id(&queues, 2);
        let msg = message(&topic, "Adm", "", b"to-queue-2");
        let result = send_to_queue(&producer, msg, &q2, "send to queue 2").await;
        assert_eq!(result.send_status, SendStatus::SendOk);
        assert_eq!(result.message_queue.as_ref().map(|q| q.queue_id()), Some(2));
        assert_eq!(
            result.queue_offset, 0,
            "first message of a new queue is at offset 0"
        );

        let group = unique_group("admin");
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let got = collect_distinct(&mut inbox, 1, Duration::from_secs(25)).await;
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;
        let mut admin = admin;
        let _ = tokio::time::timeout(Duration::from_secs(10), admin.shutdown()).await;
        let r = got.first().expect("message sent to queue 2 not consumed");
        assert_eq!(r.body_str(), "to-queue-2");
        assert_eq!(r.queue_id, 2);
    });
}
