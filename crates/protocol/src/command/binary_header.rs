//! The ROCKETMQ binary header (Java's `RocketMQSerializable`), big-endian:
//! code short, language byte, version short, opaque int, flag int, remarkLen int + remark,
//! extLen int + entries (keyLen short + key, valLen int + value).
//!
//! Java quirks kept: a zero length means null (empty remark -> None, empty key or value -> entry
//! absent). Lengths are checked against the bytes actually left in the header before any slice
//! is taken, so a hostile length can neither panic nor allocate. Encode refuses what Java would
//! silently truncate (code or version outside a short, keys longer than a short).

use bytes::{BufMut, Bytes, BytesMut};

use super::{RemotingCommand, SerializeType};
use crate::ProtocolError;

/// Fixed part before the remark: code 2 + language 1 + version 2 + opaque 4 + flag 4.
const FIXED_LEN: usize = 13;

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ProtocolError> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.buf.len());
        let Some(end) = end else {
            return Err(ProtocolError::BadHeader(format!(
                "{what}: {n} bytes wanted, {} left",
                self.buf.len() - self.pos
            )));
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self, what: &str) -> Result<u8, ProtocolError> {
        Ok(self.take(1, what)?[0])
    }

    fn i16(&mut self, what: &str) -> Result<i16, ProtocolError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, what: &str) -> Result<i32, ProtocolError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A length-prefixed string whose length was already read; 0 = null.
    fn string(&mut self, len: i64, what: &str) -> Result<Option<&'a str>, ProtocolError> {
        if len < 0 {
            return Err(ProtocolError::BadHeader(format!(
                "{what}: negative length {len}"
            )));
        }
        if len == 0 {
            return Ok(None);
        }
        let bytes = self.take(len as usize, what)?;
        let s = std::str::from_utf8(bytes)
            .map_err(|_| ProtocolError::BadHeader(format!("{what}: not UTF-8")))?;
        Ok(Some(s))
    }
}

pub(super) fn decode(header: &[u8]) -> Result<RemotingCommand, ProtocolError> {
    let mut r = Reader {
        buf: header,
        pos: 0,
    };
    let code = r.i16("code")? as i32;
    let language = r.u8("language")?;
    let version = r.i16("version")? as i32;
    let opaque = r.i32("opaque")?;
    let flag = r.i32("flag")?;
    let remark_len = r.i32("remark length")?;
    let remark = r.string(remark_len as i64, "remark")?.map(str::to_owned);
    let ext_len = r.i32("extFields length")?;
    if ext_len < 0 {
        return Err(ProtocolError::BadHeader(format!(
            "extFields: negative length {ext_len}"
        )));
    }
    let ext_bytes = r.take(ext_len as usize, "extFields")?;
    // Bytes after the map are ignored, as Java's decoder never looks at them.
    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields: decode_ext(ext_bytes)?,
        body: Bytes::new(),
        serialize_type: SerializeType::RocketMq,
    })
}

fn decode_ext(buf: &[u8]) -> Result<super::ExtFields, ProtocolError> {
    let mut map = super::ExtFields::with_capacity(16, buf.len());
    let mut r = Reader { buf, pos: 0 };
    while r.pos < buf.len() {
        let key_len = r.i16("extFields key length")?;
        let key = r.string(key_len as i64, "extFields key")?;
        let val_len = r.i32("extFields value length")?;
        let val = r.string(val_len as i64, "extFields value")?;
        if let (Some(k), Some(v)) = (key, val) {
            map.push(k, v);
        }
    }
    map.dedup();
    Ok(map)
}

pub(super) fn encode(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), ProtocolError> {
    let code = i16::try_from(cmd.code).map_err(|_| {
        ProtocolError::Unencodable(format!("code {} does not fit a short", cmd.code))
    })?;
    let version = i16::try_from(cmd.version).map_err(|_| {
        ProtocolError::Unencodable(format!("version {} does not fit a short", cmd.version))
    })?;
    let remark = cmd.remark.as_deref().unwrap_or("");
    let remark_len = len_i32(remark.len(), "remark")?;
    let mut ext_len = 0usize;
    for (k, v) in &cmd.ext_fields {
        if k.len() > i16::MAX as usize {
            return Err(ProtocolError::Unencodable(format!(
                "extFields key of {} bytes does not fit a short length",
                k.len()
            )));
        }
        ext_len += 2 + k.len() + 4 + v.len();
    }
    let ext_len_i32 = len_i32(ext_len, "extFields")?;
    dst.reserve(FIXED_LEN + 4 + remark.len() + 4 + ext_len);
    dst.put_i16(code);
    dst.put_u8(cmd.language);
    dst.put_i16(version);
    dst.put_i32(cmd.opaque);
    dst.put_i32(cmd.flag);
    dst.put_i32(remark_len);
    dst.put_slice(remark.as_bytes());
    dst.put_i32(ext_len_i32);
    for (k, v) in &cmd.ext_fields {
        dst.put_i16(k.len() as i16);
        dst.put_slice(k.as_bytes());
        dst.put_i32(v.len() as i32); // v.len() <= ext_len, checked to fit i32 above
        dst.put_slice(v.as_bytes());
    }
    Ok(())
}

fn len_i32(len: usize, what: &str) -> Result<i32, ProtocolError> {
    i32::try_from(len)
        .map_err(|_| ProtocolError::Unencodable(format!("{what} of {len} bytes exceeds i32")))
}
