//! Which broker a pull answer tells the consumer to read from next (`suggestWhichBrokerId`), as
//! Java's PullMessageProcessor decides it: always the master without `slaveReadEnable`; with
//! it, the group's `whichBrokerWhenConsumeSlowly` when the consumer reads further behind the end
//! of the commit log than `accessMessageInMemoryMaxRatio` percent of memory, else the group's
//! `brokerId`; and a slave sends its consumers back to the master, answering every pull that
//! finds nothing with PULL_RETRY_IMMEDIATELY (it never parks one).

use crate::raw_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use raw_support::{create_topic_cmd, pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

const TOPIC: &str = "SlaveReadTopic";

/// Sends `n` messages to queue 0 of the master at `addr`.
fn send(addr: SocketAddr, n: usize) {
    let mut c = Conn::connect(addr);
    for i in 0..n {
        let r = c.call(send_cmd(TOPIC, 0, format!("m{i}").as_bytes(), ""));
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
}

/// Creates (or replaces) a subscription group from its JSON config.
fn create_group(addr: SocketAddr, json: &str) {
    let r = Conn::connect(addr).call(
        RemotingCommand::new_request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(json.as_bytes().to_vec()),
    );
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

/// Creates the topic (4 queues) on the broker at `addr`. A slave would also take it from its
/// master within a mirroring round (3 s); creating it there too keeps these tests quick.
fn create_topic(addr: SocketAddr) {
    let r = Conn::connect(addr).call(create_topic_cmd(TOPIC, 4));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

/// A pull of queue 0 by `group` at `offset`: (code, suggestWhichBrokerId, messages).
fn pull(addr: SocketAddr, group: &str, offset: i64, suspend_ms: i64) -> (i32, i64, usize) {
    let r = Conn::connect(addr)
        .call(pull_cmd(TOPIC, 0, offset, suspend_ms).with_ext("consumerGroup", group));
    let suggest = r
        .ext("suggestWhichBrokerId")
        .unwrap_or_else(|| panic!("no suggestWhichBrokerId: {} {:?}", r.code, r.remark))
        .parse()
        .expect("a number");
    (r.code, suggest, records(&r.body).len())
}

/// Without `slaveReadEnable` a master always points at itself, however far behind the reader.
#[test]
fn without_slave_read_the_master_suggests_itself() {
    let m = RawBroker::start(&["accessMessageInMemoryMaxRatio=0"]);
    send(m.broker, 20);
    let (code, suggest, n) = pull(m.broker, "g_plain", 0, 0);
    assert_eq!((code, n), (response_code::SUCCESS, 20));
    assert_eq!(suggest, 0, "slaveReadEnable=false: the master");
}

/// With `slaveReadEnable`, a far-behind reader (any found message counts as far behind with a
/// ratio of 0) is sent to the group's `whichBrokerWhenConsumeSlowly`, a reader at the end to
/// the group's `brokerId`; a group without a config gets Java's defaults (1 and 0).
#[test]
fn a_reader_far_behind_is_sent_to_the_slow_consumers_broker() {
    let m = RawBroker::start(&["slaveReadEnable=true", "accessMessageInMemoryMaxRatio=0"]);
    create_group(
        m.broker,
        r#"{"groupName":"g_slow1","whichBrokerWhenConsumeSlowly":1,"brokerId":0}"#,
    );
    create_group(
        m.broker,
        r#"{"groupName":"g_slow2","whichBrokerWhenConsumeSlowly":2,"brokerId":3}"#,
    );
    send(m.broker, 20);

    let (code, suggest, n) = pull(m.broker, "g_slow1", 0, 0);
    assert_eq!((code, n), (response_code::SUCCESS, 20));
    assert_eq!(suggest, 1, "far behind: whichBrokerWhenConsumeSlowly");

    let (code, suggest, _) = pull(m.broker, "g_slow2", 5, 0);
    assert_eq!(code, response_code::SUCCESS);
    assert_eq!(suggest, 2, "the group's own whichBrokerWhenConsumeSlowly");
    // Nothing read, so nothing behind: the group's brokerId.
    let (code, suggest, _) = pull(m.broker, "g_slow2", 20, 0);
    assert_eq!(code, response_code::PULL_NOT_FOUND);
    assert_eq!(suggest, 3, "caught up: the group's brokerId");

    let (code, suggest, _) = pull(m.broker, "g_unconfigured", 0, 0);
    assert_eq!(code, response_code::SUCCESS);
    assert_eq!(suggest, 1, "Java's default whichBrokerWhenConsumeSlowly");
}

/// The default ratio (40 % of memory) keeps a reader of a small queue on the master.
#[test]
fn a_reader_near_the_end_stays_on_the_groups_broker() {
    let m = RawBroker::start(&["slaveReadEnable=true"]);
    send(m.broker, 20);
    let (code, suggest, n) = pull(m.broker, "g_near", 0, 0);
    assert_eq!((code, n), (response_code::SUCCESS, 20));
    assert_eq!(suggest, 0);
}

/// A slave serves what it holds and points its readers back at the master; a pull past what
/// it holds yet is PULL_RETRY_IMMEDIATELY at once (not parked for the suspend timeout), and so
/// is a pull far past its end.
#[test]
fn a_slave_sends_its_readers_back_to_the_master() {
    let master = RawBroker::start(&[]);
    let slave = RawBroker::start_broker(
        master.namesrv,
        &["brokerRole=SLAVE", "brokerId=1", "slaveReadEnable=true"],
    );
    create_topic(slave.broker);
    send(master.broker, 30);
    // Wait for the slave to hold the 30 messages.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, _, n) = pull(slave.broker, "g_s", 0, 0);
        if code == response_code::SUCCESS && n == 30 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slave never served 30 messages: {code} {n}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, suggest, n) = pull(slave.broker, "g_s", 10, 0);
    assert_eq!((code, suggest, n), (response_code::SUCCESS, 0, 20));

    // The master's next message is not on the slave yet: retry now, at the master.
    let started = Instant::now();
    let (code, suggest, n) = pull(slave.broker, "g_s", 30, 5_000);
    assert_eq!(
        (code, suggest, n),
        (response_code::PULL_RETRY_IMMEDIATELY, 0, 0)
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "a slave never parks a pull: {:?}",
        started.elapsed()
    );
    // Far past the end (OFFSET_MOVED on a master).
    let (code, suggest, _) = pull(slave.broker, "g_s", 1_000, 0);
    assert_eq!((code, suggest), (response_code::PULL_RETRY_IMMEDIATELY, 0));

    // The master answers the same miss as NOT_FOUND, its own suggestion 0.
    let (code, suggest, _) = pull(master.broker, "g_s", 30, 0);
    assert_eq!((code, suggest), (response_code::PULL_NOT_FOUND, 0));
}

/// A slave that itself finds the reader far behind suggests the slow consumers' broker too.
#[test]
fn a_slave_keeps_a_far_behind_reader() {
    let master = RawBroker::start(&[]);
    let slave = RawBroker::start_broker(
        master.namesrv,
        &[
            "brokerRole=SLAVE",
            "brokerId=1",
            "slaveReadEnable=true",
            "accessMessageInMemoryMaxRatio=0",
        ],
    );
    create_topic(slave.broker);
    send(master.broker, 10);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, suggest, n) = pull(slave.broker, "g_far", 0, 0);
        if code == response_code::SUCCESS && n == 10 {
            assert_eq!(
                suggest, 1,
                "far behind on a slave: whichBrokerWhenConsumeSlowly"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slave never served 10 messages: {code} {n}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A slave takes consumer offset commits into its own table and answers queries from it (a
/// client commits there once its master is gone from the route).
#[test]
fn a_slave_keeps_offsets_committed_to_it() {
    let master = RawBroker::start(&[]);
    let slave = RawBroker::start_broker(
        master.namesrv,
        &["brokerRole=SLAVE", "brokerId=1", "slaveReadEnable=true"],
    );
    create_topic(slave.broker);
    let mut c = Conn::connect(slave.broker);
    let r = c.call(
        RemotingCommand::new_request(request_code::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "g_off")
            .with_ext("topic", TOPIC)
            .with_ext("queueId", 2)
            .with_ext("commitOffset", 17),
    );
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let r = c.call(
        RemotingCommand::new_request(request_code::QUERY_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "g_off")
            .with_ext("topic", TOPIC)
            .with_ext("queueId", 2),
    );
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.ext("offset"), Some("17"));

    // An offset a pull carries (COMMIT_OFFSET flag) is not kept on a slave, as in Java.
    let r = c.call(
        pull_cmd(TOPIC, 3, 0, 0)
            .with_ext("consumerGroup", "g_off")
            .with_ext("sysFlag", 1 | 4)
            .with_ext("commitOffset", 9),
    );
    assert_eq!(
        r.code,
        response_code::PULL_RETRY_IMMEDIATELY,
        "{:?}",
        r.remark
    );
    let r = c.call(
        RemotingCommand::new_request(request_code::QUERY_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "g_off")
            .with_ext("topic", TOPIC)
            .with_ext("queueId", 3),
    );
    assert_ne!(r.ext("offset"), Some("9"), "{} {:?}", r.code, r.remark);
}
