//! Every limit and on-disk size, related by const asserts so they cannot drift apart.

// ---- protocol limits (owner: protocol) ----

/// Largest frame (bytes after the 4-byte length prefix) we accept: Java's
/// `com.rocketmq.remoting.frameMaxLength` default, 16 MiB. The broker's `frameMaxLength` key
/// configures it; the name server and the broker's own client keep this value.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;
/// The header length shares its 32-bit word with the serialize type byte: 24 bits remain.
pub const MAX_HEADER_LEN: usize = 0x00FF_FFFF;
/// The stored and batch properties length is a Java short.
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;
/// Upper bound on messages in one SEND_BATCH_MESSAGE body; each record is at least 22 bytes,
/// so a maximal frame cannot carry more than this anyway.
pub const MAX_BATCH_ENTRIES: usize = MAX_FRAME_LEN / BATCH_RECORD_MIN_LEN;
/// Smallest batch record: totalSize, magic, bodyCRC, flag, bodyLen (5 ints) + propertiesLen (short).
pub const BATCH_RECORD_MIN_LEN: usize = 5 * 4 + 2;

const _: () = assert!(MAX_HEADER_LEN < MAX_FRAME_LEN);
const _: () = assert!(MAX_FRAME_LEN <= i32::MAX as usize);
const _: () = assert!(MAX_BATCH_ENTRIES * BATCH_RECORD_MIN_LEN <= MAX_FRAME_LEN);
/// Cap on the inflated size of a compressed REGISTER_BROKER body (zlib bomb guard); a broker
/// with 100k topics needs well under this.
pub const MAX_REGISTER_BODY_INFLATED_LEN: usize = 64 * 1024 * 1024;
const _: () = assert!(MAX_REGISTER_BODY_INFLATED_LEN >= MAX_FRAME_LEN);

// ---- connections and broker limits ----

/// Bytes read from a socket per read call, at most.
pub const READ_CHUNK: usize = 64 * 1024;
/// A new connection's read chunk; it doubles up to `READ_CHUNK` each time a read fills it.
pub const READ_CHUNK_INITIAL: usize = 4 * 1024;
/// Responses already queued for one connection are copied into one buffer of up to this many
/// bytes and written with one send: on loopback each send costs the TCP stack a segment (and
/// the receiver a wake-up), far more than copying a few hundred bytes of response.
pub const WRITE_COALESCE_BYTES: usize = 64 * 1024;
/// Requests of one connection being served at once; reading pauses beyond it
/// (`maxInflightPerConnection`).
pub const MAX_INFLIGHT_PER_CONN: usize = 1024;
/// Frames waiting to be written on one connection; a client that lets it fill is disconnected
/// (`connectionOutboxCapacity`).
pub const OUTBOX_CAPACITY: usize = 2 * MAX_INFLIGHT_PER_CONN;
/// Jobs waiting in one shard's mailbox.
pub const SHARD_MAILBOX_CAPACITY: usize = 65_536;
/// Long-polling pulls parked on one queue (`maxLongPollingWaitersPerQueue`).
pub const MAX_WAITERS_PER_QUEUE: usize = 1024;
/// Connections one broker accepts across its shards (`maxConnections`).
pub const MAX_CONNECTIONS: usize = 10_000;
/// Idle connections close after this long (RocketMQ's serverChannelMaxIdleTimeSeconds).
pub const IDLE_TIMEOUT_SECS: u64 = 120;
/// A TLS handshake (from the connection's first byte to its end) that takes longer closes the
/// connection (Java's Netty SslHandler waits 10 s too).
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// Plaintext bytes rustls may hold encrypted but unsent per connection before a write pushes
/// them to the socket (its default buffer limit).
pub const TLS_SEND_BUFFER: usize = 64 * 1024;
/// Bytes of a commit-log file read per step when a zero-copy range goes through TLS instead.
pub const TLS_COPY_CHUNK: usize = 16 * 1024;
/// Pull limits when the request asks for more (maxTransferCountOnMessageInMemory / bytes).
pub const MAX_PULL_MSGS: usize = 32;
pub const MAX_PULL_BYTES: usize = 256 * 1024;
/// Messages one batch send may carry.
pub const MAX_BATCH_MESSAGES: usize = 4096;

/// Connections one shard accepts (`maxConnectionsPerShard`); by default only the broker-wide
/// bound applies.
pub const MAX_CONNECTIONS_PER_SHARD: usize = MAX_CONNECTIONS;
/// Requests the broker may have waiting for one client's answers (GET_CONSUMER_RUNNING_INFO,
/// CONSUME_MESSAGE_DIRECTLY, PUSH_REPLY_MESSAGE_TO_CLIENT); one more fails at once
/// (`maxPendingCallsPerConnection`).
pub const MAX_PENDING_CALLS_PER_CONN: usize = 64;
/// How long the broker waits for a client's answer (Java's `Broker2Client.callClient` waits
/// 10 s; `callClientTimeoutMills`).
pub const CALL_CLIENT_TIMEOUT_MS: u64 = 10_000;
/// A response that cannot be written for this long disconnects its client (one that sends but
/// never reads); the default matches the idle timeout, the bound it had before it was its own key.
pub const WRITE_STALL_TIMEOUT_MS: u64 = IDLE_TIMEOUT_SECS * 1000;

// Ceilings for the configurable limits above: config values past them are refused at start, so a
// typo cannot turn a bound into an allocation the machine cannot make (the outbox and the writer
// inbox preallocate their slots).
pub const MAX_FRAME_LEN_CEILING: usize = i32::MAX as usize;
pub const MAX_INFLIGHT_PER_CONN_CEILING: usize = 65_536;
pub const OUTBOX_CAPACITY_CEILING: usize = 1 << 18;
pub const MAX_CONNECTIONS_CEILING: usize = 1_000_000;
pub const MAX_WAITERS_PER_QUEUE_CEILING: usize = 1_000_000;
pub const MAX_PENDING_CALLS_PER_CONN_CEILING: usize = 65_536;
pub const WRITER_INBOX_CAPACITY_CEILING: usize = 1 << 20;
/// Timeouts past a day are a typo, not a policy.
pub const TIMEOUT_SECS_CEILING: u64 = 24 * 3600;

// The outbox outgrows the in-flight cap, so a client that reads keeps up: every running request
// adds at most one response (the rest is room for broker-to-client requests). Config load keeps
// the same relation for configured values.
const _: () = assert!(OUTBOX_CAPACITY > MAX_INFLIGHT_PER_CONN);
const _: () = assert!(OUTBOX_CAPACITY <= OUTBOX_CAPACITY_CEILING);
// Any legal in-flight cap leaves room for a legal, larger outbox.
const _: () = assert!(MAX_INFLIGHT_PER_CONN_CEILING < OUTBOX_CAPACITY_CEILING);
const _: () = assert!(MAX_INFLIGHT_PER_CONN <= MAX_INFLIGHT_PER_CONN_CEILING);
const _: () = assert!(MAX_CONNECTIONS_PER_SHARD <= MAX_CONNECTIONS);
const _: () = assert!(MAX_CONNECTIONS <= MAX_CONNECTIONS_CEILING);
const _: () = assert!(MAX_WAITERS_PER_QUEUE <= MAX_WAITERS_PER_QUEUE_CEILING);
// The broker's own requests fit in the outbox room the in-flight responses leave.
const _: () = assert!(MAX_PENDING_CALLS_PER_CONN <= OUTBOX_CAPACITY - MAX_INFLIGHT_PER_CONN);
const _: () = assert!(MAX_PENDING_CALLS_PER_CONN <= MAX_PENDING_CALLS_PER_CONN_CEILING);
const _: () =
    assert!(CALL_CLIENT_TIMEOUT_MS > 0 && CALL_CLIENT_TIMEOUT_MS <= TIMEOUT_SECS_CEILING * 1000);
const _: () = assert!(IDLE_TIMEOUT_SECS > 0 && IDLE_TIMEOUT_SECS <= TIMEOUT_SECS_CEILING);
const _: () =
    assert!(WRITE_STALL_TIMEOUT_MS > 0 && WRITE_STALL_TIMEOUT_MS <= TIMEOUT_SECS_CEILING * 1000);
const _: () = assert!(READ_CHUNK <= MAX_FRAME_LEN);
const _: () = assert!(TLS_HANDSHAKE_TIMEOUT_MS > 0 && TLS_COPY_CHUNK <= TLS_SEND_BUFFER);
const _: () = assert!(READ_CHUNK_INITIAL <= READ_CHUNK && READ_CHUNK_INITIAL > 0);

// ---- ConsumeQueue and IndexFile on-disk sizes (Java's `ConsumeQueue` and `IndexFile`) ----

/// One ConsumeQueue unit: phy_offset i64 | size i32 | tags_code i64, big-endian.
pub const CQ_UNIT_SIZE: u64 = 20;
/// Default ConsumeQueue file size (`mappedFileSizeConsumeQueue`): 300_000 units.
pub const CQ_FILE_SIZE_DEFAULT: u64 = 6_000_000;
const _: () = assert!(CQ_UNIT_SIZE == 8 + 4 + 8);
const _: () = assert!(CQ_FILE_SIZE_DEFAULT.is_multiple_of(CQ_UNIT_SIZE));
const _: () = assert!(CQ_FILE_SIZE_DEFAULT / CQ_UNIT_SIZE == 300_000);

/// IndexFile header: begin/end timestamp, begin/end phy_offset (4 longs), slot and index counts.
pub const INDEX_HEADER_SIZE: u64 = 40;
/// One hash slot: the i32 number of the newest entry in its chain.
pub const INDEX_SLOT_SIZE: u64 = 4;
/// One index entry: key_hash i32 | phy_offset i64 | time_diff_s i32 | prev_index i32.
pub const INDEX_ENTRY_SIZE: u64 = 20;
/// Default `maxHashSlotNum`.
pub const INDEX_HASH_SLOT_NUM_DEFAULT: u32 = 5_000_000;
/// Default `maxIndexNum` (entry 0 is never used, so a file holds one fewer key).
pub const INDEX_NUM_DEFAULT: u32 = 20_000_000;
/// Default IndexFile size, 420_000_040 bytes.
pub const INDEX_FILE_SIZE_DEFAULT: u64 = INDEX_HEADER_SIZE
    + INDEX_HASH_SLOT_NUM_DEFAULT as u64 * INDEX_SLOT_SIZE
    + INDEX_NUM_DEFAULT as u64 * INDEX_ENTRY_SIZE;
const _: () = assert!(INDEX_HEADER_SIZE == 4 * 8 + 2 * 4);
const _: () = assert!(INDEX_ENTRY_SIZE == 4 + 8 + 4 + 4);
const _: () = assert!(INDEX_FILE_SIZE_DEFAULT == 420_000_040);

// ---- store (owner: STORE worker) ----------------------------------------------------------

/// RocketMQ's default CommitLog segment size (`mappedFileSizeCommitLog`).
pub const COMMIT_LOG_FILE_SIZE_DEFAULT: u64 = 1 << 30;
/// Largest message body the broker accepts (`maxMessageSize`).
pub const MAX_MESSAGE_SIZE_DEFAULT: usize = 4 << 20;
/// Room for the fixed fields, topic and properties on top of the body in one stored record.
pub const MAX_RECORD_OVERHEAD: usize = 64 << 10;
/// Page size used to count dirty pages for `flushCommitLogLeastPages`.
pub const OS_PAGE_SIZE: u64 = 4096;
/// The checkpoint file is one 4 KiB page (Java's `StoreCheckpoint` maps one OS page).
pub const CHECKPOINT_FILE_SIZE: usize = 4096;
/// Bytes of the checkpoint actually used: five longs.
pub const CHECKPOINT_USED_LEN: usize = 40;
/// Requests the writer inbox holds before `try_append` answers busy (`writerInboxCapacity`).
pub const WRITER_INBOX_CAPACITY: usize = 4096;
/// Upper bound of records in one writer batch (soft: a batch always takes one whole request).
pub const WRITER_BATCH_MAX_RECORDS: usize = 1024;
/// ASYNC_FLUSH: dirty commit-log bytes that start a flush before the interval is up. Large
/// enough that a steady trickle does not keep fdatasync running back to back (measured: W2 at
/// 16 KiB fell from 51-66k to 45-47k msg/s on 2 cores), small enough that a burst is on its way
/// to the disk while the writer appends (1 GiB of appends: durable 1.4 s after start vs 3.4 s).
pub const ASYNC_FLUSH_EAGER_BYTES: u64 = 8 << 20;
/// Upper bound of bytes in one writer batch (soft, as above).
pub const WRITER_BATCH_MAX_BYTES: usize = 4 << 20;
/// Half the written SYNC_FLUSH batches that may wait for their fdatasync round; past 2 x this
/// the writer takes no appends (its inbox then answers busy). With the batch bound this caps
/// the bytes written but not yet covered by an fdatasync at 2 x 16 x 4 MiB.
pub const GROUP_COMMIT_QUEUE_CAPACITY: usize = 16;
/// Longest a SYNC_FLUSH group waits for the appenders the previous group released (it also
/// waits at most half the previous round): a few hundred µs buys a sync covering all of them.
/// Deadline of one request the broker makes to a name server, controller or master (Java's
/// `BrokerOuterAPI` uses 3 s): registration, controller calls, a slave's metadata sync.
pub const BROKER_RPC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// Bytes a slave reads from its HA socket at a time.
pub const HA_READ_CHUNK: usize = 64 << 10;
/// The largest HA transfer a slave accepts (Java's slave reads into a 4 MiB buffer).
pub const HA_TRANSFER_MAX: usize = 4 << 20;
const _: () = assert!(HA_READ_CHUNK <= HA_TRANSFER_MAX);
pub const GROUP_COMMIT_MAX_WAIT: std::time::Duration = std::time::Duration::from_micros(500);
/// Segments a `CommitLogReader` keeps mapped.
pub const READER_CACHE_SEGMENTS: usize = 8;
/// Appends fail past `disk_max_used_space_ratio + this`, capped at `DISK_HARD_LIMIT_MAX_PCT`.
pub const DISK_HARD_LIMIT_EXTRA_PCT: u32 = 10;
pub const DISK_HARD_LIMIT_MAX_PCT: u32 = 95;
/// How often the writer checks retention (file age and disk usage).
pub const RETENTION_CHECK_INTERVAL_MS: u64 = 10_000;
/// Retired commit-log segments kept for reuse (`recycleCommitLogSegments`): the next segment
/// and one spare, so a segment rolled right after the pass that retired one still finds one.
pub const RECYCLE_COMMIT_LOG_SEGMENTS_DEFAULT: usize = 2;
/// A retired segment is reused no sooner than this after retention took it out of the log: a
/// reader that checked its range just before has finished the syscall that reads it long before
/// (see `store::recycle`).
pub const RECYCLE_QUARANTINE_MS: u64 = 10_000;
/// How often the writer checks again while appends are refused for disk space.
pub const DISK_FULL_RECHECK_MS: u64 = 100;
/// How often the writer hands the index to the checkpoint thread for an fdatasync and records
/// its timestamp: after a crash, recovery re-indexes about this much. Index pages are written
/// at random (hash slots), so syncing much more often multiplies the writes.
pub const INDEX_FLUSH_INTERVAL_MS: u64 = 10_000;
/// Largest accepted `deleteCommitLogFilesInterval`: past it a full deleter queue would take
/// hours to drain while retention waits for room.
pub const DELETE_COMMIT_LOG_FILES_INTERVAL_MAX_MS: u64 = 60_000;
/// Commit-log file names are 20-digit zero-padded start offsets.
pub const SEGMENT_FILE_NAME_LEN: usize = 20;

/// Transaction decisions held above the half queue's progress (decided out of order, or being
/// written); past it END_TRANSACTION answers SYSTEM_BUSY until the check resolves older halves.
pub const MAX_PENDING_TRANSACTION_DECISIONS: usize = 1 << 20;
/// Half messages one transaction check examines, and stores copies of with one writer request,
/// before it yields to the shard's other tasks.
pub const TRANSACTION_CHECK_BATCH: usize = 256;
/// The most bytes of copies one such batch holds (half messages may be up to `maxMessageSize`).
pub const TRANSACTION_CHECK_BATCH_BYTES: usize = 1 << 20;
/// The longest one transaction check runs (RocketMQ's MAX_PROCESS_TIME_LIMIT).
pub const TRANSACTION_CHECK_MAX_MS: u64 = 60_000;

/// Web-console worker threads: each answers one browser connection at a time, so at most this
/// many requests (and their admin calls) are in flight; further connections wait in the
/// listener's backlog.
pub const CONSOLE_WORKERS: usize = 3;
/// Pending connections the console's listener keeps for its workers (the listen backlog).
pub const CONSOLE_BACKLOG: i32 = 64;
/// Largest HTTP request head (request line and headers) the console reads.
pub const CONSOLE_MAX_HEAD_BYTES: usize = 16 * 1024;
/// Largest HTTP request body the console reads (its forms are small JSON documents).
pub const CONSOLE_MAX_BODY_BYTES: usize = 64 * 1024;
/// Headers the console parses in one request; more is an error.
pub const CONSOLE_MAX_HEADERS: usize = 64;
/// The longest a browser may take to send its request or read the answer, so a slow or stalled
/// one holds a worker for at most this long.
pub const CONSOLE_IO_TIMEOUT_MS: u64 = 5_000;
/// The longest one admin call of the console waits for a name server or broker.
pub const CONSOLE_ADMIN_TIMEOUT_MS: u64 = 3_000;
/// Messages one lookup by key returns at most.
pub const CONSOLE_MAX_LOOKUP_MESSAGES: usize = 32;
/// Bytes of a message body the console shows; longer bodies are cut (and said to be).
pub const CONSOLE_MAX_BODY_SHOWN: usize = 64 * 1024;

const _: () = assert!(CONSOLE_WORKERS > 0 && CONSOLE_BACKLOG > 0);
const _: () = assert!(CONSOLE_MAX_HEAD_BYTES + CONSOLE_MAX_BODY_BYTES <= READ_CHUNK * 2);

const _: () = assert!(CHECKPOINT_USED_LEN <= CHECKPOINT_FILE_SIZE);
const _: () = assert!(
    (MAX_MESSAGE_SIZE_DEFAULT + MAX_RECORD_OVERHEAD) as u64 + 8 < COMMIT_LOG_FILE_SIZE_DEFAULT
);
// The default inbox holds at least one full batch; a smaller configured inbox only makes batches
// smaller (a batch never waits for more requests), which the busy-path tests rely on.
const _: () = assert!(WRITER_BATCH_MAX_RECORDS <= WRITER_INBOX_CAPACITY);
const _: () = assert!(WRITER_INBOX_CAPACITY <= WRITER_INBOX_CAPACITY_CEILING);
// A maximal message plus its header must fit in a default frame.
const _: () = assert!(MAX_MESSAGE_SIZE_DEFAULT + MAX_RECORD_OVERHEAD <= MAX_FRAME_LEN);
const _: () = assert!(DISK_HARD_LIMIT_MAX_PCT <= 100);
