//! Crash repair of one IndexFile (`IndexService::truncate_after`): keep the entries the
//! checkpoint's `indexMsgTimestamp` proves durable, drop the rest, and make the hash slots agree
//! with what is kept, so re-dispatch resumes right after the checkpoint instead of re-indexing
//! the whole file.
//!
//! Why the prefix before the checkpoint time is sound: the writer puts entries in phy order
//! with store timestamps from the wall clock, and records a timestamp only after an fdatasync
//! of every file holding entries up to it succeeded. So every entry stored before that time is
//! on disk as written. Entries at or after it may be missing, torn or stale after power loss;
//! slots may point at them (a slot page written back without its entry page) or may lag behind
//! the entries (the other way round). Each slot write and each 4-byte field lies within one
//! page, so a slot holds either a value it had at the checkpoint or a later entry number.
//!
//! Invariants after `truncate_before`: entries `1..index_count` are the kept prefix; every slot
//! holds 0 or the newest kept entry with its hash; the header matches; the file is msynced.
//! Cost: one pass over the slots and one over the kept entries (crash recovery only).
//!
//! The same slot repair serves `truncate_from_phy`: a running commit log truncated back to an
//! earlier record (AutoSwitch replication), whose dropped records' keys must not lead a query
//! to whatever is appended at those offsets next.

use super::{IndexFile, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE};
use crate::StoreError;

impl IndexFile {
    /// Keeps the entries stored before `ts` (see the module docs) and drops every later one.
    /// `stored_at(phy)` gives the exact store timestamp of the record at `phy` when the commit
    /// log has a record there: entries keep only second precision, so it decides entries in the
    /// second `ts` falls in. Returns how many entries are kept; with none kept the file is left
    /// untouched for the caller to delete.
    pub(super) fn truncate_before(
        &mut self,
        ts: i64,
        stored_at: &dyn Fn(u64) -> Option<i64>,
    ) -> Result<u32, StoreError> {
        let keep = self.durable_prefix(ts, stored_at);
        if keep <= 1 {
            return Ok(0);
        }
        let mut used_slots = self.clear_slots_from(keep);
        used_slots += self.relink_slots(keep);
        self.index_count = keep;
        self.hash_slot_count = used_slots;
        self.end_phy_offset = self.read_i64(self.entry_pos(keep - 1) + 4);
        let (earliest, latest) = self.entry_time_range(keep - 1);
        // An upper bound of the real time, which lies before `ts`.
        self.end_timestamp = latest.min(ts.saturating_sub(1)).max(earliest);
        self.write_header();
        self.flush()?;
        Ok((keep - 1) as u32)
    }

    /// Drops every entry pointing at or past `phy` (a commit log truncated back there) and makes
    /// the slots agree, as `truncate_before` does; the header's end becomes the last kept
    /// entry's (its time an upper bound) and the file is msynced. Returns how many entries are
    /// kept; with none kept the file is left untouched for the caller to delete.
    pub(super) fn truncate_from_phy(&mut self, phy: u64) -> Result<u32, StoreError> {
        let cut = i64::try_from(phy).unwrap_or(i64::MAX);
        // Entries are put in phy order: the first one at or past the cut starts the dropped run.
        let keep = (1..self.index_count)
            .find(|&i| self.read_i64(self.entry_pos(i) + 4) >= cut)
            .unwrap_or(self.index_count);
        if keep == self.index_count {
            return Ok((keep - 1).max(0) as u32);
        }
        if keep <= 1 {
            return Ok(0);
        }
        let mut used_slots = self.clear_slots_from(keep);
        used_slots += self.relink_slots(keep);
        self.index_count = keep;
        self.hash_slot_count = used_slots;
        self.end_phy_offset = self.read_i64(self.entry_pos(keep - 1) + 4);
        self.end_timestamp = self.entry_time_range(keep - 1).1;
        self.write_header();
        self.flush()?;
        Ok((keep - 1) as u32)
    }

    /// One past the last entry kept: the longest run of entries from 1 that are stored before
    /// `ts`, in phy order, less the entries of the last message in it (its other keys may lie
    /// past the cut, and re-dispatch skips a message at the file's end phy offset, so the whole
    /// message is put again).
    fn durable_prefix(&self, ts: i64, stored_at: &dyn Fn(u64) -> Option<i64>) -> i32 {
        let mut keep = 1;
        let mut last_phy = None;
        for i in 1..self.index_count {
            let pos = self.entry_pos(i);
            let phy = self.read_i64(pos + 4);
            let diff_s = self.read_i32(pos + 12);
            if phy < 0 || diff_s < 0 || last_phy.is_some_and(|p| phy < p) {
                break; // not an entry the writer made: torn or never written
            }
            let (earliest, latest) = self.entry_time_range(i);
            let before = if latest < ts {
                true
            } else if earliest >= ts {
                false
            } else {
                stored_at(phy as u64).is_some_and(|t| t < ts)
            };
            if !before {
                break;
            }
            last_phy = Some(phy);
            keep = i + 1;
        }
        if let Some(p) = last_phy {
            while keep > 1 && self.read_i64(self.entry_pos(keep - 1) + 4) == p {
                keep -= 1;
            }
        }
        keep
    }

    /// Bounds of the store time of entry `i`: entries hold whole seconds since the file's first
    /// entry, whose time is the header's begin timestamp exactly.
    fn entry_time_range(&self, i: i32) -> (i64, i64) {
        let diff_s = self.read_i32(self.entry_pos(i) + 12);
        let earliest = self
            .begin_timestamp
            .saturating_add(i64::from(diff_s) * 1000);
        let latest = if i == 1 {
            earliest
        } else {
            earliest.saturating_add(999)
        };
        (earliest, latest)
    }

    /// Zeros every slot that names an entry at or past `keep` (or no entry at all); returns how
    /// many slots still name one. Zero slots are only read, so the sparse file stays sparse.
    fn clear_slots_from(&mut self, keep: i32) -> i32 {
        let mut used = 0;
        for slot in 0..self.hash_slot_num {
            let pos = (INDEX_HEADER_SIZE + u64::from(slot) * INDEX_SLOT_SIZE) as usize;
            let v = self.read_i32(pos);
            if v == 0 {
                continue;
            }
            if v < 0 || v >= keep {
                self.write(pos, &0i32.to_be_bytes());
            } else {
                used += 1;
            }
        }
        used
    }

    /// Points each slot at the newest kept entry with its hash (a slot value below `keep` is
    /// one the slot really had, so the newest of it and the entries wins). Returns how many
    /// slots went from empty to used.
    fn relink_slots(&mut self, keep: i32) -> i32 {
        let mut newly_used = 0;
        for i in 1..keep {
            let hash = self.read_i32(self.entry_pos(i));
            let pos = self.slot_pos(hash);
            let v = self.read_i32(pos);
            if v < i {
                if v == 0 {
                    newly_used += 1;
                }
                self.write(pos, &i.to_be_bytes());
            }
        }
        newly_used
    }
}
