//! Proves retention deletes several expired commit-log segments in one pass with
//! `deleteCommitLogFilesInterval` between two unlinks, on the deleter thread: the minimum
//! physical offset moves at once, the files go one by one, and appends keep being answered
//! while they do (a writer that slept between deletions would stall them for the whole pass).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringmq::store::config::DeleteWhen;
use ringmq::store::{open, FlushDiskType, StoreConfig};
use ringmq::writer::testkit::{append_wait, record, NullDispatcher};
use ringmq::writer::{spawn_writer, WriterHandle, WriterParts};

const SEG: u64 = 128 << 10;
const INTERVAL: Duration = Duration::from_millis(50);
const EXPIRED: u64 = 5;

fn cfg(root: &Path, retention_ms: u64) -> StoreConfig {
    let every_hour: Vec<String> = (0..24).map(|h| h.to_string()).collect();
    StoreConfig {
        mapped_file_size_commit_log: SEG,
        max_message_size: 16 << 10,
        flush_disk_type: FlushDiskType::AsyncFlush,
        warm_mapped_file: Some(false),
        file_reserved_time_hours: 0,
        delete_when: DeleteWhen::parse(&every_hour.join(";")).unwrap(),
        retention_check_interval_ms: retention_ms,
        delete_commit_log_files_interval_ms: INTERVAL.as_millis() as u64,
        ..StoreConfig::with_root(root)
    }
}

fn start(c: &StoreConfig) -> WriterHandle {
    let (parts, _cqs) = WriterParts::from_opened(open(c).unwrap());
    spawn_writer(parts, c, Box::new(NullDispatcher)).unwrap()
}

/// Fills `EXPIRED` segments (retention off) and returns the start of the active one.
fn fill(root: &Path) -> u64 {
    let w = start(&cfg(root, 3_600_000));
    let s = w.clone_sender();
    let body = vec![5u8; 10_000];
    let mut last = 0;
    while last < EXPIRED * SEG {
        last = append_wait(&s, vec![record("T", 0, &body, "")], false)
            .unwrap()
            .phy_offsets[0];
    }
    w.shutdown().unwrap();
    last - last % SEG
}

fn segment_path(root: &Path, start: u64) -> PathBuf {
    root.join("commitlog").join(format!("{start:020}"))
}

#[test]
fn expired_segments_go_one_interval_apart_while_appends_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let active = fill(dir.path());
    assert_eq!(active, EXPIRED * SEG);
    let paths: Vec<PathBuf> = (0..EXPIRED)
        .map(|i| segment_path(dir.path(), i * SEG))
        .collect();
    assert!(paths.iter().all(|p| p.exists()));

    let w = start(&cfg(dir.path(), 50));
    let stop = Arc::new(AtomicBool::new(false));
    let sender = w.clone_sender();
    let appender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut answered = Vec::new(); // (when answered, latency)
            while !stop.load(Ordering::Acquire) {
                let t = Instant::now();
                append_wait(&sender, vec![record("T", 0, b"tick", "")], false).unwrap();
                answered.push((Instant::now(), t.elapsed()));
                std::thread::sleep(Duration::from_millis(1));
            }
            answered
        })
    };

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut gone: Vec<Option<Instant>> = vec![None; paths.len()];
    let mut min_phy_when_second_gone = None;
    while gone.iter().any(Option::is_none) {
        assert!(Instant::now() < deadline, "segments not deleted: {gone:?}");
        for (p, g) in paths.iter().zip(gone.iter_mut()) {
            if g.is_none() && !p.exists() {
                *g = Some(Instant::now());
            }
        }
        if gone[1].is_some() {
            min_phy_when_second_gone.get_or_insert(w.min_phy_offset());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    stop.store(true, Ordering::Release);
    let answered = appender.join().unwrap();
    let gone: Vec<Instant> = gone.into_iter().map(Option::unwrap).collect();

    // Detaching is immediate: the pass moved the minimum past all five segments while four
    // of them were still on disk.
    assert_eq!(min_phy_when_second_gone, Some(active));
    for (i, pair) in gone.windows(2).enumerate() {
        let gap = pair[1].duration_since(pair[0]);
        // Polling blurs each time by one poll period at most.
        assert!(
            gap >= INTERVAL - Duration::from_millis(2),
            "segment {} went {gap:?} after segment {i}",
            i + 1
        );
    }
    let (first, last) = (gone[0], gone[gone.len() - 1]);
    let during = answered
        .iter()
        .filter(|(at, _)| *at > first && *at < last)
        .count();
    let slowest = answered.iter().map(|(_, l)| *l).max().unwrap();
    assert!(
        during >= 10,
        "only {during} appends answered in the {:?} the deletions took",
        last - first
    );
    assert!(
        slowest < 2 * INTERVAL,
        "an append waited {slowest:?} (the pass spaces {EXPIRED} deletions {INTERVAL:?} apart)"
    );
    w.shutdown().unwrap();
    assert!(segment_path(dir.path(), active).exists());
}
