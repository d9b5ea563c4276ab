//! Truncating a running commit log back to an earlier record boundary (Java's
//! `DefaultMessageStore.truncateFiles` / `MappedFileQueue.truncateDirtyFiles`, which an
//! AutoSwitch slave runs when its log went past the point where it agrees with its new master).
//!
//! Called by the writer thread only (`WriterCore::truncate_to`), which first checks the offset
//! (`check_boundary`), collects the queue offsets the dropped records held
//! (`dropped_queue_offsets`), has the consume queues cut, then calls `truncate_to`.
//! Invariants after `truncate_to`: the log ends at the boundary; every byte past it in its
//! segment is zero and every later segment file is gone, all of it fdatasync'd (with the
//! directory), so recovery after a crash finds exactly this end and never a stale record.

use std::collections::HashMap;

use super::{list_segments, CommitLog};
use crate::mapped_file::sync_dir;
use crate::protocol::message::{self, sys_flag, RecordError};
use crate::StoreError;

/// An offset `check_boundary` found to be where a record starts (or the log's end), in
/// `[min_phy_offset, max_phy_offset]`. Only `check_boundary` makes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordBoundary(u64);

impl RecordBoundary {
    pub fn offset(self) -> u64 {
        self.0
    }
}

impl CommitLog {
    /// `Ok` when `offset` lies in `[min, max]` and a record starts there (or it is the end).
    /// Walks the record headers of its segment from the segment's start (a record never spans
    /// two segments, so every segment starts on a boundary). `Invalid` otherwise.
    pub fn check_boundary(&self, offset: u64) -> Result<RecordBoundary, StoreError> {
        let (min, max) = (self.min_phy_offset(), self.wrote);
        if offset < min || offset > max {
            return Err(StoreError::Invalid(format!(
                "offset {offset} is outside the commit log [{min}, {max}]"
            )));
        }
        if offset == max {
            return Ok(RecordBoundary(offset));
        }
        let seg = &self.segments[self.segment_index(offset)];
        let target = (offset - seg.start()) as usize;
        let bytes = seg.bytes();
        let mut pos = 0usize;
        while pos < target {
            // `get`: a size field pointing past the segment ends the walk, never a panic.
            match bytes.get(pos..).map(message::peek_total_size) {
                Some(Ok(total)) if total > 0 => pos += total as usize,
                _ => break,
            }
        }
        if pos != target {
            return Err(StoreError::Invalid(format!(
                "offset {offset} is not where a record of the commit log starts"
            )));
        }
        Ok(RecordBoundary(offset))
    }

    /// For each queue with a dispatched record in `[from, max)`, the smallest queue offset among
    /// them: where that queue's next offset goes back to once those records are gone.
    /// `from` must be a record boundary. `Corrupt` if a record there does not decode.
    pub fn dropped_queue_offsets(
        &self,
        from: RecordBoundary,
    ) -> Result<HashMap<(String, u32), u64>, StoreError> {
        let mut out: HashMap<(String, u32), u64> = HashMap::new();
        let mut pos = from.0;
        while pos < self.wrote {
            let seg = &self.segments[self.segment_index(pos)];
            let off = (pos - seg.start()) as usize;
            match message::decode(&seg.bytes()[off..], false) {
                Ok(rec) => {
                    if sys_flag::is_dispatched(rec.sys_flag)
                        && rec.queue_id >= 0
                        && rec.queue_offset >= 0
                    {
                        let key = (rec.topic.to_string(), rec.queue_id as u32);
                        let qo = rec.queue_offset as u64;
                        out.entry(key)
                            .and_modify(|v| *v = (*v).min(qo))
                            .or_insert(qo);
                    }
                    pos += u64::from(rec.total_size);
                }
                Err(RecordError::Blank { .. }) => pos = seg.end(),
                Err(e) => {
                    return Err(StoreError::Corrupt {
                        path: seg.path().to_path_buf(),
                        offset: off as u64,
                        reason: format!("record to truncate does not decode: {e}"),
                    })
                }
            }
        }
        Ok(out)
    }

    /// Moves the end of the log back to `to`: flushes what was written, removes every segment
    /// after the one holding `to` (newest first, so a crash leaves a contiguous prefix), zeros
    /// that segment from `to` on, fdatasyncs it and the directory. The store timestamp of the
    /// last record is left as it was (an upper bound for the checkpoint, whose records up to
    /// it are all durable now). An error leaves the log unusable: the caller refuses appends.
    pub fn truncate_to(&mut self, to: RecordBoundary) -> Result<(), StoreError> {
        let to = to.0;
        if to == self.wrote {
            return Ok(());
        }
        assert!(
            to >= self.min_phy_offset() && to < self.wrote,
            "a boundary inside the log"
        );
        self.flush()?;
        let idx = self.segment_index(to);
        if let Some(alloc) = self.allocator.as_mut() {
            alloc.discard_pending();
        }
        // Unmapped first; then every file past the kept segment, the allocator's spare
        // included (it lies past all of them), newest first.
        self.segments.truncate(idx + 1);
        let keep_start = self.segments[idx].start();
        for (start, path) in list_segments(&self.dir)?.into_iter().rev() {
            if start > keep_start {
                std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            }
        }
        sync_dir(&self.dir)?;
        let seg = &mut self.segments[idx];
        seg.zero_tail((to - keep_start) as usize)?;
        seg.sync_file()?;
        let next = seg.end();
        tracing::warn!(to, from = self.wrote, "commit log truncated");
        self.active = idx;
        self.wrote = to;
        self.writeback_from = to;
        self.flushed = to;
        self.touched = 0;
        if let Some(alloc) = self.allocator.as_mut() {
            alloc.request(next);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::testkit::record;
    use crate::StoreConfig;

    const SEG: u64 = 64 << 10;

    /// Proves the boundary check takes record starts, a closed segment's blank-marker position
    /// and segment starts, and refuses offsets inside a record or outside the log; and that a
    /// truncation to the blank marker's position reopens that segment: the marker and the next
    /// segment are gone, and the next record closes it again and opens a new next segment.
    #[test]
    fn boundaries_and_a_cut_at_the_blank_marker() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = StoreConfig {
            mapped_file_size_commit_log: SEG,
            ..StoreConfig::with_root(dir.path())
        };
        let mut log = CommitLog::load(&cfg, None).unwrap();
        log.recover_to(0, 0).unwrap();
        let rec = record("T", 0, &[7u8; 1000], "");
        let mut starts = Vec::new();
        while log.max_phy_offset() < SEG + 3000 {
            starts.push(log.append(&rec.bytes, starts.len() as u64, 1).unwrap());
        }
        let last_in_first = *starts.iter().rfind(|&&p| p < SEG).unwrap();
        let marker_at = last_in_first + rec.bytes.len() as u64;
        assert!(marker_at < SEG, "the first segment is closed by a marker");
        for ok in [0, starts[3], marker_at, SEG, log.max_phy_offset()] {
            assert_eq!(log.check_boundary(ok).unwrap().offset(), ok);
        }
        for bad in [
            1,
            starts[3] + 8,
            marker_at + 1,
            SEG + 1,
            log.max_phy_offset() + 1,
        ] {
            assert!(
                matches!(log.check_boundary(bad), Err(StoreError::Invalid(_))),
                "{bad}"
            );
        }
        let dropped = log.dropped_queue_offsets(log.check_boundary(SEG).unwrap());
        let qo_at_seg = starts.iter().position(|&p| p == SEG).unwrap() as u64;
        assert_eq!(dropped.unwrap()[&("T".to_string(), 0)], qo_at_seg);

        log.truncate_to(log.check_boundary(marker_at).unwrap())
            .unwrap();
        assert_eq!(log.max_phy_offset(), marker_at);
        assert_eq!(log.segments().len(), 1);
        assert!(log.segments()[0].bytes()[marker_at as usize..]
            .iter()
            .all(|&b| b == 0));
        // The segment's last bytes are too few for another record: it is closed again by a new
        // marker, and the record opens a new next segment.
        let next = record("T", 0, b"x", "");
        assert!(next.bytes.len() as u64 + 8 > SEG - marker_at);
        assert_eq!(log.append(&next.bytes, 9, 2).unwrap(), SEG);
        let marker = log.segments()[0].bytes()[marker_at as usize..marker_at as usize + 8].to_vec();
        assert_eq!(
            marker,
            [
                ((SEG - marker_at) as u32).to_be_bytes(),
                message::BLANK_MAGIC.to_be_bytes()
            ]
            .concat()
        );
    }
}
