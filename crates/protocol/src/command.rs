//! `RemotingCommand`: the one message shape of RocketMQ's remoting protocol (Java's class of
//! the same name).
//!
//! Owns decode of a frame (JSON or ROCKETMQ binary header, chosen by the type byte) and encode
//! of full frames or, for zero-copy replies, of the prefix alone. Called by the remoting layer
//! for every frame and by handlers to build responses. Invariants: `decode` never panics and
//! never allocates beyond the frame's size; `encode` leaves `dst` unchanged when it fails;
//! commands we create are JSON, language JAVA, version `CURRENT_VERSION` (Java clients rely on
//! a non-null `extFields`, which JSON encode always writes).

mod binary_header;
mod ext_fields;
mod json_fast;
mod json_header;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicI32, Ordering};

use bytes::{BufMut, Bytes, BytesMut};

use super::codes::{CURRENT_VERSION, LANGUAGE_JAVA};
use super::ProtocolError;
use crate::constants::MAX_HEADER_LEN;

/// flag bit0: this command is a response.
pub const FLAG_RESPONSE: i32 = 1;
/// flag bit1: the sender expects no response.
pub const FLAG_ONEWAY: i32 = 1 << 1;

/// The serialize type byte in the top 8 bits of the header-length word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SerializeType {
    Json = 0,
    RocketMq = 1,
}

impl SerializeType {
    fn from_byte(b: u8) -> Result<Self, ProtocolError> {
        match b {
            0 => Ok(SerializeType::Json),
            1 => Ok(SerializeType::RocketMq),
            other => Err(ProtocolError::UnknownSerializeType(other)),
        }
    }
}

pub use ext_fields::ExtFields;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemotingCommand {
    pub code: i32,
    /// `LanguageCode` wire byte (see `codes::LANGUAGE_NAMES`).
    pub language: u8,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
    pub body: Bytes,
    pub serialize_type: SerializeType,
}

/// Per-process request id sequence, like Java's `RemotingCommand.requestId` (wraps).
static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(0);

impl RemotingCommand {
    /// A request from us (broker to client, broker to name server, load generator): JSON,
    /// language JAVA, version `CURRENT_VERSION`, flag 0, opaque from the process sequence.
    pub fn new_request(code: i32) -> Self {
        RemotingCommand {
            code,
            language: LANGUAGE_JAVA,
            version: CURRENT_VERSION,
            opaque: NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed),
            flag: 0,
            remark: None,
            ext_fields: ExtFields::default(),
            body: Bytes::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// The response to `req`: same opaque, flag RESPONSE, JSON, language JAVA, our version.
    pub fn response_for(req: &RemotingCommand, code: i32, remark: Option<String>) -> Self {
        RemotingCommand {
            code,
            language: LANGUAGE_JAVA,
            version: CURRENT_VERSION,
            opaque: req.opaque,
            flag: FLAG_RESPONSE,
            remark,
            ext_fields: ExtFields::default(),
            body: Bytes::new(),
            serialize_type: SerializeType::Json,
        }
    }

    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    pub fn with_ext(mut self, k: &str, v: impl ToString) -> Self {
        self.set_ext(k, v);
        self
    }

    pub fn set_ext(&mut self, k: &str, v: impl ToString) {
        self.ext_fields.insert(k, &v.to_string());
    }

    pub fn ext(&self, k: &str) -> Option<&str> {
        self.ext_fields.get(k)
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub fn set_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// Decodes a frame: the bytes after the 4-byte length prefix (`frame::split_frame`'s
    /// output). The body is a zero-copy slice of `frame`.
    pub fn decode(frame: Bytes) -> Result<Self, ProtocolError> {
        let Some(word) = frame.get(..4) else {
            return Err(ProtocolError::BadFrame(format!(
                "frame of {} bytes has no header length word",
                frame.len()
            )));
        };
        let word = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        let serialize_type = SerializeType::from_byte((word >> 24) as u8)?;
        let header_len = (word & 0x00FF_FFFF) as usize;
        let header_end = 4 + header_len;
        if header_end > frame.len() {
            return Err(ProtocolError::BadFrame(format!(
                "header length {header_len} exceeds the frame's {} remaining bytes",
                frame.len() - 4
            )));
        }
        let header = &frame[4..header_end];
        let mut cmd = match serialize_type {
            SerializeType::Json => json_header::decode(header)?,
            SerializeType::RocketMq => binary_header::decode(header)?,
        };
        cmd.body = frame.slice(header_end..);
        Ok(cmd)
    }

    /// Appends the full frame (length prefix, header-length word, header, body) to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) -> Result<(), ProtocolError> {
        self.encode_prefix(self.body.len(), dst)?;
        dst.extend_from_slice(&self.body);
        Ok(())
    }

    /// Appends the frame prefix (length counting `body_len` body bytes, header-length word,
    /// header) for a body the caller sends separately (sendfile). `self.body` is ignored.
    pub fn encode_prefix(&self, body_len: usize, dst: &mut BytesMut) -> Result<(), ProtocolError> {
        let start = dst.len();
        dst.put_u64(0); // length and header-length word, patched below
        let written = match self.serialize_type {
            SerializeType::Json => json_header::encode(self, dst),
            SerializeType::RocketMq => binary_header::encode(self, dst),
        };
        let header_len = dst.len() - start - 8;
        let checked = written.and_then(|()| check_lengths(header_len, body_len));
        let total = match checked {
            Ok(total) => total,
            Err(e) => {
                dst.truncate(start);
                return Err(e);
            }
        };
        let word = ((self.serialize_type as u32) << 24) | header_len as u32;
        dst[start..start + 4].copy_from_slice(&(total as u32).to_be_bytes());
        dst[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
        Ok(())
    }
}

/// The value of the length field (4 + header + body), if it fits the wire format.
fn check_lengths(header_len: usize, body_len: usize) -> Result<usize, ProtocolError> {
    if header_len > MAX_HEADER_LEN {
        return Err(ProtocolError::Unencodable(format!(
            "header of {header_len} bytes exceeds the 24-bit header length"
        )));
    }
    let total = 4usize
        .checked_add(header_len)
        .and_then(|n| n.checked_add(body_len))
        .filter(|n| *n <= i32::MAX as usize)
        .ok_or_else(|| {
            ProtocolError::Unencodable(format!("frame with a {body_len}-byte body exceeds i32"))
        })?;
    Ok(total)
}
