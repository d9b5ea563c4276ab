//! Writer tests for an empty commit log that begins past 0 (`WriterSender::try_start_at`), as a
//! slave's does when it joins a master whose log spans several segments: refused for an
//! unaligned offset or a log holding records; the master's records then follow at the master's
//! offsets and queue offsets, and a reopen (clean or after a crash) keeps the log's first
//! segment and the queues' first offsets.

use crossbeam_channel::bounded;

use super::testkit::{append_wait, record, CqDispatcher, NullDispatcher};
use super::tests::{cfg, start};
use super::*;
use crate::commit_log::list_segments;
use crate::{open, CommitLogReader};

const SEG: u64 = 128 << 10;
/// 32 units a consume-queue file: the slave's first unit of a queue is in a later file.
const CQ_FILE: u64 = 32 * 20;

/// Asks the writer to begin its empty log at `offset` and waits for the outcome.
fn start_at_wait(w: &WriterSender, offset: u64) -> Result<(), StoreError> {
    let (tx, rx) = bounded(1);
    let sent = w.try_start_at(
        offset,
        Box::new(move |r| {
            // The test waits for it below.
            let _ignored = tx.send(r);
        }),
    );
    assert!(sent, "the writer's inbox took the request");
    rx.recv()
        .unwrap_or_else(|_| Err(StoreError::NotWritable("writer stopped".into())))
}

/// A replicated copy of one of the master's records.
fn replica(bytes: &[u8], queue_id: u32) -> AppendRecord {
    let mut rec = AppendRecord::whole(
        Some("J".into()),
        queue_id,
        crate::TagsCode::Known(0),
        IndexKeys::None,
        true,
        bytes::BytesMut::from(bytes),
    );
    rec.replicated = true;
    rec
}

/// The master's records in `[from, to)` (one segment, no blank end in it), each with its queue
/// id, queue offset, offset and bytes.
fn records_of(dir: &std::path::Path, from: u64, to: u64) -> Vec<(u32, u64, u64, Vec<u8>)> {
    let mut r = CommitLogReader::new(dir, SEG);
    let log = r.read(from, (to - from) as u32).unwrap().to_vec();
    let mut out = Vec::new();
    let mut at = 0;
    while at < log.len() {
        let d = crate::protocol::message::decode(&log[at..], true).unwrap();
        let len = d.total_size as usize;
        out.push((
            d.queue_id as u32,
            d.queue_offset as u64,
            d.phy_offset as u64,
            log[at..at + len].to_vec(),
        ));
        at += len;
    }
    out
}

fn segment_starts(c: &StoreConfig) -> Vec<u64> {
    list_segments(&c.commit_log_dir())
        .unwrap()
        .into_iter()
        .map(|(s, _)| s)
        .collect()
}

/// Proves an empty log refuses an unaligned start, begins at the master's last segment, takes
/// the master's records there at their offsets and queue offsets, refuses to begin again once
/// it holds records, and keeps all of it across a clean reopen and a crash.
#[test]
fn an_empty_log_begins_at_a_later_segment() {
    let (m_dir, s_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mc = cfg(m_dir.path(), SEG);
    let sc = StoreConfig {
        mapped_file_size_consume_queue: CQ_FILE,
        ..cfg(s_dir.path(), SEG)
    };
    let master = start(&mc, Box::new(NullDispatcher));
    let ms = master.clone_sender();
    for b in 0..60u32 {
        let batch = (b * 8..b * 8 + 8)
            .map(|i| {
                let body = vec![b'a' + (i % 26) as u8; 600 + (i as usize * 7) % 300];
                record("J", i % 2, &body, "")
            })
            .collect();
        append_wait(&ms, batch, true).unwrap();
    }
    let end = master.max_phy_offset();
    let x = end - end % SEG;
    assert!(
        x >= 2 * SEG,
        "the master's log spans 3 segments or more ({end})"
    );
    let recs = records_of(m_dir.path(), x, end);

    let slave = start(&sc, Box::new(NullDispatcher));
    let ss = slave.clone_sender();
    let e = start_at_wait(&ss, x + 4096).unwrap_err();
    assert!(e.to_string().contains("not a multiple"), "{e}");
    assert_eq!((ss.min_phy_offset(), ss.max_phy_offset()), (0, 0));
    start_at_wait(&ss, x).unwrap();
    assert_eq!((ss.min_phy_offset(), ss.max_phy_offset()), (x, x));
    assert!(
        segment_starts(&sc).iter().all(|&s| s >= x),
        "no segment before {x}: {:?}",
        segment_starts(&sc)
    );
    slave.shutdown().unwrap();

    // Reopened empty at x, with queues built by dispatch: the master's records follow.
    let (parts, cqs) = WriterParts::from_opened(open(&sc).unwrap());
    assert_eq!(parts.commit_log.min_phy_offset(), x);
    let d = CqDispatcher::new(s_dir.path().to_path_buf(), CQ_FILE, cqs);
    let slave = spawn_writer(parts, &sc, Box::new(d)).unwrap();
    let ss = slave.clone_sender();
    let half = recs.len() / 2;
    let batch = |r: &[(u32, u64, u64, Vec<u8>)]| {
        r.iter()
            .map(|(q, _, _, b)| replica(b, *q))
            .collect::<Vec<_>>()
    };
    let out = append_wait(&ss, batch(&recs[..half]), true).unwrap();
    let want: Vec<u64> = recs[..half].iter().map(|(_, qo, _, _)| *qo).collect();
    assert_eq!(out.queue_offsets, want);
    assert_eq!(out.phy_offsets[0], x);
    let e = start_at_wait(&ss, 0).unwrap_err();
    assert!(e.to_string().contains("cannot begin again"), "{e}");
    // A crash: recovery walks the log from x and rebuilds the queues.
    slave.abandon().unwrap();

    let (parts, cqs) = WriterParts::from_opened(open(&sc).unwrap());
    let d = CqDispatcher::new(s_dir.path().to_path_buf(), CQ_FILE, cqs);
    let slave = spawn_writer(parts, &sc, Box::new(d)).unwrap();
    let ss = slave.clone_sender();
    assert_eq!(ss.min_phy_offset(), x);
    append_wait(&ss, batch(&recs[half..]), true).unwrap();
    assert_eq!(ss.max_phy_offset(), end);
    slave.shutdown().unwrap();
    master.shutdown().unwrap();

    let o = open(&sc).unwrap();
    assert_eq!(
        (o.commit_log.min_phy_offset(), o.commit_log.max_phy_offset()),
        (x, end)
    );
    let mut r = CommitLogReader::new(m_dir.path(), SEG);
    let m_log = r.read(x, (end - x) as u32).unwrap().to_vec();
    let mut r = CommitLogReader::new(s_dir.path(), SEG);
    assert!(r.read(x, (end - x) as u32).unwrap() == &m_log[..]);
    for q in 0..2u32 {
        let mine: Vec<_> = recs.iter().filter(|(qid, _, _, _)| *qid == q).collect();
        let cq = o.consume_queues.iter().find(|c| c.queue_id() == q).unwrap();
        let first = mine[0].1;
        assert!(first > CQ_FILE / 20, "queue {q} starts in a later file");
        assert_eq!(
            (cq.min_offset(), cq.max_offset()),
            (first, mine.last().unwrap().1 + 1)
        );
        assert_eq!(cq.get(first - 1), None);
        assert_eq!(cq.get(first).map(|u| u.phy_offset), Some(mine[0].2));
        assert_eq!(o.queue_offsets[&("J".to_string(), q)], cq.max_offset());
    }
}
