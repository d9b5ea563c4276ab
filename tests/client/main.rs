//! Tests through rocketmq-client-rust (producers, push, lite pull and admin clients) against
//! `ringmq serve` processes.
//!
//! One test binary of several files (each a module below), so the suite links the broker once
//! per group instead of once per file.

// rocketmq-client-rust's futures are deep.
#![recursion_limit = "256"]

#[path = "../common/mod.rs"]
mod common;
#[path = "../failover_support/mod.rs"]
mod failover_support;
#[path = "../raw_support/mod.rs"]
mod raw_support;

mod acl;
mod admin_auth;
mod admin_connections;
mod admin_stats;
mod admin_topic;
mod batch;
mod big_body;
mod broadcast;
mod delay_timer;
mod failover;
mod lite_pull;
mod long_poll;
mod metrics;
mod offsets_restart;
mod ordered;
mod pop_push;
mod push_clustering;
mod query;
mod replication;
mod request_reply;
mod retry_dlq;
mod send_async_oneway;
mod send_sync;
mod sql92;
mod tags;
mod topic_delete;
mod transaction;
mod two_brokers;
