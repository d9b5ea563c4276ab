//! The admin client library: a blocking client of the name server and brokers for tools (the
//! `ringmq admin` command, a web console), never run on a shard.
//!
//! Owns the admin side of RocketMQ's remoting protocol: `transport` (one std::net connection
//! per call, with connect, read and write timeouts), `client` (the [`AdminClient`]: broker
//! resolution from GET_BROKER_CLUSTER_INFO and routes, one typed method per request),
//! `messages` (messages read back from stored records, sending one), `auth` (ACL 2.0's user
//! and ACL requests; the client signs every request when given `Credentials`), `bodies`
//! (the typed reply bodies) and `object_map` (the reader of fastjson's maps keyed by JSON
//! objects). Every failure is one [`AdminError`]. An `AdminClient` holds no connection and no global state: it
//! is `Send + Sync` and cheap to clone, so any thread of any program can share one.

pub mod cli;
pub mod console;

// The lower crates, under the names this crate's modules use for them.
use ringmq_protocol as protocol;
use ringmq_protocol::common;
use ringmq_protocol::constants;
use ringmq_remoting::tls;
use ringmq_runtime as runtime;

mod auth;
pub mod bodies;
mod client;
mod messages;
pub mod object_map;
mod transport;

pub use client::{AdminClient, BrokerRef, Credentials, DEFAULT_NAMESRV, DEFAULT_TIMEOUT};
pub use messages::{
    MessageView, PullResult, SendResult, ADMIN_PRODUCER_GROUP, TOOLS_CONSUMER_GROUP,
};

use crate::protocol::codes::response_code;

/// Every way an admin call can fail.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The address could not be reached (connect, read or write failed or timed out).
    #[error("{addr} is unreachable: {source}")]
    Unreachable {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The server answered with a response code other than SUCCESS.
    #[error("{addr} refused {what}: {remark} (response code {code})")]
    Refused {
        addr: String,
        what: String,
        code: i32,
        remark: String,
    },
    /// The server's reply could not be read (bad frame, bad body, missing header field).
    #[error("malformed reply from {addr}: {reason}")]
    Malformed { addr: String, reason: String },
    /// The thing asked for does not exist (no route, no such message, no such group).
    #[error("{0}")]
    NotFound(String),
    /// The caller's input cannot be sent (a bad address, a bad id, a missing argument).
    #[error("{0}")]
    InvalidArgument(String),
}

impl AdminError {
    /// True when a name server or broker could not be reached at all.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, AdminError::Unreachable { .. })
    }

    /// True when the server said the topic, group, subscription or message does not exist,
    /// or the library found nothing.
    pub fn is_not_found(&self) -> bool {
        match self {
            AdminError::NotFound(_) => true,
            AdminError::Refused { code, .. } => matches!(
                *code,
                response_code::TOPIC_NOT_EXIST
                    | response_code::QUERY_NOT_FOUND
                    | response_code::SUBSCRIPTION_GROUP_NOT_EXIST
                    | response_code::SUBSCRIPTION_NOT_EXIST
                    | response_code::CONSUMER_NOT_ONLINE
            ),
            _ => false,
        }
    }
}
