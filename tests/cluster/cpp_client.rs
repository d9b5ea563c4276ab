// Proves the RocketMQ C++ client 2.1 (librocketmq.so, driven from Python through the ctypes
// binding of rocketmq-python-cvs) works against a real ringmq: sync sends and a clustering push
// consumer, an orderly push consumer, tag filtering, send-back through the retry topic, and the
// transaction producer of its C API. Each test runs one script of tests/cpp_client/ with the
// interpreter named by RINGMQ_PYTHON (scripts/python-env.sh makes it; scripts/test.sh exports
// it) and asserts on the JSON lines the script prints.

use crate::common;
use crate::raw_support;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{unique_group, unique_topic, Broker};
use raw_support::Conn;
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;
use serde_json::Value;

/// Queues of every test topic; the scripts send probes and orders to `arg % QUEUES`.
const QUEUES: i32 = 4;
/// The scripts' own deadline (their watchdog exits 2 past it).
const SCRIPT_DEADLINE: Duration = Duration::from_secs(42);
/// Past this the test kills the script: its watchdog failed too.
const SCRIPT_KILL_AFTER: Duration = Duration::from_secs(47);
/// Retry delays of 1 s at every level, so a message sent back returns within seconds.
const FAST_DELAY_LEVELS: &str = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";
/// Half messages are checked back 1 s after they were sent, every 300 ms.
const TX_CHECK_SOON: [(&str, &str); 2] = [
    ("transactionTimeOut", "1000"),
    ("transactionCheckInterval", "300"),
];

/// The interpreter of the venv scripts/python-env.sh makes. Missing is a failure, never a skip.
fn python() -> PathBuf {
    match std::env::var_os("RINGMQ_PYTHON") {
        Some(p) if Path::new(&p).is_file() => PathBuf::from(p),
        Some(p) => panic!(
            "RINGMQ_PYTHON={p:?} is not a file. Run `export RINGMQ_PYTHON=\"$(scripts/python-env.sh)\"` \
             (it installs rocketmq-python-cvs in a venv outside the clone); scripts/test.sh does it."
        ),
        None => panic!(
            "RINGMQ_PYTHON is not set: the C++ client tests need the Python venv with the C++ client. \
             Run `export RINGMQ_PYTHON=\"$(scripts/python-env.sh)\"` first (it installs \
             rocketmq-python-cvs in ~/.cache/ringmq/venv, overridable with RINGMQ_VENV); \
             scripts/test.sh does it."
        ),
    }
}

/// Creates `topic` with [`QUEUES`] queues through UPDATE_AND_CREATE_TOPIC and waits until the
/// name server routes it, so the C++ producer's first lookup finds the real route.
/// Signed with `admin`'s key when given (a broker with access control on).
fn create_topic(broker: &Broker, topic: &str, admin: Option<(&str, &str)>) {
    let mut conn = Conn::connect(broker.broker_addr().parse().expect("broker addr"));
    let mut request = RemotingCommand::new_request(request_code::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", QUEUES)
        .with_ext("writeQueueNums", QUEUES)
        .with_ext("perm", 6)
        .with_ext("topicFilterType", "SINGLE_TAG")
        .with_ext("topicSysFlag", 0)
        .with_ext("order", false);
    if let Some((ak, sk)) = admin {
        ringmq::auth::signature::sign_request(&mut request, ak, sk).expect("sign");
    }
    let resp = conn.call(request);
    assert_eq!(
        resp.code,
        response_code::SUCCESS,
        "create {topic}: {resp:?}"
    );
    let mut ns = Conn::connect(broker.namesrv_addr().parse().expect("namesrv addr"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let route = ns.call(
            RemotingCommand::new_request(request_code::GET_ROUTEINFO_BY_TOPIC)
                .with_ext("topic", topic),
        );
        if route.code == response_code::SUCCESS {
            return;
        }
        assert!(Instant::now() < deadline, "no route for {topic}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a scenario printed: its JSON lines by event name, in order.
struct Events {
    lines: Vec<Value>,
}

impl Events {
    fn of(&self, event: &str) -> Vec<&Value> {
        self.lines.iter().filter(|l| l["event"] == event).collect()
    }
}

fn field<'a>(line: &'a Value, name: &str) -> &'a str {
    line[name]
        .as_str()
        .unwrap_or_else(|| panic!("{name} missing in {line}"))
}

/// A script's child process; killed if the test panics before it ended.
struct Script {
    child: Child,
    stdout: Option<JoinHandle<Vec<String>>>,
    stderr: Option<JoinHandle<String>>,
    // Dropped after the child: HOME and the C++ client's logs.
    home: tempfile::TempDir,
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Script {
    /// The tail of the C++ client's log files, for failure reports.
    fn client_log_tail(&self) -> String {
        let files = walk(self.home.path());
        let mut out = format!("files under the script's HOME: {files:?}\n");
        for entry in files {
            if entry.to_string_lossy().contains("rocketmq-cpp") {
                let mut text = String::new();
                if let Ok(mut f) = std::fs::File::open(&entry) {
                    let _ = f.read_to_string(&mut text);
                }
                let lines: Vec<&str> = text.lines().collect();
                let from = lines.len().saturating_sub(40);
                out.push_str(&format!("--- {} ---\n", entry.display()));
                out.push_str(&lines[from..].join("\n"));
                out.push('\n');
            }
        }
        out
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                files.extend(walk(&p));
            } else {
                files.push(p);
            }
        }
    }
    files
}

/// Runs `tests/cpp_client/<name>` against `broker` on a fresh topic and group (extra arguments
/// after the common ones) and returns its lines once it printed "done" and exited 0.
fn run_scenario(broker: &Broker, name: &str, topic: &str, extra: &[&str]) -> Events {
    run_scenario_as(broker, name, topic, extra, None)
}

/// As [`run_scenario`], the topic created with `admin`'s key.
fn run_scenario_as(
    broker: &Broker,
    name: &str,
    topic: &str,
    extra: &[&str],
    admin: Option<(&str, &str)>,
) -> Events {
    let python = python();
    create_topic(broker, topic, admin);
    let home = tempfile::Builder::new()
        .prefix("ringmq-cpp-client-")
        .tempdir()
        .expect("temp HOME");
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cpp_client");
    let group = unique_group(name.trim_end_matches(".py"));
    let mut child = Command::new(&python)
        // -B: no __pycache__ in the source tree.
        .arg("-B")
        .arg(scripts.join(name))
        .args(["--namesrv", &broker.namesrv_addr()])
        .args(["--topic", topic, "--group", &group])
        .arg("--log-dir")
        .arg(home.path())
        .args(["--queues", &QUEUES.to_string()])
        .args(["--deadline-s", &SCRIPT_DEADLINE.as_secs().to_string()])
        .args(extra)
        // The C++ client writes its default logs and local offsets under $HOME.
        .env("HOME", home.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python:?}: {e}"));
    let out = child.stdout.take().expect("stdout piped");
    let err = child.stderr.take().expect("stderr piped");
    let (tx, rx) = mpsc::channel();
    let stdout = std::thread::spawn(move || {
        let lines: Vec<String> = BufReader::new(out).lines().map_while(Result::ok).collect();
        let _ = tx.send(());
        lines
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(err).read_to_string(&mut s);
        s
    });
    let mut script = Script {
        child,
        stdout: Some(stdout),
        stderr: Some(stderr),
        home,
    };
    let started = Instant::now();
    let status = loop {
        if let Some(status) = script.child.try_wait().expect("wait for the script") {
            break Some(status);
        }
        if started.elapsed() > SCRIPT_KILL_AFTER {
            break None;
        }
        let _ = rx.recv_timeout(Duration::from_millis(100));
    };
    let _ = script.child.kill();
    let _ = script.child.wait();
    let lines = script.stdout.take().map(|h| h.join().unwrap_or_default());
    let stderr = script.stderr.take().map(|h| h.join().unwrap_or_default());
    let lines = lines.unwrap_or_default();
    let parsed: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let done = parsed.iter().any(|l| l["event"] == "done");
    if !done || !status.is_some_and(|s| s.success()) {
        panic!(
            "{name} did not finish (status {status:?}, killed after {SCRIPT_KILL_AFTER:?} if None)\n\
             --- stdout ---\n{}\n--- stderr ---\n{}\n--- C++ client log (tail) ---\n{}\n\
             --- broker stderr (tail) ---\n{}",
            lines.join("\n"),
            stderr.unwrap_or_default(),
            script.client_log_tail(),
            broker.stderr_tail()
        );
    }
    Events { lines: parsed }
}

/// With access control on (ACL 1.0's plain_acl.yml), the C++ client's session credential
/// signs every request its producer and push consumer send, so both work; a producer with a
/// wrong secret and one without a credential (the client then sends an empty AccessKey) are
/// refused, and nothing they sent is consumed.
#[test]
fn session_credentials_sign_every_request() {
    let conf = tempfile::tempdir().expect("tempdir");
    let file = conf.path().join("plain_acl.yml");
    std::fs::write(
        &file,
        "accounts:\n  - accessKey: cppuser\n    secretKey: cpp-secret-1\n    admin: false\n    \
         defaultTopicPerm: PUB|SUB\n    defaultGroupPerm: SUB\n  - accessKey: ops\n    \
         secretKey: ops-secret-1\n    admin: true\n",
    )
    .expect("write plain_acl.yml");
    let file = file.display().to_string();
    let broker = Broker::start_with(&[
        ("aclEnable", "true"),
        ("rocketmq.acl.plain.file", file.as_str()),
    ]);
    let topic = unique_topic("cpp_acl");
    let events = run_scenario_as(
        &broker,
        "acl.py",
        &topic,
        &[
            "--count",
            "6",
            "--access-key",
            "cppuser",
            "--secret-key",
            "cpp-secret-1",
        ],
        Some(("ops", "ops-secret-1")),
    );
    let sent = events.of("sent");
    assert_eq!(sent.len(), 6);
    assert!(sent.iter().all(|s| s["status"] == 0), "SEND_OK: {sent:?}");
    let received = received_by_key(&events);
    assert_eq!(received.len(), 6, "only the signed keys: {received:?}");
    assert!(
        events.of("accepted").is_empty(),
        "{:?}",
        events.of("accepted")
    );
    let refused = events.of("refused");
    let who: Vec<&str> = refused.iter().map(|r| field(r, "who")).collect();
    assert_eq!(who, ["wrong_secret", "no_credential"], "{refused:?}");
    // The client's own error text varies (it may report the refused route lookup); the
    // broker's log says why each was refused: SEND_MESSAGE_V2 (310) with a bad signature and
    // with the empty AccessKey.
    let log = broker.stderr_tail();
    for reason in ["check signature failed", "username cannot be null"] {
        assert!(
            log.lines()
                .any(|l| l.contains("request refused by access control")
                    && l.contains("code=310")
                    && l.contains(reason)),
            "no refused send ({reason}) in the broker's log:\n{log}"
        );
    }
}

/// Received lines by message key.
fn received_by_key(events: &Events) -> BTreeMap<String, Vec<&Value>> {
    let mut by_key: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for r in events.of("recv") {
        by_key
            .entry(field(r, "keys").to_string())
            .or_default()
            .push(r);
    }
    by_key
}

/// Every message sent with send_sync reaches the clustering push consumer exactly once with its
/// topic, tags, keys, body (one compressed by the client), user property and message id.
#[test]
fn sync_sends_reach_the_push_consumer_intact() {
    let broker = Broker::start();
    let topic = unique_topic("cpp_send");
    let events = run_scenario(&broker, "send_and_consume.py", &topic, &["--count", "12"]);
    let sent = events.of("sent");
    assert_eq!(sent.len(), 12);
    let received = received_by_key(&events);
    for s in &sent {
        assert_eq!(s["status"], 0, "SEND_OK: {s}");
        let key = field(s, "keys");
        let got = received
            .get(key)
            .unwrap_or_else(|| panic!("{key} never received"));
        assert_eq!(got.len(), 1, "{key} received once: {got:?}");
        let r = got[0];
        assert_eq!(field(r, "topic"), topic);
        for f in ["tags", "body", "case", "msg_id"] {
            assert_eq!(r[f], s[f], "{key}: {f}");
        }
    }
    assert_eq!(
        received.len(),
        sent.len(),
        "only the sent keys: {received:?}"
    );
}

/// An orderly push consumer gets every order's steps in the order they were sent, each once,
/// all from the queue the producer's selector chose (order id % queue count).
#[test]
fn orderly_consumer_keeps_per_queue_order() {
    let broker = Broker::start();
    let topic = unique_topic("cpp_orderly");
    let (orders, steps) = (4usize, 8usize);
    let events = run_scenario(
        &broker,
        "orderly.py",
        &topic,
        &[
            "--orders",
            &orders.to_string(),
            "--steps",
            &steps.to_string(),
        ],
    );
    assert_eq!(events.of("sent").len(), orders * steps);
    let mut steps_seen: HashMap<usize, Vec<usize>> = HashMap::new();
    for r in events.of("recv") {
        let body = field(r, "body");
        let (order, step) = body.split_once(':').expect("order:step body");
        let order: usize = order.parse().expect("order");
        assert_eq!(
            r["queue_id"].as_u64(),
            Some((order % QUEUES as usize) as u64),
            "order {order} on its queue: {r}"
        );
        steps_seen
            .entry(order)
            .or_default()
            .push(step.parse().expect("step"));
    }
    for order in 0..orders {
        assert_eq!(
            steps_seen.get(&order),
            Some(&(0..steps).collect::<Vec<_>>()),
            "order {order}"
        );
    }
}

/// A consumer subscribed to `TagA || TagC` receives every TagA and TagC message once and no
/// TagB message.
#[test]
fn tag_subscription_delivers_only_matching_tags() {
    let broker = Broker::start();
    let topic = unique_topic("cpp_tags");
    let events = run_scenario(
        &broker,
        "tag_filter.py",
        &topic,
        &["--expression", "TagA || TagC", "--count", "15"],
    );
    let received = received_by_key(&events);
    let mut wanted = 0;
    for s in events.of("sent") {
        let key = field(s, "keys");
        let copies = received.get(key).map_or(0, Vec::len);
        if field(s, "tags") == "TagB" {
            assert_eq!(copies, 0, "{key} (TagB) must not be delivered");
        } else {
            assert_eq!(copies, 1, "{key} ({}) delivered once", field(s, "tags"));
            wanted += 1;
        }
    }
    assert_eq!(wanted, 10);
    assert_eq!(received.len(), wanted, "{received:?}");
}

/// A message whose first delivery answers RECONSUME_LATER comes back through the retry topic
/// with reconsumeTimes 1, its original topic, body, tags, property and id; a message consumed
/// at once is not redelivered.
#[test]
fn reconsume_later_redelivers_through_the_retry_topic() {
    let broker = Broker::start_with(&[("messageDelayLevel", FAST_DELAY_LEVELS)]);
    let topic = unique_topic("cpp_retry");
    let events = run_scenario(&broker, "send_back.py", &topic, &["--failing", "2"]);
    let received = received_by_key(&events);
    for s in events.of("sent") {
        let key = field(s, "keys");
        let got = received
            .get(key)
            .unwrap_or_else(|| panic!("{key} never received"));
        let expect: Vec<(u64, bool)> = if key.starts_with("fail-") {
            vec![(0, false), (1, true)]
        } else {
            vec![(0, true)]
        };
        let seen: Vec<(u64, bool)> = got
            .iter()
            .map(|r| {
                (
                    r["reconsume_times"].as_u64().unwrap_or(u64::MAX),
                    r["consumed"].as_bool().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            seen, expect,
            "{key}: (reconsumeTimes, consumed) per delivery"
        );
        for r in got {
            assert_eq!(field(r, "topic"), topic, "{key}: original topic");
            for f in ["tags", "body", "case", "msg_id"] {
                assert_eq!(r[f], s[f], "{key}: {f}");
            }
        }
    }
}

/// The C API's transaction producer: messages committed by the local transaction or, after an
/// UNKNOWN, by the broker's check-back to the C++ producer are consumed exactly once; those
/// rolled back either way are never delivered.
#[test]
fn transaction_commits_are_consumed_and_rollbacks_never_delivered() {
    let broker = Broker::start_with(&TX_CHECK_SOON);
    let topic = unique_topic("cpp_tx");
    let events = run_scenario(&broker, "transaction.py", &topic, &["--linger-s", "5"]);
    let sent = events.of("sent_tx");
    assert_eq!(sent.len(), 4);
    for s in sent {
        assert_eq!(s["api_status"], 0, "{s}");
        assert_eq!(s["status"], 0, "half message SEND_OK: {s}");
    }
    let checked: Vec<&str> = events
        .of("check")
        .iter()
        .map(|c| field(c, "keys"))
        .collect();
    for key in ["check-commit-0", "check-rollback-0"] {
        assert!(
            checked.contains(&key),
            "the broker asks the producer about {key}: {checked:?}"
        );
    }
    let received = received_by_key(&events);
    for key in ["commit-0", "check-commit-0"] {
        let copies = received.get(key).map_or(0, Vec::len);
        assert_eq!(copies, 1, "{key} is consumed once");
        assert_eq!(field(received[key][0], "body"), format!("body of {key}"));
    }
    for key in ["rollback-0", "check-rollback-0"] {
        assert!(
            !received.contains_key(key),
            "{key} must never be delivered: {received:?}"
        );
    }
}
