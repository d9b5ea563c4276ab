//! IndexService: the `index/` directory as a list of IndexFiles, oldest first. Puts go to the
//! newest file and roll to a new one when it is full; queries walk files newest first.
//!
//! Who calls it: the writer thread (`put`, `detach_expired` after retention, `sync_handles` for
//! the periodic index checkpoint, `flush` at shutdown) — the only mutator; store recovery
//! (`open`, `truncate_after`, `max_phy_offset`); QUERY_MESSAGE reads (`query`).
//!
//! Invariants: `files` are sorted by creation time from their names, and creation times are
//! strictly increasing even if the wall clock steps back, so the order survives a reopen.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::naming::ms_from_file_name;
use super::{file_size, IndexFile};
use crate::StoreError;

pub struct IndexService {
    dir: PathBuf,
    hash_slot_num: u32,
    index_num: u32,
    files: Vec<IndexFile>,
    /// Scratch for `topic#key`, reused across puts.
    key_buf: String,
}

impl IndexService {
    /// Opens every `index/<yyyyMMddHHmmssSSS>` file. Files with other names are ignored; a file
    /// whose size does not fit this configuration or whose header is broken is skipped with a
    /// warning (the index is derived data: losing it only loses key lookups for that period).
    pub fn open(store_root: &Path, hash_slot_num: u32, index_num: u32) -> Result<Self, StoreError> {
        file_size(hash_slot_num, index_num)?;
        let dir = store_root.join("index");
        let mut files = Vec::new();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => Some(entries),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(StoreError::io(&dir, e)),
        };
        for entry in entries.into_iter().flatten() {
            let entry = entry.map_err(|e| StoreError::io(&dir, e))?;
            let path = entry.path();
            let named = entry
                .file_name()
                .to_str()
                .and_then(ms_from_file_name)
                .is_some();
            if !named || !path.is_file() {
                tracing::warn!(path = %path.display(), "not an index file; ignored");
                continue;
            }
            match IndexFile::open(&path, hash_slot_num, index_num) {
                Ok(f) => files.push(f),
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "index file skipped"),
            }
        }
        files.sort_by_key(IndexFile::created_ms);
        Ok(IndexService {
            dir,
            hash_slot_num,
            index_num,
            files,
            key_buf: String::new(),
        })
    }

    /// Indexes `topic#key` for every non-empty key of one message. A message at or below the
    /// newest file's last indexed phy offset is already indexed (recovery re-dispatch) and is
    /// skipped, so re-dispatch never duplicates entries. Messages must come in phy order.
    pub fn put(
        &mut self,
        topic: &str,
        keys: &[&str],
        phy_offset: u64,
        store_timestamp: i64,
    ) -> Result<(), StoreError> {
        let indexed = self.files.last().is_some_and(|f| {
            phy_offset < f.end_phy_offset() || (phy_offset == f.end_phy_offset() && !f.is_empty())
        });
        if indexed {
            return Ok(());
        }
        // One reused buffer for `topic#key`: this runs for every message on the writer thread.
        let mut full_key = std::mem::take(&mut self.key_buf);
        let mut res = Ok(());
        for key in keys.iter().filter(|k| !k.is_empty()) {
            full_key.clear();
            full_key.push_str(topic);
            full_key.push('#');
            full_key.push_str(key);
            match self.writable_file(phy_offset) {
                Ok(f) => match f.put_key(&full_key, phy_offset, store_timestamp) {
                    Ok(put) => assert!(put, "a file that is not full accepts a key"),
                    Err(e) => {
                        res = Err(e);
                        break;
                    }
                },
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        self.key_buf = full_key;
        res
    }

    /// Up to `max` phy offsets for `topic#key` stored within `[begin_ts, end_ts]`, newest file
    /// first, without duplicates. Hash matches only: the caller re-checks the key in each message.
    pub fn query(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin_ts: i64,
        end_ts: i64,
    ) -> Vec<u64> {
        let full_key = format!("{topic}#{key}");
        let mut out: Vec<u64> = Vec::new();
        for f in self.files.iter().rev().filter(|f| !f.is_empty()) {
            if out.len() >= max {
                break;
            }
            if begin_ts <= f.end_timestamp() && end_ts >= f.begin_timestamp() {
                for phy in f.select_phy_offsets(&full_key, max - out.len(), begin_ts, end_ts) {
                    if !out.contains(&phy) {
                        out.push(phy);
                    }
                }
            }
            // Older files hold only older entries.
            if f.begin_timestamp() < begin_ts {
                break;
            }
        }
        out
    }

    /// Abnormal-exit recovery against the checkpoint's index time `ts`: the first file with an
    /// entry at or after `ts` (by its header; the newest file when none has) is cut back to the
    /// entries stored before `ts` and its slots repaired (`repair.rs`); every newer file is
    /// deleted, newest first, so an interruption leaves a prefix. A file left with no entry is
    /// deleted too. Re-dispatch then puts the keys from `max_phy_offset` on. `stored_at` gives
    /// the store timestamp of the commit-log record at a phy offset, if there is one.
    pub fn truncate_after(
        &mut self,
        ts: i64,
        stored_at: &dyn Fn(u64) -> Option<i64>,
    ) -> Result<(), StoreError> {
        let Some(newest) = self.files.len().checked_sub(1) else {
            return Ok(());
        };
        let pos = self
            .files
            .iter()
            .position(|f| f.end_timestamp() >= ts)
            .unwrap_or(newest);
        while self.files.len() > pos + 1 {
            let f = self.files.pop().expect("len checked");
            remove(f)?;
        }
        let kept = self.files[pos].truncate_before(ts, stored_at)?;
        if kept == 0 {
            let f = self.files.pop().expect("pos is the last file");
            remove(f)?;
        } else {
            tracing::info!(path = %self.files[pos].path().display(), kept,
                "index file cut back to the checkpoint");
        }
        Ok(())
    }

    /// A commit log truncated back to `phy`: every entry pointing at or past it goes (the
    /// records appended there next are other messages). Files whose entries all go are deleted,
    /// newest first; the file holding the cut is cut back and msynced (`repair.rs`). Runs on the
    /// writer thread, which then fdatasyncs nothing more: the msync made the cut durable.
    pub fn truncate_from_phy(&mut self, phy: u64) -> Result<(), StoreError> {
        let mut removed_from = None;
        while let Some(f) = self.files.last_mut() {
            if !f.is_empty() && f.truncate_from_phy(phy)? > 0 {
                break;
            }
            let f = self.files.pop().expect("last checked");
            removed_from = f.path().parent().map(Path::to_path_buf);
            remove(f)?;
        }
        match removed_from {
            // The unlinks must not come back after a crash.
            Some(dir) => crate::mapped_file::sync_dir(&dir),
            None => Ok(()),
        }
    }

    /// Files holding entries written since the file created at `from_created_ms` (inclusive),
    /// as `(path, second handle)` pairs, for an fdatasync off the writer thread. The writer passes
    /// the newest file of its previous accepted hand-off, so files rolled in between are synced.
    pub fn sync_handles(
        &self,
        from_created_ms: i64,
    ) -> Result<Vec<(std::path::PathBuf, fs::File)>, StoreError> {
        self.files
            .iter()
            .filter(|f| f.created_ms() >= from_created_ms)
            .map(|f| Ok((f.path().to_owned(), f.try_clone_file()?)))
            .collect()
    }

    /// Creation time of the newest file (0 without files).
    pub fn newest_created_ms(&self) -> i64 {
        self.files.last().map_or(0, IndexFile::created_ms)
    }

    /// Retention (RocketMQ's `deleteExpiredFile`): deletes the oldest files whose last entry
    /// points below `min_phy_offset` (the commit log no longer holds any of their records).
    /// The newest file is kept: it takes new keys. Returns how many files were deleted.
    pub fn delete_expired(&mut self, min_phy_offset: u64) -> Result<usize, StoreError> {
        let mut deleted = 0;
        while let Some(f) = self.detach_expired(min_phy_offset) {
            let path = f.path().to_owned();
            drop(f);
            fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            tracing::info!(path = %path.display(), min_phy_offset, "deleted expired index file");
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Takes the oldest file out of the service if its last entry points below
    /// `min_phy_offset` and it is not the newest; the caller unlinks it (the writer hands it to
    /// the file deleter, see `store::retention::expire_index`).
    pub fn detach_expired(&mut self, min_phy_offset: u64) -> Option<IndexFile> {
        (self.files.len() > 1 && self.files[0].end_phy_offset() < min_phy_offset)
            .then(|| self.files.remove(0))
    }

    /// End phy offset of the newest file (0 without files): where index re-dispatch resumes.
    pub fn max_phy_offset(&self) -> u64 {
        self.files.last().map_or(0, IndexFile::end_phy_offset)
    }

    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.files.iter_mut().try_for_each(IndexFile::flush)
    }

    /// Files oldest first (for recovery and tests).
    pub fn files(&self) -> &[IndexFile] {
        &self.files
    }

    fn writable_file(&mut self, phy_offset: u64) -> Result<&mut IndexFile, StoreError> {
        if self.files.last().is_none_or(IndexFile::is_full) {
            return self.roll(phy_offset);
        }
        Ok(self.files.last_mut().expect("checked non-empty"))
    }

    /// Starts a new file named by the wall clock, kept strictly after the newest file's name.
    fn roll(&mut self, phy_offset: u64) -> Result<&mut IndexFile, StoreError> {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let after_newest = self.files.last().map_or(0, |f| f.created_ms() + 1);
        let begin_phy = self
            .files
            .last()
            .map_or(phy_offset, IndexFile::end_phy_offset);
        // The full file is not msynced here: that would stall the writer on up to ~400 MB of
        // pages. The next index checkpoint fdatasyncs it on the checkpoint thread (it hands over
        // every file created since the last accepted hand-off, this one included), and `flush`
        // covers it at shutdown; until then recovery re-indexes from `indexMsgTimestamp`.
        let f = IndexFile::create(
            &self.dir,
            self.hash_slot_num,
            self.index_num,
            begin_phy,
            now_ms.max(after_newest),
        )?;
        self.files.push(f);
        Ok(self.files.last_mut().expect("just pushed"))
    }
}

/// Unmaps and unlinks a file taken out of the service (recovery, and a truncation of the
/// commit log; retention goes through the file deleter).
fn remove(f: IndexFile) -> Result<(), StoreError> {
    let path = f.path().to_owned();
    drop(f);
    fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
    tracing::warn!(path = %path.display(), "index file past the checkpoint deleted");
    Ok(())
}
