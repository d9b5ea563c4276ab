// Proves a 3 MiB message body (sent uncompressed) is stored and delivered back byte for byte.

use crate::common;

use std::time::Duration;

use common::*;
use rocketmq_client_rust::{DefaultMQProducer, SendStatus};

const BODY_LEN: usize = 3 * 1024 * 1024;

/// Incompressible, reproducible bytes (xorshift64*).
fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[test]
fn three_mib_body_round_trips() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("big");
        // Compression off: the broker must carry the full 3 MiB frame both ways.
        let builder = DefaultMQProducer::builder(client_runtime("producer-big"))
            .producer_group(unique_group("big"))
            .name_server_addr(ns.clone())
            .send_msg_timeout(15_000)
            .compress_msg_body_over_howmuch(64 * 1024 * 1024)
            .max_message_size(4 * 1024 * 1024);
        let mut producer = start_producer(builder.build()).await;
        create_topic_by_send(&mut producer, &topic).await;

        let body = pseudo_random(BODY_LEN, 0x9E37_79B9_7F4A_7C15);
        let result = within(
            30,
            "3 MiB send",
            producer.send_with_timeout(message(&topic, "Big", "big-key", &body), 15_000),
        )
        .await
        .expect("3 MiB send failed")
        .expect("no SendResult");
        assert_eq!(result.send_status, SendStatus::SendOk);
        let id = result.msg_id.clone().expect("msgId").to_string();

        let group = unique_group("big");
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let got = collect_until(&mut inbox, Duration::from_secs(30), |got| {
            got.iter().any(|r| r.msg_id == id)
        })
        .await;
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let r = got.iter().find(|r| r.msg_id == id).unwrap_or_else(|| {
            panic!(
                "the 3 MiB message was not consumed (got {} others)",
                got.len()
            )
        });
        assert_eq!(r.body.len(), BODY_LEN, "body length changed in transit");
        if let Some(pos) = r.body.iter().zip(&body).position(|(a, b)| a != b) {
            panic!("body differs first at byte {pos}");
        }
        assert_eq!(r.keys.as_deref(), Some("big-key"));
    });
}
