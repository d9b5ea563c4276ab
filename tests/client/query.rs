// Proves message lookup with the real client: QUERY_MESSAGE by key (through the producer's
// query_message and the admin's query_message_by_key / query_message_by_unique_key) returns
// exactly the messages carrying that key, and VIEW_MESSAGE_BY_ID with the offset msgId from a
// SendResult (through the admin's query_message and the producer's view_message) returns that
// message.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use common::*;
use rocketmq_client_rust::{
    ClientResult, ConsumerAdmin, DefaultMQAdminExt, DefaultMQProducer, QueryResult,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::result::SendResult;

fn bodies(msgs: &[MessageExt]) -> BTreeSet<String> {
    msgs.iter()
        .map(|m| Received::from_ext(m, 0).body_str())
        .collect()
}

async fn send_keys(
    producer: &DefaultMQProducer,
    topic: &str,
    keys: &[&str],
    body: &str,
) -> SendResult {
    let msg = Message::builder()
        .topic(topic)
        .tags("TagQ")
        .keys(keys.iter().map(|k| k.to_string()).collect())
        .body_slice(body.as_bytes())
        .build_unchecked();
    within(15, "send", producer.send_with_timeout(msg, 5_000))
        .await
        .expect("send")
        .expect("no SendResult")
}

/// The producer's query_message (QUERY_MESSAGE, key type "K"), retried for up to 5 s in case
/// the broker indexes asynchronously.
async fn producer_query(
    producer: &mut DefaultMQProducer,
    topic: &str,
    key: &str,
    want: usize,
) -> QueryResult {
    let (begin, end) = (now_ms() - 60_000, now_ms() + 60_000);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = within(
            10,
            "producer.query_message",
            producer.query_message(topic, key, 32, begin, end),
        )
        .await;
        match r {
            Ok(q) if q.message_list().len() >= want => return q,
            other => {
                if Instant::now() >= deadline {
                    panic!("query by key {key:?} did not return {want} messages: {other:?}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The admin's query by key or by UNIQ_KEY (no client-side key re-check, unlike the producer).
async fn admin_query(
    admin: &DefaultMQAdminExt,
    topic: &str,
    key: &str,
    unique: bool,
) -> QueryResult {
    let (begin, end) = ((now_ms() - 60_000) as i64, (now_ms() + 60_000) as i64);
    let r = if unique {
        within(
            10,
            "admin query_message_by_unique_key",
            admin.inner().query_message_by_unique_key(
                None,
                topic.into(),
                key.into(),
                32,
                begin,
                end,
            ),
        )
        .await
    } else {
        within(
            10,
            "admin query_message_by_key",
            admin.inner().query_message_by_key(
                None,
                topic.into(),
                key.into(),
                32,
                begin,
                end,
                CheetahString::from_static_str("K"),
                None,
            ),
        )
        .await
    };
    r.unwrap_or_else(|e| panic!("admin query {key:?} (unique={unique}) failed: {e}"))
}

/// The admin's view of the message with offset msgId `id` (VIEW_MESSAGE_BY_ID), within 10 s.
async fn admin_view(
    admin: &DefaultMQAdminExt,
    topic: &str,
    id: &str,
    what: &str,
) -> ClientResult<MessageExt> {
    within(
        10,
        what,
        ConsumerAdmin::query_message(
            admin,
            CheetahString::from_static_str("DefaultCluster"),
            CheetahString::from(topic),
            CheetahString::from(id),
        ),
    )
    .await
}

#[test]
fn query_by_key_and_view_by_offset_msg_id() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("query");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        // Keys are unique per run so nothing else in the store can match.
        let key = |k: &str| format!("{k}-{}", std::process::id());
        let (k3, common_key, missing_key) = (key("order-3"), key("common"), key("nope"));
        let mut sent = Vec::new();
        for i in 0..5 {
            let ki = key(&format!("order-{i}"));
            sent.push(send_keys(&producer, &topic, &[&ki, &common_key], &format!("m{i}")).await);
        }
        let last = send_keys(&producer, &topic, &[&k3], "m-last").await;

        // By key, through the producer: m3 and m-last carry order-3; five carry `common`.
        let q = producer_query(&mut producer, &topic, &k3, 2).await;
        assert_eq!(
            bodies(q.message_list()),
            BTreeSet::from(["m-last".to_string(), "m3".to_string()]),
            "producer query by {k3:?}"
        );
        for m in q.message_list() {
            let r = Received::from_ext(m, 0);
            assert_eq!(r.topic, topic);
            assert!(
                r.keys
                    .as_deref()
                    .unwrap_or_default()
                    .split(' ')
                    .any(|k| k == k3),
                "a message without key {k3:?} came back: {r:?}"
            );
        }
        let q = producer_query(&mut producer, &topic, &common_key, 5).await;
        assert_eq!(
            bodies(q.message_list()),
            (0..5).map(|i| format!("m{i}")).collect::<BTreeSet<_>>(),
            "producer query by {common_key:?}"
        );
        let none = within(
            10,
            "query missing key",
            producer.query_message(
                &topic,
                &missing_key,
                32,
                now_ms() - 60_000,
                now_ms() + 60_000,
            ),
        )
        .await;
        assert!(
            none.as_ref()
                .map(|q| q.message_list().is_empty())
                .unwrap_or(true),
            "a key nobody used matched: {none:?}"
        );

        // By key and by UNIQ_KEY, through the admin; the broker alone decides what matches.
        let admin = admin(&ns).await;
        let q = admin_query(&admin, &topic, &k3, false).await;
        assert_eq!(
            bodies(q.message_list()),
            BTreeSet::from(["m-last".to_string(), "m3".to_string()]),
            "admin query by {k3:?}"
        );
        assert!(
            admin_query(&admin, &topic, &missing_key, false)
                .await
                .message_list()
                .is_empty(),
            "admin query by an unused key returned messages"
        );
        let uniq = sent[1].msg_id.clone().expect("msgId").to_string();
        let q = admin_query(&admin, &topic, &uniq, true).await;
        assert_eq!(
            bodies(q.message_list()),
            BTreeSet::from(["m1".to_string()]),
            "admin query by UNIQ_KEY {uniq}"
        );

        // View by the offset msgId (broker address + commit-log offset) of the SendResult.
        let offset_id = last.offset_msg_id.clone().expect("offsetMsgId");
        let (port, _) = decode_offset_msg_id(&offset_id)
            .unwrap_or_else(|| panic!("offsetMsgId {offset_id} is not an offset id"));
        assert_eq!(port, broker.broker_port(), "offsetMsgId names another port");
        let m = admin_view(&admin, &topic, &offset_id, "admin view by id")
            .await
            .unwrap_or_else(|e| panic!("admin view of {offset_id} failed: {e}"));
        let r = Received::from_ext(&m, 0);
        assert_eq!(r.body_str(), "m-last");
        assert_eq!(
            r.offset_msg_id, offset_id,
            "viewed message has another offset id"
        );
        assert_eq!(r.keys.as_deref(), Some(k3.as_str()));
        assert_eq!(r.topic, topic);
        // The producer's view_message (it falls back to a UNIQ_KEY query only on failure, and
        // an offset id is no UNIQ_KEY, so success here means the view itself worked).
        let first_offset_id = sent[0].offset_msg_id.clone().expect("offsetMsgId");
        let m = within(
            10,
            "producer view_message",
            producer.view_message(&topic, &first_offset_id),
        )
        .await
        .unwrap_or_else(|e| panic!("producer view of {first_offset_id} failed: {e}"));
        assert_eq!(Received::from_ext(&m, 0).body_str(), "m0");
        // A well-formed id whose offset points at no record must not return one.
        let (_, phy) = decode_offset_msg_id(&offset_id).expect("offset id");
        let bogus = format!("{}{:016X}", &offset_id[..16], phy + 3);
        let r = admin_view(&admin, &topic, &bogus, "admin view of a bogus offset").await;
        assert!(r.is_err(), "viewing {bogus} returned a message: {r:?}");

        let mut admin = admin;
        let _ = tokio::time::timeout(Duration::from_secs(10), admin.shutdown()).await;
        shutdown_producer(producer).await;
    });
}

/// `ringmq admin clusterList --json` against `namesrv`: the brokers' addresses the name server
/// hands out.
fn announced_addrs(namesrv: &str) -> Vec<String> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["admin", "clusterList", "-n", namesrv, "--json"])
        .output()
        .expect("run ringmq admin");
    assert!(out.status.success(), "clusterList: {out:?}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("clusterList JSON");
    j.as_array()
        .expect("a list")
        .iter()
        .map(|b| b["addr"].as_str().expect("addr").to_string())
        .collect()
}

/// The broker's stderr once it holds `needle` (its output is drained by another thread), within
/// 10 s.
fn log_with(broker: &Broker, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = broker.stderr_tail();
        if log.contains(needle) || Instant::now() >= deadline {
            return log;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A newcomer's first run: `serve` bound to loopback with no brokerIP1 announces its loopback
/// listener, so clients that know only the name server send, consume and look a message up by
/// its id; start-up names the address clients are sent to.
#[test]
fn serve_on_loopback_is_reached_through_the_name_server() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    assert_eq!(announced_addrs(&ns), vec![broker.broker_addr()]);
    let said = format!("clients are sent to the broker at {}", broker.broker_addr());
    let log = log_with(&broker, &said);
    assert!(log.contains(&said), "no {said:?} in:\n{log}");
    assert!(
        !log.contains("is announced to clients"),
        "a warning:\n{log}"
    );
    run(async move {
        let topic = unique_topic("loopback");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        let sent = send_keys(&producer, &topic, &["lb-1"], "hello loopback").await;
        let offset_id = sent.offset_msg_id.clone().expect("offsetMsgId");
        // 127.0.0.1 and the listener's port are the first 8 bytes of the offset id.
        let want = format!("7F000001{:08X}", broker.broker_port());
        assert!(offset_id.starts_with(&want), "{offset_id} is not {want}...");
        let group = unique_group("loopback");
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let got = collect_until(&mut inbox, Duration::from_secs(30), |g| {
            g.iter().any(|r| r.body_str() == "hello loopback")
        })
        .await;
        assert!(
            got.iter().any(|r| r.offset_msg_id == offset_id),
            "not consumed: {got:?}"
        );
        let admin = admin(&ns).await;
        let m = admin_view(&admin, &topic, &offset_id, "view by id")
            .await
            .unwrap_or_else(|e| panic!("view of {offset_id} failed: {e}"));
        assert_eq!(Received::from_ext(&m, 0).body_str(), "hello loopback");
        let mut admin = admin;
        let _ = tokio::time::timeout(Duration::from_secs(10), admin.shutdown()).await;
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;
    });
}

/// An explicit brokerIP1 wins over the listener's address (NAT, containers): the name server
/// hands that address out, and start-up warns that the broker does not listen on it.
#[test]
fn explicit_broker_ip1_is_announced_with_a_warning() {
    let broker = Broker::start_with(&[("brokerIP1", "127.0.0.2")]);
    let port = broker.broker_port();
    assert_eq!(
        announced_addrs(&broker.namesrv_addr()),
        vec![format!("127.0.0.2:{port}")]
    );
    let log = log_with(&broker, "is announced to clients");
    assert!(
        log.contains(
            "brokerIP1=127.0.0.2 is announced to clients, but the broker listens on 127.0.0.1 only"
        ),
        "no warning in:\n{log}"
    );
    assert!(
        log.contains(&format!(
            "clients are sent to the broker at 127.0.0.2:{port}"
        )),
        "{log}"
    );
}
