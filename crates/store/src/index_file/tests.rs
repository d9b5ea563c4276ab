//! IndexFile / IndexService tests: golden header and entry bytes written by hand,
//! Java hash values, file naming, collisions, time windows, rollover, truncation, retention and
//! junk.

use std::fs;
use std::path::Path;

use super::naming::{file_name_from_ms, index_key_hash, java_string_hash, ms_from_file_name};
use super::*;

const T0: i64 = 1_700_000_005_000;

fn be32(v: i32) -> [u8; 4] {
    v.to_be_bytes()
}

fn be64(v: i64) -> [u8; 8] {
    v.to_be_bytes()
}

#[test]
fn java_hash_matches_known_java_values() {
    // Values computed with Java's String.hashCode (UTF-16 units, wrapping).
    assert_eq!(java_string_hash(""), 0);
    assert_eq!(java_string_hash("hello"), 99_162_322);
    assert_eq!(
        java_string_hash("\u{1F600}"),
        1_772_899,
        "surrogate pair, not UTF-8"
    );
    assert_eq!(java_string_hash("TopicTest#order-42"), -870_421_153);
    assert_eq!(java_string_hash("Тема#ключ"), -247_724_874);
    assert_eq!(index_key_hash("TopicTest#order-42"), 870_421_153);
    assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    assert_eq!(
        index_key_hash("polygenelubricants"),
        0,
        "abs overflow maps to 0"
    );
}

#[test]
fn file_names_are_utc_yyyymmddhhmmsssss() {
    // 17 digits from Unix ms, leap days included, and the parse is the exact inverse.
    assert_eq!(file_name_from_ms(0).unwrap(), "19700101000000000");
    assert_eq!(
        file_name_from_ms(951_782_400_000).unwrap(),
        "20000229000000000"
    );
    assert_eq!(
        file_name_from_ms(1_700_000_000_123).unwrap(),
        "20231114221320123"
    );
    assert_eq!(
        file_name_from_ms(4_102_444_799_999).unwrap(),
        "20991231235959999"
    );
    assert_eq!(file_name_from_ms(-1), None);
    for ms in (0..4_000_000_000_000i64).step_by(7_777_777_777) {
        let name = file_name_from_ms(ms).unwrap();
        assert_eq!(ms_from_file_name(&name), Some(ms), "{name}");
    }
    for bad in [
        "2023111422132012",
        "20230230000000000",
        "2023111422136012x",
        "20231314221320123",
    ] {
        assert_eq!(ms_from_file_name(bad), None, "{bad}");
    }
}

#[test]
fn header_slot_and_entries_match_the_spec() {
    // Hand-built bytes for 4 slots, 5 entries: key "T#k" hashes to 81916, slot 81916 % 4 = 0.
    let dir = tempfile::tempdir().unwrap();
    let mut f = IndexFile::create(dir.path(), 4, 5, 0, 1_700_000_000_123).unwrap();
    assert_eq!(f.path(), dir.path().join("20231114221320123"));
    assert!(f.put_key("T#k", 0x0102_0304_0506_0708, T0).unwrap());
    assert!(f.put_key("T#k", 16, T0 + 2_500).unwrap());
    f.flush().unwrap();
    let bytes = fs::read(f.path()).unwrap();
    assert_eq!(bytes.len(), 40 + 4 * 4 + 5 * 20);
    let mut header = Vec::new();
    header.extend_from_slice(&be64(T0)); // beginTimestamp
    header.extend_from_slice(&be64(T0 + 2_500)); // endTimestamp
    header.extend_from_slice(&be64(0x0102_0304_0506_0708)); // beginPhyOffset
    header.extend_from_slice(&be64(16)); // endPhyOffset
    header.extend_from_slice(&be32(1)); // hashSlotCount
    header.extend_from_slice(&be32(3)); // indexCount (starts at 1)
    assert_eq!(&bytes[0..40], &header[..]);
    assert_eq!(
        &bytes[40..44],
        &be32(2),
        "slot 0 points at the newest entry"
    );
    assert!(bytes[44..56].iter().all(|&b| b == 0), "other slots empty");
    assert!(bytes[56..76].iter().all(|&b| b == 0), "entry 0 unused");
    let mut entries = Vec::new();
    entries.extend_from_slice(&[0x00, 0x01, 0x3F, 0xFC]); // keyHash 81916
    entries.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]); // phyOffset
    entries.extend_from_slice(&be32(0)); // timeDiff s
    entries.extend_from_slice(&be32(0)); // prevIndex
    entries.extend_from_slice(&[0x00, 0x01, 0x3F, 0xFC]);
    entries.extend_from_slice(&be64(16));
    entries.extend_from_slice(&be32(2)); // 2.5 s after begin, in whole seconds
    entries.extend_from_slice(&be32(1));
    assert_eq!(&bytes[76..116], &entries[..]);
    assert_eq!(
        f.select_phy_offsets("T#k", 10, 0, i64::MAX),
        vec![16, 0x0102_0304_0506_0708]
    );
}

#[test]
fn colliding_keys_share_a_chain_and_hash_equal_keys_both_match() {
    // One slot: every key chains together; lookups filter by hash, so only "Aa"/"BB" (equal
    // Java hashes) are confused, and that is the caller's to re-check.
    let dir = tempfile::tempdir().unwrap();
    let mut f = IndexFile::create(dir.path(), 1, 10, 0, 0).unwrap();
    for (i, key) in ["T#a", "T#Aa", "T#b", "T#BB", "T#a"].iter().enumerate() {
        assert!(f.put_key(key, i as u64 * 100, T0).unwrap());
    }
    assert_eq!(f.select_phy_offsets("T#a", 10, 0, i64::MAX), vec![400, 0]);
    assert_eq!(f.select_phy_offsets("T#b", 10, 0, i64::MAX), vec![200]);
    assert_eq!(
        f.select_phy_offsets("T#Aa", 10, 0, i64::MAX),
        vec![300, 100]
    );
    assert_eq!(
        f.select_phy_offsets("T#a", 1, 0, i64::MAX),
        vec![400],
        "max honoured"
    );
    assert_eq!(
        f.select_phy_offsets("T#zz", 10, 0, i64::MAX),
        Vec::<u64>::new()
    );
}

#[test]
fn time_window_filters_with_second_precision() {
    // Entries at +0 s, +10.9 s (stored as 10 s) and +20 s; windows select by begin + diff*1000.
    let dir = tempfile::tempdir().unwrap();
    let mut f = IndexFile::create(dir.path(), 8, 10, 0, 0).unwrap();
    f.put_key("T#k", 1, T0).unwrap();
    f.put_key("T#k", 2, T0 + 10_900).unwrap();
    f.put_key("T#k", 3, T0 + 20_000).unwrap();
    assert_eq!(
        f.select_phy_offsets("T#k", 9, T0 + 5_000, T0 + 15_000),
        vec![2]
    );
    assert_eq!(f.select_phy_offsets("T#k", 9, T0, T0 + 10_000), vec![2, 1]);
    assert_eq!(
        f.select_phy_offsets("T#k", 9, T0 + 10_500, T0 + 30_000),
        vec![3]
    );
    assert_eq!(
        f.select_phy_offsets("T#k", 9, T0 + 30_000, i64::MAX),
        Vec::<u64>::new()
    );
}

#[test]
fn file_is_full_at_index_num_minus_one_keys() {
    // index_num 3 holds entries 1 and 2 only; the third put reports full without writing.
    let dir = tempfile::tempdir().unwrap();
    let mut f = IndexFile::create(dir.path(), 4, 3, 0, 0).unwrap();
    assert!(f.put_key("T#a", 1, T0).unwrap());
    assert!(f.put_key("T#b", 2, T0).unwrap());
    assert!(f.is_full());
    assert!(!f.put_key("T#c", 3, T0).unwrap());
    assert_eq!(f.end_phy_offset(), 2);
    assert!(IndexFile::create(dir.path(), 4, 1, 0, 0).is_err());
    assert!(IndexFile::create(dir.path(), 0, 10, 0, 0).is_err());
}

#[test]
fn reopen_reads_the_header_back() {
    // open() sees what create()+put_key() wrote, and refuses a mismatched configuration.
    let dir = tempfile::tempdir().unwrap();
    let mut f = IndexFile::create(dir.path(), 4, 5, 77, 1_000).unwrap();
    f.put_key("T#k", 100, T0).unwrap();
    f.flush().unwrap();
    let path = f.path().to_owned();
    drop(f);
    let f = IndexFile::open(&path, 4, 5).unwrap();
    assert_eq!(
        (f.begin_timestamp(), f.end_timestamp(), f.end_phy_offset()),
        (T0, T0, 100)
    );
    assert_eq!((f.index_count(), f.created_ms()), (2, 1_000));
    assert_eq!(f.select_phy_offsets("T#k", 5, 0, i64::MAX), vec![100]);
    assert!(matches!(
        IndexFile::open(&path, 8, 5),
        Err(StoreError::Corrupt { .. })
    ));
}

fn service(root: &Path) -> IndexService {
    IndexService::open(root, 4, 3).unwrap()
}

#[test]
fn service_rolls_files_and_queries_newest_first() {
    // Two keys per file: five messages make three files; a query spans all, newest first.
    let dir = tempfile::tempdir().unwrap();
    let mut s = service(dir.path());
    for i in 0..5u64 {
        s.put("T", &["k", ""], i * 100, T0 + i as i64 * 1000)
            .unwrap();
        s.put("T", &["k"], i * 100, T0).unwrap(); // re-dispatch: skipped
    }
    assert_eq!(s.files().len(), 3);
    assert_eq!(s.max_phy_offset(), 400);
    let all = vec![400, 300, 200, 100, 0];
    assert_eq!(s.query("T", "k", 10, 0, i64::MAX), all);
    assert_eq!(s.query("T", "k", 3, 0, i64::MAX), vec![400, 300, 200]);
    assert_eq!(s.query("T", "k", 10, T0 + 1000, T0 + 2000), vec![200, 100]);
    assert_eq!(s.query("U", "k", 10, 0, i64::MAX), Vec::<u64>::new());
    s.flush().unwrap();
    drop(s);
    let s = service(dir.path());
    assert_eq!(s.files().len(), 3);
    assert_eq!(s.query("T", "k", 10, 0, i64::MAX), all);
    let names: Vec<_> = s.files().iter().map(|f| f.created_ms()).collect();
    assert!(
        names.windows(2).all(|w| w[0] < w[1]),
        "creation order kept: {names:?}"
    );
}

#[test]
fn truncate_after_drops_newer_files_and_put_resumes() {
    // Files ending after the checkpoint time go; re-dispatch then re-indexes their messages.
    let dir = tempfile::tempdir().unwrap();
    let mut s = service(dir.path());
    for i in 0..5u64 {
        s.put("T", &["k"], i * 100, T0 + i as i64 * 1000).unwrap();
    }
    s.truncate_after(T0 + 1500, &|_| None).unwrap();
    assert_eq!(s.files().len(), 1);
    assert_eq!(s.max_phy_offset(), 100);
    assert_eq!(fs::read_dir(dir.path().join("index")).unwrap().count(), 1);
    assert_eq!(s.query("T", "k", 10, 0, i64::MAX), vec![100, 0]);
    s.put("T", &["k"], 200, T0 + 2000).unwrap();
    assert_eq!(s.query("T", "k", 10, 0, i64::MAX), vec![200, 100, 0]);
    s.truncate_after(0, &|_| None).unwrap();
    assert_eq!((s.files().len(), s.max_phy_offset()), (0, 0));
}

#[test]
fn delete_expired_drops_files_below_the_min_phy_offset_but_never_the_newest() {
    // Files [0, 100], [200, 300], [400]: retention moved the commit log's start to 150.
    let dir = tempfile::tempdir().unwrap();
    let mut s = service(dir.path());
    for i in 0..5u64 {
        s.put("T", &["k"], i * 100, T0 + i as i64 * 1000).unwrap();
    }
    assert_eq!(
        s.delete_expired(100).unwrap(),
        0,
        "its last entry is still stored"
    );
    assert_eq!(s.delete_expired(150).unwrap(), 1);
    assert_eq!(fs::read_dir(dir.path().join("index")).unwrap().count(), 2);
    assert_eq!(s.query("T", "k", 10, 0, i64::MAX), vec![400, 300, 200]);
    assert_eq!(s.delete_expired(10_000).unwrap(), 1);
    assert_eq!(s.files().len(), 1, "the newest file takes new keys");
    s.put("T", &["k"], 500, T0 + 5000).unwrap();
    assert_eq!(s.query("T", "k", 10, 0, i64::MAX), vec![500, 400]);
}

#[test]
fn junk_in_the_index_directory_never_panics() {
    // Foreign names, wrong sizes, broken headers and random chains are skipped or bounded.
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("index");
    fs::create_dir_all(idx.join("20240101000000000.d")).unwrap();
    fs::write(idx.join("notes"), b"x").unwrap();
    fs::write(idx.join("20240101000000001"), b"short").unwrap();
    let size = 40 + 4 * 4 + 3 * 20;
    let mut bad_header = vec![0u8; size];
    bad_header[36..40].copy_from_slice(&be32(1000));
    fs::write(idx.join("20240101000000002"), &bad_header).unwrap();
    // Valid header (3 entries used of 3) over random slots and entries with cyclic links.
    let mut x: u32 = 99;
    let mut junk: Vec<u8> = (0..size)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect();
    junk[36..40].copy_from_slice(&be32(3));
    junk[16..32].fill(0);
    fs::write(idx.join("20240101000000003"), &junk).unwrap();
    let s = service(dir.path());
    assert_eq!(s.files().len(), 1);
    for key in ["a", "b", "c", "d", "e", "f"] {
        let _ = s.query("T", key, 10, i64::MIN, i64::MAX);
    }
}
