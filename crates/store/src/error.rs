//! The store layer's one error type. Every I/O failure keeps its `io::Error` and the path.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("corrupt data in {path} at byte {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("message too large: {size} bytes, the limit is {max}")]
    MessageTooLarge { size: usize, max: usize },
    #[error("properties too long: {0} bytes, the limit is 32767")]
    PropertiesTooLong(usize),
    #[error("disk full: {0}")]
    DiskFull(String),
    #[error("store not writable: {0}")]
    NotWritable(String),
    #[error("writer busy: its inbox is full")]
    Busy,
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("offset {0} is not in the store (removed or never written)")]
    OffsetNotFound(u64),
}

impl StoreError {
    /// Wraps an `io::Error` with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }
}
