//! Every limit and on-disk size, related by const asserts so they cannot drift apart.

// ---- store (owner: STORE worker) ----------------------------------------------------------

/// RocketMQ's default CommitLog segment size (`mappedFileSizeCommitLog`).
pub const COMMIT_LOG_FILE_SIZE_DEFAULT: u64 = 1 << 30;
/// RocketMQ's default ConsumeQueue file size: 300,000 units of 20 bytes.
pub const CONSUME_QUEUE_FILE_SIZE_DEFAULT: u64 = 6_000_000;
/// Largest message body the broker accepts (`maxMessageSize`).
pub const MAX_MESSAGE_SIZE_DEFAULT: usize = 4 << 20;
/// Room for the fixed fields, topic and properties on top of the body in one stored record.
pub const MAX_RECORD_OVERHEAD: usize = 64 << 10;
/// Page size used to count dirty pages for `flushCommitLogLeastPages`.
pub const OS_PAGE_SIZE: u64 = 4096;
/// The checkpoint file is one 4 KiB page (PROTOCOL.md 4.5).
pub const CHECKPOINT_FILE_SIZE: usize = 4096;
/// Bytes of the checkpoint actually used: five longs.
pub const CHECKPOINT_USED_LEN: usize = 40;
/// Requests the writer inbox holds before `try_append` answers busy.
pub const WRITER_INBOX_CAPACITY: usize = 4096;
/// Upper bound of records in one writer batch (soft: a batch always takes one whole request).
pub const WRITER_BATCH_MAX_RECORDS: usize = 1024;
/// Upper bound of bytes in one writer batch (soft, as above).
pub const WRITER_BATCH_MAX_BYTES: usize = 4 << 20;
/// Segments a `CommitLogReader` keeps mapped.
pub const READER_CACHE_SEGMENTS: usize = 8;
/// Appends fail past `disk_max_used_space_ratio + this`, capped at `DISK_HARD_LIMIT_MAX_PCT`.
pub const DISK_HARD_LIMIT_EXTRA_PCT: u32 = 10;
pub const DISK_HARD_LIMIT_MAX_PCT: u32 = 95;
/// How often the writer checks retention (file age and disk usage).
pub const RETENTION_CHECK_INTERVAL_MS: u64 = 10_000;
/// Commit-log file names are 20-digit zero-padded start offsets.
pub const SEGMENT_FILE_NAME_LEN: usize = 20;

const _: () = assert!(CHECKPOINT_USED_LEN <= CHECKPOINT_FILE_SIZE);
const _: () = assert!(
    (MAX_MESSAGE_SIZE_DEFAULT + MAX_RECORD_OVERHEAD) as u64 + 8 < COMMIT_LOG_FILE_SIZE_DEFAULT
);
const _: () = assert!(WRITER_BATCH_MAX_RECORDS <= WRITER_INBOX_CAPACITY);
const _: () = assert!(DISK_HARD_LIMIT_MAX_PCT <= 100);
const _: () = assert!(CONSUME_QUEUE_FILE_SIZE_DEFAULT.is_multiple_of(20));
