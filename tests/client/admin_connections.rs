// Proves GET_CONSUMER_CONNECTION_LIST and GET_PRODUCER_CONNECTION_LIST list the live clients of
// a group with their real peer address, language and version, and that an unknown consumer group
// answers CONSUMER_NOT_ONLINE.

use crate::common;

use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use common::*;
use rocketmq_client_rust::ConsumerAdmin;

/// Polls `f` every 300 ms until it returns Some or `secs` pass.
async fn poll<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() >= deadline => panic!("{what}: not within {secs} s: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

/// A live producer and push consumer are listed with 127.0.0.1:<their port>, language RUST and
/// a non-zero version; the consumer listing carries the group's subscription and settings.
#[test]
fn connection_lists_show_live_clients() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    let broker_addr = broker.broker_addr();
    run(async move {
        let topic = unique_topic("conns");
        let group = unique_group("conns");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        let (consumer, _inbox) = push_consumer(&ns, &group, &topic).await;
        let admin = admin(&ns).await;

        let cc = poll(40, "consumer connection", || {
            let admin = &admin;
            let group = group.clone();
            let addr = broker_addr.clone();
            async move {
                let r = ConsumerAdmin::examine_consumer_connection_info(
                    admin,
                    CheetahString::from(group.as_str()),
                    Some(CheetahString::from(addr.as_str())),
                )
                .await;
                let cc = r.map_err(|e| format!("{e:?}"))?;
                serde_json::to_value(&cc).map_err(|e| e.to_string())
            }
        })
        .await;
        let conns = cc["connectionSet"].as_array().expect("connectionSet array");
        assert_eq!(conns.len(), 1, "{cc}");
        let c = &conns[0];
        let addr = c["clientAddr"].as_str().expect("clientAddr");
        assert!(addr.starts_with("127.0.0.1:"), "{cc}");
        assert_ne!(port_of(addr), 0, "{cc}");
        assert_ne!(
            port_of(addr),
            broker.broker_port(),
            "peer, not the broker: {cc}"
        );
        assert_eq!(c["language"], "RUST", "{cc}");
        assert!(c["version"].as_i64().unwrap_or(0) > 0, "{cc}");
        assert!(
            c["clientId"].as_str().is_some_and(|s| !s.is_empty()),
            "{cc}"
        );
        assert_eq!(
            cc["subscriptionTable"][topic.as_str()]["topic"],
            topic.as_str(),
            "{cc}"
        );
        assert_eq!(cc["messageModel"], "CLUSTERING", "{cc}");
        assert_eq!(cc["consumeType"], "CONSUME_PASSIVELY", "{cc}");

        let pgroup = producer.producer_group().to_string();
        let pc = poll(40, "producer connection", || {
            let admin = &admin;
            let pgroup = pgroup.clone();
            let topic = topic.clone();
            async move {
                let r = ConsumerAdmin::examine_producer_connection_info(
                    admin,
                    CheetahString::from(pgroup.as_str()),
                    CheetahString::from(topic.as_str()),
                )
                .await;
                let pc = r.map_err(|e| format!("{e:?}"))?;
                serde_json::to_value(&pc).map_err(|e| e.to_string())
            }
        })
        .await;
        let conns = pc["connectionSet"].as_array().expect("connectionSet array");
        assert_eq!(conns.len(), 1, "{pc}");
        let p = &conns[0];
        assert!(
            p["clientAddr"]
                .as_str()
                .is_some_and(|a| a.starts_with("127.0.0.1:")),
            "{pc}"
        );
        assert_eq!(p["language"], "RUST", "{pc}");
        assert!(p["version"].as_i64().unwrap_or(0) > 0, "{pc}");

        let err = ConsumerAdmin::examine_consumer_connection_info(
            &admin,
            CheetahString::from(unique_group("nobody").as_str()),
            Some(CheetahString::from(broker_addr.as_str())),
        )
        .await
        .expect_err("a group without consumers must be refused");
        // The client keeps the remark private; the response code says CONSUMER_NOT_ONLINE.
        assert_eq!(
            err.broker_response_code(),
            Some(206),
            "CONSUMER_NOT_ONLINE expected: {err:?}"
        );

        shutdown_push(consumer).await;
        shutdown_producer(producer).await;
    });
}
