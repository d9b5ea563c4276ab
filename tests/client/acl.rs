// Access control with the unmodified Rust client signing its requests (Java's
// `AclClientRPCHook`): with ACL 1.0's plain_acl.yml, the user's key sends and a push consumer
// signed with it consumes everything; a producer with a wrong secret and one with no key are
// refused with NO_PERMISSION, and none of their messages is stored.

use crate::common;

use std::time::Duration;

use common::*;
use rocketmq_client_rust::SendStatus;

const PLAIN_ACL: &str = "\
accounts:
  - accessKey: alice
    secretKey: alice-secret-1
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - orders=PUB|SUB
";

#[test]
fn signed_clients_send_and_consume_and_others_are_refused() {
    let conf = tempfile::tempdir().expect("tempdir");
    let file = conf.path().join("plain_acl.yml");
    std::fs::write(&file, PLAIN_ACL).expect("write plain_acl.yml");
    let file = file.display().to_string();
    let broker = Broker::start_with(&[
        ("aclEnable", "true"),
        ("rocketmq.acl.plain.file", file.as_str()),
    ]);
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = "orders";
        let mut producer = signed_producer(&ns, "alice", "alice-secret-1").await;
        create_topic_by_send(&mut producer, topic).await;
        let mut sent = Vec::new();
        for i in 0..10 {
            let r = within(
                15,
                "signed send",
                producer.send_with_timeout(message(topic, "T", &format!("k{i}"), b"signed"), 5_000),
            )
            .await
            .expect("signed send")
            .expect("a SendResult");
            assert_eq!(r.send_status, SendStatus::SendOk, "{r:?}");
            sent.push(r.msg_id.expect("msgId").to_string());
        }

        // Wrong secret, and no key at all: refused with the broker's reason.
        let wrong = signed_producer(&ns, "alice", "not-her-secret").await;
        let unsigned = producer_without_key(&ns).await;
        for (who, p) in [("wrong secret", &wrong), ("no key", &unsigned)] {
            let r = within(
                20,
                who,
                p.send_with_timeout(message(topic, "T", "forged", b"forged"), 3_000),
            )
            .await;
            let err = r.expect_err(who);
            // The client keeps the remark private; the response code says NO_PERMISSION.
            assert_eq!(
                err.broker_response_code(),
                Some(16),
                "{who}: NO_PERMISSION expected: {err:?}"
            );
        }

        // A consumer signed as alice gets exactly the ten signed messages (plus the warm-up).
        let mut spec = PushSpec::new(&unique_group("acl"), topic);
        spec.credentials = Some(("alice".into(), "alice-secret-1".into()));
        let (consumer, mut inbox) = push_consumer_with(&ns, spec).await;
        let got = collect_distinct(&mut inbox, 10, Duration::from_secs(30)).await;
        let extra = drain_for(&mut inbox, Duration::from_secs(2)).await;
        let mut ids: Vec<String> = got.iter().chain(&extra).map(|r| r.msg_id.clone()).collect();
        ids.sort();
        ids.dedup();
        let mut want = sent.clone();
        want.sort();
        assert_eq!(ids, want, "only the signed messages were stored");
        assert!(got.iter().all(|r| r.body_str() == "signed"));
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;
        shutdown_producer(wrong).await;
        shutdown_producer(unsigned).await;
    });
}

async fn producer_without_key(ns: &str) -> rocketmq_client_rust::DefaultMQProducer {
    producer(ns).await
}
