//! ringmq: a message broker and name server that speaks Apache RocketMQ's remoting protocol.
//!
//! Layout (see ARCHITECTURE.md at the repository root for the invariants):
//! - `constants`: every limit and on-disk size in one place.
//! - `protocol`: pure codec, no I/O (frames, RemotingCommand, typed headers, JSON bodies,
//!   stored-message records).
//! - `store`: CommitLog segments, ConsumeQueue, IndexFile, checkpoint, recovery, retention.
//! - `writer`: the single CommitLog writer thread (sequencer, flush policy, publish).
//! - `runtime`: the only module that names glommio: shards, pinning, cross-core mesh.
//! - `remoting`: sockets: listeners, connection loops, zero-copy sendfile.
//! - `broker`: request handlers and broker state (topics, groups, offsets, long polling).
//! - `namesrv`: route table, broker liveness, KV config.
//! - `config`: broker.conf (RocketMQ key=value names) and CLI overrides.

pub mod constants;
pub mod namesrv;
pub mod protocol;
pub mod runtime;
pub mod store;
pub mod writer;
