//! Retired commit-log segments kept for reuse as new ones (`recycleCommitLogSegments`).
//!
//! Why: a new segment's blocks have never been written, and appending into them costs every
//! group commit more than overwriting written blocks (ext4 converts unwritten extents, and on
//! the reference VM, whose disk takes discards, the host seems to allocate the blocks inside the
//! guest's flush: 64 KiB + fdatasync took 284-307 us into new space, 226-249 us over extents
//! made unwritten again but still allocated, 181-208 us over written blocks). Warming (zeros written ahead) moves that cost, it does
//! not remove it: the zeros are a second write of every byte. A segment that retention takes
//! out of the log has all its blocks written and allocated, so instead of unlinking it the
//! deleter renames it into this pool, and the allocator renames it back in as the next segment,
//! unwarmed. PostgreSQL recycles its WAL segments the same way. A fresh store has nothing to
//! reuse and still warms.
//!
//! A reused file holds the old segment's records past the write position. They are never served
//! and never recovered: readers stop at the published end, recovery accepts a record only where
//! its stored physical offset equals its place (an old record's offset is the old segment's),
//! and after a crash also checks its CRC; `CommitLog::recover_to` then zeros the tail.
//!
//! Readers of the old segment must never see the new bytes. Shards' readers refuse ranges below
//! the writer's published minimum and drop their cached mappings of them, and a zero-copy write
//! checks its range before every syscall that reads the file (`SegmentRange::is_live`). What
//! the kernel already holds is protected here: before a file is reused, an
//! `FALLOC_FL_INSERT_RANGE` + `FALLOC_FL_COLLAPSE_RANGE` of one block at its start drops all its
//! page-cache pages (pages spliced into pipes or sockets keep the old bytes, detached) while
//! its extents stay written, on the same blocks. (`FALLOC_FL_ZERO_RANGE` drops them too but
//! makes the extents unwritten again, which costs the group commits most of what reuse saves:
//! in the SYNC bench 121-127k msg/s, against 114-119k for fresh warmed segments and 148-165k
//! for reused written ones with their pages dropped.) And a file is reused only
//! `recycle_quarantine` after it was retired, so a reader between its check and its syscall
//! when the segment was retired has long finished.
//!
//! The pool lives in the commit-log directory as `recycle-<retired at>-<old name>` files (names
//! that are not segment names, so loading ignores them). The time is CLOCK_BOOTTIME ms; files
//! found at open, retired by an earlier run, get 0, since no reader of this run ever mapped
//! them. The deleter thread is the only one that adds (`put`) or purges, the allocator's thread
//! (or the writer, allocating synchronously) the only one that takes; each move is a rename
//! followed by a directory fsync, so a crash leaves every file either a pooled file or a
//! segment, never both. `len` is a counter kept beside the files, so checking the pool costs no
//! directory listing. Pooled files count as used disk space;
//! retention has the deleter purge them when it deletes forcibly or appends are refused.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::fault::{FaultHook, FaultPoint};
use crate::mapped_file::{alloc_error, segment_file_name, sync_dir, MappedFile, Warm};
use crate::StoreError;

const PREFIX: &str = "recycle-";

/// Whether `name` is a reuse-pool file's name (`recycle-...`), as opposed to a segment's.
pub fn is_pool_file_name(name: &str) -> bool {
    name.starts_with(PREFIX)
}

#[derive(Debug)]
pub struct RecyclePool {
    dir: PathBuf,
    /// `mappedFileSizeCommitLog`: only files of exactly this size are kept.
    size: u64,
    /// Files kept at most (0: recycling off, every retired segment is unlinked).
    cap: usize,
    /// A file is reused only this long after it was retired.
    quarantine: Duration,
    len: AtomicUsize,
}

impl RecyclePool {
    /// The pool of the commit-log directory `dir`: files left by an earlier run are kept if they
    /// have the segment size, up to `cap`, and may be reused at once; the others are unlinked.
    pub fn open(
        dir: &Path,
        size: u64,
        cap: usize,
        quarantine: Duration,
    ) -> Result<Self, StoreError> {
        let pool = RecyclePool {
            dir: dir.to_path_buf(),
            size,
            cap,
            quarantine,
            len: AtomicUsize::new(0),
        };
        let mut kept = 0;
        let mut changed = false;
        for (path, retired_at, old) in pool.files()? {
            let len = std::fs::metadata(&path)
                .map_err(|e| StoreError::io(&path, e))?
                .len();
            if kept < cap && len == size {
                kept += 1;
                if retired_at != 0 {
                    rename_noreplace(&path, &pool.pool_path(0, &old))?;
                    changed = true;
                }
                continue;
            }
            std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            tracing::info!(path = %path.display(), len, "removed a retired segment not kept for reuse");
            changed = true;
        }
        if changed {
            sync_dir(dir)?;
        }
        pool.len.store(kept, Ordering::Release);
        Ok(pool)
    }

    /// Files in the pool (as last counted by the threads that move them).
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the pool.
    pub fn bytes(&self) -> u64 {
        self.len() as u64 * self.size
    }

    /// On the deleter thread: moves the retired segment at `path` (already unmapped) into the
    /// pool. Ok(false) when the pool is full, recycling is off or the file is not a whole
    /// segment: the caller unlinks it.
    pub fn put(&self, path: &Path) -> Result<bool, StoreError> {
        if self.len() >= self.cap {
            return Ok(false);
        }
        let len = std::fs::metadata(path)
            .map_err(|e| StoreError::io(path, e))?
            .len();
        if len != self.size {
            return Ok(false);
        }
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return Ok(false);
        };
        let to = self.pool_path(boottime_ms().max(1), name);
        rename_noreplace(path, &to)?;
        self.len.fetch_add(1, Ordering::AcqRel);
        sync_dir(&self.dir)?;
        tracing::info!(from = %path.display(), to = %to.display(), "retired commit-log segment kept for reuse");
        Ok(true)
    }

    /// On the deleter thread: unlinks every pooled file (retention is freeing space forcibly).
    pub fn purge(&self) -> Result<(), StoreError> {
        let mut removed = false;
        for (path, ..) in self.files()? {
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    self.len.fetch_sub(1, Ordering::AcqRel);
                    removed = true;
                    tracing::info!(path = %path.display(), "deleted a retired segment kept for reuse");
                }
                // Taken by the allocator meanwhile.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(&path, e)),
            }
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// A pooled file, retired at least the quarantine ago, with its page cache dropped, renamed
    /// to the segment at `start` and mapped; or None (nothing ready, or the move failed: logged,
    /// and the caller creates the segment as if the pool were empty). The rename is durable
    /// before this returns: records acknowledged in the segment must not go back to a pool name
    /// in a crash.
    pub fn take(&self, start: u64) -> Option<MappedFile> {
        if self.is_empty() {
            return None;
        }
        let target = self.dir.join(segment_file_name(start));
        let files = match self.files() {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "listing retired segments");
                return None;
            }
        };
        let now = boottime_ms();
        let quarantine = self.quarantine.as_millis() as u64;
        for (from, retired_at, _) in files {
            if retired_at != 0 && now < retired_at.saturating_add(quarantine) {
                continue;
            }
            if let Err(e) = drop_page_cache(&from) {
                // Without that, readers' spliced pages could change under them: never reused.
                tracing::warn!(error = %e, "cannot drop a retired segment's pages; deleting it");
                match std::fs::remove_file(&from) {
                    Ok(()) => {
                        self.len.fetch_sub(1, Ordering::AcqRel);
                    }
                    Err(e) => tracing::warn!(error = %e, "deleting a retired segment"),
                }
                continue;
            }
            match rename_noreplace(&from, &target) {
                Ok(()) => {}
                // Purged meanwhile: try the next one.
                Err(StoreError::Io { ref source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    continue
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reusing a retired segment");
                    return None;
                }
            }
            self.len.fetch_sub(1, Ordering::AcqRel);
            // On failure the file keeps its segment name; creating the segment then reuses it
            // and reports the directory's error.
            let opened =
                sync_dir(&self.dir).and_then(|()| MappedFile::open(&target, start, self.size));
            return match opened {
                Ok(mut mf) => {
                    mf.set_reused();
                    tracing::info!(from = %from.display(), start, "reusing a retired commit-log segment");
                    Some(mf)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reusing a retired segment");
                    None
                }
            };
        }
        None
    }

    /// The segment at `start` in this pool's directory: a retired one when one is ready (no
    /// warming: its blocks are written), else created and warmed as `warm` says.
    pub fn take_or_create(
        &self,
        start: u64,
        fault: Option<&FaultHook>,
        warm: Warm<'_>,
    ) -> Result<MappedFile, StoreError> {
        if !self.is_empty() {
            // The same seam as creating: an injected allocation failure fails either way.
            let path = self.dir.join(segment_file_name(start));
            FaultHook::check(fault, FaultPoint::AllocateSegment)
                .map_err(|e| alloc_error(&path, e))?;
            if let Some(mf) = self.take(start) {
                return Ok(mf);
            }
        }
        MappedFile::create(&self.dir, start, self.size, fault, warm)
    }

    fn pool_path(&self, retired_at: u64, old: &str) -> PathBuf {
        self.dir.join(format!("{PREFIX}{retired_at:020}-{old}"))
    }

    /// (path, retired at, old segment name) of the pooled files, oldest retired first. A file
    /// whose name does not parse counts as retired now (reused last).
    fn files(&self) -> Result<Vec<(PathBuf, u64, String)>, StoreError> {
        let mut out = Vec::new();
        let rd = std::fs::read_dir(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
        for entry in rd {
            let entry = entry.map_err(|e| StoreError::io(&self.dir, e))?;
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
                continue;
            };
            let parsed = rest
                .split_once('-')
                .filter(|(at, _)| at.len() == 20)
                .and_then(|(at, old)| Some((at.parse().ok()?, old.to_owned())));
            let (at, old) = parsed.unwrap_or_else(|| (boottime_ms(), rest.to_owned()));
            out.push((entry.path(), at, old));
        }
        out.sort_by_key(|(_, at, _)| *at);
        Ok(out)
    }
}

/// CLOCK_BOOTTIME in ms: monotonic, and counting suspended time, as the quarantine should.
fn boottime_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: plain syscall writing into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1000) + ts.tv_nsec as u64 / 1_000_000
}

/// Drops every page-cache page of the file at `path` while keeping its blocks and written
/// extents: one block inserted at the start and collapsed again. Pages held by pipes and sockets
/// are detached with their bytes; the next writes go to new pages.
fn drop_page_cache(path: &Path) -> Result<(), StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    let block = file
        .metadata()
        .map_err(|e| StoreError::io(path, e))?
        .blksize() as libc::off_t;
    for mode in [libc::FALLOC_FL_INSERT_RANGE, libc::FALLOC_FL_COLLAPSE_RANGE] {
        // SAFETY: plain syscall on a valid, owned fd.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, 0, block) };
        if rc != 0 {
            return Err(StoreError::io(path, std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// rename(2) that fails with EEXIST instead of replacing `to`.
fn rename_noreplace(from: &Path, to: &Path) -> Result<(), StoreError> {
    let c =
        |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(|e| StoreError::io(p, e.into()));
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: plain syscall with two valid NUL-terminated paths.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc != 0 {
        return Err(StoreError::io(from, std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEG: u64 = 64 << 10;

    fn segment(dir: &Path, start: u64, fill: u8) -> PathBuf {
        let path = dir.join(segment_file_name(start));
        std::fs::write(&path, vec![fill; SEG as usize]).unwrap();
        path
    }

    /// Proves a retired segment goes into the pool and comes back as the requested segment with
    /// its bytes, and that the counter follows the files.
    #[test]
    fn put_then_take_moves_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let pool = RecyclePool::open(dir.path(), SEG, 2, Duration::ZERO).unwrap();
        let old = segment(dir.path(), 0, 9);
        assert!(pool.put(&old).unwrap());
        assert!(!old.exists());
        assert_eq!((pool.len(), pool.bytes()), (1, SEG));
        let mf = pool.take(4 * SEG).expect("a pooled file");
        assert_eq!(mf.start(), 4 * SEG);
        assert_eq!(mf.path(), dir.path().join(segment_file_name(4 * SEG)));
        assert!(
            mf.bytes().iter().all(|&b| b == 9),
            "the old bytes, unwarmed"
        );
        assert!(pool.is_empty());
        assert!(pool.take(5 * SEG).is_none());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![segment_file_name(4 * SEG)]);
    }

    /// Proves the pool keeps at most `cap` files (0: none) and refuses a file of another size.
    #[test]
    fn put_respects_the_cap_and_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let pool = RecyclePool::open(dir.path(), SEG, 1, Duration::ZERO).unwrap();
        assert!(pool.put(&segment(dir.path(), 0, 1)).unwrap());
        let second = segment(dir.path(), SEG, 2);
        assert!(!pool.put(&second).unwrap(), "full");
        assert!(second.exists(), "left for the caller to unlink");
        let off = RecyclePool::open(&dir.path().join("."), SEG, 0, Duration::ZERO).unwrap();
        assert_eq!(
            off.len(),
            0,
            "cap 0 keeps nothing, even files already pooled"
        );
        assert!(!off.put(&second).unwrap());
        let small = dir.path().join(segment_file_name(7 * SEG));
        std::fs::write(&small, [0u8; 4096]).unwrap();
        let pool = RecyclePool::open(dir.path(), SEG, 4, Duration::ZERO).unwrap();
        assert!(!pool.put(&small).unwrap(), "not a whole segment");
    }

    /// Proves reopening keeps pooled files of the segment size up to the cap and unlinks the
    /// rest, and that a purge empties the pool.
    #[test]
    fn open_prunes_and_purge_empties() {
        let dir = tempfile::tempdir().unwrap();
        let pool = RecyclePool::open(dir.path(), SEG, 3, Duration::ZERO).unwrap();
        for i in 0..3 {
            assert!(pool.put(&segment(dir.path(), i * SEG, 1)).unwrap());
        }
        std::fs::write(dir.path().join("recycle-odd"), [0u8; 100]).unwrap();
        let pool = RecyclePool::open(dir.path(), SEG, 2, Duration::ZERO).unwrap();
        assert_eq!(pool.len(), 2);
        assert_eq!(pool.files().unwrap().len(), 2);
        pool.purge().unwrap();
        assert!(pool.is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Proves a file retired in this run waits out the quarantine, and one found at open (an
    /// earlier run's) does not.
    #[test]
    fn quarantine_holds_files_retired_in_this_run() {
        let dir = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let pool = RecyclePool::open(dir.path(), SEG, 2, hour).unwrap();
        assert!(pool.put(&segment(dir.path(), 0, 3)).unwrap());
        assert!(pool.take(SEG).is_none(), "retired just now");
        assert_eq!(pool.len(), 1);
        let reopened = RecyclePool::open(dir.path(), SEG, 2, hour).unwrap();
        let mf = reopened.take(SEG).expect("retired by an earlier run");
        assert_eq!(mf.bytes()[0], 3);
    }

    /// Proves the old bytes a pipe holds (a zero-copy pull in flight) survive the file's reuse
    /// and new writes, while the file keeps its size and blocks.
    #[test]
    fn reuse_leaves_spliced_pages_alone() {
        let dir = tempfile::tempdir().unwrap();
        let pool = RecyclePool::open(dir.path(), SEG, 2, Duration::ZERO).unwrap();
        let old = segment(dir.path(), 0, b'A');
        let reader = std::fs::File::open(&old).unwrap();
        let mut fds = [0; 2];
        // SAFETY: plain syscalls on valid fds.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            let mut off: libc::loff_t = 0;
            let n = libc::splice(
                reader.as_raw_fd(),
                &mut off,
                fds[1],
                std::ptr::null_mut(),
                4096,
                0,
            );
            assert_eq!(n, 4096);
        }
        assert!(pool.put(&old).unwrap());
        let mf = pool.take(SEG).unwrap();
        std::os::unix::fs::FileExt::write_all_at(mf.file(), &[b'B'; 4096], 0).unwrap();
        let mut got = [0u8; 4096];
        // SAFETY: reading into a valid buffer from the pipe's read end; then closing both ends.
        let n = unsafe {
            let n = libc::read(fds[0], got.as_mut_ptr().cast(), 4096);
            libc::close(fds[0]);
            libc::close(fds[1]);
            n
        };
        assert_eq!(n, 4096);
        assert!(
            got.iter().all(|&b| b == b'A'),
            "the pipe kept the old bytes"
        );
        assert_eq!(mf.bytes()[0], b'B');
        assert_eq!(mf.file().metadata().unwrap().len(), SEG);
    }

    /// Proves a pooled file never replaces an existing segment: the take fails over to None and
    /// both files stay.
    #[test]
    fn take_never_replaces_a_segment() {
        let dir = tempfile::tempdir().unwrap();
        let pool = RecyclePool::open(dir.path(), SEG, 2, Duration::ZERO).unwrap();
        assert!(pool.put(&segment(dir.path(), 0, 1)).unwrap());
        let existing = segment(dir.path(), SEG, 5);
        assert!(pool.take(SEG).is_none());
        assert_eq!(std::fs::read(&existing).unwrap()[0], 5);
        assert_eq!(pool.len(), 1);
        let mf = pool.take_or_create(2 * SEG, None, Warm::Off).unwrap();
        assert_eq!(mf.bytes()[0], 1, "the pooled file");
        let mf = pool.take_or_create(3 * SEG, None, Warm::Off).unwrap();
        assert_eq!(mf.bytes()[0], 0, "created: the pool is empty");
    }
}
