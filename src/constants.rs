//! Every limit and on-disk size, related by const asserts so they cannot drift apart.

// ---- protocol limits (owner: protocol) ----

/// Largest frame (bytes after the 4-byte length prefix) we accept: Java's
/// `com.rocketmq.remoting.frameMaxLength` default, 16 MiB.
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

// ---- connections and broker limits ----

/// Bytes read from a socket per read call.
pub const READ_CHUNK: usize = 64 * 1024;
/// Requests of one connection being served at once; reading pauses beyond it.
pub const MAX_INFLIGHT_PER_CONN: usize = 1024;
/// Frames waiting to be written on one connection; a client that lets it fill is disconnected.
pub const OUTBOX_CAPACITY: usize = 2 * MAX_INFLIGHT_PER_CONN;
/// Jobs waiting in one shard's mailbox.
pub const SHARD_MAILBOX_CAPACITY: usize = 65_536;
/// Long-polling pulls parked on one queue.
pub const MAX_WAITERS_PER_QUEUE: usize = 1024;
/// Connections one broker accepts across its shards.
pub const MAX_CONNECTIONS: usize = 10_000;
/// Idle connections close after this long (RocketMQ's serverChannelMaxIdleTimeSeconds).
pub const IDLE_TIMEOUT_SECS: u64 = 120;
/// Pull limits when the request asks for more (maxTransferCountOnMessageInMemory / bytes).
pub const MAX_PULL_MSGS: usize = 32;
pub const MAX_PULL_BYTES: usize = 256 * 1024;
/// Messages one batch send may carry.
pub const MAX_BATCH_MESSAGES: usize = 4096;

const _: () = assert!(OUTBOX_CAPACITY > MAX_INFLIGHT_PER_CONN);
const _: () = assert!(READ_CHUNK <= MAX_FRAME_LEN);
