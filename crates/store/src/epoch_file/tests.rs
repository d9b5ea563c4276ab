//! The epoch file: Java's file format, the `.bak` fallback, and each rule of `EpochFileCache`.

use proptest::prelude::*;

use super::*;

fn cache(root: &Path, entries: &[(u32, u64)]) -> EpochFileCache {
    let mut c = EpochFileCache::load(root).unwrap();
    for &(e, s) in entries {
        c.append(e, s).unwrap();
    }
    c
}

fn memory(entries: &[(u32, u64)]) -> EpochFileCache {
    let mut c = EpochFileCache::in_memory();
    for &(e, s) in entries {
        c.append(e, s).unwrap();
    }
    c
}

fn pairs(c: &EpochFileCache) -> Vec<(u32, u64, u64)> {
    c.epochs()
        .iter()
        .map(|e| (e.epoch, e.start_offset, e.end_offset))
        .collect()
}

/// The file holds what Java's CheckpointFile writes: count, masked CRC32 of the lines, lines.
#[test]
fn file_is_written_in_javas_format() {
    let dir = tempfile::tempdir().unwrap();
    cache(dir.path(), &[(1, 0), (7, 7000)]);
    let text = std::fs::read_to_string(dir.path().join("epochFileCheckpoint")).unwrap();
    let crc = crc32fast::hash(b"1-0\n7-7000\n") & 0x7FFF_FFFF;
    assert_eq!(text, format!("2\n{crc}\n1-0\n7-7000\n"));
}

/// A file Java wrote (including with CRC 0, "unchecked") loads, with ends recomputed.
#[test]
fn loads_a_java_written_file() {
    let dir = tempfile::tempdir().unwrap();
    let crc = java_crc32(b"2-100\n3-900\n");
    let path = dir.path().join("epochFileCheckpoint");
    std::fs::write(&path, format!("2\n{crc}\n2-100\n3-900\n")).unwrap();
    let c = EpochFileCache::load(dir.path()).unwrap();
    assert_eq!(pairs(&c), vec![(2, 100, 900), (3, 900, OPEN_END)]);
    std::fs::write(&path, "1\n0\n5-50\n").unwrap();
    let c = EpochFileCache::load(dir.path()).unwrap();
    assert_eq!(pairs(&c), vec![(5, 50, OPEN_END)]);
}

/// A cache reloaded from its file equals the one that wrote it.
#[test]
fn reload_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let c = cache(dir.path(), &[(1, 0), (2, 10), (4, 4096)]);
    assert_eq!(EpochFileCache::load(dir.path()).unwrap(), c);
}

/// No file and no backup is an empty cache, not an error.
#[test]
fn missing_file_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    assert!(EpochFileCache::load(dir.path()).unwrap().is_empty());
}

/// A main file failing its CRC or count falls back to the `.bak` (the previous version).
#[test]
fn bad_main_file_falls_back_to_bak() {
    let dir = tempfile::tempdir().unwrap();
    cache(dir.path(), &[(1, 0), (2, 10)]);
    let path = dir.path().join("epochFileCheckpoint");
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, good.replace("2-10", "2-11")).unwrap();
    let c = EpochFileCache::load(dir.path()).unwrap();
    assert_eq!(
        pairs(&c),
        vec![(1, 0, OPEN_END)],
        "the .bak holds the version before"
    );
    std::fs::write(&path, "3\n0\n1-0\n2-10\n").unwrap();
    assert_eq!(EpochFileCache::load(dir.path()).unwrap().len(), 1);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(EpochFileCache::load(dir.path()).unwrap().len(), 1);
}

/// Both the file and its `.bak` bad is an error naming both, never an empty cache.
#[test]
fn both_bad_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("epochFileCheckpoint");
    std::fs::write(&path, "x\n").unwrap();
    std::fs::write(dir.path().join("epochFileCheckpoint.bak"), "1\n5\n1-0\n").unwrap();
    let err = EpochFileCache::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("entry count") && err.contains("crc32"),
        "{err}"
    );
    std::fs::remove_file(dir.path().join("epochFileCheckpoint.bak")).unwrap();
    assert!(
        EpochFileCache::load(dir.path()).is_err(),
        "bad main, no backup"
    );
}

/// Entries out of order in the file are corrupt, not silently reordered.
#[test]
fn non_increasing_file_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("epochFileCheckpoint"), "2\n0\n3-10\n2-20\n").unwrap();
    assert!(matches!(
        EpochFileCache::load(dir.path()),
        Err(StoreError::Corrupt { .. })
    ));
}

/// append refuses an epoch or a start offset that does not increase, and changes nothing.
#[test]
fn append_refuses_non_increasing() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cache(dir.path(), &[(3, 100)]);
    assert!(c.append(3, 200).is_err());
    assert!(c.append(2, 200).is_err());
    assert!(c.append(4, 100).is_err());
    assert!(c.append(4, 50).is_err());
    assert_eq!(pairs(&c), vec![(3, 100, OPEN_END)]);
    assert_eq!(EpochFileCache::load(dir.path()).unwrap(), c);
    c.append(4, 101).unwrap();
    assert_eq!(pairs(&c), vec![(3, 100, 101), (4, 101, OPEN_END)]);
}

/// entries() ends each epoch at the next one's start and leaves the last open at i64::MAX.
#[test]
fn entries_carry_ends() {
    let c = memory(&[(1, 0), (2, 50)]);
    let e = c.entries();
    assert_eq!((e[0].epoch, e[0].start_offset, e[0].end_offset), (1, 0, 50));
    assert_eq!(
        (e[1].epoch, e[1].start_offset, e[1].end_offset),
        (2, 50, i64::MAX)
    );
    assert_eq!(c.last_epoch(), Some(2));
    assert_eq!(EpochFileCache::in_memory().last_epoch(), None);
    assert_eq!(EpochFileCache::from_entries(&e).unwrap(), c);
}

/// find_epoch_entry_by_offset: start inclusive, end exclusive; set_last_end closes the last.
#[test]
fn find_by_offset_and_last_end() {
    let mut c = memory(&[(1, 0), (2, 50)]);
    assert_eq!(c.find_epoch_entry_by_offset(0).unwrap().epoch, 1);
    assert_eq!(c.find_epoch_entry_by_offset(49).unwrap().epoch, 1);
    assert_eq!(c.find_epoch_entry_by_offset(50).unwrap().epoch, 2);
    assert_eq!(c.find_epoch_entry_by_offset(1 << 40).unwrap().epoch, 2);
    c.set_last_end(80);
    assert!(c.find_epoch_entry_by_offset(80).is_none());
    c.set_last_end(10);
    assert_eq!(
        c.last_entry().unwrap().end_offset,
        80,
        "below its start: ignored"
    );
}

/// The consistent point is the lower end of the newest epoch both have with the same start;
/// an epoch with the same number but another start does not count; none in common is None.
#[test]
fn consistent_point_rules() {
    let mut local = memory(&[(1, 0), (2, 100), (3, 300)]);
    local.set_last_end(400);
    let mut master = memory(&[(1, 0), (2, 100), (4, 250)]);
    master.set_last_end(900);
    assert_eq!(local.find_consistent_point(&master), Some(250));
    let mut master = memory(&[(1, 0), (2, 100), (3, 300)]);
    master.set_last_end(350);
    assert_eq!(local.find_consistent_point(&master), Some(350));
    let mut master = memory(&[(1, 0), (3, 200)]);
    master.set_last_end(900);
    assert_eq!(local.find_consistent_point(&master), Some(100));
    let master = memory(&[(5, 0)]);
    assert_eq!(local.find_consistent_point(&master), None);
}

/// truncate_suffix_by_offset keeps the epoch holding the offset, open; drops those starting at
/// or after it; and persists.
#[test]
fn truncate_suffix_by_offset_keeps_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cache(dir.path(), &[(1, 0), (2, 100), (3, 300)]);
    c.truncate_suffix_by_offset(150).unwrap();
    assert_eq!(pairs(&c), vec![(1, 0, 100), (2, 100, OPEN_END)]);
    assert_eq!(EpochFileCache::load(dir.path()).unwrap(), c);
    c.truncate_suffix_by_offset(100).unwrap();
    assert_eq!(pairs(&c), vec![(1, 0, OPEN_END)]);
    c.truncate_suffix_by_offset(0).unwrap();
    assert!(c.is_empty());
    assert!(
        EpochFileCache::load(dir.path()).unwrap().is_empty(),
        "empty persists"
    );
}

/// truncate_suffix_by_epoch drops the epoch and every later one.
#[test]
fn truncate_suffix_by_epoch_drops_later() {
    let mut c = memory(&[(1, 0), (2, 100), (3, 300)]);
    c.truncate_suffix_by_epoch(2).unwrap();
    assert_eq!(pairs(&c), vec![(1, 0, OPEN_END)]);
}

/// truncate_prefix_by_offset drops epochs ending at or before the offset and keeps the one
/// holding it with its start unchanged.
#[test]
fn truncate_prefix_keeps_the_holder_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cache(dir.path(), &[(1, 0), (2, 100), (3, 300)]);
    c.truncate_prefix_by_offset(100).unwrap();
    assert_eq!(pairs(&c), vec![(2, 100, 300), (3, 300, OPEN_END)]);
    c.truncate_prefix_by_offset(299).unwrap();
    assert_eq!(pairs(&c), vec![(2, 100, 300), (3, 300, OPEN_END)]);
    assert_eq!(EpochFileCache::load(dir.path()).unwrap(), c);
}

/// from_entries refuses negative or unordered entries (a master's handshake is network input).
#[test]
fn from_entries_refuses_bad_input() {
    let e = |epoch, start| EpochEntry {
        epoch,
        start_offset: start,
        end_offset: i64::MAX,
    };
    assert!(EpochFileCache::from_entries(&[e(-1, 0)]).is_err());
    assert!(EpochFileCache::from_entries(&[e(1, -5)]).is_err());
    assert!(EpochFileCache::from_entries(&[e(2, 0), e(1, 10)]).is_err());
    assert!(EpochFileCache::from_entries(&[e(1, 10), e(2, 10)]).is_err());
}

/// Epochs and starts that strictly increase, from `(epoch step, start step)` pairs.
fn chain_from(first: (u32, u64), steps: &[(u32, u64)]) -> Vec<(u32, u64)> {
    let mut out = vec![first];
    for &(de, ds) in steps {
        let &(e, s) = out.last().unwrap();
        out.push((e + de, s + ds));
    }
    out
}

proptest! {
    /// Two logs that share a prefix of epochs and then diverge (each side's later epochs are
    /// numbers the other never has) agree up to the lower of their ends of the last shared
    /// epoch, whichever side asks.
    #[test]
    fn consistent_point_is_the_end_of_the_shared_prefix(
        shared in prop::collection::vec((1u32..4, 1u64..1000), 0..6),
        local_tail in prop::collection::vec(1u64..1000, 0..5),
        master_tail in prop::collection::vec(1u64..1000, 0..5),
        local_extra in 0u64..1000,
        master_extra in 0u64..1000,
    ) {
        let prefix = chain_from((1, 0), &shared);
        let &(last_epoch, last_start) = prefix.last().unwrap();
        // Local's own epochs are odd steps past the prefix, the master's even ones.
        let mut local_entries = prefix.clone();
        for (i, ds) in local_tail.iter().enumerate() {
            let s = local_entries.last().unwrap().1 + ds;
            local_entries.push((last_epoch + 2 * i as u32 + 1, s));
        }
        let mut master_entries = prefix.clone();
        for (i, ds) in master_tail.iter().enumerate() {
            let s = master_entries.last().unwrap().1 + ds;
            master_entries.push((last_epoch + 2 * i as u32 + 2, s));
        }
        let mut local = memory(&local_entries);
        let mut master = memory(&master_entries);
        local.set_last_end(local_entries.last().unwrap().1 + local_extra);
        master.set_last_end(master_entries.last().unwrap().1 + master_extra);
        let end_of = |c: &EpochFileCache| c.entry(last_epoch).unwrap().end_offset;
        let expected = end_of(&local).min(end_of(&master));
        prop_assert!(expected >= last_start);
        prop_assert_eq!(local.find_consistent_point(&master), Some(expected));
        prop_assert_eq!(master.find_consistent_point(&local), Some(expected));
    }
}
