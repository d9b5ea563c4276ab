//! Proves abnormal recovery (abort file present) starts at the segment the checkpoint picks
//! (walking back to the newest segment whose first record is at or before
//! `min(physicMsgTimestamp, logicsMsgTimestamp) - 3 s`): records before it are not re-verified
//! (a corrupt record there survives untouched), records from it on are verified (a torn tail is
//! cut), and lagging consume queues and a truncated index are rebuilt from there.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::Ordering;

use ringmq::protocol::message::{decode, patch};
use ringmq::store::files::create_abort;
use ringmq::store::{open, Checkpoint, CommitLog, ConsumeQueue, CqUnit, IndexService, StoreConfig};
use ringmq::writer::testkit::record;

const SEG: u64 = 128 << 10;
const CQ_FILE: u64 = 20 * 16;
const TOPIC: &str = "WalkBack";
const QUEUES: u32 = 3;
const BASE_TS: i64 = 1_700_000_000_000;
const SLOTS: u32 = 512;
const ENTRIES: u32 = 2048;

fn cfg(root: &Path, index: bool) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: SEG,
        mapped_file_size_consume_queue: CQ_FILE,
        max_message_size: 8 << 10,
        message_index_enable: index,
        max_hash_slot_num: SLOTS,
        max_index_num: ENTRIES,
        warm_mapped_file: Some(false),
        ..StoreConfig::with_root(root)
    }
}

#[derive(Clone)]
struct Rec {
    phy: u64,
    size: u32,
    qid: u32,
    qo: u64,
    ts: i64,
    body: Vec<u8>,
}

fn body(i: usize) -> Vec<u8> {
    (0..6000).map(|j| (i * 31 + j * 7) as u8 | 1).collect()
}

fn props(i: usize) -> String {
    format!("KEYS\u{1}key-{i}\u{2}")
}

/// Writes `n` records (store timestamps 10 ms apart, queues round robin) straight through the
/// commit log, as the writer would, and returns them with the end of the log.
fn write_log(c: &StoreConfig, n: usize) -> (Vec<Rec>, u64) {
    let mut log = CommitLog::load(c, None).unwrap();
    log.recover_to(0, 0).unwrap();
    let mut next_qo = [0u64; QUEUES as usize];
    let mut recs = Vec::new();
    for i in 0..n {
        let qid = i as u32 % QUEUES;
        let b = body(i);
        let r = record(TOPIC, qid, &b, &props(i));
        let qo = next_qo[qid as usize];
        next_qo[qid as usize] += 1;
        let ts = BASE_TS + i as i64 * 10;
        let phy = log.append(&r.bytes, qo, ts).unwrap();
        let size = r.bytes.len() as u32;
        recs.push(Rec {
            phy,
            size,
            qid,
            qo,
            ts,
            body: b,
        });
    }
    log.flush().unwrap();
    (recs, log.max_phy_offset())
}

fn segment_of(phy: u64) -> u64 {
    phy / SEG
}

/// Consume queues as a crash left them: queues 0 and 1 hold units only for `recs[..lag]`,
/// queue 2 holds every unit plus one for the torn record that never made it to disk.
fn write_queues(c: &StoreConfig, recs: &[Rec], lag: usize, torn: Option<&Rec>) {
    for qid in 0..QUEUES {
        let mut cq = ConsumeQueue::open(&c.store_path_root_dir, TOPIC, qid, CQ_FILE).unwrap();
        let upto = if qid == 2 { recs.len() } else { lag };
        for r in recs[..upto].iter().chain(torn).filter(|r| r.qid == qid) {
            let unit = CqUnit {
                phy_offset: r.phy,
                size: r.size,
                tags_code: 0,
            };
            cq.put(r.qo, unit).unwrap();
        }
        cq.flush().unwrap();
    }
}

/// Half of a record for queue 2 at `end`, as a crash mid-write leaves it.
fn tear_tail(c: &StoreConfig, end: u64, n: usize, next_qo: u64) -> Rec {
    let b = body(n);
    let r = record(TOPIC, 2, &b, &props(n));
    let mut bytes = r.bytes.to_vec();
    let ts = BASE_TS + n as i64 * 10;
    patch(&mut bytes, next_qo as i64, end as i64, ts);
    let seg_path = c.commit_log_dir().join(format!("{:020}", end - end % SEG));
    let f = std::fs::File::options().write(true).open(seg_path).unwrap();
    f.write_all_at(&bytes[..bytes.len() / 2], end % SEG)
        .unwrap();
    f.sync_all().unwrap();
    Rec {
        phy: end,
        size: bytes.len() as u32,
        qid: 2,
        qo: next_qo,
        ts,
        body: b,
    }
}

/// Flips one body byte of `r` on disk: its CRC no longer matches.
fn corrupt(c: &StoreConfig, r: &Rec) {
    let seg_path = c
        .commit_log_dir()
        .join(format!("{:020}", r.phy - r.phy % SEG));
    let f = std::fs::File::options()
        .read(true)
        .write(true)
        .open(seg_path)
        .unwrap();
    let pos = r.phy % SEG + u64::from(r.size) - 100;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, pos).unwrap();
    f.write_all_at(&[b[0] ^ 0xFF], pos).unwrap();
    f.sync_all().unwrap();
}

fn set_checkpoint(root: &Path, physic: i64, logics: i64, index: i64) {
    let mut cp = Checkpoint::open(root).unwrap();
    cp.physic_msg_timestamp = physic;
    cp.logics_msg_timestamp.store(logics, Ordering::Release);
    cp.index_msg_timestamp = index;
    cp.flush().unwrap();
}

/// The crashed store every test starts from: 5+ segments, a corrupt record in segment 1,
/// queues 0/1 lagging into segment 2, a torn tail. Returns (records, corrupt index, end).
fn crashed_store(c: &StoreConfig, lag_in_segment: u64) -> (Vec<Rec>, usize, u64) {
    let (recs, end) = write_log(c, 120);
    assert!(segment_of(end) >= 4, "the log spans at least five segments");
    let lag = recs
        .iter()
        .position(|r| segment_of(r.phy) == lag_in_segment)
        .unwrap()
        + 3;
    let next_qo2 = recs.iter().filter(|r| r.qid == 2).count() as u64;
    let torn = tear_tail(c, end, recs.len(), next_qo2);
    write_queues(c, &recs, lag, Some(&torn));
    let bad = recs.iter().position(|r| segment_of(r.phy) == 1).unwrap() + 2;
    corrupt(c, &recs[bad]);
    create_abort(&c.store_path_root_dir).unwrap();
    (recs, bad, end)
}

fn queue(cqs: &[ConsumeQueue], qid: u32) -> &ConsumeQueue {
    cqs.iter()
        .find(|q| q.topic() == TOPIC && q.queue_id() == qid)
        .expect("queue recovered")
}

/// Every record except `bad` decodes with its CRC at its offset, and every queue has its unit.
fn assert_complete(o: &ringmq::store::OpenedStore, recs: &[Rec], bad: usize) {
    for (i, r) in recs.iter().enumerate() {
        let bytes = o.commit_log.read(r.phy, r.size).expect("record kept");
        if i == bad {
            assert!(
                decode(bytes, true).is_err(),
                "the corrupt record is still there"
            );
            continue;
        }
        let d = decode(bytes, true).unwrap_or_else(|e| panic!("record {i}: {e}"));
        assert_eq!(d.body, &r.body[..]);
        assert_eq!(d.store_timestamp, r.ts);
        let unit = queue(&o.consume_queues, r.qid).get(r.qo);
        let want = CqUnit {
            phy_offset: r.phy,
            size: r.size,
            tags_code: 0,
        };
        assert_eq!(unit, Some(want), "unit of record {i}");
    }
    for qid in 0..QUEUES {
        let n = recs.iter().filter(|r| r.qid == qid).count() as u64;
        assert_eq!(queue(&o.consume_queues, qid).max_offset(), n, "queue {qid}");
        assert_eq!(o.queue_offsets[&(TOPIC.to_string(), qid)], n);
    }
}

/// The checkpoint points into segment 2: recovery starts there, so the corrupt record in
/// segment 1 is not verified (the log is not cut there), queues 0/1 get their missing units
/// back, the torn tail is cut and queue 2's unit for it is dropped.
#[test]
fn abnormal_recovery_starts_at_the_checkpoint_segment() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), false);
    let (recs, bad, end) = crashed_store(&c, 2);
    let seg2_first = recs.iter().find(|r| segment_of(r.phy) == 2).unwrap();
    let seg3_first = recs.iter().find(|r| segment_of(r.phy) == 3).unwrap();
    // logics (the older one) lands between the first records of segments 2 and 3.
    let logics = seg2_first.ts + 5 + 3000;
    assert!(logics - 3000 < seg3_first.ts);
    set_checkpoint(dir.path(), recs.last().unwrap().ts + 3000, logics, 0);

    let o = open(&c).unwrap();
    assert!(o.recovered_from_crash);
    assert_eq!(
        o.commit_log.max_phy_offset(),
        end,
        "torn tail cut, nothing else"
    );
    assert!(o.commit_log.read(end, 8).is_err());
    assert_complete(&o, &recs, bad);
    let torn_qo = recs.iter().filter(|r| r.qid == 2).count() as u64;
    assert_eq!(queue(&o.consume_queues, 2).get(torn_qo), None);
}

/// Control for the test above: the same crashed store with a zero checkpoint is scanned from
/// segment 0, so the corrupt record in segment 1 ends the log and every unit past it goes.
#[test]
fn abnormal_recovery_without_checkpoint_verifies_everything() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), false);
    let (recs, bad, _) = crashed_store(&c, 2);
    set_checkpoint(dir.path(), 0, 0, 0);

    let o = open(&c).unwrap();
    assert_eq!(o.commit_log.max_phy_offset(), recs[bad].phy);
    for qid in 0..QUEUES {
        let before = recs[..bad].iter().filter(|r| r.qid == qid).count() as u64;
        assert_eq!(queue(&o.consume_queues, qid).max_offset(), before);
    }
}

/// With the index on, the walk-back also reaches the newest record the surviving index files
/// cover: `truncate_after` cuts the index file whose end is after the checkpoint's index time
/// back to the entries stored before it (ending in segment 2 here), and every key past the cut is
/// indexed again.
#[test]
fn abnormal_recovery_reindexes_from_the_truncated_index() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), true);
    let (recs, end) = write_log(&c, 120);
    let mut ix = IndexService::open(dir.path(), SLOTS, ENTRIES).unwrap();
    for (i, r) in recs.iter().enumerate() {
        ix.put(TOPIC, &[&format!("key-{i}")], r.phy, r.ts).unwrap();
    }
    ix.flush().unwrap();
    drop(ix);
    write_queues(&c, &recs, recs.len(), None);
    create_abort(dir.path()).unwrap();
    let seg3_first = recs.iter().find(|r| segment_of(r.phy) == 3).unwrap();
    let cp_ts = seg3_first.ts + 5;
    set_checkpoint(dir.path(), cp_ts + 3000, cp_ts + 3000, cp_ts);

    let o = open(&c).unwrap();
    assert_eq!(o.commit_log.max_phy_offset(), end);
    let ix = o.index.as_ref().expect("index enabled");
    for i in [0, 1, 20, 50, 119] {
        let found = ix.query(TOPIC, &format!("key-{i}"), 4, 0, i64::MAX);
        assert!(found.contains(&recs[i].phy), "key-{i} lost: {found:?}");
    }
}
