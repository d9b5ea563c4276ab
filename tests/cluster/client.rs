//! The crates.io client `rocketmq-client-rust` 1.0.0 (with its transport's `tls` feature) over
//! TLS: against a `serve` in enforcing mode it finds the route on the name server and sends
//! over TLS, and the message is stored (read back over a raw TLS connection).

use crate::common;
use crate::raw_support;
use crate::tls_support;

use common::*;
use rocketmq_client_rust::SendStatus;
use rocketmq_client_rust::{ClientConfig, DefaultMQProducer};

#[test]
fn rocketmq_client_sends_over_tls() {
    // The client builds its rustls config with the process default; two providers are
    // compiled into this test, so pick one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tls_support::Certs::make();
    let cert = certs.server_cert.display().to_string();
    let key = certs.server_key.display().to_string();
    let broker = Broker::start_with(&[
        ("tls.server.mode", "enforcing"),
        ("tls.server.certPath", &cert),
        ("tls.server.keyPath", &key),
        ("tls.enable", "true"),
    ]);
    let ns = broker.namesrv_addr();
    let addr: std::net::SocketAddr = broker.broker_addr().parse().unwrap();
    let topic = unique_topic("tls");
    let t = topic.clone();
    let ca = certs.ca.display().to_string();
    run(async move {
        // This client verifies the server by default (Java's does not): trust the test CA.
        let mut config = ClientConfig::default();
        config.tls_config.client.trust_cert_path = Some(ca);
        let builder = DefaultMQProducer::builder(client_runtime("producer"))
            .client_config(config)
            .producer_group(unique_group("tls"))
            .name_server_addr(ns)
            .send_msg_timeout(5_000)
            .use_tls(true);
        let producer = start_producer(builder.build()).await;
        let sent = within(
            20,
            "send over TLS",
            producer.send_with_timeout(message(&t, "TagTls", "k1", b"client-over-tls"), 5_000),
        )
        .await
        .expect("send over TLS failed")
        .expect("no SendResult");
        assert_eq!(sent.send_status, SendStatus::SendOk, "{sent:?}");
        shutdown_producer(producer).await;
    });
    // Stored: pulled back over TLS from every queue until found.
    let mut c = tls_support::TlsConn::connect(addr, certs.client(None)).expect("TLS");
    let found = (0..8).any(|q| {
        let r = c.call(raw_support::pull_cmd(&topic, q, 0, 0));
        r.code == 0
            && raw_support::records(&r.body)
                .iter()
                .any(|rec| rec.body == b"client-over-tls")
    });
    assert!(found, "the message sent over TLS is not stored");
}
