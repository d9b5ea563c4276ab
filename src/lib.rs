//! ringmq: a message broker and name server that speaks Apache RocketMQ's remoting protocol.
//!
//! Layout (the invariants are in ARCHITECTURE.md at the repository root):
//! - `constants`: every limit and on-disk size in one place.
//! - `protocol`: pure codec, no I/O (frames, RemotingCommand, typed headers, JSON bodies,
//!   stored-message records).
//! - `store`: CommitLog segments, ConsumeQueue, IndexFile, checkpoint, recovery, retention.
//! - `writer`: the single CommitLog writer thread (sequencer, flush policy, publish).
//! - `runtime`: the only module that names glommio: shards, pinning, cross-core mesh, sockets.
//! - `remoting`: the connection loop shared by broker and name server, zero-copy writes.
//! - `broker`: request handlers and broker state (topics, groups, offsets, long polling).
//! - `namesrv`: route table, broker liveness, KV config (pure); `namesrv_server` runs it.
//! - `auth`: access control (request signatures, ACLs), not yet called by the broker.
//! - `tls`: the TLS keys turned into rustls configurations (certificates, keys, trust).
//! - `common`: the clock and config-file replacement, shared by broker and name server.
//! - `config`: broker.conf (RocketMQ key=value names) and CLI overrides.
//! - `admin`: the blocking admin client library for tools (`ringmq admin`, a console);
//!   `admin_cli` the `ringmq admin` command over it.
//! - `console`: the web console, an HTTP server on its own threads whose pages are built from
//!   `admin` calls.

pub mod admin;
pub mod admin_cli;
pub mod auth;
pub mod broker;
pub mod common;
pub mod config;
pub mod console;
pub mod constants;
pub mod controller;
pub mod filter;
pub mod namesrv;
pub mod namesrv_server;
pub mod protocol;
pub mod remoting;
pub mod runtime;
pub mod store;
pub mod tls;
pub mod writer;
