//! Shared by the hostile_*, overload and soak tests: reads a broker child's memory and fd
//! counts from /proc, checks that it still serves, and drains queues back for verification.
//!
//! Memory is judged by `RssAnon` (heap and stacks) rather than `VmRSS`: the commit-log segments
//! are file mappings whose touched pages count in VmRSS but are page cache, not a leak. VmRSS is
//! still reported so a failure message shows both. Builds on `raw_support` (blocking sockets and
//! ringmq's own codec); every helper has a deadline.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use crate::raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::response_code;

/// One reading of the broker process.
#[derive(Clone, Copy, Debug)]
pub struct ProcSample {
    pub rss_anon_kib: u64,
    pub vm_rss_kib: u64,
    pub fds: usize,
    pub threads: u64,
}

/// Reads /proc/<pid>/status and counts /proc/<pid>/fd.
pub fn sample(pid: u32) -> ProcSample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in /proc/{pid}/status"))
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .expect("proc fd");
    ProcSample {
        rss_anon_kib: field("RssAnon:"),
        vm_rss_kib: field("VmRSS:"),
        fds,
        threads: field("Threads:"),
    }
}

pub fn broker_sample(b: &RawBroker) -> ProcSample {
    sample(b.child.id())
}

/// Waits (up to `within`) until the broker's fd count is back to at most `fds_max` and its
/// anonymous RSS under `rss_anon_max_kib`; panics with the last sample otherwise.
pub fn wait_settled(b: &RawBroker, fds_max: usize, rss_anon_max_kib: u64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let s = broker_sample(b);
        if s.fds <= fds_max && s.rss_anon_kib <= rss_anon_max_kib {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "broker did not settle: {s:?}, want fds <= {fds_max}, RssAnon <= {rss_anon_max_kib} KiB"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A normal client still gets SEND_OK and reads its message back.
pub fn still_serves(b: &RawBroker) {
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd("HealthT", 0, b"ok", ""));
    assert_eq!(r.code, 0, "broker stopped serving: {:?}", r.remark);
    let off: i64 = r.ext("queueOffset").unwrap().parse().unwrap();
    let r = c.call(pull_cmd("HealthT", 0, off, 0));
    assert_eq!(r.code, 0, "pull after send failed: {:?}", r.remark);
    let recs = records(&r.body);
    assert_eq!(recs[0].body, b"ok");
}

/// Sends `n` messages of `size` bytes to (topic, queue) over one connection, pipelined in
/// windows of 64, and returns the queue's max offset afterwards.
pub fn fill_backlog(b: &RawBroker, topic: &str, queue: i32, n: usize, size: usize) -> i64 {
    let mut c = Conn::connect(b.broker);
    let body = vec![b'b'; size];
    let mut sent = 0;
    while sent < n {
        let window = (n - sent).min(64);
        for _ in 0..window {
            c.send(send_cmd(topic, queue, &body, ""));
        }
        for _ in 0..window {
            let r = c.read().expect("broker closed during backlog fill");
            assert_eq!(r.code, 0, "backlog send failed: {:?}", r.remark);
        }
        sent += window;
    }
    n as i64
}

/// Like [`fill_backlog`] but sends to `queues` in turn, so each queue's records lie apart in the
/// commit log and a pull answers with one range per record (the pipe path, not one sendfile).
pub fn fill_backlog_scattered(b: &RawBroker, topic: &str, queues: &[i32], n: usize, size: usize) {
    let mut c = Conn::connect(b.broker);
    let body = vec![b's'; size];
    for round in 0..n.div_ceil(64) {
        let window = (n - round * 64).min(64);
        for _ in 0..window {
            for &q in queues {
                c.send(send_cmd(topic, q, &body, ""));
            }
        }
        for _ in 0..window * queues.len() {
            let r = c.read().expect("broker closed during backlog fill");
            assert_eq!(r.code, 0, "backlog send failed: {:?}", r.remark);
        }
    }
}

/// Pulls (topic, queue) from offset 0 until PULL_NOT_FOUND and returns every body in order.
pub fn drain_queue(c: &mut Conn, topic: &str, queue: i32, within: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    let mut offset = 0i64;
    loop {
        assert!(
            Instant::now() < deadline,
            "draining {topic}/{queue} took too long"
        );
        let r = c.call(pull_cmd(topic, queue, offset, 0));
        match r.code {
            0 => {
                for rec in records(&r.body) {
                    assert_eq!(rec.queue_offset, offset, "gap in queue offsets");
                    offset += 1;
                    out.push(rec.body.to_vec());
                }
                let next: i64 = r.ext("nextBeginOffset").unwrap().parse().unwrap();
                assert_eq!(next, offset, "nextBeginOffset disagrees with records");
            }
            response_code::PULL_NOT_FOUND => return out,
            response_code::PULL_RETRY_IMMEDIATELY => {}
            other => panic!("drain pull of {topic}/{queue}: code {other} {:?}", r.remark),
        }
    }
}
