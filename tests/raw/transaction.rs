//! Proves the broker's side of transactions byte by byte: a prepared send is invisible on its
//! topic until END_TRANSACTION commits it, and bad decisions (unknown offset, wrong commit-log
//! offset, wrong producer group, a second decision, a bad state) are refused with a clear error
//! and deliver nothing twice, and a client's own REAL_TOPIC cannot redirect a commit; clients
//! cannot write into the transaction topics, and
//! `rejectTransactionMessage` refuses prepared sends.

use crate::raw_support;

use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

const TOPIC: &str = "TxRawTopic";

fn prepared_props(group: &str, uniq: &str) -> String {
    format!("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}{group}\u{2}UNIQ_KEY\u{1}{uniq}\u{2}")
}

fn end_cmd(group: &str, queue_offset: i64, phy: i64, state: i32) -> RemotingCommand {
    RemotingCommand::new_request(request_code::END_TRANSACTION)
        .with_ext("producerGroup", group)
        .with_ext("tranStateTableOffset", queue_offset)
        .with_ext("commitLogOffset", phy)
        .with_ext("commitOrRollback", state)
        .with_ext("fromTransactionCheck", false)
        .with_ext("msgId", "U")
}

/// The commit-log offset inside an offset message id (its last 16 hex digits).
fn phy_of(msg_id: &str) -> i64 {
    i64::from_str_radix(&msg_id[msg_id.len() - 16..], 16).expect("hex offset")
}

/// Bodies of the messages of queue 0 of TOPIC from `offset` on.
fn bodies_from(c: &mut Conn, offset: i64) -> Vec<String> {
    let r = c.call(pull_cmd(TOPIC, 0, offset, 0));
    if r.code != response_code::SUCCESS {
        return Vec::new();
    }
    records(&r.body)
        .iter()
        .map(|m| String::from_utf8_lossy(m.body).into_owned())
        .collect()
}

/// Prepared sends stay invisible until committed; each bad END_TRANSACTION gets an error naming
/// the problem, a second decision is refused, and the committed message is delivered once.
#[test]
fn decisions_are_checked_and_taken_once() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd(TOPIC, 0, b"plain-0", ""));
    assert_eq!(r.code, 0, "{:?}", r.remark);

    // A client's own REAL_TOPIC/REAL_QID cannot redirect the commit: the broker's win.
    let forged = format!(
        "REAL_TOPIC\u{1}SCHEDULE_TOPIC_XXXX\u{2}REAL_QID\u{1}3\u{2}{}",
        prepared_props("pg", "U1")
    );
    let r = c.call(send_cmd(TOPIC, 0, b"tx-1", &forged));
    assert_eq!(r.code, 0, "prepared send: {:?}", r.remark);
    let half_offset: i64 = r.ext("queueOffset").unwrap().parse().unwrap();
    let phy = phy_of(r.ext("msgId").unwrap());
    assert_eq!(r.ext("transactionId"), Some("U1"));
    assert_eq!(
        bodies_from(&mut c, 0),
        vec!["plain-0"],
        "a half message is invisible"
    );

    let cases = [
        (
            end_cmd("other-group", half_offset, phy, 8),
            "producer group",
        ),
        (end_cmd("pg", half_offset + 100, phy, 8), "no half message"),
        (end_cmd("pg", half_offset, phy + 1, 8), "commit log offset"),
    ];
    for (cmd, what) in cases {
        let r = c.call(cmd);
        assert_eq!(
            r.code,
            response_code::SYSTEM_ERROR,
            "{what}: {:?}",
            r.remark
        );
        assert!(
            r.remark.as_deref().unwrap_or("").contains(what),
            "remark names the problem ({what}): {:?}",
            r.remark
        );
    }
    let r = c.call(end_cmd("pg", half_offset, phy, 5));
    assert_eq!(r.code, response_code::INVALID_PARAMETER, "{:?}", r.remark);
    assert_eq!(
        bodies_from(&mut c, 0),
        vec!["plain-0"],
        "nothing committed yet"
    );

    let r = c.call(end_cmd("pg", half_offset, phy, 8));
    assert_eq!(r.code, 0, "commit: {:?}", r.remark);
    for state in [8, 12] {
        let r = c.call(end_cmd("pg", half_offset, phy, state));
        assert_eq!(r.code, response_code::SYSTEM_ERROR, "second decision");
        assert!(r
            .remark
            .as_deref()
            .unwrap_or("")
            .contains("already decided"));
    }
    assert_eq!(
        bodies_from(&mut c, 0),
        vec!["plain-0", "tx-1"],
        "committed once"
    );

    // A rolled-back message never shows.
    let r = c.call(send_cmd(TOPIC, 0, b"tx-2", &prepared_props("pg", "U2")));
    let (off2, phy2) = (
        r.ext("queueOffset").unwrap().parse::<i64>().unwrap(),
        phy_of(r.ext("msgId").unwrap()),
    );
    let r = c.call(end_cmd("pg", off2, phy2, 12));
    assert_eq!(r.code, 0, "rollback: {:?}", r.remark);
    let r = c.call(end_cmd("pg", off2, phy2, 8));
    assert_eq!(r.code, response_code::SYSTEM_ERROR, "commit after rollback");
    assert_eq!(bodies_from(&mut c, 0), vec!["plain-0", "tx-1"]);
}

/// No client may send into the transaction topics.
#[test]
fn transaction_topics_refuse_client_writes() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    for topic in [
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
    ] {
        let r = c.call(send_cmd(topic, 0, b"forged", ""));
        assert_eq!(
            r.code,
            response_code::NO_PERMISSION,
            "{topic}: {:?}",
            r.remark
        );
    }
}

/// `rejectTransactionMessage=true` answers a prepared send with NO_PERMISSION and stores
/// nothing, while plain sends still work.
#[test]
fn reject_transaction_message_refuses_prepared_sends() {
    let b = RawBroker::start(&["rejectTransactionMessage=true"]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd(TOPIC, 0, b"plain-0", ""));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let r = c.call(send_cmd(TOPIC, 0, b"tx", &prepared_props("pg", "U1")));
    assert_eq!(r.code, response_code::NO_PERMISSION, "{:?}", r.remark);
    assert_eq!(bodies_from(&mut c, 0), vec!["plain-0"]);
}

/// A committed message with a delay level is delivered after its delay, as any delayed send,
/// not at the commit.
#[test]
fn committed_message_keeps_its_delay_level() {
    let b = RawBroker::start(&["messageDelayLevel=1s 3s"]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd(TOPIC, 0, b"plain-0", ""));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let props = format!("DELAY\u{1}2\u{2}{}", prepared_props("pg", "UD"));
    let r = c.call(send_cmd(TOPIC, 0, b"tx-delayed", &props));
    assert_eq!(r.code, 0, "prepared send: {:?}", r.remark);
    let (off, phy) = (
        r.ext("queueOffset").unwrap().parse::<i64>().unwrap(),
        phy_of(r.ext("msgId").unwrap()),
    );
    let committed_at = std::time::Instant::now();
    let r = c.call(end_cmd("pg", off, phy, 8));
    assert_eq!(r.code, 0, "commit: {:?}", r.remark);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(
        bodies_from(&mut c, 0),
        vec!["plain-0"],
        "not before its delay"
    );
    let deadline = committed_at + std::time::Duration::from_secs(10);
    loop {
        let got = bodies_from(&mut c, 0);
        if got.len() > 1 {
            assert_eq!(got, vec!["plain-0", "tx-delayed"], "delivered once");
            assert!(committed_at.elapsed() >= std::time::Duration::from_millis(2900));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never delivered");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
