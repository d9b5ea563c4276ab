//! ConsumeQueue unit tests: golden bytes written by hand, offset arithmetic across tiny
//! files, reopen, gap fill, truncation, expiry, timestamp search and junk on disk.

use std::fs;
use std::path::{Path, PathBuf};

use super::*;

/// 10 units per file, so file boundaries come quickly.
const FS: u64 = 200;

fn unit(phy_offset: u64, size: u32, tags_code: i64) -> CqUnit {
    CqUnit {
        phy_offset,
        size,
        tags_code,
    }
}

/// Unit i of a simple stream: phy i*100, size 100, tags i.
fn nth(i: u64) -> CqUnit {
    unit(i * 100, 100, i as i64)
}

fn qdir(root: &Path) -> PathBuf {
    root.join("consumequeue").join("T").join("3")
}

fn file_names(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(qdir(root))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn filled(root: &Path, n: u64) -> ConsumeQueue {
    let mut cq = ConsumeQueue::open(root, "T", 3, FS).unwrap();
    for i in 0..n {
        cq.put(i, nth(i)).unwrap();
    }
    cq
}

#[test]
fn unit_bytes_match_the_spec() {
    // A unit is big-endian phy_offset i64 | size i32 | tags_code i64 at byte N*20.
    let dir = tempfile::tempdir().unwrap();
    let mut cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    cq.put(0, unit(1, 2, 3)).unwrap();
    cq.put(1, unit(0x0102_0304_0506_0708, 0x0A0B_0C0D, -2))
        .unwrap();
    cq.flush().unwrap();
    let bytes = fs::read(qdir(dir.path()).join("00000000000000000000")).unwrap();
    assert_eq!(bytes.len(), 200);
    let mut expected = vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3];
    expected.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D]);
    expected.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE]);
    assert_eq!(&bytes[..40], &expected[..]);
    assert!(
        bytes[40..].iter().all(|&b| b == 0),
        "rest of the file is zero"
    );
}

#[test]
fn gap_is_filled_with_blank_units() {
    // put beyond max_offset writes (0, i32::MAX, 0) units in between, which get() hides.
    let dir = tempfile::tempdir().unwrap();
    let mut cq = filled(dir.path(), 2);
    cq.put(5, nth(5)).unwrap();
    assert_eq!((cq.min_offset(), cq.max_offset()), (0, 6));
    for q in 2..5 {
        assert_eq!(cq.get(q), None);
    }
    assert_eq!(cq.get(5), Some(nth(5)));
    assert_eq!(cq.max_phy_offset(), Some(600));
    cq.flush().unwrap();
    let bytes = fs::read(qdir(dir.path()).join("00000000000000000000")).unwrap();
    let blank = [
        0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    for q in 2..5 {
        assert_eq!(&bytes[q * 20..q * 20 + 20], &blank);
    }
    drop(cq);
    let cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    assert_eq!((cq.min_offset(), cq.max_offset()), (0, 6));
    assert_eq!(cq.get(3), None);
}

#[test]
fn files_are_named_by_start_byte_and_cross_boundaries() {
    // 25 units at 10 per file: three files named 0, 200, 400; unit 20 is the first of the third.
    let dir = tempfile::tempdir().unwrap();
    let mut cq = filled(dir.path(), 25);
    cq.flush().unwrap();
    assert_eq!(
        file_names(dir.path()),
        [
            "00000000000000000000",
            "00000000000000000200",
            "00000000000000000400"
        ]
    );
    let third = fs::read(qdir(dir.path()).join("00000000000000000400")).unwrap();
    assert_eq!(&third[0..8], &2000u64.to_be_bytes());
    assert_eq!(&third[80..88], &2400u64.to_be_bytes());
    assert!(third[100..].iter().all(|&b| b == 0));
    for q in 0..25 {
        assert_eq!(cq.get(q), Some(nth(q)), "offset {q}");
    }
    assert_eq!(cq.get(25), None);
}

#[test]
fn first_put_far_out_starts_at_its_file() {
    // An empty queue whose first offset is 23 creates only the file holding it (byte 400).
    let dir = tempfile::tempdir().unwrap();
    let mut cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    cq.put(23, nth(23)).unwrap();
    assert_eq!(file_names(dir.path()), ["00000000000000000400"]);
    assert_eq!((cq.min_offset(), cq.max_offset()), (23, 24));
    assert_eq!(cq.get(20), None);
    drop(cq);
    let cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    assert_eq!((cq.min_offset(), cq.max_offset()), (23, 24));
    assert_eq!(cq.get(23), Some(nth(23)));
}

#[test]
fn reopen_restores_min_max_and_units() {
    // Everything get() returned before a reopen it returns after, with the same bounds.
    let dir = tempfile::tempdir().unwrap();
    let mut cq = filled(dir.path(), 20);
    cq.put(20, nth(20)).unwrap();
    cq.flush().unwrap();
    let before: Vec<_> = (0..22).map(|q| cq.get(q)).collect();
    drop(cq);
    let cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    assert_eq!((cq.min_offset(), cq.max_offset()), (0, 21));
    assert_eq!(cq.max_phy_offset(), Some(2100));
    let after: Vec<_> = (0..22).map(|q| cq.get(q)).collect();
    assert_eq!(before, after);
}

#[test]
fn exactly_full_file_reopens_at_its_end() {
    // 10 units fill file 0 exactly; the next put must create file 200, before and after reopen.
    let dir = tempfile::tempdir().unwrap();
    drop(filled(dir.path(), 10));
    let mut cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    assert_eq!(cq.max_offset(), 10);
    cq.put(10, nth(10)).unwrap();
    assert_eq!(file_names(dir.path()).len(), 2);
    assert_eq!(cq.get(10), Some(nth(10)));
}

#[test]
fn put_below_max_is_a_no_op() {
    // Re-dispatch during recovery must not overwrite an existing unit.
    let dir = tempfile::tempdir().unwrap();
    let mut cq = filled(dir.path(), 3);
    cq.put(1, unit(9999, 7, 7)).unwrap();
    assert_eq!(cq.get(1), Some(nth(1)));
    assert_eq!(cq.max_offset(), 3);
}

#[test]
fn bad_arguments_are_errors() {
    // Sizes that are not unit multiples, path-escaping topics and invalid units are refused.
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        ConsumeQueue::open(dir.path(), "T", 0, 30),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        ConsumeQueue::open(dir.path(), "T", 0, 0),
        Err(StoreError::Invalid(_))
    ));
    for topic in ["", ".", "..", "a/b"] {
        assert!(
            ConsumeQueue::open(dir.path(), topic, 0, FS).is_err(),
            "{topic:?}"
        );
    }
    let mut cq = ConsumeQueue::open(dir.path(), "T", 0, FS).unwrap();
    assert!(cq.put(0, unit(0, 0, 0)).is_err());
    assert!(cq.put(0, unit(0, i32::MAX as u32, 0)).is_err());
    assert!(cq.put(0, unit(u64::MAX, 1, 0)).is_err());
    assert!(cq.put(u64::MAX / 10, nth(0)).is_err());
    assert_eq!(cq.max_offset(), 0);
}

#[test]
fn truncate_dirty_drops_and_zeroes_units_past_the_limit() {
    // Units end at (i+1)*100; a limit of 1050 keeps units 0..=9, deletes file 400, zeroes the rest.
    let dir = tempfile::tempdir().unwrap();
    let mut cq = filled(dir.path(), 25);
    cq.truncate_dirty(1050).unwrap();
    assert_eq!((cq.min_offset(), cq.max_offset()), (0, 10));
    assert_eq!(cq.max_phy_offset(), Some(1000));
    assert_eq!(cq.get(10), None);
    cq.flush().unwrap();
    assert_eq!(file_names(dir.path()), ["00000000000000000000"]);
    drop(cq);
    let mut cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    assert_eq!(cq.max_offset(), 10);
    cq.truncate_dirty(1000).unwrap();
    assert_eq!(
        cq.max_offset(),
        10,
        "a unit ending exactly at the limit stays"
    );
    cq.truncate_dirty(550).unwrap();
    assert_eq!((cq.max_offset(), cq.max_phy_offset()), (5, Some(500)));
    cq.flush().unwrap();
    let bytes = fs::read(qdir(dir.path()).join("00000000000000000000")).unwrap();
    assert!(
        bytes[100..].iter().all(|&b| b == 0),
        "dropped units zeroed on disk"
    );
    cq.put(5, nth(5)).unwrap();
    assert_eq!(cq.get(5), Some(nth(5)));
}

#[test]
fn truncate_everything_keeps_the_first_file() {
    // Dropping every unit leaves an empty first file, so a reopen agrees on max_offset.
    let dir = tempfile::tempdir().unwrap();
    let mut cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    for q in 23..27 {
        cq.put(q, nth(q)).unwrap();
    }
    cq.truncate_dirty(0).unwrap();
    assert_eq!(
        (cq.min_offset(), cq.max_offset(), cq.max_phy_offset()),
        (20, 20, None)
    );
    drop(cq);
    let mut cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    assert_eq!((cq.min_offset(), cq.max_offset()), (20, 20));
    cq.put(24, nth(24)).unwrap();
    assert_eq!((cq.min_offset(), cq.max_offset()), (24, 25));
}

#[test]
fn delete_expired_removes_files_and_moves_min_offset() {
    // File 0 ends with phy 900 (< 1000): deleted; the last file is never deleted.
    let dir = tempfile::tempdir().unwrap();
    let mut cq = filled(dir.path(), 25);
    assert_eq!(cq.delete_expired(1000).unwrap(), 1);
    assert_eq!(cq.min_offset(), 10);
    assert_eq!(cq.get(9), None);
    assert_eq!(cq.get(10), Some(nth(10)));
    assert_eq!(cq.delete_expired(1950).unwrap(), 1);
    assert_eq!(
        cq.min_offset(),
        20,
        "first unit with phy >= 1950 is unit 20"
    );
    assert_eq!(cq.delete_expired(10_000).unwrap(), 0);
    assert_eq!((cq.min_offset(), cq.max_offset()), (25, 25));
    assert_eq!(file_names(dir.path()), ["00000000000000000400"]);
    drop(cq);
    let mut cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    assert_eq!(
        (cq.min_offset(), cq.max_offset()),
        (20, 25),
        "reopen counts from the first file"
    );
    cq.delete_expired(2250).unwrap();
    assert_eq!(cq.min_offset(), 23);
}

/// Timestamps per offset for the search tests: [10, 20, 20, 20, 30, 40].
fn timed_queue(root: &Path) -> (ConsumeQueue, impl FnMut(CqUnit) -> Option<i64>) {
    let times = [10i64, 20, 20, 20, 30, 40];
    let cq = filled(root, times.len() as u64);
    (cq, move |u: CqUnit| {
        times.get((u.phy_offset / 100) as usize).copied()
    })
}

#[test]
fn timestamp_search_lower_and_upper_boundaries() {
    // Lower = first offset with ts >= t, upper = last with ts <= t; equal runs widen to their ends.
    let dir = tempfile::tempdir().unwrap();
    let (cq, mut ts) = timed_queue(dir.path());
    let mut s = |t, upper| cq.search_offset_by_timestamp(t, upper, &mut ts);
    assert_eq!((s(20, false), s(20, true)), (1, 3));
    assert_eq!((s(25, false), s(25, true)), (4, 3));
    assert_eq!((s(10, false), s(10, true)), (0, 0));
    assert_eq!((s(40, false), s(40, true)), (5, 5));
    assert_eq!((s(5, false), s(5, true)), (0, 0));
    assert_eq!((s(50, false), s(50, true)), (6, 5));
}

#[test]
fn timestamp_search_respects_min_offset_and_unreadable_units() {
    // Expired units are outside the search; units the reader cannot date count as old.
    let dir = tempfile::tempdir().unwrap();
    let mut cq = filled(dir.path(), 25);
    cq.delete_expired(1000).unwrap();
    let mut ts = |u: CqUnit| (u.phy_offset >= 1300).then_some(u.phy_offset as i64);
    assert_eq!(cq.search_offset_by_timestamp(0, false, &mut ts), 13);
    assert_eq!(cq.search_offset_by_timestamp(0, true, &mut ts), 12);
    assert_eq!(cq.search_offset_by_timestamp(1500, false, &mut ts), 15);
    assert_eq!(cq.search_offset_by_timestamp(1500, true, &mut ts), 15);
    assert_eq!(cq.search_offset_by_timestamp(99_999, false, &mut ts), 25);
    let empty = ConsumeQueue::open(dir.path(), "T", 9, FS).unwrap();
    assert_eq!(empty.search_offset_by_timestamp(1, false, &mut ts), 0);
    assert_eq!(empty.search_offset_by_timestamp(1, true, &mut ts), 0);
}

#[test]
fn junk_files_are_ignored_or_reported_never_panic() {
    // Foreign names are skipped; a mis-sized CQ file is a Corrupt error; a 0-byte last file goes.
    let dir = tempfile::tempdir().unwrap();
    drop(filled(dir.path(), 12));
    let q = qdir(dir.path());
    fs::write(q.join("notes.txt"), b"hello").unwrap();
    fs::write(q.join("123"), b"x").unwrap();
    fs::create_dir(q.join("00000000000000099999")).unwrap();
    fs::write(q.join("00000000000000000400"), b"").unwrap();
    let cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    assert_eq!(cq.max_offset(), 12);
    assert!(!q.join("00000000000000000400").exists());
    drop(cq);
    fs::write(q.join("00000000000000000400"), b"short").unwrap();
    assert!(matches!(
        ConsumeQueue::open(dir.path(), "T", 3, FS),
        Err(StoreError::Corrupt { .. })
    ));
    fs::remove_file(q.join("00000000000000000400")).unwrap();
    fs::write(q.join("00000000000000000600"), vec![0u8; 200]).unwrap();
    assert!(matches!(
        ConsumeQueue::open(dir.path(), "T", 3, FS),
        Err(StoreError::Corrupt { .. })
    ));
}

#[test]
fn garbage_content_never_panics() {
    // Random bytes in a CQ file load as whatever prefix passes the scan; reads stay in bounds.
    let dir = tempfile::tempdir().unwrap();
    let q = qdir(dir.path());
    fs::create_dir_all(&q).unwrap();
    let mut x: u32 = 12345;
    let junk: Vec<u8> = (0..200)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect();
    fs::write(q.join("00000000000000000000"), &junk).unwrap();
    fs::write(q.join("00000000000000000200"), vec![0xFFu8; 200]).unwrap();
    let mut cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    for off in 0..30 {
        let _ = cq.get(off);
    }
    let mut ts = |u: CqUnit| Some(u.phy_offset as i64);
    cq.search_offset_by_timestamp(7, false, &mut ts);
    cq.truncate_dirty(1).unwrap();
    cq.delete_expired(5).unwrap();
    let max = cq.max_offset();
    cq.put(max, nth(0)).unwrap();
    cq.flush().unwrap();
}

#[test]
fn list_queues_skips_junk() {
    // Only UTF-8 topic dirs containing decimal u32 queue dirs are reported, sorted.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("consumequeue");
    assert_eq!(list_queues(dir.path()).unwrap(), vec![]);
    for p in ["B/0", "B/12", "A/1", "A/-1", "A/x", "A/4294967296", "A/+2"] {
        fs::create_dir_all(root.join(p)).unwrap();
    }
    fs::write(root.join("A/7"), b"").unwrap();
    fs::write(root.join("stray"), b"").unwrap();
    let got = list_queues(dir.path()).unwrap();
    let want = [("A", 1), ("B", 0), ("B", 12)];
    assert_eq!(got, want.map(|(t, q)| (t.to_string(), q)).to_vec());
}

#[test]
fn destroy_removes_the_queue_directory() {
    // destroy deletes the files and the queue dir, and the topic dir once it is empty.
    let dir = tempfile::tempdir().unwrap();
    let cq = filled(dir.path(), 12);
    cq.destroy().unwrap();
    assert!(!dir.path().join("consumequeue").join("T").exists());
    let cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    assert_eq!(cq.max_offset(), 0);
}

#[test]
fn a_hole_ends_the_queue_and_later_bytes_are_cleared() {
    // An unwritten unit 5 (torn write) is the write position: later files are deleted and the
    // rest of file 0 is zeroed, so the next reopen and the next put agree.
    let dir = tempfile::tempdir().unwrap();
    let mut cq = filled(dir.path(), 25);
    cq.flush().unwrap();
    drop(cq);
    let path = qdir(dir.path()).join("00000000000000000000");
    let mut bytes = fs::read(&path).unwrap();
    bytes[100..120].fill(0);
    fs::write(&path, &bytes).unwrap();
    let mut cq = ConsumeQueue::open(dir.path(), "T", 3, FS).unwrap();
    assert_eq!(
        (cq.min_offset(), cq.max_offset(), cq.max_phy_offset()),
        (0, 5, Some(500))
    );
    assert_eq!(file_names(dir.path()), ["00000000000000000000"]);
    cq.flush().unwrap();
    assert!(fs::read(&path).unwrap()[100..].iter().all(|&b| b == 0));
    cq.put(5, nth(5)).unwrap();
    assert_eq!(cq.get(6), None);
}

/// A sync job names exactly the files holding dirty units and clears the dirty range; a failed
/// job handed back makes the next job cover the same files again.
#[test]
fn sync_job_covers_dirty_files_and_can_be_restored() {
    let dir = tempfile::tempdir().unwrap();
    let mut cq = filled(dir.path(), 15); // files 0 and 200
    let job = cq.take_sync_job().expect("dirty after puts");
    let mut names: Vec<String> = job
        .paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, file_names(dir.path()));
    job.sync().unwrap();
    assert!(cq.take_sync_job().is_none(), "nothing dirty after the take");
    cq.put(15, nth(15)).unwrap();
    let second = cq.take_sync_job().unwrap();
    assert_eq!(second.paths.len(), 1, "only the second file is dirty");
    cq.restore_dirty(&second);
    assert_eq!(cq.take_sync_job().unwrap().paths, second.paths);
}

#[test]
fn junk_far_past_the_write_position_is_cleared() {
    // The tail check goes a page at a time: a stray byte in a later page, or in the file's last
    // partial page, is found and zeroed too.
    let fs_ = 20 * 1000; // 20,000 bytes: four whole pages and a partial one
    for at in [4096 * 3 + 7, fs_ as usize - 1] {
        let dir = tempfile::tempdir().unwrap();
        let mut cq = ConsumeQueue::open(dir.path(), "T", 3, fs_).unwrap();
        for i in 0..5 {
            cq.put(i, nth(i)).unwrap();
        }
        cq.flush().unwrap();
        drop(cq);
        let path = qdir(dir.path()).join("00000000000000000000");
        let mut bytes = fs::read(&path).unwrap();
        bytes[at] = 0x5A;
        fs::write(&path, &bytes).unwrap();
        let mut cq = ConsumeQueue::open(dir.path(), "T", 3, fs_).unwrap();
        assert_eq!(cq.max_offset(), 5);
        cq.flush().unwrap();
        assert!(
            fs::read(&path).unwrap()[100..].iter().all(|&b| b == 0),
            "junk at {at} left"
        );
    }
}

/// Proves `truncate_from` drops the units of records at or past the cut, leaves the files left
/// without units on disk but names them for the caller to unlink, names the last kept file and
/// the queue directory to fsync, and names nothing when no unit went.
#[test]
fn truncate_from_drops_units_at_and_past_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut cq = ConsumeQueue::open(dir.path(), "T", 0, 5 * CQ_UNIT_SIZE).unwrap();
    for i in 0..12u64 {
        let unit = CqUnit {
            phy_offset: i * 100,
            size: 100,
            tags_code: 0,
        };
        cq.put(i, unit).unwrap();
    }
    assert_eq!(cq.truncate_from(1_200), CqCutFiles::default());
    let cut = cq.truncate_from(400);
    assert_eq!((cq.max_offset(), cq.max_phy_offset()), (4, Some(400)));
    assert_eq!(cq.get(4), None);
    assert_eq!(cq.get(3).map(|u| u.phy_offset), Some(300));
    let qdir = dir.path().join("consumequeue/T/0");
    let name = |start: u64| qdir.join(format!("{start:020}"));
    assert_eq!(cut.sync, vec![name(0), qdir.clone()]);
    assert_eq!(
        cut.remove,
        vec![name(5 * CQ_UNIT_SIZE), name(10 * CQ_UNIT_SIZE)]
    );
    assert!(
        cut.remove.iter().all(|p| p.exists()),
        "left for the caller to unlink"
    );
    let unit = CqUnit {
        phy_offset: 400,
        size: 50,
        tags_code: 0,
    };
    cq.put(4, unit).unwrap();
    assert_eq!(cq.get(4), Some(unit));
}
