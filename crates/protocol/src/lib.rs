//! Pure codec for RocketMQ's remoting protocol; no I/O here.
//!
//! Owns: frame splitting (`frame`), `RemotingCommand` with both header encodings (`command`),
//! request/response/language codes (`codes`), typed custom headers read from and written to
//! `extFields` (`headers`), fastjson-compatible JSON bodies (`body`), the properties string
//! (`properties`), Java's `String.hashCode` (`java_hash`), message ids (`msg_id`), the batch send
//! body (`batch`) and, owned by the store worker, the stored-message record (`message`).
//! Called by the remoting layer (decode/encode per connection), broker and name-server handlers.
//! Invariant: every input here comes from the network or disk, so every decoder returns
//! `ProtocolError` on bad bytes and never panics or allocates more than its input justifies.

pub mod common;
pub mod constants;
pub mod filter;

pub mod assignment;
pub mod batch;
pub mod body;
pub mod codes;
pub mod command;
pub mod frame;
pub mod ha;
pub mod ha_autoswitch;
pub mod headers;
pub mod java_hash;
pub mod message;
pub mod msg_id;
pub mod pop;
pub mod properties;
pub mod topics;

#[cfg(test)]
mod proptests;

pub use command::{RemotingCommand, SerializeType};

/// Every way a frame, header or body can be malformed. The remoting layer closes the
/// connection on frame/header errors (as Java's decoder does) and answers body/field errors
/// with a response code; the mapping to RocketMQ codes lives with the handlers.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    FrameTooLarge { len: usize, max: usize },
    #[error("bad frame: {0}")]
    BadFrame(String),
    #[error("bad header: {0}")]
    BadHeader(String),
    #[error("missing header field {0}")]
    MissingField(&'static str),
    #[error("invalid header field {name}: {value:?}")]
    InvalidField { name: &'static str, value: String },
    #[error("bad body: {0}")]
    BadBody(String),
    #[error("serialize type {0} is neither JSON (0) nor ROCKETMQ (1)")]
    UnknownSerializeType(u8),
    /// The command cannot be written in the requested form (e.g. a code above 32767 in the
    /// ROCKETMQ binary header, whose code field is a short).
    #[error("cannot encode: {0}")]
    Unencodable(String),
}

impl ProtocolError {
    /// True when the byte stream itself is unusable (bad length prefix, undecodable header),
    /// so the connection must be closed as Java's decoder does; false for field and body
    /// errors, which are answered with a response code on a healthy connection.
    pub fn is_connection_fatal(&self) -> bool {
        matches!(
            self,
            ProtocolError::FrameTooLarge { .. }
                | ProtocolError::BadFrame(_)
                | ProtocolError::BadHeader(_)
                | ProtocolError::UnknownSerializeType(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::ProtocolError;

    /// Stream-level errors close the connection; field and body errors do not.
    #[test]
    fn fatal_classification() {
        assert!(ProtocolError::FrameTooLarge { len: 1, max: 0 }.is_connection_fatal());
        assert!(ProtocolError::BadHeader("x".into()).is_connection_fatal());
        assert!(ProtocolError::UnknownSerializeType(9).is_connection_fatal());
        assert!(!ProtocolError::MissingField("topic").is_connection_fatal());
        assert!(!ProtocolError::BadBody("x".into()).is_connection_fatal());
        assert!(!ProtocolError::Unencodable("x".into()).is_connection_fatal());
    }
}
