//! Writer tests for truncating a running commit log back to an earlier record
//! (`WriterSender::try_truncate_to`): mid-segment, at a segment boundary, across several
//! segments and below the log's first byte; appends after it continue at the offset with the
//! dropped records' queue offsets; consume queues, index and published end go back; a reopen
//! after a clean shutdown or a crash finds exactly the truncated end; refused offsets change
//! nothing. Both flush modes.

use crossbeam_channel::bounded;

use super::testkit::{append_wait, record, CqBounds, CqDispatcher};
use super::tests::cfg;
use super::*;
use crate::commit_log::list_segments;
use crate::protocol::message::decode;
use crate::{open, CommitLogReader, FlushDiskType};

const SEG: u64 = 128 << 10;
/// 64 units a consume-queue file, so truncations remove consume-queue files too.
const CQ_FILE: u64 = 64 * 20;

fn store_cfg(dir: &std::path::Path, mode: FlushDiskType) -> StoreConfig {
    StoreConfig {
        flush_disk_type: mode,
        mapped_file_size_consume_queue: CQ_FILE,
        ..cfg(dir, SEG)
    }
}

/// Opens (recovers) the store and starts a writer whose queues the returned bounds show.
fn start_cq(c: &StoreConfig) -> (WriterHandle, CqBounds) {
    let (parts, cqs) = WriterParts::from_opened(open(c).unwrap());
    let d = CqDispatcher::new(c.store_path_root_dir.clone(), CQ_FILE, cqs);
    let bounds = d.bounds();
    (spawn_writer(parts, c, Box::new(d)).unwrap(), bounds)
}

fn truncate_wait(w: &WriterSender, offset: u64) -> Result<(), StoreError> {
    let (tx, rx) = bounded(1);
    let sent = w.try_truncate_to(
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

/// One appended record: queue, queue offset, phy offset, size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Placed {
    queue: u32,
    queue_offset: u64,
    phy: u64,
    size: u64,
}

/// Appends `n` records round robin over queues 0..3 of topic "T" (bodies of varied sizes,
/// tagged with `tag` so a later record at the same offset differs), in batches of 4.
fn fill(w: &WriterSender, n: usize, tag: u8) -> Vec<Placed> {
    let mut out = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(4) {
        let recs: Vec<_> = chunk
            .iter()
            .map(|&i| {
                let body = vec![tag.wrapping_add(i as u8); 300 + (i * 37) % 1500];
                record("T", (i % 3) as u32, &body, "")
            })
            .collect();
        let sizes: Vec<u64> = recs.iter().map(|r| r.stored_len() as u64).collect();
        let o = append_wait(w, recs, true).unwrap();
        for (k, &i) in chunk.iter().enumerate() {
            out.push(Placed {
                queue: (i % 3) as u32,
                queue_offset: o.queue_offsets[k],
                phy: o.phy_offsets[k],
                size: sizes[k],
            });
        }
    }
    out
}

/// Each queue's (max offset, max phy offset) if the log held exactly `kept`.
fn expected_bounds(kept: &[Placed]) -> Vec<(u32, u64, Option<u64>)> {
    (0..3u32)
        .map(|q| {
            let mine: Vec<_> = kept.iter().filter(|p| p.queue == q).collect();
            (
                q,
                mine.last().map_or(0, |p| p.queue_offset + 1),
                mine.last().map(|p| p.phy + p.size),
            )
        })
        .collect()
}

fn bounds_now(b: &CqBounds) -> Vec<(u32, u64, Option<u64>)> {
    let b = b.lock().unwrap();
    (0..3u32)
        .map(|q| {
            let (_, max, max_phy) = b.get(&("T".to_string(), q)).copied().unwrap_or_default();
            (q, max, max_phy)
        })
        .collect()
}

/// Whether every byte of the segment files from `end` on is zero (the rest of its segment,
/// and the spare segment the allocator may have prepared after it), and how many segment files
/// lie after the end's segment.
fn zero_past(c: &StoreConfig, end: u64) -> (bool, usize) {
    let segs = list_segments(&c.commit_log_dir()).unwrap();
    let start = end - end % SEG;
    let mut zero = true;
    let mut later = 0;
    for (s, path) in &segs {
        if *s < start {
            continue;
        }
        let bytes = std::fs::read(path).unwrap();
        let from = if *s == start {
            (end - start) as usize
        } else {
            0
        };
        zero &= bytes[from..].iter().all(|&b| b == 0);
        later += usize::from(*s > start);
    }
    (zero, later)
}

/// The whole scenario at `cut` (the index of the first record dropped): truncate, check the
/// live state, append again, check the new records' offsets, then reopen (cleanly or after a
/// crash) and check what recovery finds.
fn truncate_scenario(
    mode: FlushDiskType,
    n: usize,
    cut_at: impl Fn(&[Placed]) -> usize,
    crash: bool,
) {
    let dir = tempfile::tempdir().unwrap();
    let c = store_cfg(dir.path(), mode);
    let (w, bounds) = start_cq(&c);
    let s = w.clone_sender();
    let placed = fill(&s, n, 1);
    let cut = cut_at(&placed);
    let offset = placed[cut].phy;
    let kept = &placed[..cut];
    truncate_wait(&s, offset).unwrap();
    assert_eq!(s.max_phy_offset(), offset, "published end");
    assert_eq!(bounds_now(&bounds), expected_bounds(kept), "consume queues");
    let (zero, later) = zero_past(&c, offset);
    assert!(zero, "bytes past the new end are zero");
    assert!(
        later <= 1,
        "at most the spare segment after the end's: {later}"
    );

    // Appends continue at the offset, with the queue offsets the dropped records had.
    let again = fill(&s, 7, 100);
    assert_eq!(again[0].phy, offset);
    for p in &again[..3] {
        let dropped = placed[cut..].iter().find(|d| d.queue == p.queue);
        let want = dropped.map_or_else(
            || kept.iter().filter(|k| k.queue == p.queue).count() as u64,
            |d| d.queue_offset,
        );
        assert_eq!(
            p.queue_offset, want,
            "queue {} goes on from the cut",
            p.queue
        );
    }
    let all: Vec<Placed> = kept.iter().chain(&again).copied().collect();
    assert_eq!(bounds_now(&bounds), expected_bounds(&all));
    let end = s.max_phy_offset();
    if crash {
        w.abandon().unwrap();
    } else {
        w.shutdown().unwrap();
    }

    let o = open(&c).unwrap();
    assert_eq!(o.recovered_from_crash, crash);
    assert_eq!(o.commit_log.max_phy_offset(), end, "recovery finds the end");
    for (q, max, max_phy) in expected_bounds(&all) {
        let cq = o
            .consume_queues
            .iter()
            .find(|cq| cq.queue_id() == q)
            .unwrap();
        assert_eq!(
            (cq.max_offset(), cq.max_phy_offset()),
            (max, max_phy),
            "queue {q}"
        );
        for p in all.iter().filter(|p| p.queue == q) {
            assert_eq!(cq.get(p.queue_offset).map(|u| u.phy_offset), Some(p.phy));
        }
    }
    drop(o);
    let mut r = CommitLogReader::new(dir.path(), SEG);
    for p in &again {
        let rec = decode(r.read(p.phy, p.size as u32).unwrap(), true).unwrap();
        assert_eq!(
            (rec.queue_offset as u64, rec.phy_offset as u64, rec.body[0]),
            (
                p.queue_offset,
                p.phy,
                100u8.wrapping_add((again.iter().position(|x| x == p).unwrap()) as u8)
            )
        );
    }
}

/// Proves a truncation inside the active segment (SYNC_FLUSH) cuts the log, the queues and the
/// published end back, appends continue there, and a clean reopen finds that end.
#[test]
fn truncate_mid_segment_sync_flush() {
    truncate_scenario(FlushDiskType::SyncFlush, 40, |p| p.len() - 9, false);
}

/// Proves the same under ASYNC_FLUSH, with a crash instead of a clean shutdown.
#[test]
fn truncate_mid_segment_async_flush_then_crash() {
    truncate_scenario(FlushDiskType::AsyncFlush, 40, |p| p.len() - 9, true);
}

/// Proves a truncation to the first record of a later segment (a segment boundary, with the
/// earlier segment closed by its blank marker) removes every later segment and survives a crash.
#[test]
fn truncate_at_a_segment_boundary() {
    truncate_scenario(
        FlushDiskType::SyncFlush,
        300,
        |p| {
            p.iter()
                .position(|x| x.phy % SEG == 0 && x.phy >= SEG)
                .unwrap()
        },
        true,
    );
}

/// Proves a truncation across several segments (to the middle of the first) removes them all
/// and rebuilds nothing of them after a clean reopen (ASYNC_FLUSH).
#[test]
fn truncate_across_several_segments() {
    truncate_scenario(
        FlushDiskType::AsyncFlush,
        600,
        |p| {
            assert!(p.last().unwrap().phy >= 3 * SEG, "the log spans 4 segments");
            p.iter().position(|x| x.phy > SEG / 2).unwrap()
        },
        false,
    );
}

/// Proves offsets that are not where a record starts, past the end, or below the first byte and
/// unaligned are refused as Invalid and change nothing: the next append lands at the old end
/// with the next queue offset.
#[test]
fn refused_truncations_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = store_cfg(dir.path(), FlushDiskType::SyncFlush);
    let (w, bounds) = start_cq(&c);
    let s = w.clone_sender();
    let placed = fill(&s, 12, 1);
    let end = s.max_phy_offset();
    let before = bounds_now(&bounds);
    for bad in [placed[5].phy + 1, placed[5].phy + 8, end + 1, end + SEG] {
        match truncate_wait(&s, bad) {
            Err(StoreError::Invalid(m)) => assert!(!m.is_empty()),
            other => panic!("truncation to {bad} gave {other:?}"),
        }
    }
    assert_eq!(s.max_phy_offset(), end);
    assert_eq!(bounds_now(&bounds), before);
    assert!(s.is_writable());
    let next = fill(&s, 1, 50);
    assert_eq!((next[0].phy, next[0].queue_offset), (end, 4));
    // The end itself is a boundary: nothing to drop.
    truncate_wait(&s, s.max_phy_offset()).unwrap();
    assert_eq!(s.max_phy_offset(), end + next[0].size);
    w.shutdown().unwrap();
}

/// Proves a truncation below the log's first byte (aligned) empties the log, which then begins
/// there: min and max offsets move to it, every segment file before and after is gone, and the
/// next records land there with the queue offsets the dropped records had; a crash keeps it.
#[test]
fn truncate_below_the_first_byte_empties_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let c = store_cfg(dir.path(), FlushDiskType::AsyncFlush);
    let (w, bounds) = start_cq(&c);
    let s = w.clone_sender();
    let (tx, rx) = bounded(1);
    assert!(s.try_start_at(
        3 * SEG,
        Box::new(move |r| {
            let _ignored = tx.send(r);
        })
    ));
    rx.recv().unwrap().unwrap();
    let placed = fill(&s, 20, 1);
    assert_eq!(placed[0].phy, 3 * SEG);
    assert!(matches!(
        truncate_wait(&s, SEG + 4096),
        Err(StoreError::Invalid(_))
    ));
    truncate_wait(&s, SEG).unwrap();
    assert_eq!((s.min_phy_offset(), s.max_phy_offset()), (SEG, SEG));
    assert_eq!(bounds_now(&bounds), expected_bounds(&[]));
    let starts: Vec<u64> = list_segments(&c.commit_log_dir())
        .unwrap()
        .iter()
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(
        starts[0], SEG,
        "nothing before the new beginning: {starts:?}"
    );
    // The allocator may be creating the spare segment meanwhile: count no files here.
    assert!(
        zero_past(&c, SEG).0,
        "bytes from the new beginning on are zero"
    );
    let again = fill(&s, 3, 9);
    assert_eq!(
        again
            .iter()
            .map(|p| (p.phy, p.queue_offset))
            .collect::<Vec<_>>(),
        vec![
            (SEG, 0),
            (SEG + again[0].size, 0),
            (SEG + again[0].size + again[1].size, 0)
        ]
    );
    let end = s.max_phy_offset();
    w.abandon().unwrap();
    let o = open(&c).unwrap();
    assert_eq!(
        (o.commit_log.min_phy_offset(), o.commit_log.max_phy_offset()),
        (SEG, end)
    );
}

/// Proves the index forgets the dropped records' keys: after a truncation and a new record at
/// the same offset, a query for a dropped key finds nothing, and one for a kept key still finds
/// its record (checked after a clean shutdown, which keeps the index files as the writer left
/// them).
#[test]
fn truncate_drops_index_entries_past_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let c = store_cfg(dir.path(), FlushDiskType::SyncFlush);
    let (w, _bounds) = start_cq(&c);
    let s = w.clone_sender();
    let keyed = |k: &str, i: u8| {
        let mut r = record("T", 0, &[i; 200], &format!("KEYS\u{1}{k}\u{2}"));
        r.keys = IndexKeys::Owned(vec![k.to_string()]);
        r
    };
    let a = append_wait(&s, vec![keyed("kept", 1)], true).unwrap();
    let b = append_wait(&s, vec![keyed("dropped", 2), keyed("dropped2", 3)], true).unwrap();
    truncate_wait(&s, b.phy_offsets[0]).unwrap();
    let c2 = append_wait(&s, vec![keyed("new", 4)], true).unwrap();
    assert_eq!(c2.phy_offsets[0], b.phy_offsets[0]);
    w.shutdown().unwrap();
    let o = open(&c).unwrap();
    let ix = o.index.as_ref().unwrap();
    let q = |k: &str| ix.query("T", k, 10, 0, i64::MAX);
    assert_eq!(q("kept"), vec![a.phy_offsets[0]]);
    assert_eq!(q("dropped"), Vec::<u64>::new());
    assert_eq!(q("dropped2"), Vec::<u64>::new());
    assert_eq!(q("new"), vec![c2.phy_offsets[0]]);
}

/// Proves a shard's reader does not serve a removed segment's old bytes: it maps a later
/// segment, the log is truncated back before that segment, grows into a new file of the same
/// name, and the reader then reads the new records there; a range located before the
/// truncation is no longer live.
#[test]
fn readers_forget_segments_a_truncation_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let c = store_cfg(dir.path(), FlushDiskType::AsyncFlush);
    let (w, _bounds) = start_cq(&c);
    let s = w.clone_sender();
    let mut reader = CommitLogReader::with_min_phy(dir.path(), SEG, s.min_phy_watch());
    let placed = fill(&s, 260, 1);
    let old = *placed.iter().find(|p| p.phy >= SEG).unwrap();
    let before = reader.read(old.phy, old.size as u32).unwrap().to_vec();
    let range = reader.locate(old.phy, old.size as u32).unwrap();
    assert!(range.is_live());
    truncate_wait(&s, placed[10].phy).unwrap();
    assert!(!range.is_live(), "located before the truncation");
    let again = fill(&s, 260, 77);
    let new = *again.iter().find(|p| p.phy >= SEG).unwrap();
    let after = reader.read(new.phy, new.size as u32).unwrap().to_vec();
    let rec = decode(&after, true).unwrap();
    assert_eq!(rec.phy_offset as u64, new.phy);
    assert_ne!(before, after);
    w.shutdown().unwrap();
}
