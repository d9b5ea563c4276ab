//! StoreConfig: the store's tunables with RocketMQ's `MessageStoreConfig` names and defaults.
//!
//! Built by the broker's config layer (broker.conf keys `storePathRootDir`,
//! `mappedFileSizeCommitLog`, `flushDiskType`, ...) and read by `store::open` and the writer.
//! Invariant: a config is validated (`validate`) before the store opens.

use std::path::PathBuf;

use crate::constants::{
    COMMIT_LOG_FILE_SIZE_DEFAULT, CQ_FILE_SIZE_DEFAULT, DELETE_COMMIT_LOG_FILES_INTERVAL_MAX_MS,
    INDEX_FLUSH_INTERVAL_MS, MAX_MESSAGE_SIZE_DEFAULT, MAX_RECORD_OVERHEAD, OS_PAGE_SIZE,
    RECYCLE_COMMIT_LOG_SEGMENTS_DEFAULT, RECYCLE_QUARANTINE_MS, RETENTION_CHECK_INTERVAL_MS,
    WRITER_INBOX_CAPACITY,
};
use crate::fault::FaultHook;
use crate::runtime::placement::ThreadPlan;
use crate::tags_code::DelayLevels;
use crate::StoreError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushDiskType {
    AsyncFlush,
    SyncFlush,
}

#[derive(Clone, Debug)]
pub struct StoreConfig {
    pub store_path_root_dir: PathBuf,
    pub mapped_file_size_commit_log: u64,
    pub mapped_file_size_consume_queue: u64,
    pub flush_disk_type: FlushDiskType,
    pub flush_interval_commit_log_ms: u64,
    pub flush_commit_log_least_pages: u32,
    /// A full flush regardless of dirty pages at least this often (`flushCommitLogThoroughInterval`).
    pub flush_commit_log_thorough_interval_ms: u64,
    pub sync_flush_timeout_ms: u64,
    pub file_reserved_time_hours: u64,
    /// Hours of the local day when expired commit-log files are deleted (`deleteWhen`).
    pub delete_when: DeleteWhen,
    pub disk_max_used_space_ratio: u32,
    /// Past this usage (percent, used clamped to 30..=85 as RocketMQ does) retention deletes the
    /// oldest segments whatever their age (`diskSpaceCleanForciblyRatio`).
    pub disk_space_clean_forcibly_ratio: u32,
    /// Whether the forcible deletion above is allowed at all (`cleanFileForciblyEnable`).
    pub clean_file_forcibly_enable: bool,
    pub check_crc_on_recover: bool,
    pub max_message_size: usize,
    /// Append requests the writer inbox holds; a full inbox answers SYSTEM_BUSY.
    pub writer_inbox_capacity: usize,
    pub max_hash_slot_num: u32,
    pub max_index_num: u32,
    pub message_index_enable: bool,
    /// How often the index is made durable and its timestamp checkpointed (ringmq's own; no
    /// broker.conf key: RocketMQ only syncs an IndexFile when it is full).
    pub index_flush_interval_ms: u64,
    /// How often the writer runs retention (file age, disk usage) and the shards trim their
    /// consume queues (`cleanResourceInterval`).
    pub retention_check_interval_ms: u64,
    /// Pause on a shard after a queue lost files to retention, before trimming the next one,
    /// so a large trim is spread out (`deleteConsumeQueueFilesInterval`; an async sleep).
    pub delete_consume_queue_files_interval_ms: u64,
    /// Pause between two commit-log segment deletions of one retention pass, so unlinking many
    /// 1 GiB files does not hammer the disk (`deleteCommitLogFilesInterval`; the deleter
    /// thread sleeps, never the writer).
    pub delete_commit_log_files_interval_ms: u64,
    /// Where the store's threads run and what they are called (the writer, the segment
    /// allocator; see `runtime::placement`). Default: nothing pinned.
    pub threads: ThreadPlan,
    /// Write zeros over every new segment before it becomes active, and fdatasync them
    /// (`warmMapedFileEnable`; `None` = on under SYNC_FLUSH, off under ASYNC_FLUSH, see
    /// `warm_segments`). Group commit then overwrites blocks that are already written, and
    /// ext4's fdatasync needs no journal commit for unwritten-extent conversion: 0.09-0.10 ms
    /// instead of 0.26-0.31 ms per 62 KiB sync on a quiet machine (scripts/probe-fdatasync.py). It costs one extra
    /// write of each segment, which an ASYNC_FLUSH store at disk speed cannot spare.
    pub warm_mapped_file: Option<bool>,
    /// Commit-log segments that retention takes out of the log and keeps, renamed, to reuse as
    /// the next segments instead of unlinking them (ringmq's own: `recycleCommitLogSegments`;
    /// 0 turns it off). A reused segment's blocks are written already, so it needs no warming
    /// and its group commits cost what overwrites cost (`store::recycle`). They hold disk
    /// space until reused (at most this many segments, counted as used), and retention unlinks
    /// them when it deletes forcibly or appends are refused for disk space.
    pub recycle_commit_log_segments: usize,
    /// How long after its retirement a segment may be reused (ringmq's own, no broker.conf
    /// key; tests shorten it).
    pub recycle_quarantine_ms: u64,
    /// Delay per level (`messageDelayLevel`): recovery recomputes a delayed record's delivery
    /// time from it, as the send path computed it (`store::tags_code`).
    pub delay_levels: DelayLevels,
    /// Test seam: injected allocation/flush failures and disk usage.
    pub fault: Option<FaultHook>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        StoreConfig {
            store_path_root_dir: home.join("store"),
            mapped_file_size_commit_log: COMMIT_LOG_FILE_SIZE_DEFAULT,
            mapped_file_size_consume_queue: CQ_FILE_SIZE_DEFAULT,
            flush_disk_type: FlushDiskType::AsyncFlush,
            flush_interval_commit_log_ms: 500,
            flush_commit_log_least_pages: 4,
            flush_commit_log_thorough_interval_ms: 10_000,
            sync_flush_timeout_ms: 5_000,
            file_reserved_time_hours: 72,
            delete_when: DeleteWhen::DEFAULT,
            disk_max_used_space_ratio: 75,
            disk_space_clean_forcibly_ratio: 85,
            clean_file_forcibly_enable: true,
            check_crc_on_recover: true,
            max_message_size: MAX_MESSAGE_SIZE_DEFAULT,
            writer_inbox_capacity: WRITER_INBOX_CAPACITY,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            message_index_enable: true,
            index_flush_interval_ms: INDEX_FLUSH_INTERVAL_MS,
            retention_check_interval_ms: RETENTION_CHECK_INTERVAL_MS,
            delete_consume_queue_files_interval_ms: 100,
            delete_commit_log_files_interval_ms: 100,
            threads: ThreadPlan::default(),
            warm_mapped_file: None,
            recycle_commit_log_segments: RECYCLE_COMMIT_LOG_SEGMENTS_DEFAULT,
            recycle_quarantine_ms: RECYCLE_QUARANTINE_MS,
            delay_levels: DelayLevels::default(),
            fault: None,
        }
    }
}

impl StoreConfig {
    /// A config rooted at `dir` with every other value at its default.
    pub fn with_root(dir: impl Into<PathBuf>) -> Self {
        StoreConfig {
            store_path_root_dir: dir.into(),
            ..StoreConfig::default()
        }
    }

    /// Whether new segments are zero-filled ahead of the writer (`warm_mapped_file`).
    pub fn warm_segments(&self) -> bool {
        self.warm_mapped_file
            .unwrap_or(self.flush_disk_type == FlushDiskType::SyncFlush)
    }

    pub fn commit_log_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("commitlog")
    }

    /// Largest stored record the writer accepts.
    pub fn max_record_len(&self) -> usize {
        self.max_message_size + MAX_RECORD_OVERHEAD
    }

    pub fn validate(&self) -> Result<(), StoreError> {
        let seg = self.mapped_file_size_commit_log;
        if seg < 64 * 1024 || !seg.is_multiple_of(OS_PAGE_SIZE) {
            return Err(StoreError::Invalid(format!(
                "mappedFileSizeCommitLog {seg} must be a multiple of 4096 and at least 64 KiB"
            )));
        }
        if self.max_record_len() as u64 + 8 > seg {
            return Err(StoreError::Invalid(format!(
                "maxMessageSize {} does not fit a {seg}-byte segment",
                self.max_message_size
            )));
        }
        if self.writer_inbox_capacity == 0 {
            // A zero-capacity channel is a rendezvous: every try_append would fail.
            return Err(StoreError::Invalid(
                "writerInboxCapacity must be at least 1".into(),
            ));
        }
        if self.disk_max_used_space_ratio == 0 || self.disk_max_used_space_ratio > 95 {
            return Err(StoreError::Invalid(format!(
                "diskMaxUsedSpaceRatio {} must be in 1..=95",
                self.disk_max_used_space_ratio
            )));
        }
        if self.delete_commit_log_files_interval_ms > DELETE_COMMIT_LOG_FILES_INTERVAL_MAX_MS {
            return Err(StoreError::Invalid(format!(
                "deleteCommitLogFilesInterval {} must be at most {DELETE_COMMIT_LOG_FILES_INTERVAL_MAX_MS} ms",
                self.delete_commit_log_files_interval_ms
            )));
        }
        if self.disk_space_clean_forcibly_ratio > 100 {
            return Err(StoreError::Invalid(format!(
                "diskSpaceCleanForciblyRatio {} must be at most 100",
                self.disk_space_clean_forcibly_ratio
            )));
        }
        Ok(())
    }
}

/// `deleteWhen`: the hours of the local day (0..=23) at which time-based deletion of expired
/// commit-log files runs, written `"04"` or `"04;16"` as in RocketMQ. Kept as a 24-bit mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeleteWhen {
    hours_mask: u32,
}

impl DeleteWhen {
    /// RocketMQ's default, `"04"`.
    pub const DEFAULT: DeleteWhen = DeleteWhen { hours_mask: 1 << 4 };

    /// Parses `;`-separated decimal hours. RocketMQ's `Integer.parseInt` would throw on every
    /// check for a bad entry (so deletion by time never ran); refusing it at start-up is clearer.
    pub fn parse(spec: &str) -> Result<DeleteWhen, String> {
        let mut hours_mask = 0u32;
        for part in spec.split(';') {
            let part = part.trim();
            let digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            let hour = digits
                .then(|| part.parse::<u32>().ok())
                .flatten()
                .filter(|h| *h < 24)
                .ok_or_else(|| format!("hour {part:?} in {spec:?} is not 0..=23"))?;
            hours_mask |= 1 << hour;
        }
        Ok(DeleteWhen { hours_mask })
    }

    /// Is `hour` (of the local day) one of the configured hours? (RocketMQ's `isItTimeToDo`.)
    pub fn contains(&self, hour: u32) -> bool {
        hour < 24 && self.hours_mask & (1 << hour) != 0
    }
}
