//! Retention (RocketMQ's CleanCommitLogService): deletes the oldest commit-log segments and
//! decides whether appends are still allowed (hard limit = `diskMaxUsedSpaceRatio` + 10, at
//! most 95 %).
//!
//! A pass deletes anything only when it is one of the `deleteWhen` hours of the local day, or
//! disk usage is above `diskMaxUsedSpaceRatio` (then at any hour). It then deletes, oldest
//! first, the segments whose file mtime is older than `fileReservedTime` hours; past
//! `diskSpaceCleanForciblyRatio` (or the hard limit) it deletes them whatever their age. Consume
//! queues and index files are trimmed afterwards against the new minimum physical offset: the
//! queues by their owner shards (`broker::clean`), the index by the writer (`IndexService`).
//!
//! Called by the writer thread every `cleanResourceInterval` with a `PassClock` (injected by
//! tests). Invariant: the active segment is never deleted, so reads of recent data and appends
//! never lose their file; at most `RETENTION_MAX_DELETES_PER_CHECK` segments go per pass.

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

/// RocketMQ clamps the forcible-clean ratio to this range whatever is configured.
const CLEAN_FORCIBLY_MIN_PCT: u32 = 30;
const CLEAN_FORCIBLY_MAX_PCT: u32 = 85;

/// When a pass runs: the wall clock (file ages) and the hour of the local day (`deleteWhen`).
/// Tests build one by hand; the writer uses `PassClock::system`.
#[derive(Clone, Copy, Debug)]
pub struct PassClock {
    pub now: SystemTime,
    pub local_hour: u32,
}

impl PassClock {
    pub fn system() -> PassClock {
        let now = SystemTime::now();
        PassClock {
            now,
            local_hour: local_hour(now),
        }
    }
}

/// Hour of the local day (0..=23) at `t`, in the process's time zone as Java's `Calendar` uses.
pub fn local_hour(t: SystemTime) -> u32 {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let secs = libc::time_t::try_from(secs).unwrap_or(libc::time_t::MAX);
    // SAFETY: localtime_r reads `secs` and writes only into the zeroed `tm` we own; it is the
    // re-entrant variant, so no static buffer is shared with other threads.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: as above; both pointers are valid for the duration of the call.
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    if ok {
        tm.tm_hour.clamp(0, 23) as u32
    } else {
        ((secs / 3600) % 24) as u32 // no zone data: UTC
    }
}

/// Usage above which segments go whatever their age (RocketMQ's `cleanImmediately`): the
/// clamped forcible ratio, or the hard limit when that is lower, so that a store refusing
/// appends always frees space.
fn clean_forcibly_above(cfg: &StoreConfig) -> u32 {
    let ratio = cfg
        .disk_space_clean_forcibly_ratio
        .clamp(CLEAN_FORCIBLY_MIN_PCT, CLEAN_FORCIBLY_MAX_PCT);
    ratio.min(hard_limit_percent(cfg).saturating_sub(1))
}

/// Is the file at `path` older than `reserved` at `now`? (mtime, as RocketMQ's lastModified.)
fn expired(path: &Path, reserved: Duration, now: SystemTime) -> Result<bool, StoreError> {
    let meta = std::fs::metadata(path).map_err(|e| StoreError::io(path, e))?;
    let mtime = meta.modified().map_err(|e| StoreError::io(path, e))?;
    Ok(now.duration_since(mtime).is_ok_and(|age| age > reserved))
}

/// One retention pass at `clock`.
pub fn run(
    log: &mut CommitLog,
    cfg: &StoreConfig,
    clock: PassClock,
) -> Result<RetentionOutcome, StoreError> {
    let reserved = Duration::from_secs(cfg.file_reserved_time_hours.saturating_mul(3600));
    let mut used = measure(log, cfg)?;
    let time_up = cfg.delete_when.contains(clock.local_hour);
    let space_low = used > cfg.disk_max_used_space_ratio;
    let mut deleted = Vec::new();
    while (time_up || space_low)
        && deleted.len() < RETENTION_MAX_DELETES_PER_CHECK
        && log.segments().len() > 1
    {
        let forcibly = cfg.clean_file_forcibly_enable && used > clean_forcibly_above(cfg);
        let old = expired(log.segments()[0].path(), reserved, clock.now)?;
        if !old && !forcibly {
            break;
        }
        match log.delete_oldest_segment()? {
            Some(start) => {
                tracing::info!(
                    start,
                    old,
                    forcibly,
                    used,
                    time_up,
                    "retention deleted commit-log segment"
                );
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

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::store::config::DeleteWhen;
    use crate::store::fault::{FailNth, FaultHook, FaultPoint};
    use crate::writer::testkit::record;

    const SEG: u64 = 64 << 10;
    const HOUR: Duration = Duration::from_secs(3600);

    /// Small segments, `deleteWhen=04`, 72 h reserved, and a disk that reports `used` percent.
    fn cfg(root: &Path, used: u32) -> StoreConfig {
        let mut fault = FailNth::new(FaultPoint::Flush, 0, 0, 0); // fails nothing
        fault.disk_used_percent = Some(used);
        StoreConfig {
            mapped_file_size_commit_log: SEG,
            max_message_size: 16 << 10,
            warm_mapped_file: false,
            fault: Some(FaultHook(Arc::new(fault))),
            ..StoreConfig::with_root(root)
        }
    }

    /// A commit log of `full` filled segments plus the active one; the first `old` segment
    /// files get an mtime 100 hours before `now`, the rest `now`.
    fn log_with(c: &StoreConfig, full: usize, old: usize, now: SystemTime) -> CommitLog {
        let mut log = CommitLog::load(c, None).unwrap();
        log.recover_to(0, 0).unwrap();
        let rec = record("T", 0, &[7u8; 10_000], "");
        let mut qo = 0;
        while log.segments().len() < full + 1 || log.max_phy_offset().is_multiple_of(SEG) {
            log.append(&rec.bytes, qo, 1).unwrap();
            qo += 1;
        }
        log.flush().unwrap();
        for (i, seg) in log.segments().iter().enumerate() {
            let t = if i < old { now - 100 * HOUR } else { now };
            let f = std::fs::File::options()
                .write(true)
                .open(seg.path())
                .unwrap();
            f.set_modified(t).unwrap();
        }
        log
    }

    fn at(now: SystemTime, local_hour: u32) -> PassClock {
        PassClock { now, local_hour }
    }

    /// Proves `deleteWhen` reads RocketMQ's "04" and "04;16" forms and refuses what Java's
    /// `Integer.parseInt` would choke on or what never matches an hour.
    #[test]
    fn delete_when_parses_rocketmq_forms() {
        let one = DeleteWhen::parse("04").unwrap();
        assert_eq!(one, DeleteWhen::DEFAULT);
        assert!((0..24).filter(|h| one.contains(*h)).eq([4]));
        let two = DeleteWhen::parse("04;16").unwrap();
        assert!((0..24).filter(|h| two.contains(*h)).eq([4, 16]));
        assert!(DeleteWhen::parse("0; 23").unwrap().contains(23));
        assert!(DeleteWhen::parse("004").unwrap().contains(4));
        for bad in ["", "24", "4;", "x", "-1", "+4", "99999999999"] {
            assert!(DeleteWhen::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(!two.contains(40));
    }

    /// Proves the local hour is a real hour of the day and walks through the whole day.
    #[test]
    fn local_hour_covers_the_day() {
        let base = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let hours: std::collections::BTreeSet<u32> =
            (0..24).map(|i| local_hour(base + i * HOUR)).collect();
        assert!(hours.iter().all(|h| *h < 24));
        assert!(hours.len() >= 23, "{hours:?}"); // a DST change may repeat or skip one hour
    }

    /// Proves expired segments wait for the `deleteWhen` hour: nothing goes at 03:xx, all
    /// expired ones go (oldest first, never the active one) at 04:xx.
    #[test]
    fn expired_segments_go_only_at_the_delete_when_hour() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), 10);
        let now = SystemTime::now();
        let mut log = log_with(&c, 3, 4, now);
        let out = run(&mut log, &c, at(now, 3)).unwrap();
        assert!(out.deleted.is_empty());
        assert_eq!(log.min_phy_offset(), 0);
        let out = run(&mut log, &c, at(now, 4)).unwrap();
        assert_eq!(out.deleted, vec![0, SEG, 2 * SEG]);
        assert_eq!(log.segments().len(), 1, "the active segment stays");
        assert_eq!(log.min_phy_offset(), 3 * SEG);
        assert!(out.writable);
        assert!(!c.commit_log_dir().join("00000000000000000000").exists());
    }

    /// Proves the pass stops at the first segment younger than `fileReservedTime`, even when
    /// it is the deletion hour.
    #[test]
    fn young_segments_survive_the_delete_when_hour() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), 10);
        let now = SystemTime::now();
        let mut log = log_with(&c, 3, 1, now);
        let out = run(&mut log, &c, at(now, 4)).unwrap();
        assert_eq!(out.deleted, vec![0]);
        assert_eq!(log.min_phy_offset(), SEG);
    }

    /// Proves usage above `diskMaxUsedSpaceRatio` runs the pass at any hour but still deletes
    /// only expired segments while under the forcible ratio.
    #[test]
    fn space_pressure_deletes_expired_segments_at_any_hour() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), 80);
        let now = SystemTime::now();
        let mut log = log_with(&c, 3, 2, now);
        let out = run(&mut log, &c, at(now, 13)).unwrap();
        assert_eq!(out.deleted, vec![0, SEG]);
        assert_eq!(out.used_percent, 80);
        assert!(out.writable, "80 % is under the 85 % hard limit");
    }

    /// Proves usage past the forcible ratio deletes segments whatever their age (never the
    /// active one) and reports the store unwritable; `cleanFileForciblyEnable=false` stops that.
    #[test]
    fn forcible_ratio_deletes_young_segments() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), 90);
        let now = SystemTime::now();
        let mut log = log_with(&c, 3, 0, now);
        let keep = StoreConfig {
            clean_file_forcibly_enable: false,
            ..c.clone()
        };
        let out = run(&mut log, &keep, at(now, 13)).unwrap();
        assert!(out.deleted.is_empty());
        assert!(!out.writable);
        let out = run(&mut log, &c, at(now, 13)).unwrap();
        assert_eq!(out.deleted, vec![0, SEG, 2 * SEG]);
        assert_eq!(log.segments().len(), 1);
        assert!(!out.writable, "the disk still reports 90 %");
    }
}
