//! Proves that under SYNC_FLUSH every acknowledged record survives SIGKILL byte-exact with its
//! consume-queue unit, that nothing past the recovered end is readable, and that a torn tail
//! (garbage, half a record, a record with a bad CRC, a stale record) is truncated on recovery.
//! The same again with segments retired and reused all the time (STORE_TORTURE_RECYCLE): the
//! records retention removed are gone, every other acknowledged one is there, and no older
//! record a reused segment still holds is ever recovered.
//! The same again while the driver truncates the log back to an acknowledged record after every
//! round of appends (STORE_TORTURE_TRUNCATE): the records a truncation dropped are forgotten
//! once it began (a kill during one may leave them or not), every other acknowledged record is
//! there with its unit, and nothing past the end is readable.
//! Iterations: STORE_CRASH_ITERS (default 20; 10 with reuse, up to twice that until a reuse is
//! seen; 10 with truncations).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use ringmq::protocol::message::{decode, stored_len};
use ringmq::store::{open, FlushDiskType, StoreConfig};
use ringmq::writer::testkit::{append_wait, record, seeded_body, NullDispatcher};
use ringmq::writer::{spawn_writer, WriterParts};

/// Commit-log segment size of the stores here.
const SEGMENT: u64 = 1 << 20;
/// With reuse: four times the rolls per byte, so that iterations slowed down by a loaded machine
/// (the suite runs tests in parallel on two cores) still fill and retire segments.
const RECYCLE_SEGMENT: u64 = 256 << 10;

fn cfg(root: &Path, segment: u64) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: segment,
        max_message_size: 64 << 10,
        flush_disk_type: FlushDiskType::SyncFlush,
        ..StoreConfig::with_root(root)
    }
}

struct Ack {
    phy: u64,
    qo: u64,
    qid: u32,
    seed: u64,
}

/// Reads the driver's lines in order into `acks`; returns how many truncations completed. A
/// `TRUNCATING <offset>` line forgets every ack at or past the offset.
fn parse_acks(out: &str, acks: &mut Vec<Ack>) -> usize {
    let mut truncations = 0;
    for line in out.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match (f.as_slice(), f.get(1).and_then(|o| o.parse::<u64>().ok())) {
            (["TRUNCATING", _], Some(offset)) => {
                acks.retain(|a| a.phy < offset);
                continue;
            }
            (["TRUNC", _], Some(_)) => {
                truncations += 1;
                continue;
            }
            _ => {}
        }
        if f.len() != 5 || f[0] != "ACK" {
            continue; // a line cut by the kill
        }
        let (Ok(phy), Ok(qo), Ok(qid), Ok(seed)) =
            (f[1].parse(), f[2].parse(), f[3].parse(), f[4].parse())
        else {
            continue;
        };
        acks.push(Ack { phy, qo, qid, seed });
    }
    truncations
}

/// Reopens the store and checks every ack so far (from the oldest segment retention left) plus
/// the end of the log.
fn verify(root: &Path, acks: &[Ack], segment: u64) {
    let c = cfg(root, segment);
    let o = open(&c).expect("reopen after crash");
    // A child killed before it opened the store (slow start on a loaded machine) left no abort
    // file; once anything was acknowledged, a store was opened and never shut down cleanly.
    if !acks.is_empty() {
        assert!(o.recovered_from_crash);
    }
    let end = o.commit_log.max_phy_offset();
    let min = o.commit_log.min_phy_offset();
    for a in acks.iter().filter(|a| a.phy >= min) {
        let body = seeded_body(a.seed);
        let len = stored_len(0, body.len(), "TORTURE".len(), 0) as u32;
        let bytes = o
            .commit_log
            .read(a.phy, len)
            .unwrap_or_else(|e| panic!("acked record at {} lost: {e}", a.phy));
        let rec = decode(bytes, true).expect("acked record decodes");
        assert_eq!(rec.body, &body[..], "body of seed {}", a.seed);
        assert_eq!(rec.queue_offset as u64, a.qo);
        assert_eq!(rec.phy_offset as u64, a.phy);
        assert_eq!(rec.queue_id as u32, a.qid);
        let cq = o
            .consume_queues
            .iter()
            .find(|c| c.topic() == "TORTURE" && c.queue_id() == a.qid)
            .expect("consume queue exists");
        let unit = cq.get(a.qo).expect("cq unit for an acked record");
        assert_eq!((unit.phy_offset, unit.size), (a.phy, len));
    }
    // Nothing past the recovered end: not readable, zero on disk, no CQ unit beyond it.
    assert!(o.commit_log.read(end, 8).is_err());
    let seg = o.commit_log.segments().last().expect("active segment");
    let off = (end - seg.start()) as usize;
    assert!(
        seg.bytes()[off..].iter().all(|&b| b == 0),
        "bytes past the end"
    );
    for cq in &o.consume_queues {
        if let Some(m) = cq.max_phy_offset() {
            assert!(m <= end, "cq unit past the end");
        }
    }
}

/// (inode, whether it is a segment) of every commit-log segment file and reuse-pool file
/// (`recycle-*`, `store::recycle`).
fn commit_log_inodes(root: &Path) -> Vec<(u64, bool)> {
    use std::os::unix::fs::MetadataExt;
    // Not there yet while the driver starts.
    let Ok(dir) = std::fs::read_dir(root.join("commitlog")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let name = e.file_name();
        let name = name.to_str()?;
        let segment = ringmq::store::mapped_file::parse_segment_name(name).is_some();
        if !segment && !ringmq::store::recycle::is_pool_file_name(name) {
            return None;
        }
        Some((e.metadata().ok()?.ino(), segment))
    })
    .collect()
}

/// STORE_CRASH_ITERS, else `default`.
fn iterations(default: u32) -> u32 {
    std::env::var("STORE_CRASH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[test]
fn sigkill_loses_no_acknowledged_record() {
    crash_iterations(iterations(20), false);
}

#[test]
fn sigkill_with_reused_segments_loses_no_acknowledged_record() {
    crash_iterations(iterations(10), true);
}

/// Proves truncations of the running log under SIGKILL keep every acknowledged record that no
/// truncation dropped, with its unit, and leave nothing readable past the end; and that the
/// driver did complete truncations.
#[test]
fn sigkill_during_truncations_loses_no_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut acks = Vec::new();
    let mut truncations = 0;
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..iterations(10) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay = Duration::from_millis(100 + rng % 400);
        let mut child = Command::new(env!("CARGO_BIN_EXE_store_torture"))
            .env("STORE_TORTURE_TRUNCATE", "1")
            .arg(dir.path())
            // Two appenders: this test runs beside the others of this file on two cores.
            .arg("2")
            .arg(RECYCLE_SEGMENT.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            // Ends at EOF after the kill; a read error only loses acks, which can't hide a bug.
            let _ = stdout.read_to_string(&mut s);
            s
        });
        std::thread::sleep(delay);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let n = parse_acks(&reader.join().unwrap(), &mut acks);
        truncations += n;
        eprintln!(
            "iteration {i}: {} acks kept, {n} truncations after {delay:?}",
            acks.len()
        );
        verify(dir.path(), &acks, RECYCLE_SEGMENT);
    }
    assert!(truncations > 0, "the driver completed no truncation");
    assert!(
        !acks.is_empty(),
        "the driver acknowledged nothing that stayed"
    );
}

/// `iters` times: run the driver for a random moment, SIGKILL it, verify. With `recycle`, also
/// proves segments were reused, running up to `iters` more iterations until one was: on a
/// loaded machine the first ones may write too little to retire a segment. The proof is a
/// segment file with an inode seen before under a pool name. One inode under two segment
/// names proves nothing: a new file may get the number of a deleted one.
fn crash_iterations(iters: u32, recycle: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut pooled = std::collections::HashSet::new();
    let mut reused = false;
    let mut acks = Vec::new();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let segment = if recycle { RECYCLE_SEGMENT } else { SEGMENT };
    for i in 0..2 * iters {
        if i >= iters && (!recycle || reused) {
            break;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay = Duration::from_millis(30 + rng % 300);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_store_torture"));
        if recycle {
            cmd.env("STORE_TORTURE_RECYCLE", "1");
        }
        let mut child = cmd
            .arg(dir.path())
            .arg("6")
            .arg(segment.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            // Ends at EOF after the kill; a read error only loses acks, which can't hide a bug.
            let _ = stdout.read_to_string(&mut s);
            s
        });
        // Sample the files while the driver runs: a reused file shows up as a segment with the
        // inode of a pool file (a rename keeps it; nothing here purges the pool).
        let until = std::time::Instant::now() + delay;
        while std::time::Instant::now() < until {
            for (ino, segment) in commit_log_inodes(dir.path()) {
                if segment {
                    reused |= pooled.contains(&ino);
                } else {
                    pooled.insert(ino);
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let before = acks.len();
        let _no_truncations = parse_acks(&reader.join().unwrap(), &mut acks);
        eprintln!(
            "iteration {i}: {} acks after {delay:?}",
            acks.len() - before
        );
        verify(dir.path(), &acks, segment);
    }
    assert!(!acks.is_empty(), "the driver acknowledged nothing");
    if recycle {
        assert!(reused, "no segment file was reused");
    }
}

/// Appends 3 records, shuts down cleanly, then writes `tail` right after the last record and
/// leaves an abort file, as a crash mid-write would.
fn torn_tail_case(tail: impl Fn(&[u8], u64) -> Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), SEGMENT);
    let (parts, _) = WriterParts::from_opened(open(&c).unwrap());
    let w = spawn_writer(parts, &c, Box::new(NullDispatcher)).unwrap();
    let s = w.clone_sender();
    for i in 0..3u8 {
        append_wait(&s, vec![record("T", 0, &[i; 100], "")], true).unwrap();
    }
    let end = w.max_phy_offset();
    w.shutdown().unwrap();
    let seg_path = dir.path().join("commitlog/00000000000000000000");
    let mut seg = std::fs::read(&seg_path).unwrap();
    let sample = seg[..end as usize / 3].to_vec(); // the first record, as written
    let junk = tail(&sample, end);
    seg[end as usize..end as usize + junk.len()].copy_from_slice(&junk);
    std::fs::write(&seg_path, &seg).unwrap();
    std::fs::write(dir.path().join("abort"), b"").unwrap();

    let o = open(&c).unwrap();
    assert!(o.recovered_from_crash);
    assert_eq!(o.commit_log.max_phy_offset(), end, "torn tail truncated");
    assert_eq!(o.queue_offsets[&("T".to_string(), 0)], 3);
    let seg = &o.commit_log.segments()[0];
    assert!(seg.bytes()[end as usize..].iter().all(|&b| b == 0));
    drop(o);
    // The store keeps working after the truncation.
    let (parts, _) = WriterParts::from_opened(open(&c).unwrap());
    let w = spawn_writer(parts, &c, Box::new(NullDispatcher)).unwrap();
    let out = append_wait(&w.clone_sender(), vec![record("T", 0, b"next", "")], true).unwrap();
    assert_eq!((out.phy_offsets[0], out.queue_offsets[0]), (end, 3));
    w.shutdown().unwrap();
}

#[test]
fn torn_tail_garbage_is_truncated() {
    torn_tail_case(|_, _| (0..500u32).map(|i| (i * 7 + 3) as u8).collect());
}

#[test]
fn torn_tail_half_record_is_truncated() {
    torn_tail_case(|sample, end| {
        let mut r = sample.to_vec();
        r[28..36].copy_from_slice(&(end as i64).to_be_bytes()); // plausible phy offset
        r.truncate(r.len() / 2);
        r
    });
}

#[test]
fn torn_tail_bad_crc_record_is_truncated() {
    torn_tail_case(|sample, end| {
        let mut r = sample.to_vec();
        r[28..36].copy_from_slice(&(end as i64).to_be_bytes());
        r[84 + 4 + 50] ^= 0xFF; // a body byte: the CRC no longer matches
        r
    });
}

#[test]
fn stale_record_at_wrong_offset_is_not_served() {
    // A complete, CRC-valid record whose PHYSICALOFFSET names another position (stale bytes).
    torn_tail_case(|sample, _| sample.to_vec());
}
