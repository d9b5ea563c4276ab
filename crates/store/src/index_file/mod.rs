//! IndexFile: RocketMQ's on-disk hash index from message keys to commit-log offsets, byte for
//! byte (Java's `IndexFile`): a 40-byte header, `hash_slot_num` 4-byte slots, then `index_num`
//! 20-byte entries chained newest to oldest per slot. `IndexService` (service.rs) rolls files
//! and queries across them.
//!
//! Who calls it: the writer thread puts keys after each append batch (it is the only mutator);
//! QUERY_MESSAGE reads through `IndexService::query`; recovery opens and truncates.
//!
//! Invariants: `index_count` starts at 1 (entry 0 is never used) and never exceeds `index_num`;
//! a slot holds 0 or an entry number below `index_count`; every entry's `prev_index` is smaller
//! than its own number. Lookups compare hashes only: different keys with the same
//! `abs(hashCode)` match too, so callers must re-check the real key in the message.

mod naming;
mod repair;
mod service;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_repair;

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::constants::{INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE};
use crate::StoreError;
use naming::{file_name_from_ms, index_key_hash, ms_from_file_name};
pub use service::IndexService;

/// Where the header's fields live (all big-endian).
mod header {
    pub const BEGIN_TIMESTAMP: usize = 0;
    pub const END_TIMESTAMP: usize = 8;
    pub const BEGIN_PHY_OFFSET: usize = 16;
    pub const END_PHY_OFFSET: usize = 24;
    pub const HASH_SLOT_COUNT: usize = 32;
    pub const INDEX_COUNT: usize = 36;
}

/// Upper bound on an index file, far above the 420 MB default, so a typo cannot map terabytes.
const INDEX_FILE_SIZE_MAX: u64 = 1 << 36;

pub struct IndexFile {
    path: PathBuf,
    /// Kept for `try_clone_file`: the checkpoint thread fdatasyncs a clone (which covers pages
    /// written through the mapping) so the writer never waits for the index to reach the disk.
    file: std::fs::File,
    map: MmapMut,
    hash_slot_num: u32,
    index_num: u32,
    /// Creation time parsed from the file name (the service orders files by it).
    created_ms: i64,
    begin_timestamp: i64,
    end_timestamp: i64,
    begin_phy_offset: i64,
    end_phy_offset: i64,
    hash_slot_count: i32,
    index_count: i32,
    dirty: bool,
}

impl IndexFile {
    /// Creates `dir/<yyyyMMddHHmmssSSS of now_ms>` (the next free millisecond if taken), sparse,
    /// with a header whose phy offsets start at `begin_phy`.
    pub fn create(
        dir: &Path,
        hash_slot_num: u32,
        index_num: u32,
        begin_phy: u64,
        now_ms: i64,
    ) -> Result<Self, StoreError> {
        let size = file_size(hash_slot_num, index_num)?;
        let begin_phy = i64::try_from(begin_phy)
            .map_err(|_| StoreError::Invalid(format!("begin phy offset {begin_phy}")))?;
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        // A name collision means two files within one millisecond: take the next one.
        for created_ms in now_ms..now_ms.saturating_add(1000) {
            let name = file_name_from_ms(created_ms)
                .ok_or_else(|| StoreError::Invalid(format!("timestamp {created_ms} ms")))?;
            let path = dir.join(name);
            let file = match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::io(&path, e)),
            };
            // Sparse like RocketMQ's: most of the 420 MB of slots and entries is never touched.
            file.set_len(size).map_err(|e| StoreError::io(&path, e))?;
            let mut f = Self::map(file, path, hash_slot_num, index_num, created_ms)?;
            f.begin_phy_offset = begin_phy;
            f.end_phy_offset = begin_phy;
            f.index_count = 1;
            f.write_header();
            return Ok(f);
        }
        Err(StoreError::Invalid(format!(
            "no free index file name near {now_ms} ms"
        )))
    }

    /// Maps an existing file made with the same `hash_slot_num` and `index_num` (the header
    /// does not record them, so the caller passes its configuration; the size must agree).
    pub fn open(path: &Path, hash_slot_num: u32, index_num: u32) -> Result<Self, StoreError> {
        let size = file_size(hash_slot_num, index_num)?;
        let corrupt = |reason: String| StoreError::Corrupt {
            path: path.to_owned(),
            offset: 0,
            reason,
        };
        let created_ms = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(ms_from_file_name)
            .ok_or_else(|| corrupt("name is not yyyyMMddHHmmssSSS".into()))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        let len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
        if len != size {
            return Err(corrupt(format!(
                "{len} bytes, expected {size} for this slot/index config"
            )));
        }
        let mut f = Self::map(file, path.to_owned(), hash_slot_num, index_num, created_ms)?;
        f.begin_timestamp = f.read_i64(header::BEGIN_TIMESTAMP);
        f.end_timestamp = f.read_i64(header::END_TIMESTAMP);
        f.begin_phy_offset = f.read_i64(header::BEGIN_PHY_OFFSET);
        f.end_phy_offset = f.read_i64(header::END_PHY_OFFSET);
        f.hash_slot_count = f.read_i32(header::HASH_SLOT_COUNT);
        // A header never written (crash right after creation) reads 0: same as a fresh file.
        f.index_count = f.read_i32(header::INDEX_COUNT).max(1);
        if f.index_count as u32 > index_num || f.end_phy_offset < 0 || f.begin_phy_offset < 0 {
            return Err(corrupt(format!(
                "header out of range: index count {}, phy offsets {}..{}",
                f.index_count, f.begin_phy_offset, f.end_phy_offset
            )));
        }
        Ok(f)
    }

    fn map(
        file: std::fs::File,
        path: PathBuf,
        hash_slot_num: u32,
        index_num: u32,
        created_ms: i64,
    ) -> Result<Self, StoreError> {
        // SAFETY: the store's lock file keeps other brokers out and only this IndexFile maps
        // the file for writing; its length was checked or set to the mapped size, and nothing
        // truncates it while the mapping lives.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(|e| StoreError::io(&path, e))?;
        Ok(IndexFile {
            path,
            file,
            map,
            hash_slot_num,
            index_num,
            created_ms,
            begin_timestamp: 0,
            end_timestamp: 0,
            begin_phy_offset: 0,
            end_phy_offset: 0,
            hash_slot_count: 0,
            index_count: 1,
            dirty: false,
        })
    }

    /// Adds `key` ("topic#key") -> `phy_offset`. `Ok(false)` when the file is full.
    pub fn put_key(
        &mut self,
        key: &str,
        phy_offset: u64,
        store_timestamp: i64,
    ) -> Result<bool, StoreError> {
        let phy = i64::try_from(phy_offset)
            .map_err(|_| StoreError::Invalid(format!("phy offset {phy_offset}")))?;
        if self.is_full() {
            return Ok(false);
        }
        let key_hash = index_key_hash(key);
        let slot_pos = self.slot_pos(key_hash);
        let mut prev = self.read_i32(slot_pos);
        if prev <= 0 || prev >= self.index_count {
            prev = 0;
        }
        if self.index_count <= 1 {
            self.begin_phy_offset = phy;
            self.begin_timestamp = store_timestamp;
        }
        // Seconds since the first entry, clamped into an i32 as RocketMQ does.
        let time_diff_s = if self.begin_timestamp <= 0 {
            0
        } else {
            (store_timestamp.saturating_sub(self.begin_timestamp) / 1000).clamp(0, i32::MAX as i64)
                as i32
        };
        let entry_pos = self.entry_pos(self.index_count);
        self.write(entry_pos, &key_hash.to_be_bytes());
        self.write(entry_pos + 4, &phy.to_be_bytes());
        self.write(entry_pos + 12, &time_diff_s.to_be_bytes());
        self.write(entry_pos + 16, &prev.to_be_bytes());
        self.write(slot_pos, &self.index_count.to_be_bytes());
        if prev == 0 {
            self.hash_slot_count += 1;
        }
        self.index_count += 1;
        self.end_phy_offset = phy;
        self.end_timestamp = store_timestamp;
        self.write_header();
        Ok(true)
    }

    /// Up to `max` phy offsets of entries whose hash equals `key`'s and whose time (second
    /// precision, RocketMQ's) lies in `[begin_ts, end_ts]`, newest first. Hash matches only.
    pub fn select_phy_offsets(
        &self,
        key: &str,
        max: usize,
        begin_ts: i64,
        end_ts: i64,
    ) -> Vec<u64> {
        let mut out = Vec::new();
        let key_hash = index_key_hash(key);
        let mut next = self.read_i32(self.slot_pos(key_hash));
        // Each step moves to a strictly smaller entry number, so index_count steps bound it even
        // when the file is corrupt.
        for _ in 0..self.index_count {
            if out.len() >= max || next <= 0 || next >= self.index_count {
                break;
            }
            let pos = self.entry_pos(next);
            let hash = self.read_i32(pos);
            let phy = self.read_i64(pos + 4);
            let time_diff_s = self.read_i32(pos + 12);
            let prev = self.read_i32(pos + 16);
            if time_diff_s < 0 {
                break;
            }
            let time = self
                .begin_timestamp
                .saturating_add(i64::from(time_diff_s) * 1000);
            if hash == key_hash && (begin_ts..=end_ts).contains(&time) && phy >= 0 {
                out.push(phy as u64);
            }
            if time < begin_ts || prev >= next {
                break;
            }
            next = prev;
        }
        out
    }

    pub fn is_full(&self) -> bool {
        self.index_count as u32 >= self.index_num
    }

    /// True while no key has been put.
    pub fn is_empty(&self) -> bool {
        self.index_count <= 1
    }

    pub fn begin_timestamp(&self) -> i64 {
        self.begin_timestamp
    }

    pub fn end_timestamp(&self) -> i64 {
        self.end_timestamp
    }

    pub fn end_phy_offset(&self) -> u64 {
        self.end_phy_offset as u64
    }

    /// Entries used plus one (RocketMQ's `indexCount`).
    pub fn index_count(&self) -> u32 {
        self.index_count as u32
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creation time from the file name, Unix ms.
    pub fn created_ms(&self) -> i64 {
        self.created_ms
    }

    /// A second handle on the file, for an fdatasync on another thread.
    pub fn try_clone_file(&self) -> Result<std::fs::File, StoreError> {
        self.file
            .try_clone()
            .map_err(|e| StoreError::io(&self.path, e))
    }

    /// msync of the whole mapping when something changed; the error goes to the caller.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        if self.dirty {
            self.map
                .flush()
                .map_err(|e| StoreError::io(&self.path, e))?;
            self.dirty = false;
        }
        Ok(())
    }

    fn slot_pos(&self, key_hash: i32) -> usize {
        let slot = key_hash as u32 % self.hash_slot_num;
        (INDEX_HEADER_SIZE + u64::from(slot) * INDEX_SLOT_SIZE) as usize
    }

    fn entry_pos(&self, index: i32) -> usize {
        assert!(
            index > 0 && (index as u32) < self.index_num,
            "entry {index} in range"
        );
        (INDEX_HEADER_SIZE
            + u64::from(self.hash_slot_num) * INDEX_SLOT_SIZE
            + index as u64 * INDEX_ENTRY_SIZE) as usize
    }

    fn write_header(&mut self) {
        self.write(header::BEGIN_TIMESTAMP, &self.begin_timestamp.to_be_bytes());
        self.write(header::END_TIMESTAMP, &self.end_timestamp.to_be_bytes());
        self.write(
            header::BEGIN_PHY_OFFSET,
            &self.begin_phy_offset.to_be_bytes(),
        );
        self.write(header::END_PHY_OFFSET, &self.end_phy_offset.to_be_bytes());
        self.write(header::HASH_SLOT_COUNT, &self.hash_slot_count.to_be_bytes());
        self.write(header::INDEX_COUNT, &self.index_count.to_be_bytes());
    }

    fn write(&mut self, pos: usize, bytes: &[u8]) {
        self.map[pos..pos + bytes.len()].copy_from_slice(bytes);
        self.dirty = true;
    }

    fn read_i32(&self, pos: usize) -> i32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.map[pos..pos + 4]);
        i32::from_be_bytes(b)
    }

    fn read_i64(&self, pos: usize) -> i64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.map[pos..pos + 8]);
        i64::from_be_bytes(b)
    }
}

/// 40 + slots×4 + entries×20, validated: at least one slot and one usable entry.
fn file_size(hash_slot_num: u32, index_num: u32) -> Result<u64, StoreError> {
    let size = INDEX_HEADER_SIZE
        + u64::from(hash_slot_num) * INDEX_SLOT_SIZE
        + u64::from(index_num) * INDEX_ENTRY_SIZE;
    if hash_slot_num == 0
        || index_num < 2
        || index_num > i32::MAX as u32
        || size > INDEX_FILE_SIZE_MAX
    {
        return Err(StoreError::Invalid(format!(
            "index file with {hash_slot_num} slots and {index_num} entries"
        )));
    }
    Ok(size)
}
