//! CommitLog: the sequence of fixed-size segments holding stored-message records back to back
//! (each file named by its start offset, `%020d`, as in Java's `CommitLog`), the write position
//! and the flushed position. The writer places a batch's records (`place`), patches them in
//! their own buffers, and writes them with pwritev (`write_placed`) before anything is
//! published: no staging copy.
//!
//! Owned and mutated only by the writer thread (loaded and truncated by `store::open` before the
//! writer starts). Invariants: segments are contiguous (`start = first + i * size`); the write
//! position lies strictly inside the active segment (a record is written only if 8 bytes remain
//! after it, else a `[remaining][BLANK_MAGIC]` marker closes the segment); bytes past the write
//! position are zero; segments after the active one are spare, all-zero, preallocated files.

use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::allocator::SegmentAllocator;
use crate::config::{FlushDiskType, StoreConfig};
use crate::constants::OS_PAGE_SIZE;
use crate::fault::{FaultHook, FaultPoint};
use crate::files::StoreLock;
use crate::mapped_file::{parse_segment_name, sync_dir, MappedFile, Warm};
use crate::protocol::message::{self, BLANK_MAGIC, BLANK_MARKER_LEN};
use crate::recycle::RecyclePool;
use crate::runtime::placement::ThreadPlan;
use crate::warm_gate::WarmGate;
use crate::StoreError;

mod truncate;
pub use truncate::RecordBoundary;

/// Records per pwritev call (IOV_MAX is 1024 on Linux).
const IOV_BATCH: usize = 1024;
/// SYNC_FLUSH: the writer starts writeback once this many bytes of whole pages await it
/// (`write_run`; in 3 rounds against 4 KiB and 32 KiB, 16 KiB did as well or better in both
/// SYNC bench shapes, within noise).
const WRITEBACK_MIN_BYTES: u64 = 16 << 10;
/// The zeros that complete a write's last page in a warmed segment (`write_placed`).
static ZERO_PAGE: [u8; OS_PAGE_SIZE as usize] = [0; OS_PAGE_SIZE as usize];

pub struct CommitLog {
    dir: PathBuf,
    segment_size: u64,
    segments: Vec<MappedFile>,
    active: usize,
    wrote: u64,
    flushed: u64,
    max_record_len: usize,
    fault: Option<FaultHook>,
    warm: bool,
    /// SYNC_FLUSH: start writeback of completed pages as they accumulate (`write_run`).
    start_writeback: bool,
    /// Where the allocator thread runs (`StoreConfig::threads`).
    threads: ThreadPlan,
    /// Where the pages whose writeback was not started yet begin.
    writeback_from: u64,
    allocator: Option<SegmentAllocator>,
    /// Retired segments kept for reuse; shared with the allocator and the file deleter.
    pool: Arc<RecyclePool>,
    last_store_timestamp: i64,
    flushed_store_timestamp: i64,
    lock: Option<StoreLock>,
    /// End of the furthest byte a failed write may have left past `wrote` (zeroed on rollback).
    touched: u64,
}

/// Where a batch started, so a failed batch can be undone (`CommitLog::rollback`).
#[derive(Clone, Copy, Debug)]
pub struct AppendMark {
    wrote: u64,
    active: usize,
    last_store_timestamp: i64,
}

impl CommitLog {
    /// Opens the segments under `<root>/commitlog`, sorted by start offset. The write position
    /// is unknown until recovery calls `recover_to`.
    pub fn load(cfg: &StoreConfig, lock: Option<StoreLock>) -> Result<Self, StoreError> {
        let dir = cfg.commit_log_dir();
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
        let size = cfg.mapped_file_size_commit_log;
        let mut names = list_segments(&dir)?;
        // A zero-length newest file is an interrupted creation: drop it.
        if let Some(&(start, ref path)) = names.last() {
            let len = std::fs::metadata(path)
                .map_err(|e| StoreError::io(path, e))?
                .len();
            if len == 0 {
                std::fs::remove_file(path).map_err(|e| StoreError::io(path, e))?;
                tracing::warn!(start, "removed zero-length commit-log segment");
                names.pop();
            }
        }
        let pool = Arc::new(RecyclePool::open(
            &dir,
            size,
            cfg.recycle_commit_log_segments,
            std::time::Duration::from_millis(cfg.recycle_quarantine_ms),
        )?);
        let mut segments = Vec::with_capacity(names.len());
        for (i, (start, path)) in names.iter().enumerate() {
            let expect = names[0].0 + i as u64 * size;
            if *start % size != 0 || *start != expect {
                return Err(StoreError::Corrupt {
                    path: path.clone(),
                    offset: 0,
                    reason: format!(
                        "segment start {start} breaks the sequence (expected {expect})"
                    ),
                });
            }
            segments.push(MappedFile::open(path, *start, size)?);
        }
        Ok(CommitLog {
            dir,
            segment_size: size,
            segments,
            active: 0,
            wrote: 0,
            flushed: 0,
            max_record_len: cfg.max_record_len(),
            fault: cfg.fault.clone(),
            warm: cfg.warm_segments(),
            start_writeback: cfg.flush_disk_type == FlushDiskType::SyncFlush,
            threads: cfg.threads,
            writeback_from: 0,
            allocator: None,
            pool,
            last_store_timestamp: 0,
            flushed_store_timestamp: 0,
            lock,
            touched: 0,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn segment_size(&self) -> u64 {
        self.segment_size
    }
    pub fn segments(&self) -> &[MappedFile] {
        &self.segments
    }
    /// Retired segments kept for reuse (the deleter fills it, the allocator takes from it).
    pub fn recycle_pool(&self) -> Arc<RecyclePool> {
        self.pool.clone()
    }
    /// Next byte to be written (= end of the last record).
    pub fn max_phy_offset(&self) -> u64 {
        self.wrote
    }
    pub fn flushed_phy_offset(&self) -> u64 {
        self.flushed
    }
    pub fn min_phy_offset(&self) -> u64 {
        self.segments.first().map_or(self.wrote, MappedFile::start)
    }
    /// Store timestamp of the newest record known durable.
    pub fn flushed_store_timestamp(&self) -> i64 {
        self.flushed_store_timestamp
    }
    pub fn dirty_bytes(&self) -> u64 {
        self.wrote - self.flushed
    }

    /// Sets the write position to `end` after recovery: zeros the tail of its segment, deletes
    /// segments past it, makes sure the active segment exists, starts the allocator.
    pub fn recover_to(&mut self, end: u64, last_store_timestamp: i64) -> Result<(), StoreError> {
        let first = self
            .segments
            .first()
            .map_or(end - end % self.segment_size, MappedFile::start);
        assert!(
            end >= first,
            "recovered end {end} below the first segment {first}"
        );
        let idx = ((end - first) / self.segment_size) as usize;
        while self.segments.len() > idx + 1 {
            let seg = self.segments.pop().expect("len checked");
            let path = seg.path().to_path_buf();
            drop(seg);
            std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            tracing::warn!(path = %path.display(), "deleted commit-log segment past the recovered end");
        }
        if self.segments.len() == idx + 1 {
            let seg = &mut self.segments[idx];
            let off = (end - seg.start()) as usize;
            seg.zero_tail(off)?;
            seg.sync_file()?;
        } else {
            let start = first + idx as u64 * self.segment_size;
            // The first segment of a fresh store: a retired one if the pool has one, else
            // warmed here, before the writer starts.
            let warm = if self.warm { Warm::Full } else { Warm::Off };
            self.segments
                .push(self.pool.take_or_create(start, self.fault.as_ref(), warm)?);
        }
        sync_dir(&self.dir)?;
        self.active = idx;
        self.wrote = end;
        self.writeback_from = end;
        self.flushed = end;
        self.last_store_timestamp = last_store_timestamp;
        self.flushed_store_timestamp = last_store_timestamp;
        let mut alloc = SegmentAllocator::spawn(
            self.fault.clone(),
            self.warm,
            self.pool.clone(),
            self.threads,
        )?;
        alloc.request(self.segments[idx].end());
        self.allocator = Some(alloc);
        Ok(())
    }

    /// True when the log holds no record: its end is its first byte.
    pub fn is_empty(&self) -> bool {
        self.wrote == self.min_phy_offset()
    }

    /// Makes an empty log begin at `start`, a multiple of the segment size (a slave that joins a
    /// master whose log begins or continues past 0: Java's slave creates the file named by the
    /// first transfer's offset). Its segment files (all empty, the spare one included) are
    /// unlinked before the one at `start` is created, so a crash in between leaves an empty
    /// store or a log that begins at `start`, never a broken sequence. Refused, with nothing
    /// changed, when the log holds a record or `start` is not aligned.
    pub fn start_empty_at(&mut self, start: u64) -> Result<(), StoreError> {
        if !start.is_multiple_of(self.segment_size) {
            return Err(StoreError::Invalid(format!(
                "a commit log cannot begin at {start}: not a multiple of the segment size {}",
                self.segment_size
            )));
        }
        if !self.is_empty() {
            return Err(StoreError::Invalid(format!(
                "a commit log holding [{}, {}) cannot begin again at {start}",
                self.min_phy_offset(),
                self.wrote
            )));
        }
        if self.allocator.is_none() {
            return Err(StoreError::Invalid(
                "a commit log starts again only after recover_to".into(),
            ));
        }
        if start == self.wrote {
            return Ok(());
        }
        let alloc = SegmentAllocator::spawn(
            self.fault.clone(),
            self.warm,
            self.pool.clone(),
            self.threads,
        )?;
        // From here on an error leaves the log unusable (the writer then refuses appends, and
        // the next start recovers whatever is on disk). Dropping the old allocator waits for
        // its spare segment, which stays on disk: unlinked below with the others.
        self.allocator = Some(alloc);
        self.segments.clear();
        for (_, path) in list_segments(&self.dir)? {
            std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
        }
        sync_dir(&self.dir)?;
        let seg = self
            .pool
            .take_or_create(start, self.fault.as_ref(), Warm::Off)?;
        self.segments.push(seg);
        sync_dir(&self.dir)?;
        tracing::info!(start, "the empty commit log begins at a later segment");
        self.active = 0;
        self.wrote = start;
        self.writeback_from = start;
        self.flushed = start;
        self.touched = 0;
        if let Some(alloc) = self.allocator.as_mut() {
            alloc.request(start + self.segment_size);
        }
        Ok(())
    }

    pub fn mark(&self) -> AppendMark {
        AppendMark {
            wrote: self.wrote,
            active: self.active,
            last_store_timestamp: self.last_store_timestamp,
        }
    }

    /// Reserves the next `len` bytes for one encoded record, whose first bytes are `head` (at
    /// least its total-size field), and returns its physical offset; the caller patches the
    /// record for it and hands it to `write_placed`. When the record does not fit, the segment is
    /// closed with a blank marker (written now) and the next one taken. On error the caller must
    /// `rollback` to its mark.
    pub fn place(&mut self, head: &[u8], len: usize) -> Result<u64, StoreError> {
        if len > self.max_record_len {
            return Err(StoreError::MessageTooLarge {
                size: len,
                max: self.max_record_len,
            });
        }
        match message::peek_total_size(head) {
            Ok(total) if total as usize == len => {}
            _ => return Err(StoreError::Invalid("append of a malformed record".into())),
        }
        assert!(self.allocator.is_some(), "append before recover_to");
        let seg = &self.segments[self.active];
        let pos = (self.wrote - seg.start()) as usize;
        let remaining = seg.size() as usize - pos;
        assert!(
            remaining >= BLANK_MARKER_LEN,
            "write position too close to the segment end"
        );
        if len + BLANK_MARKER_LEN > remaining {
            let mut marker = [0u8; BLANK_MARKER_LEN];
            marker[..4].copy_from_slice(&(remaining as u32).to_be_bytes());
            marker[4..].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
            self.write_run(self.wrote, &mut [IoSlice::new(&marker)], self.wrote)?;
            self.wrote += remaining as u64;
            self.roll()?;
        }
        let phy = self.wrote;
        self.wrote += len as u64;
        Ok(phy)
    }

    /// Places, patches and writes one record at once (tests and tools; the writer batches).
    pub fn append(
        &mut self,
        record: &[u8],
        queue_offset: u64,
        store_timestamp: i64,
    ) -> Result<u64, StoreError> {
        let phy = self.place(record, record.len())?;
        let mut rec = record.to_vec();
        message::patch(&mut rec, queue_offset as i64, phy as i64, store_timestamp);
        self.write_placed(&[(phy, [&rec, &[], &[]])], store_timestamp)?;
        Ok(phy)
    }

    /// Writes placed, patched records (in commit-log order, as `place` returned them) with one
    /// pwritev per contiguous run in a segment: the page cache the mapping shares
    /// (ARCHITECTURE.md, "Writing the segment"). A record is given as up to three consecutive
    /// parts (empty ones are skipped): the send path's records keep their body in the received
    /// frame. Must run before anything publishes, reads or flushes them.
    ///
    /// In a warmed or reused segment each pwritev ends on a page boundary, completed with zeros
    /// (bytes past the end, which readers never see; never in a closed segment, whose blank
    /// marker follows its last record): warming writes around the page cache,
    /// and a write that covers only part of an uncached page of written blocks makes the kernel
    /// read that page from the disk first, on this thread. The next write begins in that page,
    /// now cached.
    pub fn write_placed(
        &mut self,
        recs: &[(u64, [&[u8]; 3])],
        store_timestamp: i64,
    ) -> Result<(), StoreError> {
        let mut i = 0;
        while i < recs.len() {
            let start = recs[i].0;
            let seg_end = self.segment_end_of(start);
            let mut iov = Vec::with_capacity(((recs.len() - i) * 3).min(IOV_BATCH));
            let mut next = start;
            // One iovec kept for the zeros that end the run on a page boundary.
            while i < recs.len() && recs[i].0 == next && iov.len() + 4 <= IOV_BATCH {
                let (phy, parts) = recs[i];
                let len: usize = parts.iter().map(|p| p.len()).sum();
                if phy + len as u64 > seg_end {
                    break;
                }
                iov.extend(
                    parts
                        .iter()
                        .filter(|p| !p.is_empty())
                        .map(|p| IoSlice::new(p)),
                );
                next = phy + len as u64;
                i += 1;
            }
            if iov.is_empty() {
                return Err(StoreError::Invalid(format!(
                    "record at {start} was not placed by this commit log"
                )));
            }
            // Not in a segment already closed: its blank marker, written by `place`, follows
            // the last record, and the zeros would overwrite it. The marker's write left that
            // page cached.
            let in_page = ((next - (seg_end - self.segment_size)) % OS_PAGE_SIZE) as usize;
            let written_blocks = self.warm || self.segments[self.segment_index(start)].reused();
            if written_blocks && in_page != 0 && self.wrote < seg_end {
                let pad = (OS_PAGE_SIZE as usize - in_page).min((seg_end - next) as usize);
                iov.push(IoSlice::new(&ZERO_PAGE[..pad]));
            }
            self.write_run(start, &mut iov, next)?;
        }
        self.last_store_timestamp = store_timestamp;
        Ok(())
    }

    /// The gate through which group commits let the next segment's warming use the disk's
    /// idle windows (None before `recover_to` or with warming off).
    pub fn warm_gate(&self) -> Option<Arc<WarmGate>> {
        self.allocator
            .as_ref()
            .filter(|_| self.warm)
            .map(SegmentAllocator::warm_gate)
    }

    fn segment_index(&self, phy: u64) -> usize {
        ((phy - self.segments[0].start()) / self.segment_size) as usize
    }

    fn segment_end_of(&self, phy: u64) -> u64 {
        let first = self.segments[0].start();
        first + ((phy - first) / self.segment_size + 1) * self.segment_size
    }

    /// pwritev of `iov` at commit-log position `phy` (one segment), retried on short writes.
    /// `data_end` is where the records end (the zeros of a padded write follow it).
    fn write_run(
        &mut self,
        phy: u64,
        iov: &mut [IoSlice<'_>],
        data_end: u64,
    ) -> Result<(), StoreError> {
        let seg = &self.segments[self.segment_index(phy)];
        let total: usize = iov.iter().map(|b| b.len()).sum();
        self.touched = self.touched.max(phy + total as u64);
        FaultHook::check(self.fault.as_ref(), FaultPoint::Write)
            .map_err(|e| StoreError::io(seg.path(), e))?;
        let mut off = phy - seg.start();
        let mut bufs = &mut iov[..];
        while !bufs.is_empty() {
            // SAFETY: IoSlice is ABI-compatible with iovec; the fd is the segment's open file.
            let n = unsafe {
                libc::pwritev(
                    seg.raw_fd(),
                    bufs.as_ptr().cast::<libc::iovec>(),
                    bufs.len() as libc::c_int,
                    off as libc::off_t,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(StoreError::io(seg.path(), e));
            }
            if n == 0 {
                return Err(StoreError::io(
                    seg.path(),
                    std::io::Error::from(std::io::ErrorKind::WriteZero),
                ));
            }
            off += n as u64;
            IoSlice::advance_slices(&mut bufs, n as usize);
        }
        // Under SYNC_FLUSH the group commit's fdatasync comes within a round: starting the
        // writeback of the pages writes completed puts the data write under the hand-over to
        // the sync thread, leaving the fdatasync less to write (0.12-0.16 -> 0.09-0.12 ms in
        // the SYNC bench). Whole pages only (the last, partial one is written again by the
        // next batch), and at least WRITEBACK_MIN_BYTES of them: a write-out per tiny batch
        // cost the 64-thread shape 15-20 % of its rate.
        if self.start_writeback {
            let page_down = |p: u64| (p - seg.start()) / OS_PAGE_SIZE * OS_PAGE_SIZE;
            let from = page_down(self.writeback_from.max(seg.start()));
            let to = page_down(data_end);
            if to >= from + WRITEBACK_MIN_BYTES {
                seg.start_writeback(from, to);
                self.writeback_from = seg.start() + to;
            }
        }
        Ok(())
    }

    fn roll(&mut self) -> Result<(), StoreError> {
        let next_start = self.segments[self.active].end();
        if self.active + 1 == self.segments.len() {
            let alloc = self
                .allocator
                .as_mut()
                .expect("allocator runs after recover_to");
            let seg = alloc.take(next_start)?;
            self.segments.push(seg);
        }
        self.active += 1;
        let after = next_start + self.segment_size;
        if let Some(alloc) = self.allocator.as_mut() {
            alloc.request(after);
        }
        Ok(())
    }

    /// Undoes every byte written since `mark`: zeros it and moves the write position back, so a
    /// failed batch leaves no partially counted record behind (later spare segments stay).
    pub fn rollback(&mut self, mark: AppendMark) {
        let end = self.wrote.max(self.touched);
        self.touched = 0;
        for seg in &mut self.segments[mark.active..=self.active] {
            let from = mark.wrote.max(seg.start());
            let to = end.min(seg.end());
            if to > from {
                let s = seg.start();
                seg.zero_range((from - s) as usize, (to - s) as usize);
            }
        }
        self.active = mark.active;
        self.wrote = mark.wrote;
        self.writeback_from = self.writeback_from.min(mark.wrote);
        self.flushed = self.flushed.min(mark.wrote);
        self.last_store_timestamp = mark.last_store_timestamp;
    }

    /// Makes every written byte durable (msync MS_SYNC per touched segment = fdatasync of the
    /// range). Returns the new flushed position. Errors are never swallowed.
    pub fn flush(&mut self) -> Result<u64, StoreError> {
        if self.flushed == self.wrote {
            return Ok(self.flushed);
        }
        let first = self.segments[0].start();
        let path = self.dir.clone();
        FaultHook::check(self.fault.as_ref(), FaultPoint::Flush)
            .map_err(|e| StoreError::io(path, e))?;
        let lo = ((self.flushed.max(first) - first) / self.segment_size) as usize;
        for seg in &self.segments[lo..=self.active] {
            let from = self.flushed.max(seg.start());
            let to = self.wrote.min(seg.end());
            if to > from {
                seg.flush_range((from - seg.start()) as usize, (to - from) as usize)?;
            }
        }
        self.flushed = self.wrote;
        self.flushed_store_timestamp = self.last_store_timestamp;
        Ok(self.flushed)
    }

    /// The files of the segments from the one holding `phy` to the active one, shared with a
    /// flush on another thread (an fdatasync of the file covers every page written to it).
    pub fn files_from(&self, phy: u64) -> Vec<std::sync::Arc<std::fs::File>> {
        let first = self.segments[0].start();
        let lo = ((phy.max(first) - first) / self.segment_size) as usize;
        self.segments[lo.min(self.active)..=self.active]
            .iter()
            .map(MappedFile::shared_file)
            .collect()
    }

    /// Store timestamp of the newest record written.
    pub fn last_store_timestamp(&self) -> i64 {
        self.last_store_timestamp
    }

    /// Bytes of `[phy, phy+size)` if fully written and inside one segment.
    pub fn read(&self, phy: u64, size: u32) -> Result<&[u8], StoreError> {
        let end = phy + u64::from(size);
        if phy < self.min_phy_offset() || end > self.wrote {
            return Err(StoreError::OffsetNotFound(phy));
        }
        let idx = ((phy - self.segments[0].start()) / self.segment_size) as usize;
        let seg = &self.segments[idx];
        if end > seg.end() {
            return Err(StoreError::OffsetNotFound(phy));
        }
        let s = seg.start();
        Ok(&seg.bytes()[(phy - s) as usize..(end - s) as usize])
    }

    /// Takes the oldest segment out of the log if it is not the active one: the minimum
    /// physical offset moves past it at once. The file is still mapped and on disk; the caller
    /// unlinks it off this thread (`store::deleter`), oldest first.
    pub fn detach_oldest_segment(&mut self) -> Option<MappedFile> {
        if self.active == 0 {
            return None;
        }
        self.active -= 1;
        Some(self.segments.remove(0))
    }

    /// Gives up the store lock (clean shutdown, after the last flush).
    pub fn release_lock(&mut self) -> Option<StoreLock> {
        self.lock.take()
    }
}

/// (start, path) of every segment file in `dir`, sorted by start.
pub fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(StoreError::io(dir, e)),
    };
    for entry in rd {
        let entry = entry.map_err(|e| StoreError::io(dir, e))?;
        if let Some(start) = entry.file_name().to_str().and_then(parse_segment_name) {
            out.push((start, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::decode;
    use crate::writer::testkit::record;

    /// Proves the zeros that end a write on a page boundary never cover a closed segment's
    /// blank marker: a batch whose second record rolls the log to the next segment is written
    /// after `place` wrote the marker behind its first record.
    #[test]
    fn a_batch_across_a_roll_keeps_the_blank_marker() {
        let dir = tempfile::tempdir().unwrap();
        let seg = 64u64 << 10;
        let cfg = StoreConfig {
            warm_mapped_file: Some(true),
            mapped_file_size_commit_log: seg,
            ..StoreConfig::with_root(dir.path())
        };
        let mut log = CommitLog::load(&cfg, None).unwrap();
        log.recover_to(0, 0).unwrap();
        // Fill the segment so that `small` fits behind the filler, with 500 bytes to spare,
        // and `big` does not.
        let small = record("T", 0, &[2u8; 100], "");
        let big = record("T", 0, &[3u8; 1_000], "");
        let head = record("T", 0, b"", "").bytes.len();
        let fill_len = seg as usize - small.bytes.len() - 500;
        let filler = record("T", 0, &vec![1u8; fill_len - head], "");
        assert_eq!(filler.bytes.len(), fill_len);
        log.append(&filler.bytes, 0, 1).unwrap();
        let mut a = small.bytes.to_vec();
        let mut b = big.bytes.to_vec();
        let pa = log.place(&a, a.len()).unwrap();
        let pb = log.place(&b, b.len()).unwrap();
        assert_eq!(
            (pa, pb),
            (fill_len as u64, seg),
            "the second record rolls the log"
        );
        message::patch(&mut a, 1, pa as i64, 1);
        message::patch(&mut b, 2, pb as i64, 1);
        log.write_placed(&[(pa, [&a, &[], &[]]), (pb, [&b, &[], &[]])], 1)
            .unwrap();
        let marker_at = pa + a.len() as u64;
        let marker = log.read(marker_at, BLANK_MARKER_LEN as u32).unwrap();
        let total = u32::from_be_bytes(marker[..4].try_into().unwrap());
        let magic = u32::from_be_bytes(marker[4..8].try_into().unwrap());
        assert_eq!((u64::from(total), magic), (seg - marker_at, BLANK_MAGIC));
        assert_eq!(
            decode(log.read(pb, b.len() as u32).unwrap(), true)
                .unwrap()
                .body,
            &[3u8; 1_000][..]
        );
    }

    /// Bytes this thread had the block layer read (`/proc/thread-self/io`), if the kernel counts.
    fn thread_read_bytes() -> Option<u64> {
        let io = std::fs::read_to_string("/proc/thread-self/io").ok()?;
        io.lines()
            .find_map(|l| l.strip_prefix("read_bytes: "))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Proves appends of odd sizes to a warmed segment read nothing from the disk (warming
    /// leaves no cached pages, and a write covering part of an uncached page of written blocks
    /// would read it first), leave zeros past the end of the log, and read back byte for byte.
    #[test]
    fn appends_to_a_warmed_segment_read_nothing_from_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = StoreConfig {
            warm_mapped_file: Some(true),
            mapped_file_size_commit_log: 1 << 20,
            ..StoreConfig::with_root(dir.path())
        };
        let mut log = CommitLog::load(&cfg, None).unwrap();
        log.recover_to(0, 0).unwrap();
        let before = thread_read_bytes();
        let mut placed = Vec::new();
        for i in 0..40usize {
            let body = vec![i as u8; 700 + 13 * i];
            let rec = record("T", 0, &body, "");
            let phy = log.append(&rec.bytes, i as u64, 1).unwrap();
            placed.push((phy, rec.bytes.len() as u32, body));
        }
        if let (Some(b), Some(a)) = (before, thread_read_bytes()) {
            assert_eq!(a - b, 0, "appending read from the disk");
        }
        for (phy, size, body) in &placed {
            let got = decode(log.read(*phy, *size).unwrap(), true).unwrap();
            assert_eq!((got.body, got.phy_offset), (&body[..], *phy as i64));
        }
        let end = log.max_phy_offset() as usize;
        let name = crate::mapped_file::segment_file_name(0);
        let file = std::fs::read(cfg.commit_log_dir().join(name)).unwrap();
        assert!(file[end..].iter().all(|&b| b == 0), "bytes past the end");
    }
}
