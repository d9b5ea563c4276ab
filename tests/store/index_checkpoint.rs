//! Proves the index is checkpointed while the writer runs: `indexMsgTimestamp` in the checkpoint
//! file follows the keys indexed (not only at a clean shutdown), and after a crash
//! (`WriterHandle::abandon`) recovery cuts the index back to that point and re-scans the commit
//! log from there instead of from the first segment, with every key findable afterwards.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ringmq::store::{open, FlushDiskType, StoreConfig};
use ringmq::writer::testkit::{append_wait, record, NullDispatcher};
use ringmq::writer::{spawn_writer, AppendOutcome, WriterParts, WriterSender};

const SEG: u64 = 128 << 10;
/// `min(physic, logics) - 3 s` bounds the walk-back: the data before the crash must be older.
const CHECKPOINT_MARGIN: Duration = Duration::from_millis(3_200);

fn cfg(root: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: SEG,
        max_message_size: 8 << 10,
        flush_disk_type: FlushDiskType::SyncFlush,
        warm_mapped_file: Some(false),
        max_hash_slot_num: 64,
        max_index_num: 4096,
        index_flush_interval_ms: 50,
        ..StoreConfig::with_root(root)
    }
}

/// The long at `at` in the checkpoint file: 0 physicMsgTimestamp, 16 indexMsgTimestamp.
fn checkpoint_long(root: &Path, at: u64) -> i64 {
    let f = std::fs::File::open(root.join("checkpoint")).unwrap();
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, at).unwrap();
    i64::from_be_bytes(b)
}

fn index_timestamp_on_disk(root: &Path) -> i64 {
    checkpoint_long(root, 16)
}

/// Waits until the checkpoint file's long at `at` reaches `ts`.
fn wait_for_checkpoint(root: &Path, at: u64, ts: i64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while checkpoint_long(root, at) < ts {
        assert!(Instant::now() < deadline, "{what} never checkpointed");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn keyed(s: &WriterSender, key: &str) -> AppendOutcome {
    let mut rec = record("T", 0, &[9u8; 2000], &format!("KEYS\u{1}{key}\u{2}"));
    rec.keys = ringmq::writer::IndexKeys::Owned(vec![key.to_string()]);
    append_wait(s, vec![rec], true).unwrap()
}

#[test]
fn crash_recovery_reindexes_from_the_periodic_index_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path());
    let (parts, _cqs) = WriterParts::from_opened(open(&c).unwrap());
    // No shards here to flush consume queues: pretend they are, so the walk-back is bounded by
    // the commit log and the index only.
    parts
        .checkpoint
        .logics_msg_timestamp
        .store(i64::MAX, Ordering::Release);
    let w = spawn_writer(parts, &c, Box::new(NullDispatcher)).unwrap();
    let s = w.clone_sender();

    let before: Vec<AppendOutcome> = (0..300).map(|i| keyed(&s, &format!("a{i}"))).collect();
    let last_before = before.last().unwrap();
    assert!(
        last_before.phy_offsets[0] >= 4 * SEG,
        "five segments written"
    );
    // The index timestamp reaches the file while the writer runs (before: only at shutdown).
    wait_for_checkpoint(
        dir.path(),
        16,
        last_before.store_timestamp,
        "index timestamp",
    );
    std::thread::sleep(CHECKPOINT_MARGIN);
    let after: Vec<AppendOutcome> = (0..20).map(|i| keyed(&s, &format!("b{i}"))).collect();
    // The physical timestamp past the margin lets the walk-back stop inside the "a" records.
    let last_after = after.last().unwrap().store_timestamp;
    wait_for_checkpoint(dir.path(), 0, last_after, "physical timestamp");
    w.abandon().unwrap();

    let recorded = index_timestamp_on_disk(dir.path());
    assert!(recorded >= last_before.store_timestamp, "{recorded}");
    let o = open(&c).unwrap();
    assert!(o.recovered_from_crash);
    // The index keeps the entries stored before its checkpoint time less the last message:
    // the scan starts no earlier than the segment holding the second-to-last "a" record (later
    // if a periodic index checkpoint after the "b" records made it to disk too).
    let resume = before[before.len() - 2].phy_offsets[0];
    assert!(
        o.scan_from_phy >= resume - resume % SEG && o.scan_from_phy > 0,
        "scan started at {} (index resumes in the segment at {})",
        o.scan_from_phy,
        resume - resume % SEG
    );
    let ix = o.index.as_ref().expect("index enabled");
    for (key, out) in (0..300)
        .map(|i| format!("a{i}"))
        .zip(&before)
        .chain((0..20).map(|i| format!("b{i}")).zip(&after))
    {
        assert_eq!(
            ix.query("T", &key, 4, 0, i64::MAX),
            vec![out.phy_offsets[0]],
            "key {key}"
        );
    }
}
