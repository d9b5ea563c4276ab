//! Stored-message record codec (Java's `MessageDecoder`): the exact byte layout of one CommitLog
//! record, which is also one element of a pull/query/view response body.
//!
//! Callers: the send path encodes (`encode`) on a shard with all offsets zero; the writer thread
//! copies the bytes into a segment and `patch`es queue offset, physical offset and store
//! timestamp in place; recovery and readers `decode`.
//! Invariants: every field is big-endian; `TOTALSIZE` equals the length computed from the
//! field lengths; `decode` never panics and never reads past `buf`, whatever the bytes are.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{BufMut, BytesMut};

pub const MESSAGE_MAGIC_V1: u32 = 0xDAA3_20A7;
pub const MESSAGE_MAGIC_V2: u32 = 0xDAA3_20AB;
/// End-of-file marker: `[int remaining][int BLANK_MAGIC]`.
pub const BLANK_MAGIC: u32 = 0xCBD4_3194;
/// Size of the end-of-file blank marker; a record is written only if this much room remains after it.
pub const BLANK_MARKER_LEN: usize = 8;
/// Topics longer than this need the V2 magic (2-byte topic length); Java writes a signed byte.
pub const TOPIC_LEN_V1_MAX: usize = 127;
/// Topic and properties lengths are Java shorts.
pub const SHORT_LEN_MAX: usize = i16::MAX as usize;

/// Fixed field offsets; those after BORNHOST depend on the host widths (IPv4 8 bytes, IPv6 20).
pub const OFF_TOTAL_SIZE: usize = 0;
pub const OFF_MAGIC: usize = 4;
pub const OFF_BODY_CRC: usize = 8;
pub const OFF_QUEUE_ID: usize = 12;
pub const OFF_FLAG: usize = 16;
pub const OFF_QUEUE_OFFSET: usize = 20;
pub const OFF_PHY_OFFSET: usize = 28;
pub const OFF_SYS_FLAG: usize = 36;
pub const OFF_BORN_TIMESTAMP: usize = 40;
pub const OFF_BORN_HOST: usize = 48;

/// Java's `MessageSysFlag` bits.
pub mod sys_flag {
    pub const COMPRESSED: i32 = 0x1;
    pub const MULTI_TAGS: i32 = 0x2;
    pub const TRANSACTION_NOT_TYPE: i32 = 0x0;
    pub const TRANSACTION_PREPARED: i32 = 0x4;
    pub const TRANSACTION_COMMIT: i32 = 0x8;
    pub const TRANSACTION_ROLLBACK: i32 = 0xC;
    pub const BORNHOST_V6: i32 = 0x10;
    pub const STOREHOST_V6: i32 = 0x20;
    pub const NEED_UNWRAP: i32 = 0x40;
    pub const INNER_BATCH: i32 = 0x80;
    pub const COMPRESSION_LZ4: i32 = 0x100;
    pub const COMPRESSION_ZSTD: i32 = 0x200;
    pub const COMPRESSION_ZLIB: i32 = 0x300;

    /// The transaction type bits (`flag & 0xC`).
    pub fn transaction_type(flag: i32) -> i32 {
        flag & TRANSACTION_ROLLBACK
    }

    /// Only NOT_TYPE and COMMIT records go to consume queues.
    pub fn is_dispatched(flag: i32) -> bool {
        matches!(
            transaction_type(flag),
            TRANSACTION_NOT_TYPE | TRANSACTION_COMMIT
        )
    }

    pub fn born_host_len(flag: i32) -> usize {
        if flag & BORNHOST_V6 != 0 {
            20
        } else {
            8
        }
    }

    pub fn store_host_len(flag: i32) -> usize {
        if flag & STOREHOST_V6 != 0 {
            20
        } else {
            8
        }
    }
}

/// One message as the send path hands it to `encode`.
#[derive(Clone, Debug)]
pub struct MessageToStore<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub properties: &'a str,
}

/// A record decoded in place; `body`, `topic` and `properties` borrow from the input buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedRecord<'a> {
    pub total_size: u32,
    pub magic: u32,
    pub body_crc: u32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub phy_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a str,
    pub properties: &'a str,
}

impl<'a> DecodedRecord<'a> {
    /// This record as a message to store again under `topic` and `queue_id` with `properties`,
    /// every other field kept (a delivery of a parked record, a retried message rewritten).
    pub fn to_store(
        &self,
        topic: &'a str,
        queue_id: i32,
        properties: &'a str,
    ) -> MessageToStore<'a> {
        MessageToStore {
            topic,
            queue_id,
            flag: self.flag,
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp,
            born_host: self.born_host,
            store_host: self.store_host,
            reconsume_times: self.reconsume_times,
            prepared_transaction_offset: self.prepared_transaction_offset,
            body: self.body,
            properties,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    /// An end-of-file blank marker: the rest of the segment (`remaining` bytes) is unused.
    #[error("end-of-file blank marker, {remaining} bytes unused")]
    Blank { remaining: u32 },
    #[error("record truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("bad magic code {0:#010x}")]
    BadMagic(u32),
    #[error("total size {total} does not match the computed length {computed}")]
    SizeMismatch { total: usize, computed: usize },
    #[error("body CRC mismatch: stored {stored:#x}, computed {computed:#x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("{0} is not valid UTF-8")]
    BadUtf8(&'static str),
    #[error("negative or impossible length in field {0}")]
    BadLength(&'static str),
    #[error("port {0} out of range")]
    BadPort(i32),
    #[error("properties too long: {0} bytes, the limit is 32767")]
    PropertiesTooLong(usize),
    #[error("topic too long: {0} bytes, the limit is 32767")]
    TopicTooLong(usize),
}

/// CRC32 (IEEE) with the sign bit masked, as RocketMQ's `UtilAll.crc32`.
pub fn body_crc(body: &[u8]) -> u32 {
    crc32fast::hash(body) & 0x7FFF_FFFF
}

/// Exact stored length for these sizes (sys_flag decides host widths, topic length decides magic).
pub fn stored_len(sys_flag: i32, body_len: usize, topic_len: usize, props_len: usize) -> usize {
    let topic_len_size = if topic_len > TOPIC_LEN_V1_MAX { 2 } else { 1 };
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + sys_flag::born_host_len(sys_flag)
        + 8
        + sys_flag::store_host_len(sys_flag)
        + 4
        + 8
        + 4
        + body_len
        + topic_len_size
        + topic_len
        + 2
        + props_len
}

fn host_flag_bits(born: &SocketAddr, store: &SocketAddr) -> i32 {
    let mut bits = 0;
    if born.is_ipv6() {
        bits |= sys_flag::BORNHOST_V6;
    }
    if store.is_ipv6() {
        bits |= sys_flag::STOREHOST_V6;
    }
    bits
}

fn put_host(dst: &mut BytesMut, host: &SocketAddr) {
    match host.ip() {
        IpAddr::V4(ip) => dst.put_slice(&ip.octets()),
        IpAddr::V6(ip) => dst.put_slice(&ip.octets()),
    }
    dst.put_i32(i32::from(host.port()));
}

/// Appends one full record to `dst` with queue_offset = phy_offset = store_timestamp = 0 and the
/// body CRC computed; sets the IPv6 sysflag bits from the host address families itself.
pub fn encode(msg: &MessageToStore, dst: &mut BytesMut) -> Result<(), RecordError> {
    encode_parts(msg, dst, true).map(|_| ())
}

/// As `encode`, but leaves the body out of `dst`: the record is `dst`'s bytes up to the returned
/// position (from where the record starts in `dst`), then the body, then the rest. The writer
/// writes the body straight from the received frame (pwritev), so the send path copies no body.
pub fn encode_without_body(msg: &MessageToStore, dst: &mut BytesMut) -> Result<usize, RecordError> {
    encode_parts(msg, dst, false)
}

fn encode_parts(
    msg: &MessageToStore,
    dst: &mut BytesMut,
    with_body: bool,
) -> Result<usize, RecordError> {
    if msg.properties.len() > SHORT_LEN_MAX {
        return Err(RecordError::PropertiesTooLong(msg.properties.len()));
    }
    if msg.topic.len() > SHORT_LEN_MAX {
        return Err(RecordError::TopicTooLong(msg.topic.len()));
    }
    let flags = (msg.sys_flag & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6))
        | host_flag_bits(&msg.born_host, &msg.store_host);
    let total = stored_len(flags, msg.body.len(), msg.topic.len(), msg.properties.len());
    let total_i32 = i32::try_from(total).map_err(|_| RecordError::BadLength("total size"))?;
    let v2 = msg.topic.len() > TOPIC_LEN_V1_MAX;
    let start = dst.len();
    dst.reserve(if with_body {
        total
    } else {
        total - msg.body.len()
    });
    dst.put_i32(total_i32);
    dst.put_u32(if v2 {
        MESSAGE_MAGIC_V2
    } else {
        MESSAGE_MAGIC_V1
    });
    dst.put_u32(body_crc(msg.body));
    dst.put_i32(msg.queue_id);
    dst.put_i32(msg.flag);
    dst.put_i64(0); // queue offset, patched by the writer
    dst.put_i64(0); // physical offset, patched by the writer
    dst.put_i32(flags);
    dst.put_i64(msg.born_timestamp);
    put_host(dst, &msg.born_host);
    dst.put_i64(0); // store timestamp, patched by the writer
    put_host(dst, &msg.store_host);
    dst.put_i32(msg.reconsume_times);
    dst.put_i64(msg.prepared_transaction_offset);
    dst.put_i32(msg.body.len() as i32);
    let body_at = dst.len() - start;
    if with_body {
        dst.put_slice(msg.body);
    }
    if v2 {
        dst.put_i16(msg.topic.len() as i16);
    } else {
        dst.put_u8(msg.topic.len() as u8);
    }
    dst.put_slice(msg.topic.as_bytes());
    dst.put_i16(msg.properties.len() as i16);
    dst.put_slice(msg.properties.as_bytes());
    Ok(body_at)
}

/// Byte offset of STORETIMESTAMP in a record with this sys_flag.
pub fn store_timestamp_offset(flag: i32) -> usize {
    OFF_BORN_HOST + sys_flag::born_host_len(flag)
}

/// Overwrites queue_offset, phy_offset and store_timestamp of an encoded record in place.
/// `record` must come from `encode` (an internal invariant, hence the assert).
/// (queue offset, commit-log offset, store timestamp) of an encoded record, the fields `patch`
/// writes; `None` when the record is too short to hold them.
pub fn replica_fields(record: &[u8]) -> Option<(u64, u64, i64)> {
    let read8 = |at: usize| -> Option<i64> {
        Some(i64::from_be_bytes(record.get(at..at + 8)?.try_into().ok()?))
    };
    let flag = i32::from_be_bytes(
        record
            .get(OFF_SYS_FLAG..OFF_SYS_FLAG + 4)?
            .try_into()
            .ok()?,
    );
    let qo = read8(OFF_QUEUE_OFFSET)?;
    let phy = read8(OFF_PHY_OFFSET)?;
    let ts = read8(store_timestamp_offset(flag))?;
    (qo >= 0 && phy >= 0).then_some((qo as u64, phy as u64, ts))
}

pub fn patch(record: &mut [u8], queue_offset: i64, phy_offset: i64, store_timestamp: i64) {
    assert!(
        record.len() >= OFF_BORN_HOST + 8 + 8,
        "patch on a short record"
    );
    let flag = i32::from_be_bytes(read4(record, OFF_SYS_FLAG));
    let ts_off = store_timestamp_offset(flag);
    assert!(record.len() >= ts_off + 8, "patch on a short record");
    record[OFF_QUEUE_OFFSET..OFF_QUEUE_OFFSET + 8].copy_from_slice(&queue_offset.to_be_bytes());
    record[OFF_PHY_OFFSET..OFF_PHY_OFFSET + 8].copy_from_slice(&phy_offset.to_be_bytes());
    record[ts_off..ts_off + 8].copy_from_slice(&store_timestamp.to_be_bytes());
}

fn read4(buf: &[u8], at: usize) -> [u8; 4] {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    b
}

/// Bounds-checked big-endian reader over one record.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(RecordError::BadLength("field"))?;
        if end > self.buf.len() {
            return Err(RecordError::Truncated {
                need: end,
                have: self.buf.len(),
            });
        }
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, RecordError> {
        Ok(self.take(1)?[0])
    }
    fn i16(&mut self) -> Result<i16, RecordError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Result<i32, RecordError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u32(&mut self) -> Result<u32, RecordError> {
        Ok(self.i32()? as u32)
    }
    fn i64(&mut self) -> Result<i64, RecordError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn host(&mut self, v6: bool) -> Result<SocketAddr, RecordError> {
        let ip = if v6 {
            let mut a = [0u8; 16];
            a.copy_from_slice(self.take(16)?);
            IpAddr::V6(Ipv6Addr::from(a))
        } else {
            let b = self.take(4)?;
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        };
        let port = self.i32()?;
        let port = u16::try_from(port).map_err(|_| RecordError::BadPort(port))?;
        Ok(SocketAddr::new(ip, port))
    }
}

fn len_field(v: i64, name: &'static str) -> Result<usize, RecordError> {
    usize::try_from(v).map_err(|_| RecordError::BadLength(name))
}

/// Reads the 8-byte prefix: `Ok(total_size)` for a message record, `Err(Blank)` for an
/// end-of-file marker, other errors for anything else.
pub fn peek_total_size(buf: &[u8]) -> Result<u32, RecordError> {
    if buf.len() < 8 {
        return Err(RecordError::Truncated {
            need: 8,
            have: buf.len(),
        });
    }
    let total = u32::from_be_bytes(read4(buf, OFF_TOTAL_SIZE));
    match u32::from_be_bytes(read4(buf, OFF_MAGIC)) {
        BLANK_MAGIC => Err(RecordError::Blank { remaining: total }),
        MESSAGE_MAGIC_V1 | MESSAGE_MAGIC_V2 => Ok(total),
        other => Err(RecordError::BadMagic(other)),
    }
}

/// Decodes one record at the start of `buf`, verifying magic, total size, and (if check_crc)
/// body CRC.
pub fn decode(buf: &[u8], check_crc: bool) -> Result<DecodedRecord<'_>, RecordError> {
    let total = peek_total_size(buf)? as usize;
    if total > buf.len() {
        return Err(RecordError::Truncated {
            need: total,
            have: buf.len(),
        });
    }
    let mut r = Reader {
        buf: &buf[..total],
        pos: 0,
    };
    let total_size = r.u32()?;
    let magic = r.u32()?;
    let body_crc_stored = r.u32()?;
    let queue_id = r.i32()?;
    let flag = r.i32()?;
    let queue_offset = r.i64()?;
    let phy_offset = r.i64()?;
    let sys = r.i32()?;
    let born_timestamp = r.i64()?;
    let born_host = r.host(sys & sys_flag::BORNHOST_V6 != 0)?;
    let store_timestamp = r.i64()?;
    let store_host = r.host(sys & sys_flag::STOREHOST_V6 != 0)?;
    let reconsume_times = r.i32()?;
    let prepared_transaction_offset = r.i64()?;
    let body_len = r.i32()?;
    let body_len = len_field(i64::from(body_len), "body length")?;
    let body = r.take(body_len)?;
    let topic_len = if magic == MESSAGE_MAGIC_V2 {
        len_field(i64::from(r.i16()?), "topic length")?
    } else {
        usize::from(r.u8()?)
    };
    let topic = r.take(topic_len)?;
    let props_len = r.i16()?;
    let props_len = len_field(i64::from(props_len), "properties length")?;
    let properties = r.take(props_len)?;
    if r.pos != total {
        return Err(RecordError::SizeMismatch {
            total,
            computed: r.pos,
        });
    }
    if check_crc {
        let computed = body_crc(body);
        if computed != body_crc_stored {
            return Err(RecordError::BadCrc {
                stored: body_crc_stored,
                computed,
            });
        }
    }
    Ok(DecodedRecord {
        total_size,
        magic,
        body_crc: body_crc_stored,
        queue_id,
        flag,
        queue_offset,
        phy_offset,
        sys_flag: sys,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic: std::str::from_utf8(topic).map_err(|_| RecordError::BadUtf8("topic"))?,
        properties: std::str::from_utf8(properties)
            .map_err(|_| RecordError::BadUtf8("properties"))?,
    })
}

#[cfg(test)]
#[path = "message_tests.rs"]
mod tests;
