//! The message store in RocketMQ's on-disk formats: CommitLog segments, ConsumeQueue files,
//! IndexFile, checkpoint and abort files, recovery and retention.
//!
//! Ownership: the CommitLog is mutated only by the writer thread (`crate::writer`); each
//! ConsumeQueue only by the shard that owns its (topic, queue id); readers on shards map
//! segments read-only and touch only bytes the writer has published.

pub mod consume_queue;
pub mod error;
pub mod index_file;

pub use error::StoreError;
