//! `ringmq admin`'s message commands against a real `ringmq serve`: a message sent with
//! sendMessage is found by queryMsgById, queryMsgByKey and queryMsgByOffset and read back by
//! consumeMessage, in tables and in `--json`.

use crate::raw_support;

use raw_support::admin::{admin, admin_until_ok, create_topic};
use raw_support::RawBroker;

fn start() -> RawBroker {
    RawBroker::start(&["shardCount=2", "pinCores=false"])
}

/// sendMessage stores the message; queryMsgById (by UNIQ_KEY and by offset id),
/// queryMsgByKey and queryMsgByOffset each find it with its body, tag and key.
#[test]
fn sent_message_is_found_by_id_key_and_offset() {
    let b = start();
    let ns = b.namesrv;
    create_topic(ns, b.broker, "AdmM", 2);
    let sent = admin(
        ns,
        &[
            "sendMessage",
            "-t",
            "AdmM",
            "-p",
            "hello admin",
            "-k",
            "order-7",
            "-c",
            "tagA",
            "-i",
            "1",
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(sent["sendStatus"], "SEND_OK", "{sent}");
    assert_eq!(sent["queueId"], 1, "{sent}");
    let msg_id = sent["msgId"].as_str().unwrap().to_owned();
    let offset_id = sent["offsetMsgId"].as_str().unwrap().to_owned();
    let queue_offset = sent["queueOffset"].as_i64().unwrap().to_string();

    // The broker indexes keys and ids behind the send (as Java's reput does): the first
    // lookup by index may come too early.
    let m = admin_until_ok(ns, &["queryMsgById", "-t", "AdmM", "-i", &msg_id, "--json"]).json();
    assert_eq!(m["body"], "hello admin", "{m}");
    assert_eq!(m["msgId"], msg_id.as_str(), "{m}");
    assert_eq!(
        (m["tags"].as_str(), m["keys"].as_str()),
        (Some("tagA"), Some("order-7")),
        "{m}"
    );
    let m = admin(ns, &["queryMsgById", "-i", &offset_id, "--json"])
        .ok()
        .json();
    assert_eq!(m["msgId"], msg_id.as_str(), "{m}");
    let t = admin(ns, &["queryMsgById", "-t", "AdmM", "-i", &msg_id]).ok();
    assert!(
        t.stdout
            .lines()
            .any(|l| l.starts_with("Message Body:") && l.ends_with("hello admin")),
        "{t:?}"
    );

    let k = admin(ns, &["queryMsgByKey", "-t", "AdmM", "-k", "order-7"]).ok();
    let row = k.first_row();
    assert_eq!(row, [msg_id.as_str(), "1", queue_offset.as_str()], "{k:?}");
    let k = admin(
        ns,
        &["queryMsgByKey", "-t", "AdmM", "-k", "order-7", "--json"],
    )
    .ok()
    .json();
    assert_eq!(k.as_array().unwrap().len(), 1, "{k}");

    let o = admin(
        ns,
        &[
            "queryMsgByOffset",
            "-t",
            "AdmM",
            "-b",
            "broker-a",
            "-i",
            "1",
            "-o",
            &queue_offset,
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(o["body"], "hello admin", "{o}");
    assert_eq!(o["offsetMsgId"], offset_id.as_str(), "{o}");
}

/// consumeMessage prints every message sent, in queue order, and honours the queue, offset
/// and count flags.
#[test]
fn consume_message_prints_what_was_sent() {
    let b = start();
    let ns = b.namesrv;
    create_topic(ns, b.broker, "AdmCm", 2);
    for body in ["m0", "m1", "m2"] {
        admin(ns, &["sendMessage", "-t", "AdmCm", "-p", body, "-i", "0"]).ok();
    }
    admin(
        ns,
        &["sendMessage", "-t", "AdmCm", "-p", "other", "-i", "1"],
    )
    .ok();
    let t = admin(ns, &["consumeMessage", "-t", "AdmCm"]).ok();
    for body in ["m0", "m1", "m2", "other"] {
        assert!(
            t.stdout
                .lines()
                .any(|l| l.starts_with("Message Body:") && l.ends_with(body)),
            "{body} missing: {t:?}"
        );
    }
    assert!(t.stdout.contains("4 message(s) consumed"), "{t:?}");
    let j = admin(
        ns,
        &[
            "consumeMessage",
            "-t",
            "AdmCm",
            "-b",
            "broker-a",
            "-i",
            "0",
            "-o",
            "1",
            "--json",
        ],
    )
    .ok()
    .json();
    let bodies: Vec<&str> = j
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["m1", "m2"], "{j}");
    let j = admin(ns, &["consumeMessage", "-t", "AdmCm", "-c", "2", "--json"])
        .ok()
        .json();
    assert_eq!(j.as_array().unwrap().len(), 2, "{j}");
}

/// A message, key or topic that does not exist is exit 1 with a message naming it; an id that
/// is neither found nor an offset id, without a topic, is a usage error (exit 2).
#[test]
fn missing_messages_and_topics() {
    let b = start();
    let ns = b.namesrv;
    create_topic(ns, b.broker, "AdmMiss", 1);
    let r = admin(
        ns,
        &[
            "queryMsgById",
            "-t",
            "AdmMiss",
            "-i",
            "0123456789ABCDEF0123456789ABCDEF",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("0123456789ABCDEF0123456789ABCDEF"),
        "{r:?}"
    );
    let r = admin(ns, &["queryMsgByKey", "-t", "AdmMiss", "-k", "nokey"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("nokey"), "{r:?}");
    let r = admin(
        ns,
        &[
            "queryMsgByOffset",
            "-t",
            "AdmMiss",
            "-b",
            "broker-a",
            "-i",
            "0",
            "-o",
            "5",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let r = admin(ns, &["sendMessage", "-t", "NoSuchTopic", "-p", "x"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("NoSuchTopic"), "{r:?}");
    let r = admin(ns, &["queryMsgById", "-i", "not-an-id"]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = admin(ns, &["sendMessage", "-t", "AdmMiss", "-p", "x", "-i", "9"]);
    assert_eq!(r.code, 2, "queue out of range: {r:?}");
}
