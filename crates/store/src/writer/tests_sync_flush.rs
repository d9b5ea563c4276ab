//! Writer tests of SYNC_FLUSH group commit: completion in order through the shards'
//! back-pressure,
//! the warming gate, FLUSH_DISK_TIMEOUT for a slow fdatasync, keys indexed only after their
//! group commit.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::testkit::{append_wait, record, CollectingDispatcher, NullDispatcher};
use super::tests::{cfg, start};
use super::*;
use crate::{open, FlushDiskType};

/// Keeps completions (a shard with no room) from the first group on until the gate's sender is
/// dropped; collects every unit.
struct KeepAfterFirst {
    gate: crossbeam_channel::Receiver<()>,
    groups: usize,
    units: Arc<std::sync::Mutex<Vec<DispatchUnit>>>,
}

impl Dispatcher for KeepAfterFirst {
    fn complete(&mut self, runs: Vec<DispatchRun>, _replies: Vec<ShardReply>) {
        self.groups += 1;
        let mut all = self.units.lock().expect("units lock");
        all.extend(runs.into_iter().flat_map(DispatchRun::into_units));
    }
    fn flush(&mut self) -> bool {
        self.groups == 0
            || matches!(
                self.gate.try_recv(),
                Err(crossbeam_channel::TryRecvError::Disconnected)
            )
    }
    fn truncate(&mut self, cut: CqTruncate) {
        cut.answer(Ok(crate::CqCutFiles::default()));
    }
    fn barrier(&mut self, _reply: ShardReply) {}
}

/// Proves SYNC_FLUSH completes in order through the shards' back-pressure: while a shard has no
/// room for a completed group, the writer takes no appends (nothing more is written, answered
/// or published, a wait_flush = false send included: nothing is readable before its sync); once
/// there is room it takes everything that waited as one batch, one fdatasync round covers it,
/// and the replies come in commit-log order.
#[test]
fn group_commit_takes_everything_pending() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), 1 << 20);
    let (open_gate, gate) = crossbeam_channel::bounded(1);
    let units = Arc::new(std::sync::Mutex::new(Vec::new()));
    let w = start(
        &c,
        Box::new(KeepAfterFirst {
            gate,
            groups: 0,
            units: units.clone(),
        }),
    );
    let (tx, rx) = crossbeam_channel::unbounded();
    let append = |body: &'static [u8], wait_flush: bool| {
        let tx = tx.clone();
        let req = AppendRequest {
            records: vec![record("T", 0, body, "")],
            wait_flush,
            reply: ReplyTo::Call(Box::new(move |r| tx.send((body, r)).unwrap())),
        };
        assert!(w.try_append(req).is_ok());
    };
    append(b"held", true);
    let (body, first) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(body, b"held");
    assert_eq!(first.unwrap().phy_offsets[0], 0);
    let n = 20;
    for _ in 0..n {
        append(b"waits", true);
    }
    append(b"no-wait", false);
    std::thread::sleep(Duration::from_millis(200));
    assert!(rx.try_recv().is_err(), "nothing answered while kept");
    assert_eq!(w.max_phy_offset(), 96, "nothing more published while kept");
    let stats = w.group_commit_stats().unwrap();
    assert_eq!(stats.group_commits.load(Ordering::Relaxed), 1);
    drop(open_gate);
    let mut acks = Vec::new();
    for _ in 0..=n {
        let (body, r) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        acks.push((body, r.unwrap()));
    }
    assert_eq!(acks[n].0, b"no-wait");
    let qos: Vec<u64> = acks.iter().map(|(_, o)| o.queue_offsets[0]).collect();
    assert_eq!(
        qos,
        (1..=n as u64 + 1).collect::<Vec<_>>(),
        "completed in commit-log order"
    );
    assert_eq!(
        stats.group_commits.load(Ordering::Relaxed),
        2,
        "one round for everything that waited"
    );
    assert_eq!(stats.records.load(Ordering::Relaxed), n as u64 + 2);
    let end = acks[n].1.phy_offsets[0] + 99;
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
    let ix = crate::IndexService::open(dir.path(), c.max_hash_slot_num, c.max_index_num).unwrap();
    assert_eq!(
        ix.query("T", "k1", 4, 0, i64::MAX),
        vec![out.phy_offsets[0]]
    );
}
