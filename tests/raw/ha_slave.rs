//! A ringmq slave follows a ringmq master over the classic HA protocol: what the master stores
//! arrives in the slave's commit log at the same offsets, byte for byte, and the slave's own
//! dispatch builds the same consume queues (GET_MAX_OFFSET per queue matches the master's),
//! while the slave still refuses sends of its own; the slave finds its master through
//! `haMasterAddress` or through the name server; and it refuses to follow a master whose
//! offsets do not continue its own log.

use crate::raw_support;

use std::path::Path;
use std::time::{Duration, Instant};

use raw_support::{send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

const TOPIC: &str = "HaFollowTopic";

fn max_offsets(addr: std::net::SocketAddr) -> Vec<String> {
    let mut c = Conn::connect(addr);
    (0..4)
        .map(|q| {
            let r = c.call(
                RemotingCommand::new_request(request_code::GET_MAX_OFFSET)
                    .with_ext("topic", TOPIC)
                    .with_ext("queueId", q),
            );
            r.ext("offset").unwrap_or("none").to_string()
        })
        .collect()
}

/// The first segment's bytes up to its last record.
fn log_prefix(store: &Path) -> Vec<u8> {
    let bytes = std::fs::read(store.join("commitlog").join(format!("{:020}", 0))).unwrap();
    let mut at = 0usize;
    while at + 4 <= bytes.len() {
        let total = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if total == 0 {
            break;
        }
        at += total;
    }
    bytes[..at].to_vec()
}

/// A slave given `haMasterAddress`.
#[test]
fn a_slave_copies_its_master() {
    let master = RawBroker::start(&[]);
    let ha = master.ha.expect("a master listens for slaves");
    let slave = RawBroker::start(&[
        "brokerRole=SLAVE",
        "brokerId=1",
        &format!("haMasterAddress={ha}"),
    ]);
    follows(&master, &slave);
}

/// A slave without `haMasterAddress` learns it from the name server's answer to its
/// registration, as Java's slaves do.
#[test]
fn a_slave_learns_its_master_from_the_name_server() {
    let master = RawBroker::start(&[]);
    let slave = RawBroker::start_broker(master.namesrv, &["brokerRole=SLAVE", "brokerId=1"]);
    follows(&master, &slave);
}

/// Sends to the master until the slave holds the same log and queues.
fn follows(master: &RawBroker, slave: &RawBroker) {
    let mut c = Conn::connect(master.broker);
    for i in 0..300 {
        let body = format!("message {i} {}", "y".repeat(i % 700));
        let r = c.call(send_cmd(TOPIC, (i % 4) as i32, body.as_bytes(), ""));
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    let want = max_offsets(master.broker);
    assert_eq!(want, vec!["75", "75", "75", "75"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = max_offsets(slave.broker);
        if got == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slave's queues {got:?}, the master's {want:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let m = log_prefix(master.dir.path());
    let s = log_prefix(slave.dir.path());
    assert!(m.len() > 300 * 100, "{}", m.len());
    assert_eq!(
        m.len(),
        s.len(),
        "the slave's log ends where the master's does"
    );
    assert!(
        m == s,
        "the slave's commit log is the master's, byte for byte"
    );

    // The slave still takes no sends of its own.
    let r = Conn::connect(slave.broker).call(send_cmd(TOPIC, 0, b"x", ""));
    assert_eq!(r.code, response_code::SERVICE_NOT_AVAILABLE);
}

/// A fake master that serves real commit-log bytes and then a transfer at the wrong offset:
/// the slave appends the first, refuses the second (classic HA has no truncation), says so in
/// its log, drops the connection, and keeps its log as it was; when it comes back it reports
/// the same end.
#[test]
fn a_slave_refuses_a_master_whose_offsets_do_not_match() {
    use std::io::{Read, Write};
    // Real records: a master's first messages.
    let real = RawBroker::start(&[]);
    let mut c = Conn::connect(real.broker);
    for i in 0..10 {
        let r = c.call(send_cmd(TOPIC, 0, format!("real {i}").as_bytes(), ""));
        assert_eq!(r.code, response_code::SUCCESS);
    }
    let records = log_prefix(real.dir.path());
    drop(real);

    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let log = tempfile::NamedTempFile::new().unwrap();
    let slave = RawBroker::start_logged(
        tempfile::tempdir().unwrap(),
        &[
            "brokerRole=SLAVE",
            "brokerId=1",
            &format!("haMasterAddress={}", fake.local_addr().unwrap()),
        ],
        log.path(),
    );
    let (mut conn, _) = fake.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut report = [0u8; 8];
    conn.read_exact(&mut report).unwrap();
    assert_eq!(i64::from_be_bytes(report), 0, "an empty slave reports 0");
    let mut frame = Vec::new();
    frame.extend_from_slice(&0i64.to_be_bytes());
    frame.extend_from_slice(&(records.len() as i32).to_be_bytes());
    frame.extend_from_slice(&records);
    conn.write_all(&frame).unwrap();
    // The slave reports the end of what it appended.
    let end = records.len() as i64;
    loop {
        conn.read_exact(&mut report).unwrap();
        if i64::from_be_bytes(report) == end {
            break;
        }
    }
    assert_eq!(max_offsets(slave.broker)[0], "10");

    // A transfer that does not continue where the slave stands.
    let mut wrong = Vec::new();
    wrong.extend_from_slice(&(end + 4096).to_be_bytes());
    wrong.extend_from_slice(&(records.len() as i32).to_be_bytes());
    wrong.extend_from_slice(&records);
    conn.write_all(&wrong).unwrap();
    let mut rest = Vec::new();
    let closed = conn.read_to_end(&mut rest);
    assert!(
        closed.is_ok(),
        "the slave closes the connection: {closed:?}"
    );
    assert!(rest.len() % 8 == 0, "only reports came before the close");
    assert_eq!(
        max_offsets(slave.broker)[0],
        "10",
        "nothing of it was appended"
    );
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        text.contains(&format!(
            "the master sent offset {}, this slave stands at {end}",
            end + 4096
        )),
        "the slave says why: {text}"
    );

    // It comes back (after 5 s, as Java's) and reports the same end.
    fake.set_nonblocking(false).unwrap();
    let (mut again, _) = fake.accept().unwrap();
    again
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    again.read_exact(&mut report).unwrap();
    assert_eq!(i64::from_be_bytes(report), end);
}
