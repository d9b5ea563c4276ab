//! Retention (RocketMQ's CleanCommitLogService): takes the oldest commit-log segments out of
//! the store and decides whether appends are still allowed (hard limit =
//! `diskMaxUsedSpaceRatio` + 10, at most 95 %).
//!
//! A pass deletes anything only when it is one of the `deleteWhen` hours of the local day, or
//! disk usage is above `diskMaxUsedSpaceRatio` (then at any hour). It then deletes, oldest
//! first, the segments whose file mtime is older than `fileReservedTime` hours; past
//! `diskSpaceCleanForciblyRatio` (or the hard limit) it deletes them whatever their age. Consume
//! queues and index files are trimmed afterwards against the new minimum physical offset: the
//! queues by their owner shards (`broker::clean`), the index by the writer (`expire_index`).
//!
//! "Deletes" means: detaches the segment from the commit log (the minimum physical offset moves
//! at once) and hands it to the file deleter (`store::deleter`), which unlinks it on its own
//! thread, pausing `deleteCommitLogFilesInterval` between files. Usage is judged as if every
//! segment waiting there were already gone (`FileDeleter::queued_bytes`): its space is on its
//! way back, and counting it as used would make one pass under disk pressure take more segments
//! than it needs. Whether appends are allowed is judged on the disk as it is: a queued file
//! still holds its blocks. An expired segment goes to the deleter as `Retired`, which may keep
//! it for reuse as a later segment (`store::recycle`; those count as used space); one deleted
//! forcibly goes as `Segment`, which also empties that pool, and so does a pass that finds
//! appends refused. When the deleter's queue is full the pass stops and the segment stays
//! in the log for the next pass.
//!
//! Called by the writer thread every `cleanResourceInterval` with a `PassClock` (injected by
//! tests). Invariant: the active segment is never deleted, so reads of recent data and appends
//! never lose their file; at most `RETENTION_MAX_DELETES_PER_CHECK` segments go per pass.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::commit_log::CommitLog;
use crate::config::StoreConfig;
use crate::constants::{DISK_HARD_LIMIT_EXTRA_PCT, DISK_HARD_LIMIT_MAX_PCT};
use crate::deleter::{DetachedFile, FileDeleter, DELETER_QUEUE_CAPACITY};
pub use crate::fault::DiskUsage;
use crate::{IndexService, StoreError};

/// Segments deleted per check at most, so one check never stalls the writer for long.
pub const RETENTION_MAX_DELETES_PER_CHECK: usize = 10;
// One full pass fits in the deleter's queue.
const _: () = assert!(DELETER_QUEUE_CAPACITY >= RETENTION_MAX_DELETES_PER_CHECK);

#[derive(Debug, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Start offsets of the segments detached and handed to the deleter.
    pub deleted: Vec<u64>,
    /// Usage counting the segments waiting in the deleter as freed.
    pub used_percent: u32,
    /// False past the hard limit: appends must fail with DiskFull.
    pub writable: bool,
}

/// Used and usable bytes of the filesystem holding `path` (as `df` computes them).
pub fn disk_usage(path: &Path) -> Result<DiskUsage, StoreError> {
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
    let block = st.f_frsize;
    Ok(DiskUsage {
        used_bytes: used.saturating_mul(block),
        total_bytes: total.saturating_mul(block),
    })
}

pub fn hard_limit_percent(cfg: &StoreConfig) -> u32 {
    (cfg.disk_max_used_space_ratio + DISK_HARD_LIMIT_EXTRA_PCT).min(DISK_HARD_LIMIT_MAX_PCT)
}

/// Usage in percent: (with the segments queued for deletion counted as freed, as the disk
/// reports it now). The first decides how much a pass detaches; the second whether appends are
/// allowed, since queued files still hold their blocks. The queued bytes are read before the
/// disk: a file unlinked in between is then subtracted from a figure that already lacks it (the
/// pass under-deletes and the next one catches up), never counted twice as used (which could
/// make the pass delete one segment too many).
fn measure(
    log: &CommitLog,
    cfg: &StoreConfig,
    deleter: &FileDeleter,
) -> Result<(u32, u32), StoreError> {
    let queued = deleter.queued_bytes();
    let fault = cfg.fault.as_ref().map(|f| &f.0);
    let usage = match fault.and_then(|f| f.disk_usage()) {
        Some(u) => u,
        None => match fault.and_then(|f| f.disk_used_percent()) {
            Some(p) => return Ok((p, p)),
            None => disk_usage(log.dir())?,
        },
    };
    Ok((usage.after_freeing(queued).percent(), usage.percent()))
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
    /// An admin asked for expired files to go now (DELETE_EXPIRED_COMMITLOG, Java's
    /// `executeDeleteFilesManually`): the pass runs as if it were a `deleteWhen` hour.
    pub manual: bool,
}

impl PassClock {
    pub fn system() -> PassClock {
        let now = SystemTime::now();
        PassClock {
            now,
            local_hour: local_hour(now),
            manual: false,
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

/// One retention pass at `clock`; detached segments go to `deleter`.
pub fn run(
    log: &mut CommitLog,
    cfg: &StoreConfig,
    clock: PassClock,
    deleter: &FileDeleter,
) -> Result<RetentionOutcome, StoreError> {
    let reserved = Duration::from_secs(cfg.file_reserved_time_hours.saturating_mul(3600));
    let (mut used, mut on_disk) = measure(log, cfg, deleter)?;
    let time_up = clock.manual || cfg.delete_when.contains(clock.local_hour);
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
        if !deleter.has_room() {
            // Never wait for the deleter: the segment stays in the log for the next pass.
            tracing::warn!(
                queued_bytes = deleter.queued_bytes(),
                "file deleter busy; retention continues next pass"
            );
            break;
        }
        let Some(seg) = log.detach_oldest_segment() else {
            break; // only the active segment is left
        };
        let start = seg.start();
        // An expired segment may be kept for reuse; one deleted for space is unlinked, and
        // the reuse pool with it.
        deleter.submit(if forcibly {
            DetachedFile::Segment(seg)
        } else {
            DetachedFile::Retired(seg)
        });
        tracing::info!(
            start,
            old,
            forcibly,
            used,
            time_up,
            "retention detached commit-log segment for deletion"
        );
        deleted.push(start);
        (used, on_disk) = measure(log, cfg, deleter)?;
    }
    let writable = on_disk < hard_limit_percent(cfg);
    if !writable && deleter.pooled_bytes() > 0 && deleter.has_room() {
        // Segments kept for reuse are only reused by appends, which are refused now.
        tracing::warn!(
            pooled_bytes = deleter.pooled_bytes(),
            "appends refused for disk space; deleting the segments kept for reuse"
        );
        deleter.submit(DetachedFile::PurgePool);
    }
    Ok(RetentionOutcome {
        deleted,
        used_percent: used,
        writable,
    })
}

/// Hands the IndexFiles that point only below `min_phy` to the deleter (RocketMQ's
/// `deleteExpiredFile`), as many as its queue takes; the rest go at a later pass. Returns how
/// many were handed over.
pub fn expire_index(index: &mut IndexService, min_phy: u64, deleter: &FileDeleter) -> usize {
    let mut n = 0;
    while deleter.has_room() {
        let Some(f) = index.detach_expired(min_phy) else {
            break;
        };
        tracing::info!(path = %f.path().display(), min_phy, "index file expired");
        deleter.submit(DetachedFile::Index(f));
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::config::DeleteWhen;
    use crate::fault::{FailNth, FaultHook, FaultPoint};
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
            warm_mapped_file: Some(false),
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
        PassClock {
            now,
            local_hour,
            manual: false,
        }
    }

    /// A deleter that does not pause between files.
    fn deleter() -> FileDeleter {
        FileDeleter::spawn(Duration::ZERO, None).unwrap()
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
        let mut d = deleter();
        let out = run(&mut log, &c, at(now, 3), &d).unwrap();
        assert!(out.deleted.is_empty());
        assert_eq!(log.min_phy_offset(), 0);
        let out = run(&mut log, &c, at(now, 4), &d).unwrap();
        assert_eq!(out.deleted, vec![0, SEG, 2 * SEG]);
        assert_eq!(log.segments().len(), 1, "the active segment stays");
        assert_eq!(log.min_phy_offset(), 3 * SEG);
        assert!(out.writable);
        d.finish();
        assert!(!c.commit_log_dir().join("00000000000000000000").exists());
        assert!(!c.commit_log_dir().join(format!("{:020}", 2 * SEG)).exists());
    }

    /// Proves a manual pass (DELETE_EXPIRED_COMMITLOG) deletes expired segments outside the
    /// `deleteWhen` hour, and still keeps the active one.
    #[test]
    fn a_manual_pass_runs_outside_the_delete_when_hour() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), 10);
        let now = SystemTime::now();
        let mut log = log_with(&c, 3, 4, now);
        let mut d = deleter();
        let manual = PassClock {
            manual: true,
            ..at(now, 3)
        };
        let out = run(&mut log, &c, manual, &d).unwrap();
        assert_eq!(out.deleted, vec![0, SEG, 2 * SEG]);
        assert_eq!(log.segments().len(), 1);
        d.finish();
    }

    /// Proves the pass stops at the first segment younger than `fileReservedTime`, even when
    /// it is the deletion hour.
    #[test]
    fn young_segments_survive_the_delete_when_hour() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), 10);
        let now = SystemTime::now();
        let mut log = log_with(&c, 3, 1, now);
        let out = run(&mut log, &c, at(now, 4), &deleter()).unwrap();
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
        let out = run(&mut log, &c, at(now, 13), &deleter()).unwrap();
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
        let d = deleter();
        let out = run(&mut log, &keep, at(now, 13), &d).unwrap();
        assert!(out.deleted.is_empty());
        assert!(!out.writable);
        let out = run(&mut log, &c, at(now, 13), &d).unwrap();
        assert_eq!(out.deleted, vec![0, SEG, 2 * SEG]);
        assert_eq!(log.segments().len(), 1);
        assert!(!out.writable, "the disk still reports 90 %");
    }

    /// A disk of `total` bytes holding `other` bytes plus whichever of `files` still exist:
    /// unlinking one of them frees its size, as on a real filesystem.
    struct FilesDisk {
        files: Vec<std::path::PathBuf>,
        other: u64,
        total: u64,
    }

    impl crate::fault::FaultInjector for FilesDisk {
        fn check(&self, _point: FaultPoint) -> Option<std::io::Error> {
            None
        }
        fn disk_usage(&self) -> Option<DiskUsage> {
            let on_disk: u64 = self
                .files
                .iter()
                .filter_map(|p| std::fs::metadata(p).ok())
                .map(|m| m.len())
                .sum();
            Some(DiskUsage {
                used_bytes: self.other + on_disk,
                total_bytes: self.total,
            })
        }
    }

    /// Proves a pass under disk pressure counts segments queued for deletion as freed: with the
    /// deleter slow (an hour between files), usage drops from 90 % to under the forcible ratio
    /// after two young segments, so exactly two go; counting them as still used would detach
    /// every segment but the active one.
    #[test]
    fn queued_segments_count_as_freed_so_pressure_deletes_only_what_it_needs() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let mut log = log_with(&cfg(dir.path(), 10), 5, 0, now);
        let files: Vec<_> = log.segments().iter().map(|s| s.path().to_owned()).collect();
        assert_eq!(files.len(), 6);
        // 12 + 6 of 20 segments' worth used: 90 %. The forcible ratio is 84 % (one under the
        // 85 % hard limit): 17/20 is still above it, 16/20 is not.
        let disk = FilesDisk {
            files,
            other: 12 * SEG,
            total: 20 * SEG,
        };
        let c = StoreConfig {
            fault: Some(FaultHook(Arc::new(disk))),
            ..cfg(dir.path(), 10)
        };
        let d = slow_deleter();
        let out = run(&mut log, &c, at(now, 13), &d).unwrap();
        assert_eq!(out.deleted, vec![0, SEG]);
        assert_eq!(out.used_percent, 80);
        assert!(
            !out.writable,
            "the queued files still hold their blocks: 90 % is past the 85 % hard limit"
        );
        assert_eq!(log.min_phy_offset(), 2 * SEG);
        assert_eq!(d.queued_bytes(), 2 * SEG);
        assert!(
            c.commit_log_dir().join(format!("{SEG:020}")).exists(),
            "both segments wait in the deleter"
        );
        drop(d); // abandons them: the next start loads them again, contiguous with the rest
        drop(log);
        let again = CommitLog::load(&c, None).unwrap();
        assert_eq!(again.min_phy_offset(), 0);
    }

    /// A deleter that has just unlinked a file, so it holds every file submitted next for an
    /// hour: nothing the test submits is unlinked while the test looks.
    fn slow_deleter() -> FileDeleter {
        let scratch = tempfile::tempdir().unwrap();
        let d = FileDeleter::spawn(HOUR, None).unwrap();
        let seg = crate::mapped_file::MappedFile::create(
            scratch.path(),
            0,
            SEG,
            None,
            crate::mapped_file::Warm::Off,
        )
        .unwrap();
        d.submit(DetachedFile::Segment(seg));
        while d.deleted() == 0 || d.queued_bytes() != 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        d
    }

    /// Proves a pass never waits for a full deleter: it detaches nothing, the segments stay in
    /// the log for the next pass, and the pass returns at once.
    #[test]
    fn full_deleter_leaves_segments_for_the_next_pass() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), 10);
        let now = SystemTime::now();
        let mut log = log_with(&c, 3, 4, now);
        let d = slow_deleter();
        let mut start = 0;
        while d.has_room() {
            d.submit(DetachedFile::Segment(
                crate::mapped_file::MappedFile::create(
                    other.path(),
                    start,
                    SEG,
                    None,
                    crate::mapped_file::Warm::Off,
                )
                .unwrap(),
            ));
            start += SEG;
        }
        let t0 = std::time::Instant::now();
        let out = run(&mut log, &c, at(now, 4), &d).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(1));
        assert!(out.deleted.is_empty());
        assert_eq!(log.min_phy_offset(), 0);
        assert_eq!(log.segments().len(), 4);
    }

    /// Proves expired IndexFiles go through the deleter (never the newest one), and that a
    /// full deleter leaves them in the service for a later pass instead of waiting.
    #[test]
    fn expired_index_files_go_through_the_deleter() {
        let dir = tempfile::tempdir().unwrap();
        let mut ix = IndexService::open(dir.path(), 4, 3).unwrap(); // two keys per file
        for i in 0..5u64 {
            ix.put("T", &["k"], i * 100, 1_000 + i as i64).unwrap();
        }
        assert_eq!(ix.files().len(), 3);
        let busy = slow_deleter();
        let scratch = tempfile::tempdir().unwrap();
        let mut start = 0;
        while busy.has_room() {
            let seg = crate::mapped_file::MappedFile::create(
                scratch.path(),
                start,
                SEG,
                None,
                crate::mapped_file::Warm::Off,
            )
            .unwrap();
            busy.submit(DetachedFile::Segment(seg));
            start += SEG;
        }
        assert_eq!(expire_index(&mut ix, 10_000, &busy), 0);
        assert_eq!(ix.files().len(), 3);
        let mut d = deleter();
        assert_eq!(expire_index(&mut ix, 150, &d), 1, "[0, 100] is below 150");
        assert_eq!(expire_index(&mut ix, 10_000, &d), 1, "the newest stays");
        d.finish();
        assert_eq!(ix.files().len(), 1);
        let left = std::fs::read_dir(dir.path().join("index")).unwrap().count();
        assert_eq!(left, 1);
        assert_eq!(ix.query("T", "k", 10, 0, i64::MAX), vec![400]);
    }
}
