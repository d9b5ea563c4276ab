//! Writer tests of SYNC_FLUSH group commit: pipelining while the group-commit thread is busy,
//! the warming gate, FLUSH_DISK_TIMEOUT for a slow fdatasync, keys indexed only after their
//! group commit.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::testkit::{append_wait, record, CollectingDispatcher, NullDispatcher};
use super::tests::{cfg, start};
use super::*;
use crate::store::{open, FlushDiskType};

/// Dispatcher whose first call blocks until the test opens the gate; collects every unit.
struct FirstDispatchGate {
    gate: Option<crossbeam_channel::Receiver<()>>,
    units: Arc<std::sync::Mutex<Vec<DispatchUnit>>>,
}

impl Dispatcher for FirstDispatchGate {
    fn dispatch(&mut self, runs: Vec<DispatchRun>) {
        if let Some(g) = self.gate.take() {
            let _opened = g.recv();
        }
        let mut all = self.units.lock().expect("units lock");
        all.extend(runs.into_iter().flat_map(DispatchRun::into_units));
    }
    fn truncate(&mut self, cut: CqTruncate) {
        cut.answer(Ok(crate::store::CqCutFiles::default()));
    }
}

/// Proves SYNC_FLUSH group commit is pipelined: while the group-commit thread is held inside
/// the completion of one group, the writer keeps writing; wait_flush = false requests are
/// answered right after their write; nothing written meanwhile is published; and once the
/// thread is free it makes everything pending durable with one fdatasync round.
#[test]
fn group_commit_takes_everything_pending() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), 1 << 20);
    let (open_gate, gate) = crossbeam_channel::bounded(1);
    let units = Arc::new(std::sync::Mutex::new(Vec::new()));
    let w = start(
        &c,
        Box::new(FirstDispatchGate {
            gate: Some(gate),
            units: units.clone(),
        }),
    );
    let (tx, rx) = crossbeam_channel::unbounded();
    let append = |body: &'static [u8], wait_flush: bool| {
        let tx = tx.clone();
        let req = AppendRequest {
            records: vec![record("T", 0, body, "")],
            wait_flush,
            reply: Box::new(move |r| tx.send((body, r)).unwrap()),
        };
        assert!(w.try_append(req).is_ok());
    };
    append(b"held", true); // its group's dispatch blocks the group-commit thread
    while w
        .group_commit_stats()
        .unwrap()
        .group_commits
        .load(Ordering::Relaxed)
        == 0
    {
        std::thread::yield_now();
    }
    // At most one writer batch per request: this many batches plus the last fit in the
    // group-commit queue, so the writer is never stalled by the held thread here.
    let n = crate::constants::GROUP_COMMIT_QUEUE_CAPACITY - 1;
    for _ in 0..n {
        append(b"waits", true);
    }
    append(b"no-wait", false);
    let (body, early) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(
        body, b"no-wait",
        "only the wait_flush = false request is answered"
    );
    let early = early.unwrap();
    assert_eq!(
        early.phy_offsets[0],
        96 + 97 * n as u64,
        "written behind the others"
    );
    assert_eq!(
        w.max_phy_offset(),
        96,
        "nothing published while the group is held"
    );
    assert!(rx.try_recv().is_err());
    open_gate.send(()).unwrap();
    let mut acks = Vec::new();
    for _ in 0..=n {
        let (body, r) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        acks.push((body, r.unwrap()));
    }
    assert_eq!(acks[0].0, b"held");
    let qos: Vec<u64> = acks[1..].iter().map(|(_, o)| o.queue_offsets[0]).collect();
    assert_eq!(
        qos,
        (1..=n as u64).collect::<Vec<_>>(),
        "completed in commit-log order"
    );
    let stats = w.group_commit_stats().unwrap();
    let rounds = stats.group_commits.load(Ordering::Relaxed);
    // One round for "held", one for everything written meanwhile, and at most one more for a
    // batch the writer was still handing over when the gate opened.
    assert!((2..=3).contains(&rounds), "{rounds} fdatasync rounds");
    assert_eq!(stats.records.load(Ordering::Relaxed), n as u64 + 1);
    let end = early.phy_offsets[0] + 99;
    assert_eq!(w.max_phy_offset(), end);
    assert_eq!(units.lock().unwrap().len(), n + 2);
    w.shutdown().unwrap();
}

/// Under SYNC_FLUSH (warming on by default) each group commit reaches the next segment's
/// warming through the allocator's gate; under ASYNC_FLUSH (warming off) there is no gate.
#[test]
fn group_commits_tell_the_warming_gate() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), 1 << 20);
    let (parts, _cqs) = WriterParts::from_opened(open(&c).unwrap());
    let gate = parts
        .commit_log
        .warm_gate()
        .expect("SYNC_FLUSH warms, so it has a gate");
    let w = spawn_writer(parts, &c, Box::new(NullDispatcher)).unwrap();
    for _ in 0..3 {
        append_wait(&w.clone_sender(), vec![record("T", 0, b"x", "")], true).unwrap();
    }
    // The gate hears of a round just after its replies.
    let t = std::time::Instant::now();
    while gate.rounds() == 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(gate.rounds() >= 1, "no round reached the gate");
    assert!(gate.rounds() <= 3, "one per round at most");
    w.shutdown().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let c = StoreConfig {
        flush_disk_type: FlushDiskType::AsyncFlush,
        ..cfg(dir.path(), 1 << 20)
    };
    let opened = open(&c).unwrap();
    assert!(
        opened.commit_log.warm_gate().is_none(),
        "ASYNC_FLUSH does not warm"
    );
}

/// Proves a group commit slower than syncFlushTimeout answers FLUSH_DISK_TIMEOUT, and that the
/// record is stored and dispatched all the same (RocketMQ's semantics).
#[test]
fn slow_sync_answers_flush_disk_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let c = StoreConfig {
        sync_flush_timeout_ms: 0,
        ..cfg(dir.path(), 256 << 10)
    };
    let col = CollectingDispatcher::default();
    let w = start(&c, Box::new(col.clone()));
    let out = append_wait(&w.clone_sender(), vec![record("T", 0, b"late", "")], true).unwrap();
    assert_eq!(out.status, AppendStatus::FlushDiskTimeout);
    assert_eq!(w.max_phy_offset(), 96);
    assert_eq!(col.0.lock().unwrap().len(), 1);
    w.shutdown().unwrap();
    assert_eq!(open(&c).unwrap().commit_log.max_phy_offset(), 96);
}

/// Proves keys of SYNC_FLUSH records reach the IndexFile (indexed once the group commit
/// covering them is done, so a query never finds a record that is not durable).
#[test]
fn sync_flush_indexes_keys_after_the_group_commit() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), 256 << 10);
    assert!(c.message_index_enable);
    let w = start(&c, Box::new(NullDispatcher));
    let mut rec = record("T", 0, b"keyed", "");
    rec.keys = IndexKeys::Owned(vec!["k1".to_string()]);
    let out = append_wait(&w.clone_sender(), vec![rec], true).unwrap();
    w.shutdown().unwrap();
    let ix =
        crate::store::IndexService::open(dir.path(), c.max_hash_slot_num, c.max_index_num).unwrap();
    assert_eq!(
        ix.query("T", "k1", 4, 0, i64::MAX),
        vec![out.phy_offsets[0]]
    );
}
