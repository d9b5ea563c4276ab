//! Every limit and on-disk size, related by const asserts so they cannot drift apart.

// ---- ConsumeQueue and IndexFile on-disk sizes (PROTOCOL.md 4.3, 4.4) ----

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
