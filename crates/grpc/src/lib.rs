//! The RocketMQ 5 gRPC endpoint: the `apache.rocketmq.v2.MessagingService` protocol that the
//! RocketMQ 5.x SDKs (Java, Go, C++, Python, Node.js, C#, Rust) speak over HTTP/2, served in
//! process the way the Java Proxy's "local" mode does: each call becomes the Remoting request
//! a client would send, run by the broker's own dispatch on a shard, over a virtual connection
//! per gRPC client. tonic serves it from a thread of its own (`server`), never on a shard.
//! `pb` holds the messages, the server trait and the client, generated at build time from
//! this crate's own `.proto` files.
//!
//! Modules, from the wire in: `server` (thread, TLS or plaintext per connection), `service`
//! (the RPCs), `route`, `produce`, `consume`, `telemetry` (what each RPC does), `clients` (the
//! clients), `convert` (messages both ways), `gateway` (jobs for the shards), `status` (errors
//! and their codes).

pub mod clients;
pub mod consume;
pub mod convert;
pub mod diagnostics;
pub mod endpoint;
pub mod gateway;
pub mod pb;
pub mod produce;
pub mod questions;
pub mod renew;
pub mod renewals;
pub mod route;
pub mod server;
pub mod service;
pub mod start;
pub mod status;
pub mod telemetry;
pub mod tls;

pub use endpoint::{Endpoint, EndpointConfig};
pub use server::{serve, GrpcServer, TlsPolicy};
pub use start::{start, Listen};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
