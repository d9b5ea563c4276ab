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
/// Cap on the inflated size of a compressed REGISTER_BROKER body (zlib bomb guard); a broker
/// with 100k topics needs well under this.
pub const MAX_REGISTER_BODY_INFLATED_LEN: usize = 64 * 1024 * 1024;
const _: () = assert!(MAX_REGISTER_BODY_INFLATED_LEN >= MAX_FRAME_LEN);
