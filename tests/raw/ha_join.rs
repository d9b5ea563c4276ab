//! A new, empty slave joins a master whose commit log spans several segments: the master starts
//! it at its last segment (as Java's does), and the slave's log begins there, byte for byte the
//! master's; its consume queues begin at the first queue offset they hold (GET_MIN_OFFSET), end
//! where the master's do (GET_MAX_OFFSET), and serve the master's messages from there (a pull
//! below is sent back to the master with the queue's min, as every miss on a slave is). Killed
//! and started again on its store, the slave keeps that log and catches up.

use crate::raw_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use raw_support::{create_topic_cmd, pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::message::{decode, BLANK_MAGIC};
use ringmq::protocol::RemotingCommand;

const SEG: u64 = 256 << 10;
const TOPICS: [&str; 3] = ["JoinA", "JoinB", "JoinC"];
const QUEUES: i32 = 4;
/// 16 units a consume-queue file: a slave's queue begins in a later file than the first.
const CQ_UNITS_PER_FILE: u64 = 16;

fn store_opts() -> Vec<String> {
    vec![
        format!("mappedFileSizeCommitLog={SEG}"),
        "maxMessageSize=65536".into(),
        format!("mappedFileSizeConsumeQueue={}", CQ_UNITS_PER_FILE * 20),
    ]
}

fn start_slave(dir: Option<tempfile::TempDir>, ha: std::net::SocketAddr) -> RawBroker {
    let mut opts = store_opts();
    opts.extend([
        "brokerRole=SLAVE".to_string(),
        "brokerId=1".into(),
        format!("haMasterAddress={ha}"),
        "slaveReadEnable=true".into(),
    ]);
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let b = match dir {
        Some(d) => RawBroker::start_in(d, &opts),
        None => RawBroker::start(&opts),
    };
    create_topics(b.broker);
    b
}

fn create_topics(addr: std::net::SocketAddr) {
    let mut c = Conn::connect(addr);
    for t in TOPICS {
        let r = c.call(create_topic_cmd(t, QUEUES));
        assert_eq!(r.code, response_code::SUCCESS, "{t}: {:?}", r.remark);
    }
}

/// Sends `n` messages of about 1 KiB, spread over the topics and queues.
fn send(master: &RawBroker, from: usize, n: usize) {
    let mut c = Conn::connect(master.broker);
    for i in from..from + n {
        let body = format!("join {i} {}", "z".repeat(700 + (i * 37) % 600));
        let (t, q) = (TOPICS[i % 3], ((i / 3) % QUEUES as usize) as i32);
        let props = format!("KEYS\u{1}join-{i}\u{2}");
        let r = c.call(send_cmd(t, q, body.as_bytes(), &props));
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
}

fn offsets(addr: std::net::SocketAddr, code: i32) -> BTreeMap<(String, i32), i64> {
    let mut c = Conn::connect(addr);
    let mut out = BTreeMap::new();
    for t in TOPICS {
        for q in 0..QUEUES {
            let r = c.call(
                RemotingCommand::new_request(code)
                    .with_ext("topic", t)
                    .with_ext("queueId", q),
            );
            assert_eq!(r.code, response_code::SUCCESS, "{t}/{q}: {:?}", r.remark);
            let v = r
                .ext("offset")
                .and_then(|o| o.parse().ok())
                .expect("offset");
            out.insert((t.to_string(), q), v);
        }
    }
    out
}

fn wait_max_offsets_equal(master: &RawBroker, slave: &RawBroker) {
    let want = offsets(master.broker, request_code::GET_MAX_OFFSET);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = offsets(slave.broker, request_code::GET_MAX_OFFSET);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the slave's max offsets {got:?}, the master's {want:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Start offsets of the commit-log segment files in `store`.
fn segments(store: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(store.join("commitlog"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.parse().ok())
        .collect();
    v.sort();
    v
}

fn segment(store: &Path, start: u64) -> Vec<u8> {
    std::fs::read(store.join("commitlog").join(format!("{start:020}"))).unwrap()
}

/// The end of the written log: walks the records from the first segment (blank markers move
/// to the next one).
fn log_end(store: &Path) -> u64 {
    let segs = segments(store);
    let mut pos = segs[0];
    for start in segs {
        if start != pos {
            break;
        }
        let bytes = segment(store, start);
        let mut at = 0usize;
        loop {
            let total = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let magic = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().unwrap());
            if total == 0 {
                return start + at as u64;
            }
            if magic == BLANK_MAGIC {
                pos = start + SEG;
                break;
            }
            at += total;
        }
    }
    pos
}

/// The first queue offset of each queue among the records stored in `[from, end)`.
fn first_queue_offsets(store: &Path, from: u64, end: u64) -> BTreeMap<(String, i32), i64> {
    let mut out = BTreeMap::new();
    let mut start = from;
    while start < end {
        let bytes = segment(store, start);
        let mut at = 0usize;
        while start + (at as u64) < end {
            let r = match decode(&bytes[at..], false) {
                Ok(r) => r,
                Err(_) => break, // the blank end of a segment
            };
            out.entry((r.topic.to_string(), r.queue_id))
                .or_insert(r.queue_offset);
            at += r.total_size as usize;
        }
        start += SEG;
    }
    out
}

/// The slave's segments are the master's from `first` on, byte for byte up to the end, and it
/// has none before `first`.
fn assert_same_log(master: &RawBroker, slave: &RawBroker, first: u64) {
    let end = log_end(master.dir.path());
    assert_eq!(
        log_end(slave.dir.path()),
        end,
        "the slave's log ends where the master's does"
    );
    let s_segs = segments(slave.dir.path());
    assert_eq!(
        s_segs.first(),
        Some(&first),
        "the slave's first segment: {s_segs:?}"
    );
    let mut start = first;
    while start < end {
        let len = (end - start).min(SEG) as usize;
        let m = segment(master.dir.path(), start);
        let s = segment(slave.dir.path(), start);
        assert!(
            m[..len] == s[..len],
            "segment {start}: the slave's bytes differ from the master's"
        );
        start += SEG;
    }
}

/// The bodies QUERY_MESSAGE finds for the key of message `i` (None: QUERY_NOT_FOUND), waiting
/// up to 10 s for `want` (keys are indexed after the records are appended).
fn query_key(addr: std::net::SocketAddr, i: usize, want: bool) -> Option<Vec<Vec<u8>>> {
    let mut c = Conn::connect(addr);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = ringmq::common::now_ms();
        let r = c.call(
            RemotingCommand::new_request(request_code::QUERY_MESSAGE)
                .with_ext("topic", TOPICS[i % 3])
                .with_ext("key", format!("join-{i}"))
                .with_ext("maxNum", 32)
                .with_ext("beginTimestamp", now - 600_000)
                .with_ext("endTimestamp", now + 60_000),
        );
        let got = (r.code == response_code::SUCCESS)
            .then(|| records(&r.body).iter().map(|r| r.body.to_vec()).collect());
        if got.is_some() == want || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Pulls `[from, to)` of a queue, (queue offset, body) of each message.
fn pull_all(
    addr: std::net::SocketAddr,
    t: &str,
    q: i32,
    from: i64,
    to: i64,
) -> Vec<(i64, Vec<u8>)> {
    let mut c = Conn::connect(addr);
    let mut out = Vec::new();
    let mut at = from;
    while at < to {
        let r = c.call(pull_cmd(t, q, at, 0));
        assert_eq!(
            r.code,
            response_code::SUCCESS,
            "{t}/{q} at {at}: {:?}",
            r.remark
        );
        let body = &r.body[..];
        for rec in records(body) {
            out.push((rec.queue_offset, rec.body.to_vec()));
        }
        at = r.ext("nextBeginOffset").unwrap().parse().unwrap();
    }
    out
}

#[test]
fn an_empty_slave_joins_a_master_of_several_segments() {
    let opts = store_opts();
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let master = RawBroker::start(&opts);
    let ha = master.ha.expect("a master listens for slaves");
    create_topics(master.broker);
    send(&master, 0, 1100);
    let end = log_end(master.dir.path());
    let first = end - end % SEG;
    assert!(
        first >= 2 * SEG,
        "the master's log spans 3 segments or more: it ends at {end}"
    );

    let slave = start_slave(None, ha);
    send(&master, 1100, 150);
    wait_max_offsets_equal(&master, &slave);
    assert_same_log(&master, &slave, first);

    // Each queue begins on the slave at the first queue offset its log holds.
    let want_min = first_queue_offsets(master.dir.path(), first, log_end(master.dir.path()));
    let min = offsets(slave.broker, request_code::GET_MIN_OFFSET);
    let max = offsets(slave.broker, request_code::GET_MAX_OFFSET);
    assert_eq!(
        min.len(),
        want_min.len(),
        "every queue has messages on the slave"
    );
    assert_eq!(min, want_min);
    assert!(
        min.values().all(|&m| m > CQ_UNITS_PER_FILE as i64),
        "every queue begins past its first consume-queue file: {min:?}"
    );
    for ((t, q), &lo) in &min {
        let hi = max[&(t.clone(), *q)];
        let on_slave = pull_all(slave.broker, t, *q, lo, hi);
        assert_eq!(on_slave.len() as i64, hi - lo, "{t}/{q}");
        assert_eq!(on_slave, pull_all(master.broker, t, *q, lo, hi), "{t}/{q}");
        // Below the min: as any miss on a slave, PULL_RETRY_IMMEDIATELY with the master
        // suggested (Java's rule), and the min to start again from.
        let r = Conn::connect(slave.broker).call(pull_cmd(t, *q, lo - 1, 0));
        assert_eq!(
            r.code,
            response_code::PULL_RETRY_IMMEDIATELY,
            "{t}/{q}: {:?}",
            r.remark
        );
        assert_eq!(r.ext("suggestWhichBrokerId"), Some("0"));
        assert_eq!(r.ext("nextBeginOffset"), Some(lo.to_string().as_str()));
    }

    // The slave's index holds the keys of the records its log holds, and only those.
    let found = query_key(slave.broker, 1099, true).expect("the last key before the join");
    assert_eq!(found, query_key(master.broker, 1099, true).unwrap());
    assert!(query_key(slave.broker, 1200, true).is_some());
    assert_eq!(query_key(slave.broker, 0, false), None);

    // A crash, then a start on the same store: the log still begins at `first`, and the slave
    // catches up.
    let dir = slave.kill9();
    let slave = start_slave(Some(dir), ha);
    send(&master, 1250, 150);
    wait_max_offsets_equal(&master, &slave);
    assert_same_log(&master, &slave, first);
    assert_eq!(
        offsets(slave.broker, request_code::GET_MIN_OFFSET),
        want_min
    );
    assert!(query_key(slave.broker, 1300, true).is_some());

    // A clean stop and start keep it too.
    let dir = slave.stop();
    let slave = start_slave(Some(dir), ha);
    send(&master, 1400, 50);
    wait_max_offsets_equal(&master, &slave);
    assert_same_log(&master, &slave, first);
    assert_eq!(
        offsets(slave.broker, request_code::GET_MIN_OFFSET),
        want_min
    );
}
