//! Fault seam: lets tests (and the crash-test driver) make segment allocation or flushing fail
//! with a chosen errno, or pretend the disk is fuller than it is. Production passes no injector.
//!
//! Called by `mapped_file` (allocation, warming syncs), `commit_log` (flush), `retention` (disk
//! usage) and the checkpoint thread (index sync).

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// Creating + fallocating a new commit-log segment.
    AllocateSegment,
    /// msync/fdatasync of commit-log bytes.
    Flush,
    /// The pwritev of a batch's records into the active segment.
    Write,
    /// fdatasync of IndexFiles before their timestamp goes into the checkpoint.
    IndexSync,
    /// fdatasync of a segment being zero-filled ahead of the writer (`mapped_file` warming).
    WarmSync,
}

pub trait FaultInjector: Send + Sync {
    /// `Some(err)` makes the operation at `point` fail with `err` instead of running.
    fn check(&self, point: FaultPoint) -> Option<io::Error>;
    /// Overrides the measured disk usage (percent) for retention decisions.
    fn disk_used_percent(&self) -> Option<u32> {
        None
    }
    /// Overrides the measured disk usage in bytes (takes precedence over
    /// `disk_used_percent`, which is a fixed figure nothing the store does can change).
    fn disk_usage(&self) -> Option<DiskUsage> {
        None
    }
}

/// Used and usable bytes of a filesystem, as `df` counts them (reserved blocks excluded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskUsage {
    pub used_bytes: u64,
    pub total_bytes: u64,
}

impl DiskUsage {
    /// Used space in percent, rounded down (0 for an empty filesystem).
    pub fn percent(&self) -> u32 {
        if self.total_bytes == 0 {
            return 0;
        }
        (u128::from(self.used_bytes) * 100 / u128::from(self.total_bytes)) as u32
    }

    /// The usage once `bytes` more are freed.
    pub fn after_freeing(self, bytes: u64) -> DiskUsage {
        DiskUsage {
            used_bytes: self.used_bytes.saturating_sub(bytes),
            ..self
        }
    }
}

/// Cloneable, debuggable holder for an injector inside `StoreConfig`.
#[derive(Clone)]
pub struct FaultHook(pub Arc<dyn FaultInjector>);

impl fmt::Debug for FaultHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FaultHook")
    }
}

impl FaultHook {
    pub fn check(hook: Option<&FaultHook>, point: FaultPoint) -> io::Result<()> {
        match hook.and_then(|h| h.0.check(point)) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Fails calls number `first..first+count` (0-based) at `point` with `errno`; also can report a
/// fixed disk usage.
pub struct FailNth {
    pub point: FaultPoint,
    pub first: u64,
    pub count: u64,
    pub errno: i32,
    pub disk_used_percent: Option<u32>,
    calls: AtomicU64,
}

impl FailNth {
    pub fn new(point: FaultPoint, first: u64, count: u64, errno: i32) -> Self {
        FailNth {
            point,
            first,
            count,
            errno,
            disk_used_percent: None,
            calls: AtomicU64::new(0),
        }
    }

    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

impl FaultInjector for FailNth {
    fn check(&self, point: FaultPoint) -> Option<io::Error> {
        if point != self.point {
            return None;
        }
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        (n >= self.first && n - self.first < self.count)
            .then(|| io::Error::from_raw_os_error(self.errno))
    }

    fn disk_used_percent(&self) -> Option<u32> {
        self.disk_used_percent
    }
}
