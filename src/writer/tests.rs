//! Writer tests: offsets, group-commit replies, segment roll with the blank marker, reopen,
//! fault injection (ENOSPC on allocation, EIO on write and flush), SYNC_FLUSH group commit (pipelining,
//! FLUSH_DISK_TIMEOUT, deferred indexing), back-pressure, disk hard limit.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::testkit::{append_wait, record, CollectingDispatcher, NullDispatcher};
use super::*;
use crate::protocol::message::{decode, BLANK_MAGIC};
use crate::store::fault::{FailNth, FaultHook, FaultPoint};
use crate::store::{open, CommitLogReader, FlushDiskType};

fn cfg(dir: &std::path::Path, seg: u64) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: seg,
        max_message_size: 16 << 10,
        flush_disk_type: FlushDiskType::SyncFlush,
        ..StoreConfig::with_root(dir)
    }
}

fn start(c: &StoreConfig, d: Box<dyn Dispatcher>) -> WriterHandle {
    let (parts, _cqs) = WriterParts::from_opened(open(c).unwrap());
    spawn_writer(parts, c, d).unwrap()
}

/// Proves offsets are assigned per queue, records land byte-exact at their phy offsets, units
/// are dispatched, and non-dispatched records get no queue offset.
#[test]
fn append_assigns_offsets_and_dispatches() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), 256 << 10);
    let col = CollectingDispatcher::default();
    let w = start(&c, Box::new(col.clone()));
    let s = w.clone_sender();
    let a = append_wait(
        &s,
        vec![record("A", 0, b"a0", ""), record("A", 1, b"a1", "")],
        true,
    )
    .unwrap();
    assert_eq!(a.status, AppendStatus::PutOk);
    assert_eq!(a.queue_offsets, vec![0, 0]);
    assert_eq!(a.phy_offsets[0], 0);
    let mut tx = record("A", 0, b"half", "");
    tx.dispatch = false;
    let b = append_wait(&s, vec![record("A", 0, b"a2", ""), tx], true).unwrap();
    assert_eq!(b.queue_offsets, vec![1, 0]);
    assert_eq!(w.max_phy_offset(), b.phy_offsets[1] + 91 + 4 + 1);
    let units = col.0.lock().unwrap().clone();
    assert_eq!(units.len(), 3);
    assert_eq!((units[2].queue_id, units[2].queue_offset), (0, 1));
    let mut r = CommitLogReader::new(dir.path(), c.mapped_file_size_commit_log);
    let u = units[2].unit;
    let rec = decode(r.read(u.phy_offset, u.size).unwrap(), true).unwrap();
    assert_eq!(
        (rec.body, rec.queue_offset, rec.phy_offset),
        (&b"a2"[..], 1, u.phy_offset as i64)
    );
    assert_eq!(rec.store_timestamp, b.store_timestamp);
    w.shutdown().unwrap();
    assert!(!dir.path().join("abort").exists());
}

/// Keeps the runs as the writer sent them.
#[derive(Clone, Default)]
struct RunCollector(Arc<std::sync::Mutex<Vec<DispatchRun>>>);

impl Dispatcher for RunCollector {
    fn dispatch(&mut self, runs: Vec<DispatchRun>) {
        self.0.lock().expect("runs lock").extend(runs);
    }
}

impl RunCollector {
    /// (topic, queue, first queue offset, unit count) of each run so far.
    fn shape(&self) -> Vec<(String, u32, u64, usize)> {
        let runs = self.0.lock().expect("runs lock");
        runs.iter()
            .map(|r| {
                (
                    r.topic.to_string(),
                    r.queue_id,
                    r.first_queue_offset,
                    r.units.len(),
                )
            })
            .collect()
    }
}

/// An ASYNC_FLUSH writer over `dir` whose dispatched runs the collector keeps.
fn start_collecting_runs(dir: &std::path::Path) -> (WriterHandle, RunCollector) {
    let c = StoreConfig {
        flush_disk_type: FlushDiskType::AsyncFlush,
        ..cfg(dir, 256 << 10)
    };
    let col = RunCollector::default();
    (start(&c, Box::new(col.clone())), col)
}

fn shape_of(v: &[(&str, u32, u64, usize)]) -> Vec<(String, u32, u64, usize)> {
    v.iter()
        .map(|&(t, q, o, n)| (t.to_string(), q, o, n))
        .collect()
}

/// Proves the records of one queue in a batch become one run, even with other queues' records
/// (or a record that is not dispatched) between them, with the right offsets and sizes, and
/// that a later batch starts runs of its own.
#[test]
fn units_of_one_queue_are_dispatched_as_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (w, col) = start_collecting_runs(dir.path());
    let s = w.clone_sender();
    let mut held = record("A", 0, b"held", "");
    held.dispatch = false;
    let recs = vec![
        record("A", 0, b"a0", ""),
        record("A", 0, b"a1", ""),
        record("A", 1, b"b0", ""),
        record("B", 1, b"c0", ""),
        record("A", 0, b"a2", ""),
        held,
        record("A", 0, b"a3", ""),
    ];
    let out = append_wait(&s, recs, true).unwrap();
    let again = append_wait(&s, vec![record("A", 0, b"a4", "")], true).unwrap();
    w.shutdown().unwrap();
    let runs = col.0.lock().unwrap().clone();
    // a2 and a3 continue the run of A/0 across A/1, B/1 and the "held" record, which takes no
    // queue offset; the second request is a batch of its own.
    assert_eq!(
        col.shape(),
        shape_of(&[
            ("A", 0, 0, 4),
            ("A", 1, 0, 1),
            ("B", 1, 0, 1),
            ("A", 0, 4, 1)
        ])
    );
    let phys: Vec<u64> = runs
        .iter()
        .flat_map(|r| r.iter().map(|(_, u)| u.phy_offset))
        .collect();
    let p = &out.phy_offsets;
    let mut expected = vec![p[0], p[1], p[4], p[6], p[2], p[3]];
    expected.extend(&again.phy_offsets);
    assert_eq!(phys, expected);
    let offsets: Vec<u64> = runs.iter().flat_map(|r| r.iter().map(|(q, _)| q)).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3, 0, 0, 4]);
}

/// Proves a batch spread round robin over queues dispatches every unit once, each queue's in
/// offset order with the phy offset of its record: over 8 queues as one run per queue, over
/// more queues than a unit looks back (20) as runs of one.
#[test]
fn units_spread_over_queues_keep_each_queue_in_order() {
    for (queues, runs_expected) in [(8u32, 8usize), (20, 60)] {
        let dir = tempfile::tempdir().unwrap();
        let (w, col) = start_collecting_runs(dir.path());
        let s = w.clone_sender();
        let n = 3 * queues;
        let recs: Vec<_> = (0..n).map(|i| record("A", i % queues, b"x", "")).collect();
        let out = append_wait(&s, recs, true).unwrap();
        w.shutdown().unwrap();
        let runs = col.0.lock().unwrap().clone();
        let mut seen: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
        for r in &runs {
            for (qo, u) in r.iter() {
                seen.entry(r.queue_id).or_default().push((qo, u.phy_offset));
            }
        }
        assert_eq!(seen.len(), queues as usize);
        for (q, units) in seen {
            let expected: Vec<(u64, u64)> = (0..3u32)
                .map(|k| (u64::from(k), out.phy_offsets[(k * queues + q) as usize]))
                .collect();
            assert_eq!(units, expected, "queue {q} of {queues}");
        }
        assert_eq!(runs.len(), runs_expected, "{queues} queues");
    }
}

/// Proves a record without a topic continues the previous record's (queue offsets and units
/// included), and that a request whose first record names none is refused, not appended.
#[test]
fn records_without_a_topic_repeat_the_previous_one() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), 256 << 10);
    let col = RunCollector::default();
    let w = start(&c, Box::new(col.clone()));
    let s = w.clone_sender();
    let mut b1 = record("B", 0, b"b1", "");
    b1.topic = None;
    let mut b2 = record("B", 1, b"b2", "");
    b2.topic = None;
    let recs = vec![record("A", 0, b"a0", ""), record("B", 0, b"b0", ""), b1, b2];
    let out = append_wait(&s, recs, true).unwrap();
    assert_eq!(out.queue_offsets, vec![0, 0, 1, 0]);
    let mut orphan = record("C", 0, b"c", "");
    orphan.topic = None;
    let e = append_wait(&s, vec![orphan], true).unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let after = append_wait(&s, vec![record("B", 0, b"b3", "")], true).unwrap();
    assert_eq!(after.queue_offsets, vec![2]);
    w.shutdown().unwrap();
    assert_eq!(
        col.shape(),
        shape_of(&[
            ("A", 0, 0, 1),
            ("B", 0, 0, 2),
            ("B", 1, 0, 1),
            ("B", 0, 2, 1)
        ])
    );
}

/// Proves a record that does not fit closes the segment with [remaining][BLANK] and starts
/// the next one, and that queue offsets continue after a clean reopen.
#[test]
fn segment_roll_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let seg = 128 << 10;
    let c = cfg(dir.path(), seg);
    let w = start(&c, Box::new(NullDispatcher));
    let s = w.clone_sender();
    let body = vec![7u8; 10_000];
    let mut last = None;
    for _ in 0..30 {
        last = Some(append_wait(&s, vec![record("T", 0, &body, "")], true).unwrap());
    }
    let last = last.unwrap();
    assert!(last.phy_offsets[0] > 2 * seg, "three segments used");
    w.shutdown().unwrap();
    let seg0 = std::fs::read(dir.path().join("commitlog/00000000000000000000")).unwrap();
    let rec_len = 10_000 + 91 + 1;
    let fits = (seg as usize - 8) / rec_len; // records that leave 8 bytes free
    let blank_at = fits * rec_len;
    let remaining = seg as usize - blank_at;
    assert_eq!(
        &seg0[blank_at..blank_at + 4],
        &(remaining as u32).to_be_bytes()
    );
    assert_eq!(
        &seg0[blank_at + 4..blank_at + 8],
        &BLANK_MAGIC.to_be_bytes()
    );
    let w = start(&c, Box::new(NullDispatcher));
    let again = append_wait(&w.clone_sender(), vec![record("T", 0, b"x", "")], true).unwrap();
    assert_eq!(again.queue_offsets, vec![30]);
    assert_eq!(again.phy_offsets[0], last.phy_offsets[0] + rec_len as u64);
    w.shutdown().unwrap();
}

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

struct Gate(crossbeam_channel::Receiver<()>);
impl Dispatcher for Gate {
    fn dispatch(&mut self, _runs: Vec<DispatchRun>) {
        let _opened = self.0.recv();
    }
}

/// Proves try_append never blocks and hands the request back when the inbox is full.
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
    // The writer may have taken one batch before blocking in dispatch.
    let n =
        crate::constants::WRITER_INBOX_CAPACITY + crate::constants::WRITER_BATCH_MAX_RECORDS + 10;
    for _ in 0..n {
        let req = AppendRequest {
            records: vec![record("T", 0, b"x", "")],
            wait_flush: false,
            reply: Box::new(|_| {}),
        };
        if w.try_append(req).is_err() {
            refused += 1;
        }
    }
    drop(open_gate); // dispatcher stops waiting
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

/// `deleteWhen` listing every hour of the day, so time-based deletion may run whenever the test does.
fn every_hour() -> String {
    (0..24).map(|h| h.to_string()).collect::<Vec<_>>().join(";")
}

/// A store whose segments expire as soon as they are not the active one, checked every
/// `check_ms`, deleted without pauses.
fn expiring(dir: &std::path::Path, seg: u64, check_ms: u64) -> StoreConfig {
    StoreConfig {
        file_reserved_time_hours: 0,
        delete_when: crate::store::config::DeleteWhen::parse(&every_hour()).unwrap(),
        retention_check_interval_ms: check_ms,
        // The pause between deletions has its own test (tests/store_retention_deleter.rs).
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
                crate::store::mapped_file::parse_segment_name(e.file_name().to_str().unwrap())
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
            let start = crate::store::mapped_file::parse_segment_name(e.file_name().to_str()?)?;
            (start < data_end).then(|| e.metadata().ok().map(|m| m.len()))?
        })
        .collect()
}

impl crate::store::fault::FaultInjector for CommitLogDisk {
    fn check(&self, _point: FaultPoint) -> Option<std::io::Error> {
        None
    }
    fn disk_usage(&self) -> Option<crate::store::fault::DiskUsage> {
        let on_disk: u64 = data_segments(&self.dir, self.data_end).iter().sum();
        Some(crate::store::fault::DiskUsage {
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

/// Proves in-record key ranges yield each non-empty KEYS entry, then UNIQ_KEY, borrowed from the
/// record; and that a range past the record or over bytes that are not UTF-8 yields nothing.
#[test]
fn index_keys_in_record_are_read_from_the_record_bytes() {
    let bytes = b"....KEYS\x01a  b\x02UNIQ_KEY\x01U1\x02\xff\xfe".to_vec();
    let k = IndexKeys::InRecord {
        keys: Some((9, 13)),
        uniq: Some((23, 25)),
    };
    let mut out = Vec::new();
    k.collect(&bytes, &mut out);
    assert_eq!(out, vec!["a", "b", "U1"]);
    assert!(!k.is_empty());
    let bad = IndexKeys::InRecord {
        keys: Some((26, 28)),
        uniq: Some((20, 400)),
    };
    let mut out = Vec::new();
    bad.collect(&bytes, &mut out);
    assert!(out.is_empty());
    assert!(IndexKeys::None.is_empty());
    assert!(IndexKeys::InRecord {
        keys: None,
        uniq: None
    }
    .is_empty());
}

/// Proves a record whose body is kept apart (the send path's) lands byte for byte as the same
/// record encoded whole, mixed with whole records in one request and across a segment roll; and
/// that a split that does not match its body-length field is refused, not written.
#[test]
fn records_with_the_body_apart_are_written_as_whole_ones() {
    let dir = tempfile::tempdir().unwrap();
    let seg = 128 << 10;
    let c = cfg(dir.path(), seg);
    let col = CollectingDispatcher::default();
    let w = start(&c, Box::new(col.clone()));
    let s = w.clone_sender();
    let mut sent = Vec::new();
    for i in 0..60u32 {
        let body: Vec<u8> = (0..3000 + i).map(|b| (b * 7 + i) as u8).collect();
        let props = format!("KEYS\u{1}k{i}\u{2}");
        let recs = vec![
            super::testkit::record_split("S", 0, &body, &props),
            record("S", 0, b"whole", ""),
        ];
        let a = append_wait(&s, recs, true).unwrap();
        sent.push((a.phy_offsets[0], body, props));
    }
    assert!(
        sent.last().unwrap().0 > seg,
        "the records crossed a segment"
    );
    let mut bad = super::testkit::record_split("S", 0, b"body", "");
    bad.body_at -= 1;
    assert!(matches!(
        append_wait(&s, vec![bad], true),
        Err(StoreError::Invalid(_))
    ));
    let mut short = super::testkit::record_split("S", 0, b"body", "");
    short.body = bytes::Bytes::from_static(b"bod");
    assert!(matches!(
        append_wait(&s, vec![short], true),
        Err(StoreError::Invalid(_))
    ));
    let max_phy = w.max_phy_offset();
    w.shutdown().unwrap();
    let units = col.0.lock().unwrap().clone();
    let mut r = CommitLogReader::new(dir.path(), c.mapped_file_size_commit_log);
    for (i, (phy, body, props)) in sent.iter().enumerate() {
        let u = units.iter().find(|u| u.unit.phy_offset == *phy).unwrap();
        let mut expect = record("S", 0, body, props).bytes;
        let got = r.read(*phy, u.unit.size).unwrap();
        let d = decode(got, true).unwrap();
        assert_eq!((d.body, d.properties), (&body[..], &props[..]));
        crate::protocol::message::patch(
            &mut expect,
            d.queue_offset,
            *phy as i64,
            d.store_timestamp,
        );
        assert_eq!(got, &expect[..], "record {i}");
        assert_eq!(d.queue_offset, 2 * i as i64);
    }
    assert!(max_phy > sent.last().unwrap().0);
}

/// With a writer core configured, its helper threads run there too: the group commit's
/// hand-over after each write then wakes a thread on the same core, and the allocator's work
/// stays off the shards' cores (bench journal, fifteenth session). The ASYNC flusher runs on its own
/// `flush_core` instead, a shard's (bench journal, nineteenth session).
#[test]
fn writer_core_threads_are_pinned_to_it() {
    let core = crate::runtime::available_cores() - 1;
    // On one core both are 0; otherwise the flusher's core is not the writer's, as the broker
    // places them.
    let flush_core = 0;
    // Other tests' writers run in this process too, unpinned: look for one pinned thread of
    // each name (only a writer core or a flush core pins them).
    let pinned = |name: &str, core: usize| {
        std::fs::read_dir("/proc/self/task").unwrap().any(|t| {
            let p = t.unwrap().path();
            let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
            let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
            comm.trim() == name
                && status.lines().any(|l| {
                    l.split_whitespace()
                        .eq(["Cpus_allowed_list:", &core.to_string()])
                })
        })
    };
    for (flush, helper, helper_core) in [
        (FlushDiskType::SyncFlush, "ringmq-sync-flu", core),
        (FlushDiskType::AsyncFlush, "ringmq-flush", flush_core),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let c = StoreConfig {
            writer_core: Some(core),
            flush_core: Some(flush_core),
            flush_disk_type: flush,
            ..cfg(dir.path(), 1 << 20)
        };
        let w = start(&c, Box::new(NullDispatcher));
        append_wait(&w.clone_sender(), vec![record("T", 0, b"x", "")], true).unwrap();
        for (name, on) in [
            ("ringmq-writer", core),
            (helper, helper_core),
            ("ringmq-prealloc", core),
        ] {
            assert!(pinned(name, on), "{name} is not on core {on}");
        }
        w.shutdown().unwrap();
    }
}
