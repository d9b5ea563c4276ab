//! Writer tests of failed and refused appends: ENOSPC while allocating a segment, EIO on write
//! and on fdatasync (rolled back, or the store stops taking appends), a full inbox as
//! back-pressure, and the disk hard limit.

use std::sync::Arc;
use std::time::Duration;

use super::testkit::{append_wait, record, CollectingDispatcher, NullDispatcher};
use super::tests::{cfg, start};
use super::*;
use crate::fault::{FailNth, FaultHook, FaultPoint};
use crate::protocol::message::decode;
use crate::{open, CommitLogReader, FlushDiskType};

/// Proves ENOSPC while allocating the next segment is a DiskFull error to the caller, leaves
/// the write position where it was, and a later append (space back) succeeds; store reopens.
#[test]
fn disk_full_on_segment_allocation_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    let seg = 128 << 10;
    // Call 0 is the first segment at open; call 1 the background preallocation of the next
    // (fails, reported when the writer needs it); call 2 the writer's retry (succeeds).
    let fault = Arc::new(FailNth::new(
        FaultPoint::AllocateSegment,
        1,
        1,
        libc::ENOSPC,
    ));
    let c = StoreConfig {
        fault: Some(FaultHook(fault.clone())),
        ..cfg(dir.path(), seg)
    };
    let w = start(&c, Box::new(NullDispatcher));
    let s = w.clone_sender();
    let body = vec![1u8; 10_000];
    let mut ok = Vec::new();
    let err = loop {
        match append_wait(&s, vec![record("T", 0, &body, "")], true) {
            Ok(o) => ok.push(o),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, StoreError::DiskFull(_)), "{err}");
    assert_eq!(
        w.max_phy_offset(),
        ok.last().unwrap().phy_offsets[0] + 10_092
    );
    let again = append_wait(&s, vec![record("T", 0, &body, "")], true).unwrap();
    assert_eq!(
        again.queue_offsets[0],
        ok.len() as u64,
        "no queue offset was lost"
    );
    assert_eq!(again.phy_offsets[0], seg);
    w.abandon().unwrap();
    let o = open(&c).unwrap();
    assert!(o.recovered_from_crash);
    assert_eq!(o.commit_log.max_phy_offset(), seg + 10_092);
    assert_eq!(o.queue_offsets[&("T".to_string(), 0)], ok.len() as u64 + 1);
}

/// Proves an fdatasync failure under SYNC_FLUSH fails the waiting request, publishes and
/// dispatches nothing past the last good group commit, refuses every later append, and that
/// shutdown then leaves the abort file so the next start recovers the tail from the log.
/// (Before pipelined group commit the failed batch was rolled back and its offsets reused; now
/// the writer may already have written later groups, so the store stops instead.)
#[test]
fn flush_error_fails_group_and_refuses_appends() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FailNth::new(FaultPoint::Flush, 1, 1, libc::EIO));
    let c = StoreConfig {
        fault: Some(FaultHook(fault)),
        ..cfg(dir.path(), 256 << 10)
    };
    let col = CollectingDispatcher::default();
    let w = start(&c, Box::new(col.clone()));
    let s = w.clone_sender();
    let first = append_wait(&s, vec![record("T", 0, b"one", "")], true).unwrap();
    let e = append_wait(&s, vec![record("T", 0, b"two", "")], true).unwrap_err();
    assert!(matches!(e, StoreError::Io { .. }), "{e}");
    assert_eq!(
        w.max_phy_offset(),
        95,
        "nothing published past the good sync"
    );
    assert_eq!(
        col.0.lock().unwrap().len(),
        1,
        "the failed record was not dispatched"
    );
    let third = append_wait(&s, vec![record("T", 0, b"three", "")], true).unwrap_err();
    assert!(matches!(third, StoreError::NotWritable(_)), "{third}");
    assert!(!w.is_writable());
    assert_eq!(w.max_phy_offset(), 95);
    assert!(
        w.shutdown().is_err(),
        "no clean shutdown after a failed flush"
    );
    assert!(dir.path().join("abort").exists());
    let o = open(&c).unwrap();
    assert!(o.recovered_from_crash);
    // The injected failure left "two" in the page cache with a valid CRC: recovery keeps it
    // (its producer saw an error, so a retry may duplicate it: at-least-once, as RocketMQ).
    assert_eq!(o.commit_log.max_phy_offset(), 95 + 95);
    assert_eq!(first.phy_offsets[0], 0);
}

/// Proves an EIO from the pwrite of a batch fails that batch with an Io error, rolls it back
/// (write position, queue offsets, nothing dispatched), and the next append takes its place
/// and reads back byte-exact; the store reopens cleanly.
#[test]
fn write_error_fails_batch_and_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FailNth::new(FaultPoint::Write, 1, 1, libc::EIO));
    let c = StoreConfig {
        fault: Some(FaultHook(fault)),
        flush_disk_type: FlushDiskType::AsyncFlush,
        ..cfg(dir.path(), 256 << 10)
    };
    let col = CollectingDispatcher::default();
    let w = start(&c, Box::new(col.clone()));
    let s = w.clone_sender();
    let first = append_wait(&s, vec![record("T", 0, b"one", "")], false).unwrap();
    let e = append_wait(
        &s,
        vec![record("T", 0, b"two", ""), record("T", 0, b"2b", "")],
        false,
    )
    .unwrap_err();
    assert!(matches!(e, StoreError::Io { .. }), "{e}");
    assert_eq!(w.max_phy_offset(), 95, "the failed batch was rolled back");
    assert_eq!(col.0.lock().unwrap().len(), 1, "nothing of it dispatched");
    let third = append_wait(&s, vec![record("T", 0, b"three", "")], false).unwrap();
    assert_eq!(
        (third.phy_offsets[0], third.queue_offsets[0]),
        (95, 1),
        "the next record takes the failed one's place"
    );
    let mut r = CommitLogReader::new(dir.path(), c.mapped_file_size_commit_log);
    let rec = decode(r.read(95, 97).unwrap(), true).unwrap();
    assert_eq!((rec.body, rec.queue_offset), (&b"three"[..], 1));
    assert!(w.is_writable(), "a failed write is not sticky");
    w.shutdown().unwrap();
    let o = open(&c).unwrap();
    assert!(!o.recovered_from_crash);
    assert_eq!(o.commit_log.max_phy_offset(), 95 + 97);
    assert_eq!(first.phy_offsets[0], 0);
}

/// Keeps every completion (a shard with no room) until the gate's sender is dropped.
pub(super) struct Gate(pub crossbeam_channel::Receiver<()>);
impl Gate {
    fn open(&self) -> bool {
        matches!(
            self.0.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    }
}
impl Dispatcher for Gate {
    fn complete(&mut self, _runs: Vec<DispatchRun>, _replies: Vec<ShardReply>) {}
    fn flush(&mut self) -> bool {
        self.open()
    }
    fn truncate(&mut self, cut: CqTruncate) {
        cut.answer(Ok(crate::CqCutFiles::default()));
    }
    fn barrier(&mut self, _reply: ShardReply) {}
}

/// Proves try_append never blocks and hands the request back when the inbox is full: while a
/// shard has no room for completions the writer takes no appends, and its inbox fills.
#[test]
fn full_inbox_is_back_pressure() {
    let dir = tempfile::tempdir().unwrap();
    let c = StoreConfig {
        flush_disk_type: FlushDiskType::AsyncFlush,
        ..cfg(dir.path(), 256 << 10)
    };
    let (open_gate, gate) = crossbeam_channel::unbounded();
    let w = start(&c, Box::new(Gate(gate)));
    let mut refused = 0;
    // The writer may have taken one batch before its completions were kept.
    let n =
        crate::constants::WRITER_INBOX_CAPACITY + crate::constants::WRITER_BATCH_MAX_RECORDS + 10;
    for _ in 0..n {
        let req = AppendRequest {
            records: vec![record("T", 0, b"x", "")],
            wait_flush: false,
            reply: ReplyTo::Call(Box::new(|_| {})),
        };
        if w.try_append(req).is_err() {
            refused += 1;
        }
    }
    drop(open_gate); // the shard has room again
    assert!(refused >= 10, "refused {refused}");
    w.shutdown().unwrap();
}

/// Proves that past the disk hard limit appends fail with DiskFull while reads still work.
#[test]
fn disk_hard_limit_refuses_appends() {
    let dir = tempfile::tempdir().unwrap();
    let mut fault = FailNth::new(FaultPoint::Flush, u64::MAX, 0, 0);
    fault.disk_used_percent = Some(99);
    let c = StoreConfig {
        fault: Some(FaultHook(Arc::new(fault))),
        retention_check_interval_ms: 20,
        ..cfg(dir.path(), 256 << 10)
    };
    let w = start(&c, Box::new(NullDispatcher));
    let s = w.clone_sender();
    let ok = append_wait(&s, vec![record("T", 0, b"kept", "")], true).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!w.is_writable());
    let e = append_wait(&s, vec![record("T", 0, b"no", "")], true).unwrap_err();
    assert!(matches!(e, StoreError::DiskFull(_)), "{e}");
    let mut r = CommitLogReader::new(dir.path(), c.mapped_file_size_commit_log);
    let rec = decode(r.read(ok.phy_offsets[0], 96).unwrap(), true).unwrap();
    assert_eq!(rec.body, b"kept");
    w.shutdown().unwrap();
}
