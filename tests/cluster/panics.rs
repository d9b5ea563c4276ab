//! Any panic ends the broker process with a non-zero exit, and a restart recovers everything
//! acknowledged. The panics come from the test switches that only builds with the `testkit`
//! feature have (the binary `cargo test` spawns): a send to `RINGMQ_TEST_PANIC_SHARD` panics on
//! the shard, an append of `RINGMQ_TEST_PANIC_WRITER` panics on the writer thread.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::response_code;

/// Sends 5 messages (each acknowledged), then one to `sentinel`; the process must end on its
/// own, not zero, saying which thread panicked; restarted on its store, it serves the 5.
fn panic_ends_the_process(sentinel: &str, thread_prefix: &str) {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("broker.log");
    let mut b = RawBroker::start_logged(tempfile::tempdir().unwrap(), &[], &log);
    let mut c = Conn::connect(b.broker);
    for i in 0..5 {
        let r = c.call(send_cmd("PanicT", 0, format!("m{i}").as_bytes(), ""));
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    c.send(send_cmd(sentinel, 0, b"boom", ""));
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = b.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the broker outlived its panic");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "exited with {status}");
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("a thread panicked"))
        .unwrap_or_else(|| panic!("no panic line in:\n{text}"));
    assert!(
        line.contains(&format!("thread=\"{thread_prefix}")),
        "{line}"
    );
    assert!(line.contains("test switch"), "{line}");
    let dir = std::mem::replace(&mut b.dir, tempfile::tempdir().unwrap());
    drop(b);
    let b = RawBroker::start_in(dir, &[]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(pull_cmd("PanicT", 0, 0, 0));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let bodies: Vec<Vec<u8>> = records(&r.body).iter().map(|m| m.body.to_vec()).collect();
    let want: Vec<Vec<u8>> = (0..5).map(|i| format!("m{i}").into_bytes()).collect();
    assert_eq!(bodies, want);
}

#[test]
fn a_shard_panic_ends_the_process() {
    panic_ends_the_process("RINGMQ_TEST_PANIC_SHARD", "ringmq-shard-");
}

#[test]
fn a_writer_panic_ends_the_process() {
    panic_ends_the_process("RINGMQ_TEST_PANIC_WRITER", "ringmq-writer");
}
