//! The message store in RocketMQ's on-disk formats: CommitLog segments, ConsumeQueue files,
//! IndexFile, checkpoint and abort files, recovery and retention (with its file deleter).
//!
//! Ownership: the CommitLog is mutated only by the writer thread (`crate::writer`); each
//! ConsumeQueue only by the shard that owns its (topic, queue id); readers on shards map
//! segments read-only and touch only bytes the writer has published.

pub mod writer;

// The lower crates, under the names this crate's modules use for them.
use ringmq_protocol as protocol;
use ringmq_protocol::common;
use ringmq_protocol::constants;
use ringmq_runtime as runtime;

pub mod allocator;
pub mod broker_identity;
pub mod commit_log;
pub mod config;
pub mod consume_queue;
pub mod deleter;
pub mod epoch_file;
pub mod error;
pub mod fault;
pub mod files;
pub mod index_file;
pub mod mapped_file;
pub mod reader;
pub mod recovery;
pub mod recycle;
pub mod retention;
pub mod tags_code;
pub mod text_file;
pub mod warm_gate;

pub use consume_queue::{list_queues, ConsumeQueue, CqCutFiles, CqSyncJob, CqUnit, CQ_UNIT_SIZE};
pub use index_file::IndexService;

pub use commit_log::CommitLog;
pub use config::{FlushDiskType, StoreConfig};
pub use epoch_file::EpochFileCache;
pub use error::StoreError;
pub use files::Checkpoint;
pub use reader::{CommitLogReader, SegmentRange};
pub use recovery::{open, OpenedStore};
pub use tags_code::{DelayLevels, TagsCode};
