//! Retention: deletes the oldest commit-log segments when they are older than
//! `file_reserved_time_hours` (file mtime) or while disk usage is above
//! `disk_max_used_space_ratio`, and decides whether appends are still allowed (hard limit =
//! ratio + 10, at most 95 %). Consume queues are trimmed by their owner shards against the
//! published minimum physical offset.
//!
//! Called by the writer thread every `RETENTION_CHECK_INTERVAL_MS`. Invariant: the active
//! segment is never deleted, so reads of recent data and appends never lose their file.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::constants::{DISK_HARD_LIMIT_EXTRA_PCT, DISK_HARD_LIMIT_MAX_PCT};
use crate::store::commit_log::CommitLog;
use crate::store::config::StoreConfig;
use crate::store::StoreError;

/// Segments deleted per check at most, so one check never stalls the writer for long.
pub const RETENTION_MAX_DELETES_PER_CHECK: usize = 10;

#[derive(Debug, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Start offsets of the segments deleted.
    pub deleted: Vec<u64>,
    pub used_percent: u32,
    /// False past the hard limit: appends must fail with DiskFull.
    pub writable: bool,
}

/// Used space of the filesystem holding `path`, in percent (as `df` computes it).
pub fn disk_used_percent(path: &Path) -> Result<u32, StoreError> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| StoreError::Invalid("path with NUL".into()))?;
    // SAFETY: statvfs writes into the zeroed struct we pass; `c` is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(StoreError::io(path, std::io::Error::last_os_error()));
    }
    let used = st.f_blocks.saturating_sub(st.f_bfree);
    let total = used + st.f_bavail;
    if total == 0 {
        return Ok(0);
    }
    Ok((used as u128 * 100 / total as u128) as u32)
}

pub fn hard_limit_percent(cfg: &StoreConfig) -> u32 {
    (cfg.disk_max_used_space_ratio + DISK_HARD_LIMIT_EXTRA_PCT).min(DISK_HARD_LIMIT_MAX_PCT)
}

fn measure(log: &CommitLog, cfg: &StoreConfig) -> Result<u32, StoreError> {
    match cfg.fault.as_ref().and_then(|f| f.0.disk_used_percent()) {
        Some(p) => Ok(p),
        None => disk_used_percent(log.dir()),
    }
}

/// One retention pass at time `now`.
pub fn run(
    log: &mut CommitLog,
    cfg: &StoreConfig,
    now: SystemTime,
) -> Result<RetentionOutcome, StoreError> {
    let reserved = Duration::from_secs(cfg.file_reserved_time_hours * 3600);
    let mut used = measure(log, cfg)?;
    let mut deleted = Vec::new();
    while deleted.len() < RETENTION_MAX_DELETES_PER_CHECK && log.segments().len() > 1 {
        let oldest = &log.segments()[0];
        let meta =
            std::fs::metadata(oldest.path()).map_err(|e| StoreError::io(oldest.path(), e))?;
        let mtime = meta
            .modified()
            .map_err(|e| StoreError::io(oldest.path(), e))?;
        let expired = now.duration_since(mtime).is_ok_and(|age| age > reserved);
        let over = used > cfg.disk_max_used_space_ratio;
        if !expired && !over {
            break;
        }
        match log.delete_oldest_segment()? {
            Some(start) => {
                tracing::info!(start, expired, used, "retention deleted commit-log segment");
                deleted.push(start);
            }
            None => break, // only the active segment is left
        }
        used = measure(log, cfg)?;
    }
    Ok(RetentionOutcome {
        deleted,
        used_percent: used,
        writable: used < hard_limit_percent(cfg),
    })
}
