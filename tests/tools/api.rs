//! The web console's HTTP side over real sockets, without a browser: the JSON API's errors
//! (bad requests, a form not posted as JSON, missing topics and groups, a name server or a
//! broker that does not answer), the bounds of its HTTP server (an oversized request, browsers
//! that stall), `ringmq console` running alone and stopping on SIGTERM, and `serve` refusing to
//! start with its console address taken.

use crate::common;
use crate::raw_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

/// Sends `raw` (a whole HTTP request) to `addr`; the answer's status and body.
fn exchange(addr: &str, raw: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the console");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(raw).expect("send the request");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read the answer");
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

fn get(addr: &str, path: &str) -> (u16, String) {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
    )
}

fn post(addr: &str, path: &str, json: &str) -> (u16, String) {
    let raw = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{json}",
        json.len()
    );
    exchange(addr, raw.as_bytes())
}

/// The `error` message of a JSON error answer.
fn error_of(body: &str) -> String {
    let v: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message: {body}"))
        .to_string()
}

/// Every kind of bad API request gets a JSON error with the status of its cause and a message
/// that names what was wrong, and a missing page gets the HTML 404 page.
#[test]
fn api_errors_are_json_with_their_status() {
    let broker = Broker::start_with_console(&[]);
    let c = broker.console_addr();
    let form_as_text = exchange(
        &c,
        format!(
            "POST /api/topics HTTP/1.1\r\nHost: {c}\r\nContent-Type: text/plain\r\n\
             Content-Length: 2\r\n\r\n{{}}"
        )
        .as_bytes(),
    );
    let cases: Vec<((u16, String), u16, &str)> = vec![
        (form_as_text, 415, "application/json"),
        (get(&c, "/api/nothing"), 404, "/api/nothing"),
        (post(&c, "/api/cluster", "{}"), 405, "POST"),
        (get(&c, "/api/messages"), 400, "message id"),
        (get(&c, "/api/messages?key=k"), 400, "topic"),
        (get(&c, "/api/messages?id=zz"), 400, "zz"),
        (get(&c, "/api/topics/NoSuchTopic"), 404, "NoSuchTopic"),
        (get(&c, "/api/groups/NoSuchGroup"), 404, "NoSuchGroup"),
        (post(&c, "/api/topics", "not json"), 400, "form"),
        (
            post(
                &c,
                "/api/topics",
                r#"{"topic":"a b","readQueueNums":4,"writeQueueNums":4,"perm":6}"#,
            ),
            400,
            "a b",
        ),
        (
            post(
                &c,
                "/api/topics",
                r#"{"topic":"T","readQueueNums":0,"writeQueueNums":4,"perm":6}"#,
            ),
            400,
            "read queues",
        ),
        (
            post(
                &c,
                "/api/groups/G/reset-offset",
                r#"{"topic":"","timestamp":1}"#,
            ),
            400,
            "topic",
        ),
    ];
    for ((status, body), want, says) in cases {
        assert_eq!(status, want, "{body}");
        let msg = error_of(&body);
        assert!(msg.contains(says), "{want}: {msg:?} should name {says:?}");
    }
    let (status, page) = get(&c, "/no/such/page");
    assert_eq!(status, 404);
    assert!(
        page.contains("href=\"/\"") && page.contains("/no/such/page"),
        "{page}"
    );
    // A good request still works after all of them.
    let (status, body) = get(&c, "/api/cluster");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&broker.broker_addr()), "{body}");
}

/// `ringmq console` alone, pointed at a name server that is not there, serves its pages, answers
/// its API with a 502 that names the unreachable address, and exits 0 on SIGTERM.
#[test]
fn a_name_server_down_is_a_clear_error() {
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let console = ConsoleProcess::start(&dead_addr);
    let c = console.addr();
    assert_eq!(get(&c, "/").0, 200);
    for path in ["/api/cluster", "/api/topics", "/api/groups"] {
        let (status, body) = get(&c, path);
        assert_eq!(status, 502, "{path}: {body}");
        let msg = error_of(&body);
        assert!(msg.contains(&dead_addr), "{path}: {msg:?}");
    }
    assert!(
        console.stop().success(),
        "ringmq console exits 0 on SIGTERM"
    );
}

/// A request head larger than the console reads is refused with 413, and browsers that connect
/// and stall hold its workers only until their deadline: a request behind them on every worker
/// is still answered, and the stalled connections are closed.
#[test]
fn oversized_and_stalled_requests_are_bounded() {
    let broker = Broker::start_with_console(&[]);
    let c = broker.console_addr();
    let big = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(20 * 1024)
    );
    assert_eq!(exchange(&c, big.as_bytes()).0, 413);

    // More stalled browsers than workers (3): each sent half a request and waits.
    let mut stalled: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(&c).unwrap();
            s.write_all(b"GET / HTTP/1.1\r\nHo").unwrap();
            s
        })
        .collect();
    let start = Instant::now();
    let (status, _) = get(&c, "/api/cluster");
    assert_eq!(status, 200);
    assert!(
        start.elapsed() < Duration::from_secs(25),
        "answered after {:?}",
        start.elapsed()
    );
    for s in &mut stalled {
        s.set_read_timeout(Some(Duration::from_secs(25))).unwrap();
        let mut buf = [0u8; 64];
        // Closed by the console without an answer: end of stream (or a reset).
        match s.read(&mut buf) {
            Ok(n) => assert_eq!(n, 0, "a stalled request got an answer"),
            Err(e) => assert!(
                e.kind() == std::io::ErrorKind::ConnectionReset,
                "stalled connection not closed: {e}"
            ),
        }
    }
}

/// A page on another site cannot drive the console: a request naming a host the console does
/// not serve (DNS rebinding) is refused 403, and so is one whose Origin is another site, before
/// anything is done; the console's own origin and plain requests pass, and every answer forbids
/// framing.
#[test]
fn rebinding_and_foreign_origins_are_refused() {
    let broker = Broker::start_with_console(&[]);
    let c = broker.console_addr();
    let create = r#"{"topic":"GuardT","readQueueNums":1,"writeQueueNums":1,"perm":6}"#;
    let raw = |host: &str, origin: Option<&str>| {
        let origin = origin
            .map(|o| format!("Origin: {o}\r\n"))
            .unwrap_or_default();
        format!(
            "POST /api/topics HTTP/1.1\r\nHost: {host}\r\n{origin}\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{create}",
            create.len()
        )
    };
    let port = c.rsplit(':').next().unwrap();
    let (status, body) = exchange(&c, raw(&format!("evil.example:{port}"), None).as_bytes());
    assert_eq!(status, 403, "{body}");
    assert!(
        error_of(&body).contains("not served as evil.example"),
        "{body}"
    );
    let (status, body) = exchange(&c, raw(&c, Some("http://evil.example")).as_bytes());
    assert_eq!(status, 403, "{body}");
    let (_, topics) = get(&c, "/api/topics");
    assert!(
        !topics.contains("GuardT"),
        "a refused request created the topic: {topics}"
    );
    let own = format!("http://{c}");
    let (status, body) = exchange(&c, raw(&c, Some(&own)).as_bytes());
    assert!(status < 300, "the console's own origin: {status} {body}");
    let mut s = std::net::TcpStream::connect(&c).unwrap();
    std::io::Write::write_all(
        &mut s,
        format!("GET / HTTP/1.1\r\nHost: {c}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut head = String::new();
    std::io::Read::read_to_string(&mut s, &mut head).unwrap();
    assert!(head.contains("X-Frame-Options: DENY"), "{head}");
    assert!(head.contains("frame-ancestors 'none'"), "{head}");
}

/// A message id names an address: the console's lookup follows it only to a broker the name
/// server lists, so an id pointing at any other host and port is "not found" and that address
/// is never connected to (a listener the test holds there accepts nothing).
#[test]
fn a_message_id_cannot_point_the_console_elsewhere() {
    let broker = Broker::start_with_console(&[]);
    let c = broker.console_addr();
    let bait = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    bait.set_nonblocking(true).unwrap();
    let port = bait.local_addr().unwrap().port();
    let id = format!("7F000001{:08X}{:016X}", port, 0);
    let (status, body) = get(&c, &format!("/api/messages?id={id}"));
    assert_eq!(status, 404, "{body}");
    assert!(error_of(&body).contains(&id), "{body}");
    assert!(
        bait.accept().is_err(),
        "the console connected to the address the id named"
    );
}

/// `serve --console-listen ADDR` where ADDR is taken stops the start with an error naming the
/// address, before the broker opens its store.
#[test]
fn serve_fails_on_a_taken_console_address() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let store = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["serve", "--namesrv-listen", "127.0.0.1:0"])
        .args(["--broker-listen", "127.0.0.1:0", "--console-listen", &addr])
        .arg("--store-dir")
        .arg(store.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn ringmq");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve kept running with its console address taken");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "{err}");
    assert!(err.contains(&format!("web console on {addr}")), "{err}");
    assert!(
        !store.path().join("commitlog").exists(),
        "the store was opened: {err}"
    );
}

/// A broker the name server lists but that does not answer keeps its row in `/api/cluster`,
/// with the reason it gave no figures, beside the brokers that answer.
#[test]
fn a_broker_down_is_shown_with_its_reason() {
    let broker = Broker::start_with_console(&[]);
    let c = broker.console_addr();
    // A broker registered at an address where nothing listens; its registration connection
    // stays open, so the name server keeps listing it.
    let gone = TcpListener::bind("127.0.0.1:0").unwrap();
    let gone_addr = gone.local_addr().unwrap().to_string();
    drop(gone);
    let mut reg = raw_support::Conn::connect(broker.namesrv_addr().parse().unwrap());
    let r = reg.call(
        RemotingCommand::new_request(request_code::REGISTER_BROKER)
            .with_ext("brokerName", "broker-down")
            .with_ext("brokerAddr", &gone_addr)
            .with_ext("clusterName", "DefaultCluster")
            .with_ext("haServerAddr", &gone_addr)
            .with_ext("brokerId", 0)
            .with_ext("compressed", false)
            .with_ext("bodyCrc32", 0)
            .with_body(br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{}}}"#.to_vec()),
    );
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    let (status, body) = get(&c, "/api/cluster");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let rows: Vec<serde_json::Value> = v["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .flat_map(|cl| cl["brokers"].as_array().cloned().unwrap_or_default())
        .collect();
    let down = rows
        .iter()
        .find(|r| r["brokerName"] == "broker-down")
        .unwrap_or_else(|| panic!("no row for the broker that does not answer: {body}"));
    let why = down["error"].as_str().unwrap_or_default();
    assert!(
        why.contains(&gone_addr) && why.contains("unreachable"),
        "{body}"
    );
    assert!(down["putTps"].is_null(), "{body}");
    let up = rows
        .iter()
        .find(|r| r["brokerName"] == "broker-a")
        .unwrap_or_else(|| panic!("no row for the live broker: {body}"));
    assert!(up["error"].is_null() && up["version"].is_string(), "{body}");
}
