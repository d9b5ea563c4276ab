//! The ConsumeQueue operations that are not the append path: recovery truncation
//! (`truncate_dirty`, and `truncate_from` for a running commit log truncated back), retention (`delete_expired`), time-based search and the directory walk
//! that finds every queue at startup. Same owner and invariants as `consume_queue/mod.rs`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{ConsumeQueue, CqUnit, CQ_UNIT_SIZE};

/// What a consume queue's cut leaves to do off its owner's core (`ConsumeQueue::truncate_from`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CqCutFiles {
    /// Files left without units, unmapped: to unlink.
    pub remove: Vec<PathBuf>,
    /// To fsync once those are unlinked: the last kept file and the queue's directory.
    pub sync: Vec<PathBuf>,
}
use crate::StoreError;

impl ConsumeQueue {
    /// Drops every unit whose `phy_offset + size > phy_limit` (it points past the recovered end of
    /// the commit log), zeroing it on disk; blank units trailing the kept ones go too. Files left
    /// empty are deleted, except the first, which remembers where the queue starts.
    pub fn truncate_dirty(&mut self, phy_limit: u64) -> Result<(), StoreError> {
        for path in self.cut_units(phy_limit) {
            fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
        }
        Ok(())
    }

    /// `truncate_dirty` for a running commit log truncated back to `phy_offset`, a record
    /// boundary (a unit before it ends at or before it), on the queue's owner shard: the units
    /// at or past it go at once, but the files left empty are only unmapped and named, for the
    /// caller to unlink off the shard's core; with them it names what to fsync so the cut
    /// survives a crash (the last kept file and the queue's directory). Nothing when no unit went.
    pub fn truncate_from(&mut self, phy_offset: u64) -> CqCutFiles {
        let before = (self.max_offset, self.files.len());
        let remove = self.cut_units(phy_offset);
        if (self.max_offset, self.files.len()) == before {
            return CqCutFiles::default();
        }
        let mut sync: Vec<PathBuf> = self
            .files
            .last()
            .map(|f| f.path.clone())
            .into_iter()
            .collect();
        sync.push(self.dir.clone());
        CqCutFiles { remove, sync }
    }

    /// The cut itself: units past `phy_limit` zeroed, files left empty (but the first) taken
    /// out of the queue and unmapped; returns their paths, still on disk.
    fn cut_units(&mut self, phy_limit: u64) -> Vec<PathBuf> {
        if self.max_phy_offset.is_none_or(|end| end <= phy_limit) {
            return Vec::new();
        }
        let floor = self.first_offset();
        let mut new_max = self.max_offset;
        let mut new_max_phy = None;
        while new_max > floor {
            let raw = self.read_raw(new_max - 1);
            if !raw.is_blank() {
                if let Some(unit) = CqUnit::from_raw(raw).filter(|u| u.end() <= phy_limit) {
                    new_max_phy = Some(unit.end());
                    break;
                }
            }
            new_max -= 1;
        }
        let cut_byte = new_max * CQ_UNIT_SIZE;
        let old_end_byte = self.max_offset * CQ_UNIT_SIZE;
        let keep = self
            .files
            .iter()
            .position(|f| f.start >= cut_byte)
            .unwrap_or(self.files.len())
            .max(1);
        let removed = self.files.drain(keep..).map(|f| f.path.clone()).collect();
        // Zero the dropped units still inside kept files (only the last kept file can hold any).
        if let Some(f) = self.files.last_mut() {
            let f_end = f.start + f.len() as u64;
            let from = cut_byte.max(f.start);
            let to = old_end_byte.min(f_end);
            if from < to {
                f.zero((from - f.start) as usize, (to - f.start) as usize);
                self.mark_dirty(from, to);
            }
        }
        self.max_offset = new_max;
        self.min_offset = self.min_offset.min(new_max);
        self.max_phy_offset = new_max_phy;
        removed
    }

    /// Deletes whole files whose last (non-blank) unit's phy_offset is below `min_phy_offset` (the commit log
    /// no longer holds them), never the last file, then moves `min_offset` to the first unit at or
    /// above `min_phy_offset`. Returns how many files were deleted. Also serves as RocketMQ's
    /// `correctMinOffset` at startup.
    pub fn delete_expired(&mut self, min_phy_offset: u64) -> Result<usize, StoreError> {
        let min_phy = i64::try_from(min_phy_offset).unwrap_or(i64::MAX);
        let mut deleted = 0;
        while self.files.len() > 1 && self.first_file_expired(min_phy) {
            let f = self.files.remove(0);
            fs::remove_file(&f.path).map_err(|e| StoreError::io(&f.path, e))?;
            deleted += 1;
        }
        let from = self.min_offset.max(self.first_offset());
        self.min_offset = self.first_unit_from(from, |raw| raw.phy_offset >= min_phy);
        Ok(deleted)
    }

    /// The first file (full, since it is not the last) is expired when its last non-blank unit
    /// points below `min_phy`; blank gap units carry no position, and an all-blank file holds
    /// nothing readable.
    fn first_file_expired(&self, min_phy: i64) -> bool {
        let f = &self.files[0];
        (0..f.len())
            .step_by(CQ_UNIT_SIZE as usize)
            .rev()
            .map(|pos| f.read(pos))
            .find(|raw| !raw.is_blank())
            .is_none_or(|raw| raw.phy_offset < min_phy)
    }

    /// RocketMQ's `getOffsetInQueueByTime` over `[min_offset, max_offset)`, by binary search on
    /// store timestamps (which grow with the queue offset):
    /// - lower (`upper == false`): the smallest offset whose timestamp is >= `ts`; `max_offset`
    ///   when every message is older;
    /// - upper: the largest offset whose timestamp is <= `ts`; 0 when every message is newer
    ///   (RocketMQ returns 0 there, not `min_offset`).
    ///
    /// A blank unit or one whose timestamp `store_ts` cannot read (its commit-log segment is gone)
    /// counts as older than any `ts`.
    pub fn search_offset_by_timestamp(
        &self,
        ts: i64,
        upper: bool,
        store_ts: &mut dyn FnMut(CqUnit) -> Option<i64>,
    ) -> u64 {
        let mut time_at = |q: u64| self.get(q).and_then(&mut *store_ts);
        // First offset in [lo, hi) where `after(time)` holds; `after` is monotone over the queue.
        let mut lo = self.min_offset;
        let mut hi = self.max_offset;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let after = match time_at(mid) {
                None => false,
                Some(t) if upper => t > ts,
                Some(t) => t >= ts,
            };
            if after {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        match (upper, lo) {
            (false, first_not_older) => first_not_older,
            (true, first_newer) if first_newer == self.min_offset => 0,
            (true, first_newer) => first_newer - 1,
        }
    }
}

/// Lists the (topic, queue_id) pairs that have a directory under `store_root/consumequeue`,
/// sorted. Names that are not UTF-8 topics or decimal u32 queue ids, and plain files, are skipped.
pub fn list_queues(store_root: &Path) -> Result<Vec<(String, u32)>, StoreError> {
    let root = store_root.join("consumequeue");
    let topics = match fs::read_dir(&root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(&root, e)),
    };
    let mut out = Vec::new();
    for topic_entry in topics {
        let topic_entry = topic_entry.map_err(|e| StoreError::io(&root, e))?;
        let topic_path = topic_entry.path();
        let Some(topic) = topic_entry.file_name().to_str().map(str::to_owned) else {
            tracing::warn!(path = %topic_path.display(), "topic directory name is not UTF-8; skipped");
            continue;
        };
        if !topic_path.is_dir() {
            continue;
        }
        let queues = fs::read_dir(&topic_path).map_err(|e| StoreError::io(&topic_path, e))?;
        for queue_entry in queues {
            let queue_entry = queue_entry.map_err(|e| StoreError::io(&topic_path, e))?;
            let queue_id = queue_entry.file_name().to_str().and_then(parse_queue_id);
            match queue_id {
                Some(id) if queue_entry.path().is_dir() => out.push((topic.clone(), id)),
                _ => {
                    tracing::warn!(path = %queue_entry.path().display(), "not a queue directory; skipped")
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Plain decimal digits only (no sign, no spaces), within u32.
fn parse_queue_id(name: &str) -> Option<u32> {
    if name.is_empty() || name.len() > 10 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}
