//! Multi-process set-ups and hostile conditions: controllers, failover, limits and overload, TLS,
//! start-up failures, and the C++ client through Python.
//!
//! One test binary of several files (each a module below), so the suite links the broker once
//! per group instead of once per file.

// rocketmq-client-rust's futures are deep.
#![recursion_limit = "256"]

#[path = "../common/mod.rs"]
mod common;
#[path = "../failover_support/mod.rs"]
mod failover_support;
#[path = "../hostile_support/mod.rs"]
mod hostile_support;
#[path = "../raw_support/mod.rs"]
mod raw_support;
#[path = "../tls_support/mod.rs"]
mod tls_support;

mod bad_input;
mod client;
mod config;
mod cpp_client;
mod embedded;
mod failover;
mod failover_controller;
mod grpc_protocol;
mod grpc_sdk;
mod heartbeat_timeout;
mod leader_change;
mod limits;
mod network;
mod overload;
mod panics;
mod remoting;
mod snapshot;
mod soak_short;
mod start_failures;
