//! Writer tests of retention: expired segments deleted or kept for reuse, and appends taken
//! again soon after the segments a full disk queued for deletion are unlinked.

use std::sync::Arc;
use std::time::Duration;

use super::testkit::{append_wait, record, NullDispatcher};
use super::tests::{cfg, start};
use super::*;
use crate::fault::{FaultHook, FaultPoint};
use crate::protocol::message::decode;
use crate::{open, CommitLogReader};

/// `deleteWhen` listing every hour of the day, so time-based deletion may run whenever the test does.
fn every_hour() -> String {
    (0..24).map(|h| h.to_string()).collect::<Vec<_>>().join(";")
}

/// A store whose segments expire as soon as they are not the active one, checked every
/// `check_ms`, deleted without pauses.
fn expiring(dir: &std::path::Path, seg: u64, check_ms: u64) -> StoreConfig {
    StoreConfig {
        file_reserved_time_hours: 0,
        delete_when: crate::config::DeleteWhen::parse(&every_hour()).unwrap(),
        retention_check_interval_ms: check_ms,
        // The pause between deletions has its own test (tests/store/retention_deleter.rs).
        delete_commit_log_files_interval_ms: 0,
        ..cfg(dir, seg)
    }
}

/// Proves retention deletes expired segments (never the active one) and publishes the new
/// minimum physical offset.
#[test]
fn retention_deletes_expired_segments() {
    let dir = tempfile::tempdir().unwrap();
    let seg = 128 << 10;
    let c = expiring(dir.path(), seg, 50);
    let w = start(&c, Box::new(NullDispatcher));
    let s = w.clone_sender();
    let body = vec![3u8; 10_000];
    let mut last = None;
    for _ in 0..30 {
        last = Some(append_wait(&s, vec![record("T", 0, &body, "")], true).unwrap());
    }
    std::thread::sleep(Duration::from_millis(200));
    let last = last.unwrap().phy_offsets[0];
    assert_eq!(w.min_phy_offset(), last - last % seg);
    assert!(!dir.path().join("commitlog/00000000000000000000").exists());
    let mut r = CommitLogReader::new(dir.path(), seg);
    assert!(matches!(r.read(0, 10), Err(StoreError::OffsetNotFound(0))));
    assert!(r.read(last, 10_092).is_ok());
    assert_eq!(r.min_phy_offset(), last - last % seg);
    w.shutdown().unwrap();
}

/// Proves expired segments come back as new segments (the same file under a later name,
/// unwarmed), that a reader with the writer's minimum never reads a retired range, whose file
/// now holds other records, and that every record still in the log reads back byte-exact, also
/// after a restart.
#[test]
fn retention_reuses_retired_segments() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let seg = 128 << 10;
    let c = StoreConfig {
        recycle_commit_log_segments: 2,
        recycle_quarantine_ms: 0,
        ..expiring(dir.path(), seg, 20)
    };
    let w = start(&c, Box::new(NullDispatcher));
    let s = w.clone_sender();
    let mut reader = CommitLogReader::with_min_phy(dir.path(), seg, s.min_phy_watch());
    let mut inodes: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    let mut reused = false;
    let mut acked = Vec::new();
    for i in 0..120u32 {
        let body = vec![i as u8; 10_000];
        let out = append_wait(&s, vec![record("T", 0, &body, "")], true).unwrap();
        acked.push((out.phy_offsets[0], body));
        // Reads the oldest record through the cache before retention may retire it.
        let (phy, _) = acked[0];
        let _ = reader.read(phy, 10_092);
        for e in std::fs::read_dir(dir.path().join("commitlog")).unwrap() {
            let e = e.unwrap();
            let Some(start) =
                crate::mapped_file::parse_segment_name(e.file_name().to_str().unwrap())
            else {
                continue;
            };
            let ino = e.metadata().unwrap().ino();
            reused |= inodes.insert(ino, start).is_some_and(|s| s != start);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(reused, "no retired segment was reused");
    let min = w.min_phy_offset();
    assert!(min > 2 * seg, "retention ran: {min}");
    let check = |reader: &mut CommitLogReader, min: u64| {
        for (phy, body) in &acked {
            match reader.read(*phy, 10_092) {
                Ok(bytes) => {
                    assert!(*phy >= min);
                    let rec = decode(bytes, true).unwrap();
                    assert_eq!((rec.body, rec.phy_offset), (&body[..], *phy as i64));
                }
                Err(StoreError::OffsetNotFound(_)) => assert!(*phy < min, "{phy} lost"),
                Err(e) => panic!("{e}"),
            }
        }
    };
    check(&mut reader, min);
    w.shutdown().unwrap();
    let o = open(&c).unwrap();
    let min = o.commit_log.min_phy_offset();
    drop(o);
    check(&mut CommitLogReader::new(dir.path(), seg), min);
}

/// Disk usage as `other` bytes plus every commit-log segment that holds data (start below
/// `data_end`): the spare segment the allocator may or may not have created yet is left out, so
/// the figure does not depend on that thread's timing.
struct CommitLogDisk {
    dir: std::path::PathBuf,
    data_end: u64,
    other: u64,
    total: u64,
}

/// Segment files under `dir` that start below `data_end`, with their sizes.
fn data_segments(dir: &std::path::Path, data_end: u64) -> Vec<u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let start = crate::mapped_file::parse_segment_name(e.file_name().to_str()?)?;
            (start < data_end).then(|| e.metadata().ok().map(|m| m.len()))?
        })
        .collect()
}

impl crate::fault::FaultInjector for CommitLogDisk {
    fn check(&self, _point: FaultPoint) -> Option<std::io::Error> {
        None
    }
    fn disk_usage(&self) -> Option<crate::fault::DiskUsage> {
        let on_disk: u64 = data_segments(&self.dir, self.data_end).iter().sum();
        Some(crate::fault::DiskUsage {
            used_bytes: self.other + on_disk,
            total_bytes: self.total,
        })
    }
}

/// Proves segments queued for deletion do not count as free space for taking appends (they
/// still hold their blocks), and that appends are taken again soon after the deleter unlinks
/// them rather than a whole `cleanResourceInterval` (60 s here) later. The disk is full from
/// the start, so the first pass, at start, detaches two segments (100 % -> 80 % counted as
/// freed, under the 84 % forcible ratio), or one if it under-counts (see the body); the deleter
/// pauses 1 s between the two unlinks.
#[test]
fn appends_resume_soon_after_queued_segments_are_unlinked() {
    const SEG: u64 = 256 << 10;
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), SEG);
    let w = start(&c, Box::new(NullDispatcher));
    let s = w.clone_sender();
    while w.max_phy_offset() < 5 * SEG + SEG / 2 {
        append_wait(&s, vec![record("T", 0, &[7u8; 8 << 10], "")], true).unwrap();
    }
    drop(s);
    let data_end = w.max_phy_offset();
    w.shutdown().unwrap();
    let files = data_segments(&c.commit_log_dir(), data_end).len() as u64;
    let total = 10 * SEG;
    let full = StoreConfig {
        retention_check_interval_ms: 60_000,
        delete_commit_log_files_interval_ms: 1_000,
        fault: Some(FaultHook(Arc::new(CommitLogDisk {
            dir: c.commit_log_dir(),
            data_end,
            other: total - files * SEG,
            total,
        }))),
        ..cfg(dir.path(), SEG)
    };
    let w = start(&full, Box::new(NullDispatcher));
    let s = w.clone_sender();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while w.is_writable() {
        assert!(
            std::time::Instant::now() < deadline,
            "the pass at start never ran"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Two segments bring the counted usage under the ratio. The deleter unlinks the first one
    // at once, though, and if that lands between the pass's two readings the pass counts it
    // twice and detaches only one (retention::measure: it under-deletes, the next pass, 100 ms
    // later while appends are refused, detaches the second).
    let first = w.min_phy_offset();
    assert!(
        first == SEG || first == 2 * SEG,
        "one or two segments detached, not {first}"
    );
    let refused = append_wait(&s, vec![record("T", 0, b"x", "")], true).unwrap_err();
    assert!(matches!(refused, StoreError::DiskFull(_)), "{refused}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !w.is_writable() {
        assert!(
            std::time::Instant::now() < deadline,
            "still refusing appends 30 s after the deleter's 1 s pause"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    append_wait(&s, vec![record("T", 0, b"y", "")], true).unwrap();
    assert_eq!(w.min_phy_offset(), 2 * SEG, "two segments detached in all");
    assert_eq!(
        data_segments(&full.commit_log_dir(), data_end).len() as u64,
        files - 2
    );
    drop(s);
    w.shutdown().unwrap();
}

/// Proves DELETE_EXPIRED_COMMITLOG's request (`delete_expired_files_now`) makes the writer delete
/// expired segments outside the `deleteWhen` hour, which it otherwise waits for.
#[test]
fn a_manual_request_deletes_outside_the_delete_when_hour() {
    let dir = tempfile::tempdir().unwrap();
    let seg = 128 << 10;
    let now_hour = crate::retention::local_hour(std::time::SystemTime::now());
    let other_hour = ((now_hour + 12) % 24).to_string();
    let c = StoreConfig {
        delete_when: crate::config::DeleteWhen::parse(&other_hour).unwrap(),
        // The host's own disk use must not open the deleteWhen gate (past these ratios
        // retention deletes at any hour).
        disk_max_used_space_ratio: 95,
        disk_space_clean_forcibly_ratio: 95,
        ..expiring(dir.path(), seg, 20)
    };
    let w = start(&c, Box::new(NullDispatcher));
    let s = w.clone_sender();
    let body = vec![5u8; 10_000];
    for _ in 0..30 {
        append_wait(&s, vec![record("T", 0, &body, "")], true).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        w.min_phy_offset(),
        0,
        "not the deleteWhen hour: nothing goes"
    );
    s.delete_expired_files_now();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while w.min_phy_offset() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the manual pass never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!dir.path().join("commitlog/00000000000000000000").exists());
    w.shutdown().unwrap();
}
