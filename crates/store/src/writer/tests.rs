//! Writer tests: offsets, dispatch runs, segment roll with the blank marker, reopen, index keys
//! read from the record, records with the body apart, thread pinning; and the store set-up the
//! other writer test modules share (`cfg`, `start`). Failures and refusals are in
//! `tests_faults`, SYNC_FLUSH group commit in `tests_sync_flush`, retention in
//! `tests_retention`.

use std::sync::Arc;

use super::testkit::{append_wait, record, CollectingDispatcher, NullDispatcher};
use super::*;
use crate::protocol::message::{decode, BLANK_MAGIC};
use crate::{open, CommitLogReader, FlushDiskType};

pub(super) fn cfg(dir: &std::path::Path, seg: u64) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: seg,
        max_message_size: 16 << 10,
        flush_disk_type: FlushDiskType::SyncFlush,
        ..StoreConfig::with_root(dir)
    }
}

pub(super) fn start(c: &StoreConfig, d: Box<dyn Dispatcher>) -> WriterHandle {
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
    fn complete(&mut self, runs: Vec<DispatchRun>, _replies: Vec<ShardReply>) {
        self.0.lock().expect("runs lock").extend(runs);
    }
    fn barrier(&mut self, _reply: ShardReply) {}
    fn truncate(&mut self, cut: CqTruncate) {
        cut.answer(Ok(crate::CqCutFiles::default()));
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

/// With a writer core configured, the writer and the allocator run there, and no flush thread
/// exists in either mode: the syncs go through the writer's own ring.
#[test]
fn writer_core_threads_are_pinned_to_it() {
    use crate::runtime::{Role, ThreadPlan};
    // One core: a plan that pins nothing; the core below is then the only one, 0.
    let plan = ThreadPlan::for_this_process(true);
    let core = plan.core(Role::Writer).unwrap_or(0);
    // Other tests' writers run in this process too, unpinned: look for one pinned thread of
    // each name (only a writer core pins them).
    let allowed = |name: &str, list: &str| {
        std::fs::read_dir("/proc/self/task").unwrap().any(|t| {
            let p = t.unwrap().path();
            let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
            let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
            comm.trim().starts_with(name)
                && status
                    .lines()
                    .any(|l| l.split_whitespace().eq(["Cpus_allowed_list:", list]))
        })
    };
    let pinned = |name: &str, core: usize| allowed(name, &core.to_string());
    for flush in [FlushDiskType::SyncFlush, FlushDiskType::AsyncFlush] {
        let dir = tempfile::tempdir().unwrap();
        let c = StoreConfig {
            flush_disk_type: flush,
            threads: plan,
            ..cfg(dir.path(), 1 << 20)
        };
        let w = start(&c, Box::new(NullDispatcher));
        append_wait(&w.clone_sender(), vec![record("T", 0, b"x", "")], true).unwrap();
        // Enough dirty pages for the periodic async flush (flushCommitLogLeastPages).
        let body = [7u8; 1024];
        let batch: Vec<_> = (0..64).map(|_| record("T", 0, &body, "")).collect();
        append_wait(&w.clone_sender(), batch, true).unwrap();
        for (name, on) in [("ringmq-writer", core), ("ringmq-prealloc", core)] {
            assert!(pinned(name, on), "{name} is not on core {on}");
        }
        // The syncs run on the writer's ring: no flush thread of ours exists.
        let names: Vec<String> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap_or_default())
            .collect();
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("ringmq-flush") || n.starts_with("ringmq-sync-fl")),
            "{names:?}"
        );
        // The kernel workers that run the ring's fdatasyncs sit where the plan says: the
        // writer's core under SYNC_FLUSH (the append above waited for one), the shards' under
        // ASYNC_FLUSH (the periodic flush runs within flushIntervalCommitLog).
        if let Some(cores) = plan.ring_worker_cores(flush == FlushDiskType::SyncFlush) {
            let list = match (cores.first(), cores.last()) {
                (Some(a), Some(b)) if a == b => a.to_string(),
                (Some(a), Some(b)) => format!("{a}-{b}"),
                _ => unreachable!("a plan that pins has cores"),
            };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !allowed("iou-wrk", &list) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let seen: Vec<String> = std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|t| {
                    let p = t.unwrap().path();
                    let comm = std::fs::read_to_string(p.join("comm")).ok()?;
                    let status = std::fs::read_to_string(p.join("status")).ok()?;
                    let list = status
                        .lines()
                        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
                        .trim()
                        .to_string();
                    Some(format!("{} {list}", comm.trim()))
                })
                .collect();
            assert!(
                allowed("iou-wrk", &list),
                "{flush:?}: no ring worker on {list}: {seen:?}"
            );
        }
        w.shutdown().unwrap();
    }
}

/// A slave's writer keeps a replicated record as the master wrote it: same offset, same queue
/// offset, same store time, so its log is the master's; a record that would land elsewhere (the
/// slave's log does not follow the master's) is refused and nothing is written.
#[test]
fn replicated_records_keep_the_masters_offsets() {
    let (m_dir, s_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mc, sc) = (cfg(m_dir.path(), 256 << 10), cfg(s_dir.path(), 256 << 10));
    let master = start(&mc, Box::new(NullDispatcher));
    let col = CollectingDispatcher::default();
    let slave = start(&sc, Box::new(col.clone()));
    let ms = master.clone_sender();
    append_wait(
        &ms,
        vec![record("R", 2, b"first", ""), record("R", 2, b"second", "")],
        true,
    )
    .unwrap();
    let mut r = CommitLogReader::new(m_dir.path(), mc.mapped_file_size_commit_log);
    let end = master.max_phy_offset();
    let log = r.read(0, end as u32).unwrap().to_vec();
    let first_len = u32::from_be_bytes(log[..4].try_into().unwrap()) as usize;
    let replica = |bytes: &[u8]| {
        let mut rec = AppendRecord::whole(
            Some("R".into()),
            2,
            crate::TagsCode::Known(0),
            IndexKeys::None,
            true,
            bytes::BytesMut::from(bytes),
        );
        rec.replicated = true;
        rec
    };
    // The second record first: it would land at 0, not at its own offset.
    let ss = slave.clone_sender();
    assert!(append_wait(&ss, vec![replica(&log[first_len..])], true).is_err());
    assert_eq!(slave.max_phy_offset(), 0);
    let out = append_wait(
        &ss,
        vec![replica(&log[..first_len]), replica(&log[first_len..])],
        true,
    )
    .unwrap();
    assert_eq!(out.phy_offsets, vec![0, first_len as u64]);
    assert_eq!(out.queue_offsets, vec![0, 1]);
    let mut sr = CommitLogReader::new(s_dir.path(), sc.mapped_file_size_commit_log);
    assert_eq!(sr.read(0, end as u32).unwrap(), &log[..]);
    let units = col.0.lock().unwrap().clone();
    assert_eq!(
        units.iter().map(|u| u.queue_offset).collect::<Vec<_>>(),
        vec![0, 1]
    );
}
