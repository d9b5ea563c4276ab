//! ConsumeQueue: the per-(topic, queue id) logical index into the commit log, in RocketMQ's
//! on-disk format byte for byte (Java's `ConsumeQueue`). Files live at
//! `consumequeue/<topic>/<queueId>/<%020d start byte>`, each `file_size` bytes of 20-byte
//! big-endian units `phy_offset i64 | size i32 | tags_code i64`; logical offset N is at byte N×20.
//!
//! Who calls it: store recovery opens every queue (`list_queues` + `open`), truncates dirty units
//! and re-dispatches; afterwards the queue's owner shard is the only mutator (`put` from the
//! writer's published units, `delete_expired` from retention) and reader (`get`, timestamp search).
//!
//! Invariants: `files` are contiguous and ascending; `min_offset <= max_offset`; every unit in
//! `[first file start, max_offset)` passes the recovery test (written or blank) and every byte from
//! `max_offset` to the end of the last file is zero, so a reopen finds the same `max_offset`.
//! Blank gap units `(0, i32::MAX, 0)` are stored but never returned by `get`.

mod maintenance;
mod mapped;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub use crate::constants::CQ_UNIT_SIZE;
use crate::StoreError;
pub use maintenance::{list_queues, CqCutFiles};
use mapped::{parse_file_name, CqFile, RawUnit};

/// One ConsumeQueue unit with the signed Java fields turned into what they mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqUnit {
    pub phy_offset: u64,
    pub size: u32,
    pub tags_code: i64,
}

impl CqUnit {
    /// `None` for blank or unwritten units (they are not messages).
    fn from_raw(raw: RawUnit) -> Option<CqUnit> {
        if raw.is_blank() || !raw.is_written() {
            return None;
        }
        Some(CqUnit {
            phy_offset: raw.phy_offset as u64,
            size: raw.size as u32,
            tags_code: raw.tags_code,
        })
    }

    fn to_raw(self) -> Result<RawUnit, StoreError> {
        let phy_offset = i64::try_from(self.phy_offset)
            .map_err(|_| StoreError::Invalid(format!("phy_offset {} > i64", self.phy_offset)))?;
        // size i32::MAX is reserved for blank units; real records are far smaller.
        if self.size == 0 || self.size >= i32::MAX as u32 {
            return Err(StoreError::Invalid(format!("unit size {}", self.size)));
        }
        Ok(RawUnit {
            phy_offset,
            size: self.size as i32,
            tags_code: self.tags_code,
        })
    }

    fn end(&self) -> u64 {
        self.phy_offset + u64::from(self.size)
    }
}

/// Files to fdatasync for one queue (see `ConsumeQueue::take_sync_job`).
#[derive(Debug)]
pub struct CqSyncJob {
    pub paths: Vec<PathBuf>,
    dirty: (u64, u64),
}

impl CqSyncJob {
    /// fdatasync of every file (any descriptor of a file syncs its page-cache pages, including
    /// those dirtied through the shard's mapping). Blocking: call off the shard's core.
    pub fn sync(&self) -> Result<(), StoreError> {
        for p in &self.paths {
            let f = fs::File::open(p).map_err(|e| StoreError::io(p, e))?;
            f.sync_data().map_err(|e| StoreError::io(p, e))?;
        }
        Ok(())
    }
}

pub struct ConsumeQueue {
    topic: String,
    queue_id: u32,
    dir: PathBuf,
    file_size: u64,
    files: Vec<CqFile>,
    min_offset: u64,
    max_offset: u64,
    max_phy_offset: Option<u64>,
    /// Logical byte range written (or zeroed) since the last successful flush.
    dirty: Option<(u64, u64)>,
}

impl ConsumeQueue {
    /// Loads existing files (write position = first unit with size <= 0 or phy_offset < 0) or
    /// starts empty. The directory is created only by the first `put`.
    pub fn open(
        store_root: &Path,
        topic: &str,
        queue_id: u32,
        file_size: u64,
    ) -> Result<Self, StoreError> {
        validate_topic(topic)?;
        if file_size == 0 || !file_size.is_multiple_of(CQ_UNIT_SIZE) || file_size > i32::MAX as u64
        {
            return Err(StoreError::Invalid(format!(
                "consume queue file size {file_size} must be a positive multiple of {CQ_UNIT_SIZE}"
            )));
        }
        let dir = queue_dir(store_root, topic, queue_id);
        let mut cq = ConsumeQueue {
            topic: topic.to_owned(),
            queue_id,
            dir,
            file_size,
            files: Vec::new(),
            min_offset: 0,
            max_offset: 0,
            max_phy_offset: None,
            dirty: None,
        };
        cq.load()?;
        Ok(cq)
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    /// Smallest logical offset still present (first non-blank unit not expired).
    pub fn min_offset(&self) -> u64 {
        self.min_offset
    }

    /// Next logical offset to be written.
    pub fn max_offset(&self) -> u64 {
        self.max_offset
    }

    /// `phy_offset + size` of the last non-blank unit, `None` when there is none.
    pub fn max_phy_offset(&self) -> Option<u64> {
        self.max_phy_offset
    }

    /// Writes `unit` at logical `queue_offset`. Below `max_offset` it is already there (recovery
    /// re-dispatch): Ok without change. Above `max_offset` the gap is filled with blank units; an
    /// empty queue instead starts at the file containing `queue_offset` (RocketMQ's fillPreBlank).
    pub fn put(&mut self, queue_offset: u64, unit: CqUnit) -> Result<(), StoreError> {
        let raw = unit.to_raw()?;
        if queue_offset < self.max_offset {
            if self.get(queue_offset).is_some_and(|old| old != unit) {
                tracing::warn!(topic = %self.topic, queue_id = self.queue_id, queue_offset,
                    ?unit, "re-dispatched unit differs from the stored one; keeping the stored one");
            }
            return Ok(());
        }
        // Java keeps byte positions in a long: the end of this unit must fit one.
        let fits = queue_offset
            .checked_add(1)
            .and_then(|n| n.checked_mul(CQ_UNIT_SIZE))
            .is_some_and(|b| b <= i64::MAX as u64);
        if !fits {
            return Err(StoreError::Invalid(format!(
                "queue offset {queue_offset} too large"
            )));
        }
        if self.files.is_empty() {
            fs::create_dir_all(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
            let start = queue_offset * CQ_UNIT_SIZE / self.file_size * self.file_size;
            self.files
                .push(CqFile::create(&self.dir, start, self.file_size)?);
            self.max_offset = start / CQ_UNIT_SIZE;
            self.min_offset = self.max_offset;
        }
        let had_messages = self.min_offset < self.max_offset;
        while self.max_offset < queue_offset {
            self.write_raw(self.max_offset, RawUnit::BLANK)?;
            self.max_offset += 1;
        }
        self.write_raw(queue_offset, raw)?;
        self.max_offset = queue_offset + 1;
        self.max_phy_offset = Some(unit.end());
        if !had_messages {
            // Nothing readable before: the gap (if any) is blank, so the queue starts here.
            self.min_offset = queue_offset;
        }
        Ok(())
    }

    /// The unit at `queue_offset`; `None` outside `[min_offset, max_offset)` or for a blank unit.
    pub fn get(&self, queue_offset: u64) -> Option<CqUnit> {
        if queue_offset < self.min_offset || queue_offset >= self.max_offset {
            return None;
        }
        CqUnit::from_raw(self.read_raw(queue_offset))
    }

    /// msync of everything written or zeroed since the last flush.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        let Some((lo, hi)) = self.dirty else {
            return Ok(());
        };
        for f in &self.files {
            let f_end = f.start + f.len() as u64;
            let from = lo.max(f.start);
            let to = hi.min(f_end);
            if from < to {
                f.flush_range((from - f.start) as usize, (to - f.start) as usize)?;
            }
        }
        self.dirty = None;
        Ok(())
    }

    /// Takes what `flush` would sync, for a sync done elsewhere (the owner shard must not
    /// block its core on fdatasync): the files holding dirty bytes, and the dirty range to hand
    /// back with `restore_dirty` if that sync fails. `None` when nothing is dirty.
    pub fn take_sync_job(&mut self) -> Option<CqSyncJob> {
        let (lo, hi) = self.dirty.take()?;
        let paths = self
            .files
            .iter()
            .filter(|f| f.start < hi && lo < f.start + f.len() as u64)
            .map(|f| f.path.clone())
            .collect();
        Some(CqSyncJob {
            paths,
            dirty: (lo, hi),
        })
    }

    /// Marks a failed sync job's range dirty again so the next flush retries it.
    pub fn restore_dirty(&mut self, job: &CqSyncJob) {
        self.mark_dirty(job.dirty.0, job.dirty.1);
    }

    /// Removes every file of this queue and its directory.
    pub fn destroy(self) -> Result<(), StoreError> {
        let dir = self.dir.clone();
        drop(self);
        match fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io(&dir, e)),
        }
        // The topic directory goes too once its last queue is gone; a sibling queue keeps it.
        if let Some(topic_dir) = dir.parent() {
            if let Err(e) = fs::remove_dir(topic_dir) {
                tracing::debug!(dir = %topic_dir.display(), error = %e, "topic directory kept");
            }
        }
        Ok(())
    }

    // ---- internals shared with maintenance.rs ----

    fn first_offset(&self) -> u64 {
        self.files.first().map_or(0, |f| f.start / CQ_UNIT_SIZE)
    }

    /// (file index, byte position in that file) of a logical offset at or after the first file.
    fn locate(&self, queue_offset: u64) -> (usize, usize) {
        let first = self.files.first().expect("locate needs a file").start;
        let byte = queue_offset * CQ_UNIT_SIZE;
        assert!(byte >= first, "offset {queue_offset} before the first file");
        let rel = byte - first;
        (
            (rel / self.file_size) as usize,
            (rel % self.file_size) as usize,
        )
    }

    fn read_raw(&self, queue_offset: u64) -> RawUnit {
        let (idx, pos) = self.locate(queue_offset);
        self.files[idx].read(pos)
    }

    /// Writes one unit, creating the next file when the offset is the first byte past the last.
    fn write_raw(&mut self, queue_offset: u64, raw: RawUnit) -> Result<(), StoreError> {
        let (idx, pos) = self.locate(queue_offset);
        if idx == self.files.len() {
            let start = self.files[idx - 1].start + self.file_size;
            self.files
                .push(CqFile::create(&self.dir, start, self.file_size)?);
        }
        assert!(idx < self.files.len(), "writes never skip a file");
        self.files[idx].write(pos, raw);
        let byte = queue_offset * CQ_UNIT_SIZE;
        self.mark_dirty(byte, byte + CQ_UNIT_SIZE);
        Ok(())
    }

    fn mark_dirty(&mut self, lo: u64, hi: u64) {
        self.dirty = Some(match self.dirty {
            None => (lo, hi),
            Some((a, b)) => (a.min(lo), b.max(hi)),
        });
    }

    /// First non-blank unit in `[from, max_offset)` accepted by `keep`, or `max_offset`.
    fn first_unit_from(&self, from: u64, keep: impl Fn(RawUnit) -> bool) -> u64 {
        (from.max(self.first_offset())..self.max_offset)
            .find(|&q| {
                let raw = self.read_raw(q);
                !raw.is_blank() && keep(raw)
            })
            .unwrap_or(self.max_offset)
    }

    /// `phy_offset + size` of the last non-blank unit below `max_offset`.
    fn scan_max_phy_offset(&self) -> Option<u64> {
        (self.first_offset()..self.max_offset)
            .rev()
            .map(|q| self.read_raw(q))
            .find(|raw| !raw.is_blank())
            .and_then(CqUnit::from_raw)
            .map(|u| u.end())
    }

    fn load(&mut self) -> Result<(), StoreError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io(&self.dir, e)),
        };
        let mut found: Vec<(u64, PathBuf, u64)> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io(&self.dir, e))?;
            let path = entry.path();
            let start = entry.file_name().to_str().and_then(parse_file_name);
            let meta = entry.metadata().map_err(|e| StoreError::io(&path, e))?;
            match start {
                Some(start) if meta.is_file() => found.push((start, path, meta.len())),
                _ => tracing::warn!(path = %path.display(), "not a consume queue file; ignored"),
            }
        }
        found.sort_by_key(|(start, _, _)| *start);
        // A zero-length last file is a creation cut short by a crash: nothing was written to it.
        if found.last().is_some_and(|(_, _, len)| *len == 0) {
            let (_, path, _) = found.pop().expect("checked non-empty");
            fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
        }
        for (i, (start, path, _)) in found.iter().enumerate() {
            let expected = found[0].0 + i as u64 * self.file_size;
            if !start.is_multiple_of(self.file_size) || *start != expected {
                return Err(StoreError::Corrupt {
                    path: path.clone(),
                    offset: 0,
                    reason: format!("file start {start} breaks the sequence (expected {expected})"),
                });
            }
        }
        for (start, path, _) in found {
            self.files.push(CqFile::open(path, start, self.file_size)?);
        }
        self.recover_write_position()?;
        self.min_offset = self.first_unit_from(self.first_offset(), |_| true);
        self.max_phy_offset = self.scan_max_phy_offset();
        Ok(())
    }

    /// Finds the write position like RocketMQ's recover: scan from the third-last file (earlier
    /// files are full by construction); the first unwritten unit ends the queue, and files after
    /// it hold nothing valid, so they are deleted.
    fn recover_write_position(&mut self) -> Result<(), StoreError> {
        let Some(last) = self.files.last() else {
            return Ok(());
        };
        let mut end = last.start + self.file_size;
        let mut cut_after = self.files.len();
        for i in self.files.len().saturating_sub(3)..self.files.len() {
            let pos = self.files[i].scan_write_position();
            if pos < self.files[i].len() {
                end = self.files[i].start + pos as u64;
                cut_after = i + 1;
                break;
            }
        }
        // Keep a file that is empty but is the first one: it remembers where the queue starts.
        let keep = cut_after.max(1);
        for f in self.files.drain(keep..) {
            tracing::warn!(path = %f.path.display(), "consume queue file past the write position; deleted");
            fs::remove_file(&f.path).map_err(|e| StoreError::io(&f.path, e))?;
        }
        self.max_offset = end / CQ_UNIT_SIZE;
        // Bytes past the write position must read as zero for the next reopen to agree.
        let (idx, pos) = self.locate_end();
        if let Some(f) = self.files.get_mut(idx) {
            let len = f.len();
            let f_end = f.start + len as u64;
            if f.zero_if_nonzero(pos, len) {
                tracing::warn!(path = %f.path.display(), pos, "junk after the write position; zeroed");
                self.mark_dirty(end, f_end);
            }
        }
        Ok(())
    }

    /// (file index, position) of `max_offset`; idx == files.len() when the last file is full.
    fn locate_end(&self) -> (usize, usize) {
        let first = self.files.first().map_or(0, |f| f.start);
        let rel = self.max_offset * CQ_UNIT_SIZE - first;
        (
            (rel / self.file_size) as usize,
            (rel % self.file_size) as usize,
        )
    }
}

fn queue_dir(store_root: &Path, topic: &str, queue_id: u32) -> PathBuf {
    store_root
        .join("consumequeue")
        .join(topic)
        .join(queue_id.to_string())
}

/// The topic becomes a directory name: refuse anything that could escape or alias it.
fn validate_topic(topic: &str) -> Result<(), StoreError> {
    if topic.is_empty() || topic == "." || topic == ".." || topic.contains(['/', '\0']) {
        return Err(StoreError::Invalid(format!(
            "topic {topic:?} is not a valid directory name"
        )));
    }
    Ok(())
}
