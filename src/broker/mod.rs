//! The broker: request handlers over shard-owned state.
//!
//! Ownership (ARCHITECTURE invariant 1): each (topic, queue id) has one owner shard, a pure
//! function of the pair and the shard count ([`owner_of`]). The owner holds the queue's
//! ConsumeQueue, its consumer offsets and its long-polling waiters. Shard 0 additionally owns the
//! broker's metadata (topic configs, subscription groups, consumer/producer registrations, queue
//! locks) and publishes read-only snapshots (`Arc`) of the parts other shards read. A request that
//! needs state owned elsewhere is forwarded with `Mesh::call`; nothing is shared mutably.

pub mod admin;
pub mod admin_conns;
pub mod admin_stats;
pub mod broker2client;
pub mod clean;
pub mod clients;
pub mod error;
pub mod handler;
pub mod long_poll;
pub mod metadata;
pub mod offsets;
pub mod pull;
pub mod query;
pub mod register;
pub mod relay;
pub mod reply;
pub mod retry;
pub mod schedule;
pub mod send;
pub mod shard;
pub mod start;
pub mod stats;
pub mod timer;
pub mod topic_attributes;
pub mod topic_delete;
pub mod topic_validator;
pub mod transaction;

pub use error::BrokerError;
pub use shard::Shard;
pub use start::{start_broker, BrokerHandle};

/// The shard that owns (topic, queue_id). FNV-1a over the topic, plus the queue id, so the
/// queues of one topic spread over shards. The transaction op queue lives with the half queue,
/// whose owner alone reads both (see `transaction`).
pub fn owner_of(topic: &str, queue_id: u32, shards: usize) -> usize {
    let topic = if topic == topic_validator::TRANS_OP_HALF_TOPIC {
        topic_validator::TRANS_HALF_TOPIC
    } else {
        topic
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in topic.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    ((h.wrapping_add(queue_id as u64)) % shards.max(1) as u64) as usize
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::owner_of;

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
