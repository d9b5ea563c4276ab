//! Running the built `ringmq admin` against a test's broker: its exit code, stdout and stderr,
//! and the JSON document `--json` prints; and the broker state those tests check, asked over
//! the wire.

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use ringmq::protocol::body::{from_json, SubscriptionGroupWrapper};
use ringmq::protocol::codes::request_code;
use ringmq::protocol::RemotingCommand;

use super::Conn;

/// One finished `ringmq admin` run.
#[derive(Debug)]
pub struct AdminRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl AdminRun {
    /// stdout as JSON (panics with the run when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {self:?}"))
    }

    /// The cells of the table's first row (the line after the header).
    pub fn first_row(&self) -> Vec<&str> {
        let line = self.stdout.lines().nth(1);
        line.unwrap_or_else(|| panic!("no table row: {self:?}"))
            .split_whitespace()
            .collect()
    }

    /// Asserts exit 0 and returns self.
    pub fn ok(self) -> AdminRun {
        assert_eq!(self.code, 0, "ringmq admin failed: {self:?}");
        self
    }
}

/// `ringmq admin <args> -n <namesrv>`; `NAMESRV_ADDR` is cleared so only `-n` counts.
pub fn admin(namesrv: SocketAddr, args: &[&str]) -> AdminRun {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend(["-n".to_owned(), namesrv.to_string()]);
    admin_raw(&all, None)
}

/// `ringmq admin <args>` as given, with `NAMESRV_ADDR` set to `env` (or cleared).
pub fn admin_raw(args: &[String], env: Option<&str>) -> AdminRun {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    cmd.arg("admin").args(args).env_remove("NAMESRV_ADDR");
    if let Some(v) = env {
        cmd.env("NAMESRV_ADDR", v);
    }
    let out = cmd.output().expect("run ringmq admin");
    AdminRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `ringmq admin` until it exits 0 (a topic's route reaching the name server, say), for
/// at most 15 s.
pub fn admin_until_ok(namesrv: SocketAddr, args: &[&str]) -> AdminRun {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = admin(namesrv, args);
        if r.code == 0 {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "never succeeded within 15 s: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Creates `topic` with `queues` queues on the broker at `broker` and waits for its route.
pub fn create_topic(namesrv: SocketAddr, broker: SocketAddr, topic: &str, queues: u32) {
    let q = queues.to_string();
    admin(
        namesrv,
        &[
            "updateTopic",
            "-b",
            &broker.to_string(),
            "-t",
            topic,
            "-r",
            &q,
            "-w",
            &q,
        ],
    )
    .ok();
    admin_until_ok(namesrv, &["topicRoute", "-t", topic]);
}

/// An address nothing listens on.
pub fn dead_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

/// The broker's subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
pub fn groups_of(broker: SocketAddr) -> SubscriptionGroupWrapper {
    let mut c = Conn::connect(broker);
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    ));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    from_json(&r.body).expect("group wrapper")
}

/// Commits `offset` for `group` on `topic` queue `qid` (UPDATE_CONSUMER_OFFSET).
pub fn commit_offset(broker: SocketAddr, group: &str, topic: &str, qid: i32, offset: i64) {
    commit_on(&mut Conn::connect(broker), group, topic, qid, offset);
}

/// UPDATE_CONSUMER_OFFSET over an open connection; asserts success.
pub fn commit_on(c: &mut Conn, group: &str, topic: &str, qid: i32, offset: i64) {
    let r = c.call(
        RemotingCommand::new_request(request_code::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", group)
            .with_ext("topic", topic)
            .with_ext("queueId", qid)
            .with_ext("commitOffset", offset),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
}

/// The committed offset (QUERY_CONSUMER_OFFSET), or None when the broker has none.
pub fn committed_on(c: &mut Conn, group: &str, topic: &str, qid: i32) -> Option<i64> {
    let r = c.call(
        RemotingCommand::new_request(request_code::QUERY_CONSUMER_OFFSET)
            .with_ext("consumerGroup", group)
            .with_ext("topic", topic)
            .with_ext("queueId", qid)
            .with_ext("setZeroIfNotFound", false),
    );
    (r.code == 0).then(|| r.ext("offset").unwrap().parse().unwrap())
}
