//! Crash repair of the index (`IndexService::truncate_after` with `repair.rs`): the file that
//! straddles the checkpoint's index time is cut back to the entries stored before it, its slots
//! are repaired, newer files go, and re-dispatch resumes right after the cut.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::naming::index_key_hash;
use super::*;

/// A whole second, so entry times (whole seconds after the first entry) are exact here.
const T0: i64 = 1_700_000_000_000;
const SLOTS: u32 = 4;
const ENTRIES: u32 = 64;

fn service(root: &Path) -> IndexService {
    IndexService::open(root, SLOTS, ENTRIES).unwrap()
}

/// Message `i`: keys "k" (shared, one long chain) and "m<i>", at phy `i * 100`, stored at
/// `T0 + i` seconds.
fn put_messages(s: &mut IndexService, n: u64) {
    for i in 0..n {
        s.put("T", &["k", &format!("m{i}")], i * 100, T0 + i as i64 * 1000)
            .unwrap();
    }
}

fn phys_down_from(last: u64) -> Vec<u64> {
    (0..=last).rev().map(|i| i * 100).collect()
}

/// Proves the straddling file keeps exactly the messages stored before the checkpoint time
/// (less the last one, whose keys re-dispatch puts again), that its slot chains are repaired
/// (the shared key finds every kept message, no dropped one), and that puts resume after it.
#[test]
fn cuts_inside_the_file_and_resumes_after_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = service(dir.path());
    put_messages(&mut s, 20);
    // Message 10 is stored in the second that holds the checkpoint time: with no commit log
    // to ask, it is not provably older and the cut falls before it.
    s.truncate_after(T0 + 10_500, &|_| None).unwrap();
    assert_eq!(s.files().len(), 1, "the file is kept");
    assert_eq!(
        s.max_phy_offset(),
        800,
        "messages 0..=8 kept, 9 dropped as the last"
    );
    assert_eq!(s.query("T", "k", 100, 0, i64::MAX), phys_down_from(8));
    for gone in [9, 10, 19] {
        assert!(s.query("T", &format!("m{gone}"), 4, 0, i64::MAX).is_empty());
    }
    assert_eq!(s.query("T", "m8", 4, 0, i64::MAX), vec![800]);
    assert!(s.files()[0].end_timestamp() < T0 + 10_500);
    // Re-dispatch from the commit log: message 8 is skipped, 9.. are put again.
    for i in 8..20u64 {
        s.put("T", &["k", &format!("m{i}")], i * 100, T0 + i as i64 * 1000)
            .unwrap();
    }
    assert_eq!(s.query("T", "k", 100, 0, i64::MAX), phys_down_from(19));
    assert_eq!(s.files()[0].index_count(), 41, "no entry duplicated");
    s.flush().unwrap();
    drop(s);
    assert_eq!(
        service(dir.path()).query("T", "m9", 4, 0, i64::MAX),
        vec![900]
    );
}

/// Proves the commit log's exact store time decides the entries in the checkpoint's second.
#[test]
fn exact_store_time_decides_the_checkpoint_second() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = service(dir.path());
    put_messages(&mut s, 20);
    let stored_at = |phy: u64| Some(T0 + (phy / 100) as i64 * 1000);
    s.truncate_after(T0 + 10_500, &stored_at).unwrap();
    assert_eq!(
        s.max_phy_offset(),
        900,
        "message 10 is provably older; 9 is the last kept"
    );
    assert_eq!(s.query("T", "k", 100, 0, i64::MAX), phys_down_from(9));
}

/// Proves files wholly after the checkpoint go, and a file left empty goes too, so the index
/// resumes at the end of the previous file.
#[test]
fn newer_files_go_and_an_emptied_file_goes() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = IndexService::open(dir.path(), SLOTS, 5).unwrap(); // two messages per file
    put_messages(&mut s, 6);
    assert_eq!(s.files().len(), 3);
    s.truncate_after(T0 + 2_500, &|_| None).unwrap();
    // File 2 (messages 2 and 3) straddles the checkpoint: only message 2's first key is
    // provably older (a file's first entry has an exact time), and as part of the last message
    // it goes too, so the emptied file goes with file 3. File 1 ends before the checkpoint and
    // stays whole.
    assert_eq!(s.files().len(), 1);
    assert_eq!(fs::read_dir(dir.path().join("index")).unwrap().count(), 1);
    assert_eq!(s.max_phy_offset(), 100);
    assert_eq!(s.query("T", "k", 10, 0, i64::MAX), vec![100, 0]);
}

/// Proves the repair survives what power loss can leave: entries past a point never written
/// (zeros) though the header counts them, and a slot pointing at one of them. The cut stops at
/// the first entry that is not one the writer made, and the slot is relinked to the newest
/// kept entry.
#[test]
fn unwritten_entries_and_dangling_slots_are_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = service(dir.path());
    put_messages(&mut s, 20);
    s.flush().unwrap();
    let path = s.files()[0].path().to_owned();
    drop(s);
    let f = fs::File::options().write(true).open(&path).unwrap();
    let entries_at = 40 + 4 * u64::from(SLOTS);
    // Entries 25..=40 (message 12 on) never reached the disk.
    f.write_all_at(&[0u8; 16 * 20], entries_at + 25 * 20)
        .unwrap();
    let k_slot = 40 + 4 * u64::from(index_key_hash("T#k") as u32 % SLOTS);
    f.write_all_at(&39i32.to_be_bytes(), k_slot).unwrap();
    drop(f);
    let mut s = service(dir.path());
    assert_eq!(
        s.files()[0].index_count(),
        41,
        "the header claims every entry"
    );
    s.truncate_after(T0 + 15_500, &|_| None).unwrap();
    // Kept: entries 1..=24 (messages 0..=11, the 24th is message 11's "m11"), less message 11.
    assert_eq!(s.max_phy_offset(), 1000);
    assert_eq!(s.files()[0].index_count(), 23);
    assert_eq!(s.query("T", "k", 100, 0, i64::MAX), phys_down_from(10));
    s.put("T", &["k"], 1100, T0 + 11_000).unwrap();
    assert_eq!(s.query("T", "k", 100, 0, i64::MAX), phys_down_from(11));
}

/// Proves a truncation of the commit log (`truncate_from_phy`) drops exactly the entries at or
/// past the cut, repairs the shared key's chain to the newest kept message, keeps the file
/// header's end on the last kept entry, survives a reopen, and takes new puts after the cut.
#[test]
fn truncate_from_phy_drops_entries_at_and_past_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = service(dir.path());
    put_messages(&mut s, 12);
    s.truncate_from_phy(700).unwrap();
    assert_eq!(s.max_phy_offset(), 600);
    assert_eq!(s.query("T", "k", 100, 0, i64::MAX), phys_down_from(6));
    for gone in [7, 11] {
        assert!(s.query("T", &format!("m{gone}"), 4, 0, i64::MAX).is_empty());
    }
    drop(s);
    let mut s = service(dir.path());
    assert_eq!(s.query("T", "k", 100, 0, i64::MAX), phys_down_from(6));
    s.put("T", &["k", "m7"], 700, T0 + 20_000).unwrap();
    assert_eq!(s.query("T", "m7", 4, 0, i64::MAX), vec![700]);
    assert_eq!(s.query("T", "k", 100, 0, i64::MAX), phys_down_from(7));
}

/// Proves a cut before a file's first entry deletes that file (and only newer ones), and a cut
/// past every entry changes nothing.
#[test]
fn truncate_from_phy_deletes_files_wholly_past_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = service(dir.path());
    put_messages(&mut s, 40); // two keys a message: 64 entries fill the first file
    let files = s.files().len();
    assert!(files >= 2, "the messages span {files} files");
    s.truncate_from_phy(4_000).unwrap();
    assert_eq!(s.files().len(), files, "nothing at or past 4000");
    let second_begins = s.files()[1].begin_phy_offset as u64;
    s.truncate_from_phy(second_begins).unwrap();
    assert_eq!(s.files().len(), 1);
    assert_eq!(s.max_phy_offset(), second_begins - 100);
    assert!(s
        .query("T", "k", 100, 0, i64::MAX)
        .iter()
        .all(|&p| p < second_begins));
}
