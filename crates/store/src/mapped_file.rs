//! MappedFile: one preallocated, fixed-size commit-log segment mapped read-write with memmap2.
//! The writer adds records with pwrite on `file()` (same page cache; ARCHITECTURE.md, "Writing
//! the segment"); the mapping serves reads, recovery and rollback zeroing.
//!
//! Created by the allocator thread (`store::allocator`) or at open/recovery; owned afterwards by
//! the `CommitLog` (writer thread). Invariants: the file is exactly `size` bytes and its blocks
//! are allocated (fallocate) before it is mapped, so writes never extend the file and never hit
//! ext4's delayed allocation on the hot path; the mapping is never truncated while mapped.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::{MmapMut, MmapOptions};

use crate::constants::SEGMENT_FILE_NAME_LEN;
use crate::fault::{FaultHook, FaultPoint};
use crate::warm_gate::{WarmGate, ROUNDS_RUNNING_WITHIN};
use crate::StoreError;

pub struct MappedFile {
    path: PathBuf,
    /// Shared with the flush threads (a clone of the Arc, not a dup'd descriptor, per batch).
    file: Arc<File>,
    map: MmapMut,
    start: u64,
    /// A retired segment reused (`store::recycle`): every block written, old bytes past the end.
    reused: bool,
}

/// Bytes of zeros per pwrite when warming a segment.
const WARM_CHUNK: usize = 1 << 20;
/// Background warming pace: a 1 GiB segment in 4 s, and a fifth of this disk's sequential
/// rate. SYNC_FLUSH appends mostly stay below it here (~200-250 MB/s in the SYNC bench), but
/// reached ~280 MB/s in a quiet minute; past the pace, later segments are taken partly warmed
/// (slower to sync, never wrong).
const WARM_BYTES_PER_SEC: u64 = 256 << 20;
/// Background warming through the page cache (where O_DIRECT is refused) starts writeback of
/// what it wrote every this many bytes.
const WARM_WRITEBACK_BYTES: usize = 16 << 20;
/// Background warming at its time pace (no group commit running) fdatasyncs the segment every
/// this many bytes. Zeros the guest has written but not flushed wait in the disk's volatile
/// cache (on this VM, the host's page cache) until the next flush, so without this the first
/// group commit after an idle spell paid for all of them: a SYNC_FLUSH broker's first send
/// after start took ~470 ms with the next segment being warmed, 9 ms without warming.
/// RocketMQ's warmMappedFile forces every `flushLeastPagesWhenWarmMapedFile` (16 MiB) for the
/// same reason.
const WARM_SYNC_BYTES: usize = 4 << 20;
/// Offset, length and buffer alignment of the O_DIRECT warming writes (any logical block size
/// up to a page).
const DIRECT_ALIGN: usize = 4096;

/// Whether `MappedFile::create` zero-fills the new segment (`MappedFile::zero_fill`).
#[derive(Clone, Copy)]
pub enum Warm<'a> {
    Off,
    /// The whole segment, before `create` returns (a segment the writer needs now).
    Full,
    /// Until the flag is set (the allocator thread; the writer sets it, and unparks that thread,
    /// when it wants the file), writing in the disk's idle windows while the gate's group
    /// commits run.
    UntilWanted(&'a AtomicBool, Option<&'a WarmGate>),
}

/// `%020d` of the segment's first global offset.
pub fn segment_file_name(start: u64) -> String {
    format!("{start:0width$}", width = SEGMENT_FILE_NAME_LEN)
}

/// Parses a 20-digit segment name; anything else is not a segment.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    if name.len() != SEGMENT_FILE_NAME_LEN || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

/// Maps `io::Error`s from space allocation: ENOSPC/EDQUOT become `DiskFull`.
pub fn alloc_error(path: &Path, e: io::Error) -> StoreError {
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
            StoreError::DiskFull(format!("allocating {}: {e}", path.display()))
        }
        _ => StoreError::io(path, e),
    }
}

fn fallocate(file: &File, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    loop {
        // SAFETY: plain syscall on a valid, owned fd; no memory is passed.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// fsyncs a directory so a created or deleted file name survives power loss.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    let d = File::open(dir).map_err(|e| StoreError::io(dir, e))?;
    d.sync_all().map_err(|e| StoreError::io(dir, e))
}

impl MappedFile {
    /// Creates (or reuses an existing, correctly sized) segment `dir/<start>` of `size` bytes:
    /// fallocate, then map. On failure a file created here is removed again.
    pub fn create(
        dir: &Path,
        start: u64,
        size: u64,
        fault: Option<&FaultHook>,
        warm: Warm<'_>,
    ) -> Result<Self, StoreError> {
        let path = dir.join(segment_file_name(start));
        FaultHook::check(fault, FaultPoint::AllocateSegment).map_err(|e| alloc_error(&path, e))?;
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| alloc_error(&path, e))?;
        if let Err(e) = fallocate(&file, size) {
            if !existed {
                // Best effort: a half-allocated new file must not be mistaken for a segment.
                if let Err(rm) = std::fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), error = %rm, "removing failed segment");
                }
            }
            return Err(alloc_error(&path, e));
        }
        sync_dir(dir)?;
        let mf = Self::map(path, file, start, size)?;
        match warm {
            Warm::Off => {}
            Warm::Full => mf.zero_fill(None, None, fault),
            Warm::UntilWanted(wanted, gate) => mf.zero_fill(Some(wanted), gate, fault),
        }
        Ok(mf)
    }

    /// Opens an existing segment; its size must be exactly `size`.
    pub fn open(path: &Path, start: u64, size: u64) -> Result<Self, StoreError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        let len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
        if len != size {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                reason: format!("segment is {len} bytes, mappedFileSizeCommitLog is {size}"),
            });
        }
        Self::map(path.to_path_buf(), file, start, size)
    }

    fn map(path: PathBuf, file: File, start: u64, size: u64) -> Result<Self, StoreError> {
        let len = usize::try_from(size).map_err(|_| StoreError::Invalid("segment size".into()))?;
        // SAFETY: the segment file is private to this store (the lock file keeps other brokers
        // out), only the writer thread mutates this mapping, the file is never truncated while
        // mapped, and readers map it read-only and read only bytes the writer has published.
        let map = unsafe { MmapOptions::new().len(len).map_mut(&file) }
            .map_err(|e| StoreError::io(&path, e))?;
        Ok(MappedFile {
            path,
            file: Arc::new(file),
            map,
            start,
            reused: false,
        })
    }

    /// Writes zeros over the whole (fresh, all-zero) segment and fdatasyncs them, so the
    /// writer's group commits overwrite written blocks (config: `warm_mapped_file`). Stops early,
    /// without the sync, once `wanted` is set: the writer is waiting for this segment, and a
    /// partly warmed one is only slower to sync, never wrong. A failed write or sync is logged
    /// and the segment handed over as it is: its bytes are zeros either way, and the writer's
    /// own writes and syncs to it report any lasting I/O error to the producers.
    ///
    /// The zeros go out with O_DIRECT from one aligned buffer: through the page cache they cost
    /// the prealloc thread 17 % of a core at the background pace (a copy and a cache page per
    /// 4 KiB, then their writeback) and left a whole segment of cache pages ahead of the writer.
    /// The writer then finds no cached pages, so it writes whole pages (see
    /// `CommitLog::write_placed`): a partial write to an uncached page of written blocks would
    /// read the page from the disk first. Where O_DIRECT is refused (tmpfs, an unaligned
    /// tail), the zeros go through the page cache.
    ///
    /// In the background (`wanted` given) the zeros go out at most `WARM_BYTES_PER_SEC`: written
    /// at full speed, 1 GiB of zeros competed with the active segment's group commits for the
    /// disk (SYNC_FLUSH bench: 168-210k msg/s with the burst, 200-219k without any background
    /// warming). While the `gate`'s group commits run, a chunk goes out only right after one
    /// completes, sized to the round (`WarmGate::window_chunk`), and a round is skipped while
    /// ahead of that pace: zeros written at any moment held the rounds' own writes up. While
    /// the rounds saturate the disk, nothing is written at all (see `warm_gate`).
    ///
    /// At the time pace the segment is also fdatasynced every `WARM_SYNC_BYTES`, so that the
    /// next group commit never finds more than that waiting in the disk's cache.
    fn zero_fill(
        &self,
        wanted: Option<&AtomicBool>,
        gate: Option<&WarmGate>,
        fault: Option<&FaultHook>,
    ) {
        let buf = vec![0u8; WARM_CHUNK + DIRECT_ALIGN];
        let at = buf.as_ptr().align_offset(DIRECT_ALIGN);
        let zeros = &buf[at..at + WARM_CHUNK];
        let mut direct = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.path)
            .ok();
        let started = Instant::now();
        let mut off = 0usize;
        let mut written_back = 0usize;
        // Zeros written at the time pace since the last fdatasync (see WARM_SYNC_BYTES).
        let mut unsynced = 0usize;
        let mut seen_round = gate.map_or(0, WarmGate::rounds);
        while off < self.map.len() {
            let mut chunk = WARM_CHUNK;
            // A chunk written right after a round is flushed by the next round's fdatasync.
            let mut in_window = false;
            if let Some(w) = wanted {
                if w.load(Ordering::Acquire) {
                    tracing::debug!(path = %self.path.display(), off, "segment wanted before it was warm");
                    return;
                }
                let due = Duration::from_secs_f64(off as f64 / WARM_BYTES_PER_SEC as f64);
                let ahead = due.checked_sub(started.elapsed());
                // Parked, not slept: `SegmentAllocator::take` unparks this thread after raising
                // `wanted`, and the gate after each round, so the writer never waits out a
                // pacing pause and a window is not missed.
                match gate.filter(|g| g.rounds_running()) {
                    Some(g) if g.disk_saturated() => {
                        // Zeros now would only delay the rounds (`warm_gate`). Not woken per
                        // round: that would be a wake-up on the writer's core per round.
                        std::thread::park_timeout(ROUNDS_RUNNING_WITHIN);
                        continue;
                    }
                    Some(g) => {
                        let round = g.rounds();
                        let fresh = round != seen_round;
                        seen_round = round;
                        if !fresh || ahead.is_some() {
                            g.wait_round(round, ROUNDS_RUNNING_WITHIN);
                            continue;
                        }
                        chunk = g.window_chunk(WARM_CHUNK, DIRECT_ALIGN);
                        in_window = true;
                    }
                    None => {
                        if let Some(ahead) = ahead {
                            std::thread::park_timeout(ahead);
                            continue;
                        }
                    }
                }
                if direct.is_none() && off - written_back >= WARM_WRITEBACK_BYTES {
                    self.start_writeback(written_back as u64, off as u64);
                    written_back = off;
                }
            }
            let len = chunk.min(self.map.len() - off);
            let fd = match direct.as_ref() {
                Some(d) if len.is_multiple_of(DIRECT_ALIGN) && off.is_multiple_of(DIRECT_ALIGN) => {
                    d.as_raw_fd()
                }
                _ => self.file.as_raw_fd(),
            };
            // SAFETY: plain syscall on a valid, owned fd; the buffer outlives the call. Nobody
            // else writes this file yet: it is handed to the writer after this returns.
            let n = unsafe { libc::pwrite(fd, zeros.as_ptr().cast(), len, off as libc::off_t) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                if direct.is_some() && fd != self.file.as_raw_fd() {
                    // The filesystem took the O_DIRECT open but not the write: page cache.
                    tracing::debug!(path = %self.path.display(), error = %e, "O_DIRECT warming refused");
                    direct = None;
                    continue;
                }
                tracing::warn!(path = %self.path.display(), off, error = %e, "warming segment");
                return;
            }
            off += n as usize;
            if wanted.is_some() {
                unsynced = if in_window { 0 } else { unsynced + n as usize };
                if unsynced >= WARM_SYNC_BYTES {
                    unsynced = 0;
                    if !self.warm_sync(fault) {
                        return;
                    }
                }
            }
        }
        self.warm_sync(fault);
    }

    /// fdatasync of the segment being warmed. A failure is logged and ends the warming (the
    /// writer's own syncs report a lasting I/O error to the producers).
    fn warm_sync(&self, fault: Option<&FaultHook>) -> bool {
        let synced =
            FaultHook::check(fault, FaultPoint::WarmSync).and_then(|()| self.file.sync_data());
        if let Err(e) = &synced {
            tracing::warn!(path = %self.path.display(), error = %e, "syncing warmed segment");
        }
        synced.is_ok()
    }

    /// Starts writeback of the file's bytes `[from, to)` without waiting. Advisory: a failure is
    /// logged, and the fdatasync that follows reports any write error.
    pub(crate) fn start_writeback(&self, from: u64, to: u64) {
        // SAFETY: plain syscall on a valid, owned fd; the range lies in the file.
        let rc = unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                from as libc::off64_t,
                (to - from) as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        if rc != 0 {
            let e = io::Error::last_os_error();
            tracing::debug!(path = %self.path.display(), error = %e, "starting writeback");
        }
    }

    /// Marks this segment as a reused retired one (`store::recycle::RecyclePool::take`).
    pub(crate) fn set_reused(&mut self) {
        self.reused = true;
    }

    /// Whether this is a reused retired segment: its blocks are all written.
    pub fn reused(&self) -> bool {
        self.reused
    }

    pub fn file(&self) -> &File {
        &self.file
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn start(&self) -> u64 {
        self.start
    }
    pub fn size(&self) -> u64 {
        self.map.len() as u64
    }
    pub fn end(&self) -> u64 {
        self.start + self.size()
    }
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// msync(MS_SYNC) of `[off, off+len)`: on Linux this is an fdatasync of that file range.
    pub fn flush_range(&self, off: usize, len: usize) -> Result<(), StoreError> {
        if len == 0 {
            return Ok(());
        }
        self.map
            .flush_range(off, len)
            .map_err(|e| StoreError::io(&self.path, e))
    }

    /// Makes `[off, end of file)` read as zeros: FALLOC_FL_ZERO_RANGE where the filesystem
    /// supports it (no page writes), else a memset through the mapping. Not flushed here.
    pub fn zero_tail(&mut self, off: usize) -> Result<(), StoreError> {
        let len = self.map.len().saturating_sub(off);
        if len == 0 {
            return Ok(());
        }
        let mode = libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: plain syscall on a valid, owned fd; the range lies inside the file.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                mode,
                off as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            self.map[off..].fill(0);
        }
        Ok(())
    }

    /// Zeros `[from, to)` through the mapping (used to undo a failed batch).
    pub fn zero_range(&mut self, from: usize, to: usize) {
        self.map[from..to].fill(0);
    }

    pub fn sync_file(&self) -> Result<(), StoreError> {
        self.file
            .sync_data()
            .map_err(|e| StoreError::io(&self.path, e))
    }

    /// The segment file for a flush on another thread (fdatasync of the file covers it).
    pub fn shared_file(&self) -> Arc<File> {
        self.file.clone()
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::FailNth;

    const SEG: u64 = 4 << 20;

    /// (extents, how many are still unwritten) of `file`, via FIEMAP; None where the
    /// filesystem has no FIEMAP or no unwritten extents (tmpfs), so there is nothing to check.
    fn unwritten_extents(file: &File) -> Option<(u32, u32)> {
        const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
        const FIEMAP_FLAG_SYNC: u32 = 1;
        const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
        const MAX: usize = 64;
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Extent {
            logical: u64,
            physical: u64,
            length: u64,
            reserved64: [u64; 2],
            flags: u32,
            reserved: [u32; 3],
        }
        #[repr(C)]
        struct Fiemap {
            start: u64,
            length: u64,
            flags: u32,
            mapped_extents: u32,
            extent_count: u32,
            reserved: u32,
            extents: [Extent; MAX],
        }
        let mut fm = Fiemap {
            start: 0,
            length: u64::MAX,
            flags: FIEMAP_FLAG_SYNC,
            mapped_extents: 0,
            extent_count: MAX as u32,
            reserved: 0,
            extents: [Extent::default(); MAX],
        };
        // SAFETY: FIEMAP fills at most extent_count extents into the struct we own.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut fm as *mut Fiemap) };
        if rc != 0 {
            return None;
        }
        let n = fm.mapped_extents.min(MAX as u32);
        let unwritten = fm.extents[..n as usize]
            .iter()
            .filter(|e| e.flags & FIEMAP_EXTENT_UNWRITTEN != 0)
            .count() as u32;
        Some((n, unwritten))
    }

    #[test]
    fn warming_writes_every_block_and_keeps_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let cold = MappedFile::create(dir.path(), 0, SEG, None, Warm::Off).unwrap();
        let warm = MappedFile::create(dir.path(), SEG, SEG, None, Warm::Full).unwrap();
        assert_eq!(warm.size(), SEG);
        assert!(warm.bytes().iter().all(|&b| b == 0));
        let Some((n, cold_unwritten)) = unwritten_extents(cold.file()) else {
            return; // no FIEMAP here: the zeros above are all there is to check
        };
        if cold_unwritten == 0 {
            return; // this filesystem allocates written blocks: warming changes nothing
        }
        assert!(n > 0);
        let (n, unwritten) = unwritten_extents(warm.file()).unwrap();
        assert!(n > 0, "a warmed segment has extents");
        assert_eq!(unwritten, 0, "warming left unwritten extents");
    }

    #[test]
    fn a_wanted_segment_is_handed_over_unwarmed() {
        let dir = tempfile::tempdir().unwrap();
        let wanted = AtomicBool::new(true);
        let seg =
            MappedFile::create(dir.path(), 0, SEG, None, Warm::UntilWanted(&wanted, None)).unwrap();
        assert_eq!(seg.size(), SEG);
        assert!(seg.bytes().iter().all(|&b| b == 0));
        if let Some((_, unwritten)) = unwritten_extents(seg.file()) {
            let cold = MappedFile::create(dir.path(), SEG, SEG, None, Warm::Off).unwrap();
            let (_, cold_unwritten) = unwritten_extents(cold.file()).unwrap();
            assert_eq!(
                unwritten, cold_unwritten,
                "no block was written after the flag"
            );
        }
    }

    /// A segment at 0 created as the allocator thread creates one: warmed until `wanted`, in
    /// the windows `gate` gives.
    fn warmed_in_background(
        dir: &Path,
        wanted: &AtomicBool,
        gate: &WarmGate,
    ) -> Result<MappedFile, StoreError> {
        MappedFile::create(dir, 0, SEG, None, Warm::UntilWanted(wanted, Some(gate)))
    }

    /// A hook that counts the warming's fdatasyncs and fails the `fail`-th (0-based) onwards.
    fn warm_syncs(fail: Option<u64>) -> (Arc<FailNth>, FaultHook) {
        let (first, count) = fail.map_or((0, 0), |n| (n, u64::MAX));
        let nth = Arc::new(FailNth::new(FaultPoint::WarmSync, first, count, libc::EIO));
        (nth.clone(), FaultHook(nth))
    }

    /// At its time pace the warming syncs every WARM_SYNC_BYTES: a SYNC_FLUSH broker's first
    /// group commit after an idle spell then finds at most that much of it in the disk's cache,
    /// not the whole segment's zeros (~470 ms for a first send after start, RESULTS).
    #[test]
    fn background_warming_syncs_as_it_goes() {
        let dir = tempfile::tempdir().unwrap();
        let (nth, hook) = warm_syncs(None);
        let wanted = AtomicBool::new(false);
        let size = 4 * WARM_SYNC_BYTES as u64;
        let warm = Warm::UntilWanted(&wanted, None);
        let seg = MappedFile::create(dir.path(), 0, size, Some(&hook), warm).unwrap();
        assert!(seg.bytes().iter().all(|&b| b == 0));
        // One per WARM_SYNC_BYTES, then the closing one.
        assert_eq!(
            nth.calls(),
            5,
            "fdatasyncs while warming 4 x WARM_SYNC_BYTES"
        );
        // A segment the writer waits for is warmed in one go, with one sync at the end.
        let (nth, hook) = warm_syncs(None);
        MappedFile::create(dir.path(), size, size, Some(&hook), Warm::Full).unwrap();
        assert_eq!(nth.calls(), 1);
    }

    /// A failed sync ends the warming; the segment is handed over, all zeros, and usable. The
    /// second sync fails: a warming that went on would sync three more times.
    #[test]
    fn a_failed_warming_sync_hands_the_segment_over() {
        let dir = tempfile::tempdir().unwrap();
        let (nth, hook) = warm_syncs(Some(1));
        let wanted = AtomicBool::new(false);
        let size = 4 * WARM_SYNC_BYTES as u64;
        let warm = Warm::UntilWanted(&wanted, None);
        let mut seg = MappedFile::create(dir.path(), 0, size, Some(&hook), warm).unwrap();
        assert_eq!(
            nth.calls(),
            2,
            "the warming stopped at its first failed sync"
        );
        assert!(seg.bytes().iter().all(|&b| b == 0));
        seg.bytes_mut()[..4].copy_from_slice(b"rmq!");
        seg.sync_file().unwrap();
        assert_eq!(&seg.bytes()[..4], b"rmq!");
    }

    /// While group commits run, the background warming writes only right after a round, about
    /// a round's bytes each time: a segment takes many rounds (time-paced alone it would be done
    /// in a fraction of them), and ends fully warmed.
    #[test]
    fn warming_under_group_commit_waits_for_rounds() {
        let dir = tempfile::tempdir().unwrap();
        let (wanted, gate) = (AtomicBool::new(false), WarmGate::default());
        let round = 64u64 << 10;
        gate.round_done(round, Duration::ZERO);
        let mut rounds = 0u32;
        let (nth, hook) = warm_syncs(None);
        let warm = Warm::UntilWanted(&wanted, Some(&gate));
        let seg = std::thread::scope(|s| {
            let h = s.spawn(|| MappedFile::create(dir.path(), 0, SEG, Some(&hook), warm));
            while !h.is_finished() {
                std::thread::sleep(Duration::from_millis(1));
                gate.round_done(round, Duration::ZERO);
                rounds += 1;
            }
            h.join().unwrap().unwrap()
        });
        assert!(seg.bytes().iter().all(|&b| b == 0));
        // 80 KiB per round: at least 51 rounds for 4 MiB. The time pace alone (256 MiB/s)
        // needs 16 ms, i.e. about 16 of these 1 ms rounds.
        let per_round = (round + round / 4) as u32;
        assert!(
            rounds >= SEG as u32 / per_round - 1,
            "warmed in {rounds} rounds"
        );
        // The rounds' own fdatasyncs flush what is written right after them: no sync of its
        // own between rounds, only the closing one.
        assert_eq!(nth.calls(), 1, "the warming synced between rounds");
        if let Some((_, unwritten)) = unwritten_extents(seg.file()) {
            assert_eq!(unwritten, 0, "warming left unwritten extents");
        }
    }

    /// A gate whose last rounds synced all the time: the disk counts as saturated.
    fn saturated_gate() -> WarmGate {
        let gate = WarmGate::default();
        for _ in 0..30 {
            gate.round_done(64 << 10, Duration::from_secs(1));
        }
        assert!(gate.disk_saturated());
        gate
    }

    /// Joins a warming that must now finish by time, within 5 s.
    fn finished_by_time(
        h: std::thread::ScopedJoinHandle<'_, Result<MappedFile, StoreError>>,
    ) -> MappedFile {
        let t = Instant::now();
        let seg = h.join().unwrap().unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "finished by time");
        seg
    }

    /// While the rounds saturate the disk the warming writes nothing (in the windows after
    /// them it would finish this segment in ~51 rounds, by time in ~16 ms), and it finishes
    /// the segment once they stop.
    #[test]
    fn warming_holds_back_while_rounds_saturate_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let (wanted, gate) = (AtomicBool::new(false), saturated_gate());
        let busy = Duration::from_secs(1);
        let seg = std::thread::scope(|s| {
            let h = s.spawn(|| warmed_in_background(dir.path(), &wanted, &gate));
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(300) {
                std::thread::sleep(Duration::from_millis(1));
                gate.round_done(64 << 10, busy);
            }
            assert!(
                !h.is_finished(),
                "warmed while the rounds saturated the disk"
            );
            finished_by_time(h)
        });
        assert!(seg.bytes().iter().all(|&b| b == 0));
        if let Some((_, unwritten)) = unwritten_extents(seg.file()) {
            assert_eq!(unwritten, 0, "warming left unwritten extents");
        }
    }

    /// Rounds spaced further apart than ROUNDS_RUNNING_WITHIN because each sync takes that long
    /// (a slow disk) still hold the warming back: it must not take the gaps for idle time and
    /// write at its time pace (which would finish this segment in ~16 ms).
    #[test]
    fn warming_holds_back_while_slow_syncs_saturate_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let (wanted, gate) = (AtomicBool::new(false), saturated_gate());
        let slow = ROUNDS_RUNNING_WITHIN * 2;
        gate.sync_started();
        let seg = std::thread::scope(|s| {
            let h = s.spawn(|| warmed_in_background(dir.path(), &wanted, &gate));
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(300) {
                std::thread::sleep(slow);
                gate.round_done(64 << 10, slow);
                gate.sync_started();
            }
            assert!(!h.is_finished(), "warmed while slow syncs held the disk");
            gate.round_done(64 << 10, slow);
            finished_by_time(h)
        });
        assert!(seg.bytes().iter().all(|&b| b == 0));
    }

    /// Once rounds stop, the warming goes on at its time pace and finishes the segment.
    #[test]
    fn warming_goes_on_when_rounds_stop() {
        let dir = tempfile::tempdir().unwrap();
        let (wanted, gate) = (AtomicBool::new(false), WarmGate::default());
        gate.round_done(64 << 10, Duration::ZERO);
        let t = Instant::now();
        let seg = warmed_in_background(dir.path(), &wanted, &gate).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "finished by time");
        if let Some((_, unwritten)) = unwritten_extents(seg.file()) {
            assert_eq!(unwritten, 0, "warming left unwritten extents");
        }
    }
}
