//! The broker: request handlers over shard-owned state.
//!
//! Ownership (ARCHITECTURE invariant 1): each (topic, queue id) has one owner shard, a pure
//! function of the pair and the shard count ([`owner_of`]). The owner holds the queue's
//! ConsumeQueue, its consumer offsets and its long-polling waiters. Shard 0 additionally owns the
//! broker's metadata (topic configs, subscription groups, consumer/producer registrations, queue
//! locks) and publishes read-only snapshots (`Arc`) of the parts other shards read. A request that
//! needs state owned elsewhere is forwarded with `Mesh::call`; nothing is shared mutably.

pub mod config;

// The lower crates, under the names this crate's modules use for them.
use ringmq_auth as auth;
use ringmq_protocol as protocol;
use ringmq_protocol::common;
use ringmq_protocol::constants;
use ringmq_protocol::filter;
use ringmq_remoting as remoting;
use ringmq_remoting::tls;
use ringmq_runtime as runtime;
use ringmq_store as store;
use ringmq_store::writer;

pub mod admin;
pub mod admin_auth;
pub mod admin_config;
pub mod admin_conns;
pub mod admin_groups;
pub mod admin_offsets;
pub mod admin_stats;
pub mod admin_store;
pub mod append;
pub mod assignment;
pub mod auth_gate;
pub mod auth_state;
pub mod broker2client;
pub mod broker_stats;
pub mod clean;
pub mod clients;
pub mod completion;
pub mod error;
pub mod group_transfer;
pub mod ha;
pub mod ha_autoswitch;
pub mod ha_autoswitch_client;
pub mod ha_client;
pub mod ha_status;
pub mod ha_watch;
pub mod handler;
pub mod local;
pub mod long_poll;
pub mod metadata;
pub mod metrics;
pub mod offsets;
pub mod pop;
pub mod pull;
pub mod query;
pub mod register;
pub mod relay;
pub mod replicas;
pub mod reply;
pub mod retry;
pub mod role;
pub mod runtime_info;
pub mod schedule;
pub mod send;
pub mod settings;
pub mod shard;
pub mod slave_sync;
pub mod start;
pub mod stats;
pub mod threads;
pub mod timer;
pub mod topic_delete;
pub mod topic_manager;
pub mod transaction;

pub use error::BrokerError;
pub use shard::{owner_of, Shard};
pub use start::{start_broker, BrokerHandle};

#[cfg(test)]
mod tests {
    use super::shard::owner_of;

    /// Ownership is a pure function in range, and a topic's queues spread over the shards.
    #[test]
    fn owner_is_pure_and_spreads() {
        for n in 1..5 {
            for q in 0..16 {
                let o = owner_of("TopicTest", q, n);
                assert!(o < n);
                assert_eq!(o, owner_of("TopicTest", q, n));
            }
        }
        let owners: std::collections::BTreeSet<_> = (0..8).map(|q| owner_of("T", q, 4)).collect();
        assert_eq!(owners.len(), 4);
    }
}
