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
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{MmapMut, MmapOptions};

use crate::constants::{OS_PAGE_SIZE, SEGMENT_FILE_NAME_LEN};
use crate::store::fault::{FaultHook, FaultPoint};
use crate::store::StoreError;

pub struct MappedFile {
    path: PathBuf,
    /// Shared with the flush threads (a clone of the Arc, not a dup'd descriptor, per batch).
    file: Arc<File>,
    map: MmapMut,
    start: u64,
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
        warm: bool,
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
        if warm {
            mf.warm();
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
        })
    }

    /// Touches one byte per page so later writes do not take first-touch faults.
    fn warm(&self) {
        let mut sum = 0u8;
        for off in (0..self.map.len()).step_by(OS_PAGE_SIZE as usize) {
            sum = sum.wrapping_add(self.map[off]);
        }
        std::hint::black_box(sum);
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
