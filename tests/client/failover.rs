// Controller mode seen by the real client (rocketmq-client-rust), which knows only the name
// server: a producer sending to a group of three brokers in controller mode goes on sending
// after the master is SIGKILLed, to the master the controller elects (the name server's route
// follows it), and a consumer of the group reads every message the producer was answered
// SEND_OK for, before and after the failover, from the new master.

use crate::common;
use crate::failover_support;
use crate::raw_support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::*;
use failover_support::{try_call, Cluster, Net};
use raw_support::create_topic_cmd;
use rocketmq_client_rust::{ClientConfig, ClientOptions, DefaultMQProducer, SendStatus};

const QUEUES: i32 = 4;

/// A producer that asks the name server for routes every 10 s, the shortest the client allows
/// (its default is 30 s).
async fn fast_producer(ns: &str) -> DefaultMQProducer {
    let mut config = ClientConfig::new();
    config.set_poll_name_server_interval(10_000);
    config.set_instance_name(unique_name("inst").into());
    config.set_namesrv_addr(ns.into());
    let p = DefaultMQProducer::builder(client_runtime("failover-producer"))
        .client_options(ClientOptions::legacy(config))
        .producer_group(unique_group("producer"))
        .name_server_addr(ns.to_string())
        .send_msg_timeout(3_000)
        .build();
    start_producer(p).await
}

/// Sends `body` once; whether the answer was SEND_OK.
async fn send_ok(p: &DefaultMQProducer, topic: &str, body: &str) -> bool {
    let sent = tokio::time::timeout(
        Duration::from_secs(6),
        p.send_with_timeout(message(topic, "", body, body.as_bytes()), 3_000),
    )
    .await;
    matches!(sent, Ok(Ok(Some(r))) if r.send_status == SendStatus::SendOk)
}

/// The producer and a consumer move to the new master on their own; nothing answered SEND_OK
/// is missing from it.
#[test]
fn clients_follow_the_new_master() {
    let mut c = Cluster::start(3, &[], Net::Loopback);
    let m = c.wait_for_master(3, Duration::from_secs(30));
    let topic = unique_topic("ctlfail");
    for b in &c.brokers {
        let r = try_call(b.addr, create_topic_cmd(&topic, QUEUES)).expect("create topic");
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    let ns = c.namesrv.1.to_string();
    let old = c.brokers[m].addr;
    let (killed_tx, killed_rx) = std::sync::mpsc::channel::<Instant>();
    let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
    let ns2 = ns.clone();
    let topic2 = topic.clone();
    let client = std::thread::spawn(move || {
        let mut acked: Vec<String> = Vec::new();
        run(async {
            let producer = fast_producer(&ns2).await;
            let started = Instant::now();
            while acked.len() < 200 {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "no route to the first master"
                );
                let body = format!("before-{}", acked.len());
                if send_ok(&producer, &topic2, &body).await {
                    acked.push(body);
                }
            }
            kill_tx.send(()).unwrap();
            let killed_at = killed_rx.recv().unwrap();
            let mut attempt = 0;
            let mut first_after = None;
            let mut after = 0;
            while after < 200 {
                assert!(
                    killed_at.elapsed() < Duration::from_secs(30),
                    "the producer never reached the new master"
                );
                let body = format!("after-{attempt}");
                attempt += 1;
                if send_ok(&producer, &topic2, &body).await {
                    first_after.get_or_insert(killed_at.elapsed());
                    acked.push(body);
                    after += 1;
                }
            }
            println!(
                "the producer's first SEND_OK after the SIGKILL came {} ms after it",
                first_after.unwrap().as_millis()
            );
            shutdown_producer(producer).await;
        });
        acked
    });
    kill_rx.recv().unwrap();
    c.ha_proxies[m].cut();
    c.brokers[m].node.kill9();
    killed_tx.send(Instant::now()).unwrap();
    let acked = client.join().expect("client thread");
    let new = c.wait_for_master(2, Duration::from_secs(10));
    assert_ne!(c.brokers[new].addr, old);
    run(async move {
        let consumer = lite_pull_consumer(&ns, &unique_group("ctlfail"), &topic, "*").await;
        let want: HashSet<String> = acked.into_iter().collect();
        let mut seen = HashSet::new();
        let started = Instant::now();
        while !want.is_subset(&seen) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the consumer read {} of {} acknowledged messages",
                want.intersection(&seen).count(),
                want.len()
            );
            for m in within(10, "poll", consumer.poll_with_timeout(500)).await {
                seen.insert(Received::from_ext(&m, 0).body_str());
            }
        }
    });
}
