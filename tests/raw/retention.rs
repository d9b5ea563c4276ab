//! Proves, over a real socket, that commit-log retention trims the consume queues: with tiny
//! segments and `fileReservedTime=0` at a `deleteWhen` hour, old commit-log segments and the
//! ConsumeQueue files pointing only into them are deleted, GET_MIN_OFFSET moves to the first
//! message still stored, a pull below it gets PULL_OFFSET_MOVED (OFFSET_TOO_SMALL) with the new
//! minimum as next begin offset, and a restart keeps that minimum.

use crate::raw_support;

use std::path::Path;
use std::time::{Duration, Instant};

use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

const SEG: u64 = 128 << 10;
const CQ_UNITS_PER_FILE: u64 = 10;
const TOPIC: &str = "RetentionT";

fn opts() -> Vec<String> {
    let every_hour: Vec<String> = (0..24).map(|h| format!("{h:02}")).collect();
    vec![
        format!("mappedFileSizeCommitLog={SEG}"),
        "maxMessageSize=16384".into(),
        format!("mappedFileSizeConsumeQueue={}", CQ_UNITS_PER_FILE * 20),
        "fileReservedTime=0".into(),
        format!("deleteWhen={}", every_hour.join(";")),
        "cleanResourceInterval=100".into(),
        "deleteConsumeQueueFilesInterval=0".into(),
    ]
}

fn min_offset(c: &mut Conn) -> i64 {
    let r = c.call(
        RemotingCommand::new_request(request_code::GET_MIN_OFFSET)
            .with_ext("topic", TOPIC)
            .with_ext("queueId", 0),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    r.ext("offset").unwrap().parse().unwrap()
}

/// Physical offset from an offset message id (16 hex digits of address, 16 of offset).
fn phy_of(msg_id: &str) -> u64 {
    u64::from_str_radix(&msg_id[16..], 16).unwrap()
}

/// Start offsets of the consume-queue files of queue 0, in units.
fn cq_file_starts(store: &Path) -> Vec<u64> {
    let dir = store.join("consumequeue").join(TOPIC).join("0");
    let mut v: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            e.unwrap()
                .file_name()
                .to_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
                / 20
        })
        .collect();
    v.sort();
    v
}

#[test]
fn retention_trims_consume_queues_and_moves_min_offset() {
    let opts = opts();
    let opt_refs: Vec<&str> = opts.iter().map(String::as_str).collect();
    let b = RawBroker::start(&opt_refs);
    let mut c = Conn::connect(b.broker);
    let mut phys = Vec::new();
    for i in 0..80 {
        let body = vec![b'a' + (i % 26) as u8; 6000];
        let r = c.call(send_cmd(TOPIC, 0, &body, ""));
        assert_eq!(r.code, 0, "send {i}: {:?}", r.remark);
        phys.push(phy_of(r.ext("msgId").unwrap()));
    }
    // Once retention settles only the active segment remains: the first message in it is the
    // queue's new minimum.
    let last = *phys.last().unwrap();
    let active_start = last - last % SEG;
    let expect_min = phys.iter().position(|p| *p >= active_start).unwrap() as i64;
    assert!(
        expect_min >= 2 * CQ_UNITS_PER_FILE as i64,
        "enough data expires"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while min_offset(&mut c) != expect_min {
        assert!(
            Instant::now() < deadline,
            "min offset stuck at {}",
            min_offset(&mut c)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let store = b.dir.path();
    assert!(!store.join("commitlog").join(format!("{:020}", 0)).exists());
    let starts = cq_file_starts(store);
    let first = *starts.first().unwrap();
    assert!(
        first + CQ_UNITS_PER_FILE > expect_min as u64 && first <= expect_min as u64,
        "every file wholly below the min is gone, the one holding it stays: {starts:?}"
    );

    let r = c.call(pull_cmd(TOPIC, 0, 0, 0));
    assert_eq!(r.code, response_code::PULL_OFFSET_MOVED);
    assert_eq!(r.remark.as_deref(), Some("OFFSET_TOO_SMALL"));
    assert_eq!(
        r.ext("nextBeginOffset"),
        Some(expect_min.to_string().as_str())
    );
    assert_eq!(r.ext("minOffset"), Some(expect_min.to_string().as_str()));

    let r = c.call(pull_cmd(TOPIC, 0, expect_min, 0));
    assert_eq!(r.code, 0, "pull at the new min: {:?}", r.remark);
    let recs = records(&r.body);
    assert_eq!(recs[0].queue_offset, expect_min);
    assert_eq!(recs[0].phy_offset as u64, phys[expect_min as usize]);
    assert_eq!(recs.len() as i64, 80 - expect_min);
    drop(c);

    // A restart recovers the same minimum from what is left on disk.
    let dir = b.stop();
    let b = RawBroker::start_in(dir, &opt_refs);
    let mut c = Conn::connect(b.broker);
    assert_eq!(min_offset(&mut c), expect_min);
    let r = c.call(pull_cmd(TOPIC, 0, 1, 0));
    assert_eq!(r.code, response_code::PULL_OFFSET_MOVED);
    assert_eq!(
        r.ext("nextBeginOffset"),
        Some(expect_min.to_string().as_str())
    );
}
