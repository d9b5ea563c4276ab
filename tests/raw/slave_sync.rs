//! A SLAVE copies its master's metadata over the master's remoting port, as Java's
//! `SlaveSynchronize` does: topic configs (21), consumer offsets (43), delay-level progress (45)
//! and subscription groups (201). The slave answers reads with them, takes later changes,
//! keeps them in its own config files across a restart, and keeps what it has when the master
//! is gone. The master's 43 and 45 bodies carry Java's field names, on the fast port too.

use crate::raw_support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use raw_support::admin::{commit_on, committed_on};
use raw_support::{create_topic_cmd, send_cmd, Conn, RawBroker};
use ringmq::protocol::body::{from_json, SubscriptionGroupWrapper, TopicConfigSerializeWrapper};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::frame::split_frame;
use ringmq::protocol::RemotingCommand;

/// A slave with several shards, so offsets and delay progress are routed to owner shards.
const SLAVE: &[&str] = &[
    "brokerRole=SLAVE",
    "brokerId=1",
    "slaveReadEnable=true",
    "fastListenPort=0",
    "shardCount=3",
    "pinCores=false",
];

fn create_topic(c: &mut Conn, topic: &str, queues: i32) {
    let r = c.call(create_topic_cmd(topic, queues));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

fn create_group(c: &mut Conn, group: &str) {
    let body = format!(r#"{{"groupName":"{group}","retryMaxTimes":3,"consumeEnable":true}}"#);
    let r = c.call(
        RemotingCommand::new_request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(body.into_bytes()),
    );
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

fn topics(c: &mut Conn) -> TopicConfigSerializeWrapper {
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_ALL_TOPIC_CONFIG,
    ));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    from_json(&r.body).expect("topic config body")
}

fn groups(c: &mut Conn) -> SubscriptionGroupWrapper {
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    ));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    from_json(&r.body).expect("subscription group body")
}

/// A GET_ALL_* body as a JSON tree (fastjson's unquoted integer keys read as strings), and
/// its raw text.
fn all(c: &mut Conn, code: i32) -> (serde_json::Value, String) {
    let r = c.call(RemotingCommand::new_request(code));
    assert_eq!(r.code, response_code::SUCCESS, "{code}: {:?}", r.remark);
    let text = String::from_utf8(r.body.to_vec()).expect("utf-8 body");
    (from_json(&r.body).expect("JSON body"), text)
}

fn delay_offset(c: &mut Conn, level: &str) -> Option<i64> {
    all(c, request_code::GET_ALL_DELAY_OFFSET).0["offsetTable"][level].as_i64()
}

fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A slave on a store of the test's choosing (a restart, or files written by the test),
/// registered with the name server at `namesrv`.
struct Restarted {
    child: Child,
    broker: SocketAddr,
}

impl Restarted {
    fn start(store: &std::path::Path, namesrv: SocketAddr) -> Restarted {
        Self::start_logged(store, namesrv, Stdio::null())
    }

    /// As `start`, with the slave's log (stderr) going to `log`.
    fn start_logged(store: &std::path::Path, namesrv: SocketAddr, log: Stdio) -> Restarted {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
            .args(["broker", "--namesrv-addr"])
            .arg(namesrv.to_string())
            .args(["--broker-listen", "127.0.0.1:0", "--store-dir"])
            .arg(store)
            .args(["-o", "mappedFileSizeCommitLog=16777216"])
            .args(["-o", "brokerIP1=127.0.0.1"])
            .args(SLAVE.iter().flat_map(|o| ["-o", o]))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn ringmq");
        let out = child.stdout.take().expect("stdout");
        let broker = BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| {
                l.strip_prefix("broker listening on ")
                    .map(|a| a.trim().parse().unwrap())
            })
            .expect("broker address");
        Restarted { child, broker }
    }
}

impl Drop for Restarted {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Everything the master has reaches the slave, later changes too, and the slave's files keep
/// them: after a restart without a master it answers the same.
#[test]
fn a_slave_mirrors_its_masters_metadata() {
    let fast = free_port();
    let fast_port = format!("fastListenPort={fast}");
    let master = RawBroker::start(&[&fast_port, "shardCount=2", "pinCores=false"]);
    let mut m = Conn::connect(master.broker);
    create_topic(&mut m, "SyncT1", 4);
    create_group(&mut m, "SyncG1");
    for (q, off) in [(0, 5), (1, 7), (3, 11)] {
        commit_on(&mut m, "SyncG1", "SyncT1", q, off);
    }
    let r = m.call(send_cmd("SyncDelayT", 0, b"later", "DELAY\u{1}1\u{2}"));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert!(
        eventually(Duration::from_secs(6), || delay_offset(&mut m, "1")
            == Some(1)),
        "the master delivers its level-1 message and records the level's progress"
    );

    // The master's bodies, with Java's field names (and fastjson's unquoted integer keys).
    let (offsets, text) = all(&mut m, request_code::GET_ALL_CONSUMER_OFFSET);
    assert_eq!(offsets["offsetTable"]["SyncT1@SyncG1"]["1"], 7, "{text}");
    assert!(text.contains("\"offsetTable\":{"), "{text}");
    assert!(text.contains("\"SyncT1@SyncG1\":{0:5,1:7,3:11}"), "{text}");
    assert!(
        offsets["dataVersion"]["timestamp"].as_i64() > Some(0),
        "{text}"
    );
    assert!(offsets["dataVersion"]["counter"].is_i64(), "{text}");
    let (delay, text) = all(&mut m, request_code::GET_ALL_DELAY_OFFSET);
    assert!(text.contains("\"offsetTable\":{1:1}"), "{text}");
    assert!(delay["dataVersion"]["stateVersion"].is_i64(), "{text}");
    // The fast (VIP) port serves them as well.
    let mut f = Conn::connect(SocketAddr::from(([127, 0, 0, 1], fast)));
    let (offsets, text) = all(&mut f, request_code::GET_ALL_CONSUMER_OFFSET);
    assert_eq!(offsets["offsetTable"]["SyncT1@SyncG1"]["3"], 11, "{text}");
    assert_eq!(delay_offset(&mut f, "1"), Some(1));

    let slave = RawBroker::start_broker(master.namesrv, SLAVE);
    let mut s = Conn::connect(slave.broker);
    assert!(
        eventually(Duration::from_secs(10), || {
            topics(&mut s).topic_config_table.contains_key("SyncT1")
        }),
        "the slave lists the master's topics"
    );
    let t = &topics(&mut s).topic_config_table["SyncT1"];
    assert_eq!((t.read_queue_nums, t.write_queue_nums), (4, 4));
    assert_eq!(topics(&mut s).data_version, topics(&mut m).data_version);
    assert!(
        eventually(Duration::from_secs(10), || {
            groups(&mut s)
                .subscription_group_table
                .contains_key("SyncG1")
                && committed_on(&mut s, "SyncG1", "SyncT1", 3) == Some(11)
                && delay_offset(&mut s, "1") == Some(1)
        }),
        "the slave has the master's groups, offsets and delay progress"
    );
    assert_eq!(
        groups(&mut s).subscription_group_table["SyncG1"].retry_max_times,
        3
    );
    assert_eq!(committed_on(&mut s, "SyncG1", "SyncT1", 0), Some(5));
    assert_eq!(committed_on(&mut s, "SyncG1", "SyncT1", 1), Some(7));
    assert_eq!(committed_on(&mut s, "SyncG1", "SyncT1", 2), None);

    // Later changes on the master reach the slave.
    create_topic(&mut m, "SyncT2", 2);
    commit_on(&mut m, "SyncG1", "SyncT1", 0, 9);
    assert!(
        eventually(Duration::from_secs(10), || {
            topics(&mut s).topic_config_table.contains_key("SyncT2")
                && committed_on(&mut s, "SyncG1", "SyncT1", 0) == Some(9)
        }),
        "a new topic and a new commit on the master reach the slave"
    );

    // Persisted: the slave's files hold them, and a slave restarted without any master
    // answers the same.
    let store = slave.stop();
    let config = store.path().join("config");
    let read = |f: &str| std::fs::read_to_string(config.join(f)).unwrap_or_default();
    assert!(read("topics.json").contains("SyncT2"));
    assert!(read("subscriptionGroup.json").contains("SyncG1"));
    assert!(read("consumerOffset.json").contains("SyncT1@SyncG1"));
    assert!(read("delayOffset.json").contains("1:1"));
    // A name server that is not there: the slave never learns a master.
    let nowhere = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let again = Restarted::start(store.path(), nowhere);
    let mut r = Conn::connect(again.broker);
    assert!(topics(&mut r).topic_config_table.contains_key("SyncT2"));
    assert!(groups(&mut r)
        .subscription_group_table
        .contains_key("SyncG1"));
    assert_eq!(committed_on(&mut r, "SyncG1", "SyncT1", 0), Some(9));
    assert_eq!(committed_on(&mut r, "SyncG1", "SyncT1", 3), Some(11));
    assert_eq!(delay_offset(&mut r, "1"), Some(1));
}

/// A master that goes away leaves the slave's copy as it was, round after round.
#[test]
fn an_unreachable_master_leaves_the_slaves_tables() {
    let master = RawBroker::start(&["fastListenPort=0"]);
    let mut m = Conn::connect(master.broker);
    create_topic(&mut m, "KeepT", 2);
    create_group(&mut m, "KeepG");
    commit_on(&mut m, "KeepG", "KeepT", 1, 4);
    let slave = RawBroker::start_broker(master.namesrv, SLAVE);
    let mut s = Conn::connect(slave.broker);
    assert!(
        eventually(Duration::from_secs(10), || {
            topics(&mut s).topic_config_table.contains_key("KeepT")
                && groups(&mut s)
                    .subscription_group_table
                    .contains_key("KeepG")
                && committed_on(&mut s, "KeepG", "KeepT", 1) == Some(4)
        }),
        "the slave copies the master first"
    );
    let before = topics(&mut s);
    drop(m);
    let _ = master.kill9();
    // Three sync rounds with the master gone.
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(topics(&mut s), before);
    assert!(groups(&mut s)
        .subscription_group_table
        .contains_key("KeepG"));
    assert_eq!(committed_on(&mut s, "KeepG", "KeepT", 1), Some(4));
}

/// A "master" that answers the four requests with garbage or an error: the slave asks it every
/// round, keeps the tables it loaded from its files, and warns once, not every round.
#[test]
fn a_master_answering_garbage_leaves_the_slaves_tables() {
    let dir = tempfile::tempdir().unwrap();
    let mut ns = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["namesrv", "--listen", "127.0.0.1:0", "--kv-config"])
        .arg(dir.path().join("kv.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn name server");
    let namesrv: SocketAddr = BufReader::new(ns.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("namesrv listening on ")
                .map(|a| a.trim().parse().unwrap())
        })
        .expect("name server address");
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _ns = Kill(ns);

    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_addr = fake.local_addr().unwrap();
    let asked: Arc<Mutex<BTreeMap<i32, usize>>> = Arc::default();
    let seen = asked.clone();
    std::thread::spawn(move || {
        for stream in fake.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || answer_garbage(stream, &seen));
        }
    });
    // The fake registers as the group's master (id 0); its connection stays open.
    let mut reg = Conn::connect(namesrv);
    let r = reg.call(
        RemotingCommand::new_request(request_code::REGISTER_BROKER)
            .with_ext("brokerName", "broker-a")
            .with_ext("brokerAddr", fake_addr)
            .with_ext("clusterName", "DefaultCluster")
            .with_ext("haServerAddr", format!("127.0.0.1:{}", free_port()))
            .with_ext("brokerId", 0)
            .with_ext("compressed", false)
            .with_ext("bodyCrc32", 0)
            .with_body(br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{}}}"#.to_vec()),
    );
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    // The slave's own tables, as files in its store.
    let store = tempfile::tempdir().unwrap();
    let config = store.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    let files = [
        (
            "topics.json",
            r#"{"dataVersion":{"counter":7,"timestamp":1},"topicConfigTable":{"PreT":{"topicName":"PreT","readQueueNums":2,"writeQueueNums":2,"perm":6}}}"#,
        ),
        (
            "subscriptionGroup.json",
            r#"{"dataVersion":{"counter":3,"timestamp":1},"subscriptionGroupTable":{"PreG":{"groupName":"PreG"}}}"#,
        ),
        (
            "consumerOffset.json",
            r#"{"offsetTable":{"PreT@PreG":{0:3,1:4}}}"#,
        ),
        ("delayOffset.json", r#"{"offsetTable":{2:8}}"#),
    ];
    for (f, text) in files {
        std::fs::write(config.join(f), text).unwrap();
    }
    let log_path = dir.path().join("slave.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let slave = Restarted::start_logged(store.path(), namesrv, Stdio::from(log));
    let mut s = Conn::connect(slave.broker);
    let all_four = [
        request_code::GET_ALL_TOPIC_CONFIG,
        request_code::GET_ALL_CONSUMER_OFFSET,
        request_code::GET_ALL_DELAY_OFFSET,
        request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    ];
    assert!(
        eventually(Duration::from_secs(10), || {
            let seen = asked.lock().unwrap();
            all_four.iter().all(|c| seen.contains_key(c))
        }),
        "the slave asks the master it learned for the four tables"
    );
    assert!(
        eventually(Duration::from_secs(8), || {
            asked.lock().unwrap()[&request_code::GET_ALL_TOPIC_CONFIG] >= 3
        }),
        "the slave keeps asking, round after round"
    );
    let t = topics(&mut s);
    assert!(t.topic_config_table.contains_key("PreT"), "{t:?}");
    assert_eq!(t.data_version.counter, 7);
    let g = groups(&mut s);
    assert!(g.subscription_group_table.contains_key("PreG"));
    assert_eq!(g.data_version.counter, 3);
    assert_eq!(committed_on(&mut s, "PreG", "PreT", 0), Some(3));
    assert_eq!(committed_on(&mut s, "PreG", "PreT", 1), Some(4));
    assert_eq!(delay_offset(&mut s, "2"), Some(8));
    let log = std::fs::read_to_string(&log_path).unwrap();
    let warnings = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("cannot copy the master's metadata"))
        .count();
    assert_eq!(
        warnings, 1,
        "the same problem is logged at WARN once:\n{log}"
    );
    drop(reg);
}

/// Serves one connection of the fake master: unreadable bodies, and an error for the delay
/// offsets.
fn answer_garbage(mut stream: std::net::TcpStream, seen: &Mutex<BTreeMap<i32, usize>>) {
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Ok(Some(f)) = split_frame(&mut buf, 1 << 20) {
            let Ok(cmd) = RemotingCommand::decode(f) else {
                return;
            };
            *seen.lock().unwrap().entry(cmd.code).or_default() += 1;
            let resp = match cmd.code {
                request_code::GET_ALL_DELAY_OFFSET => {
                    RemotingCommand::response_for(&cmd, 1, Some("no delay offsets".into()))
                }
                request_code::GET_ALL_CONSUMER_OFFSET => {
                    RemotingCommand::response_for(&cmd, response_code::SUCCESS, None)
                        .with_body(br#"{"offsetTable":"#.to_vec())
                }
                _ => RemotingCommand::response_for(&cmd, response_code::SUCCESS, None)
                    .with_body(b"not json {".to_vec()),
            };
            let mut out = BytesMut::new();
            resp.encode(&mut out).unwrap();
            if stream.write_all(&out).is_err() {
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
