//! The name server core: RocketMQ's `NamesrvController` and `RouteInfoManager` minus the sockets.
//!
//! Owns the route table (`route_table`), broker liveness and the KV config (`kv_config`). The
//! remoting layer calls `NameServer::handle` once per decoded request frame, with the
//! connection id and the current time, and sends back whatever it returns; a timer calls
//! `scan_not_active_brokers` every 5 s; connection teardown calls `on_connection_closed`; a
//! background step writes `take_kv_snapshot` to `kv_config_path()` with `kv_config::write_file`.
//! Nothing here does I/O except the one-time KV load in `new`, so the state has a single owner
//! and needs no lock. Invariants: every non-oneway request gets exactly one response with the
//! request's opaque; bad input from the network becomes an error response, never a panic.

pub mod server;

// The lower crates, under the names this crate's modules use for them.
use ringmq_protocol as protocol;
use ringmq_protocol::common;
use ringmq_protocol::constants;
use ringmq_remoting as remoting;
use ringmq_remoting::tls;
use ringmq_runtime as runtime;

mod admin;
mod handlers;
pub mod kv_config;
pub mod register_body;
pub mod route_table;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_model;
#[cfg(test)]
mod tests_register;

use std::path::{Path, PathBuf};

use crate::protocol::codes::response_code;
use crate::protocol::{ProtocolError, RemotingCommand};

use kv_config::KvConfig;
use route_table::RouteTable;

/// Java's `scanNotActiveBrokerInterval`: how often the caller should run the expiry scan.
pub const SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS: u64 = 5_000;
/// The name server's default listen port.
pub const DEFAULT_LISTEN_PORT: u16 = 9876;

/// Why a request could not be served. Exactly one mapping to a response code:
/// `response_code`; the remark is the Display text.
#[derive(Debug, thiserror::Error)]
pub enum NamesrvError {
    /// A missing or unparsable header field or a malformed body (Java answers SYSTEM_ERROR
    /// when a processor throws on bad input; clients treat it as a broker-side failure).
    #[error("{0}")]
    Protocol(#[from] ProtocolError),
    /// REGISTER_BROKER's `bodyCrc32` disagrees with the body (Java's exact remark).
    #[error("crc32 not match")]
    CrcMismatch { header: i32, computed: u32 },
    /// A request that names an entity the name server does not know (e.g. a topic route for
    /// an unregistered broker).
    #[error("{0}")]
    InvalidParameter(String),
    #[error(" request type {0} not supported")]
    NotSupported(i32),
}

impl NamesrvError {
    pub fn response_code(&self) -> i32 {
        match self {
            NamesrvError::Protocol(_) | NamesrvError::CrcMismatch { .. } => {
                response_code::SYSTEM_ERROR
            }
            NamesrvError::InvalidParameter(_) => response_code::INVALID_PARAMETER,
            NamesrvError::NotSupported(_) => response_code::REQUEST_CODE_NOT_SUPPORTED,
        }
    }
}

/// Routing and KV state of one name server; single owner, no interior locking.
pub struct NameServer {
    routes: RouteTable,
    kv: KvConfig,
    kv_config_path: Option<PathBuf>,
    /// The port the server listens on, for GET_NAMESRV_CONFIG (set by whoever bound it).
    listen_port: Option<u16>,
}

impl NameServer {
    /// A name server with empty routes; loads the KV config from `kv_config_path` when given
    /// (an unreadable file is logged and the server starts with an empty table, as Java does).
    pub fn new(kv_config_path: Option<PathBuf>) -> Self {
        let kv = match &kv_config_path {
            Some(path) => KvConfig::load(path).unwrap_or_else(|e| {
                tracing::error!(error = %e, "kv config not loaded; starting with an empty one");
                KvConfig::new()
            }),
            None => KvConfig::new(),
        };
        NameServer {
            routes: RouteTable::new(),
            kv,
            kv_config_path,
            listen_port: None,
        }
    }

    /// Records the port the server was bound to (GET_NAMESRV_CONFIG shows it).
    pub fn set_listen_port(&mut self, port: u16) {
        self.listen_port = Some(port);
    }

    /// Handles one request from connection `conn_id` at time `now_ms`. Returns the response,
    /// or None for oneway requests (processed all the same) and for stray responses (the name
    /// server sends no requests, so a response has nothing to match).
    pub fn handle(
        &mut self,
        conn_id: u64,
        cmd: &RemotingCommand,
        now_ms: i64,
    ) -> Option<RemotingCommand> {
        if cmd.is_response() {
            tracing::debug!(
                opaque = cmd.opaque,
                "dropping a response sent to the name server"
            );
            return None;
        }
        let response = match self.dispatch(conn_id, cmd, now_ms) {
            Ok(response) => response,
            Err(e) => {
                tracing::warn!(code = cmd.code, conn_id, error = %e, "name server request failed");
                RemotingCommand::response_for(cmd, e.response_code(), Some(e.to_string()))
            }
        };
        (!cmd.is_oneway()).then_some(response)
    }

    /// Removes brokers whose last update is older than their heartbeat timeout (default
    /// 120 s); returns the removed addresses, sorted.
    pub fn scan_not_active_brokers(&mut self, now_ms: i64) -> Vec<String> {
        self.routes.scan_not_active(now_ms)
    }

    /// A connection closed: drop the brokers registered through it.
    pub fn on_connection_closed(&mut self, conn_id: u64) {
        let removed = self.routes.remove_by_conn(conn_id);
        if !removed.is_empty() {
            tracing::info!(
                conn_id,
                ?removed,
                "broker connection closed; routes removed"
            );
        }
    }

    /// If the KV config changed since the last call, the JSON bytes to persist.
    pub fn take_kv_snapshot(&mut self) -> Option<Vec<u8>> {
        self.kv.take_snapshot()
    }

    /// Where the snapshot belongs (the path given to `new`).
    pub fn kv_config_path(&self) -> Option<&Path> {
        self.kv_config_path.as_deref()
    }

    /// Read access to the routing state, for status output and tests.
    pub fn route_table(&self) -> &RouteTable {
        &self.routes
    }
}
