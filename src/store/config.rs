//! StoreConfig: the store's tunables with RocketMQ's `MessageStoreConfig` names and defaults.
//!
//! Built by the broker's config layer (broker.conf keys `storePathRootDir`,
//! `mappedFileSizeCommitLog`, `flushDiskType`, ...) and read by `store::open` and the writer.
//! Invariant: a config is validated (`validate`) before the store opens.

use std::path::PathBuf;

use crate::constants::{
    COMMIT_LOG_FILE_SIZE_DEFAULT, CONSUME_QUEUE_FILE_SIZE_DEFAULT, MAX_MESSAGE_SIZE_DEFAULT,
    MAX_RECORD_OVERHEAD, OS_PAGE_SIZE, RETENTION_CHECK_INTERVAL_MS, WRITER_INBOX_CAPACITY,
};
use crate::store::fault::FaultHook;
use crate::store::StoreError;

#[derive(Clone, Debug, PartialEq, Eq)]
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
    pub disk_max_used_space_ratio: u32,
    pub check_crc_on_recover: bool,
    pub max_message_size: usize,
    /// Append requests the writer inbox holds; a full inbox answers SYSTEM_BUSY.
    pub writer_inbox_capacity: usize,
    pub max_hash_slot_num: u32,
    pub max_index_num: u32,
    pub message_index_enable: bool,
    /// How often the writer runs retention (file age, disk usage).
    pub retention_check_interval_ms: u64,
    /// Pin the writer thread to this CPU (the broker passes the last core).
    pub writer_core: Option<usize>,
    /// Pre-fault the pages of a freshly allocated segment on the allocator thread.
    pub warm_mapped_file: bool,
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
            mapped_file_size_consume_queue: CONSUME_QUEUE_FILE_SIZE_DEFAULT,
            flush_disk_type: FlushDiskType::AsyncFlush,
            flush_interval_commit_log_ms: 500,
            flush_commit_log_least_pages: 4,
            flush_commit_log_thorough_interval_ms: 10_000,
            sync_flush_timeout_ms: 5_000,
            file_reserved_time_hours: 72,
            disk_max_used_space_ratio: 75,
            check_crc_on_recover: true,
            max_message_size: MAX_MESSAGE_SIZE_DEFAULT,
            writer_inbox_capacity: WRITER_INBOX_CAPACITY,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            message_index_enable: true,
            retention_check_interval_ms: RETENTION_CHECK_INTERVAL_MS,
            writer_core: None,
            warm_mapped_file: true,
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
        Ok(())
    }
}
