//! Broker liveness as this controller sees it (Java's `DefaultBrokerHeartbeatManager`): one
//! `BrokerLiveInfo` per (cluster, brokerName, brokerId), refreshed by every BROKER_HEARTBEAT
//! (904) a broker sends to all controllers. Not replicated: each controller keeps its own.
//!
//! Owned by the controller's thread. A broker is alive while `last heartbeat + its timeout >=
//! now`; `scan` removes the expired ones and `on_connection_closed` the one whose heartbeats came
//! on a closed connection, and both report who went inactive. The table is bounded.

use std::collections::HashMap;

use super::elect::{ElectInfo, Liveness};
use crate::protocol::headers::BrokerHeartbeatRequestHeader;

/// Java's `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`: a heartbeat without a timeout lasts 10 s.
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: i64 = 10_000;
/// At most this many brokers tracked; heartbeats from more are dropped with a log line.
pub const MAX_LIVE_BROKERS: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BrokerIdentity {
    pub cluster_name: String,
    pub broker_name: String,
    pub broker_id: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerLiveInfo {
    pub broker_addr: String,
    pub last_update_ms: i64,
    pub heartbeat_timeout_ms: i64,
    /// The controller connection the heartbeats arrive on.
    pub connection: u64,
    pub epoch: i32,
    pub max_offset: i64,
    pub confirm_offset: i64,
    pub election_priority: i32,
}

/// The live table plus the clock it is judged by (set by the owner before each use).
#[derive(Default)]
pub struct BrokerLiveTable {
    table: HashMap<BrokerIdentity, BrokerLiveInfo>,
    now_ms: i64,
}

impl BrokerLiveTable {
    pub fn set_now(&mut self, now_ms: i64) {
        self.now_ms = now_ms;
    }

    pub fn get(&self, id: &BrokerIdentity) -> Option<&BrokerLiveInfo> {
        self.table.get(id)
    }

    /// Records one heartbeat. Epoch, offsets only move forward (a later epoch, or the same
    /// epoch with a larger maxOffset), as in Java.
    pub fn on_heartbeat(&mut self, h: &BrokerHeartbeatRequestHeader, broker_id: i64, conn: u64) {
        let key = BrokerIdentity {
            cluster_name: h.cluster_name.clone(),
            broker_name: h.broker_name.clone(),
            broker_id,
        };
        let epoch = h.epoch.unwrap_or(-1);
        let max_offset = h.max_offset.unwrap_or(-1);
        let confirm_offset = h.confirm_offset.unwrap_or(-1);
        let timeout = h
            .heartbeat_timeout_mills
            .unwrap_or(DEFAULT_HEARTBEAT_TIMEOUT_MS);
        let priority = h.election_priority.unwrap_or(i32::MAX);
        if let Some(prev) = self.table.get_mut(&key) {
            prev.last_update_ms = self.now_ms;
            prev.heartbeat_timeout_ms = timeout;
            prev.election_priority = priority;
            prev.connection = conn;
            prev.broker_addr.clone_from(&h.broker_addr);
            if epoch > prev.epoch || (epoch == prev.epoch && max_offset > prev.max_offset) {
                prev.epoch = epoch;
                prev.max_offset = max_offset;
                prev.confirm_offset = confirm_offset;
            }
            return;
        }
        if self.table.len() >= MAX_LIVE_BROKERS {
            tracing::warn!(?key, "broker live table full; heartbeat dropped");
            return;
        }
        let info = BrokerLiveInfo {
            broker_addr: h.broker_addr.clone(),
            last_update_ms: self.now_ms,
            heartbeat_timeout_ms: timeout,
            connection: conn,
            epoch,
            max_offset,
            confirm_offset,
            election_priority: priority,
        };
        tracing::info!(?key, "new broker registered");
        self.table.insert(key, info);
    }

    /// Removes and returns the brokers whose heartbeat expired.
    pub fn scan(&mut self) -> Vec<BrokerIdentity> {
        let now = self.now_ms;
        let expired: Vec<BrokerIdentity> = self
            .table
            .iter()
            .filter(|(_, i)| now - i.last_update_ms > i.heartbeat_timeout_ms)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &expired {
            self.table.remove(k);
            tracing::warn!(broker = ?k, "broker heartbeat expired");
        }
        expired
    }

    /// Removes and returns the brokers whose heartbeats came on `conn`.
    pub fn on_connection_closed(&mut self, conn: u64) -> Vec<BrokerIdentity> {
        let gone: Vec<BrokerIdentity> = self
            .table
            .iter()
            .filter(|(_, i)| i.connection == conn)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &gone {
            self.table.remove(k);
            tracing::info!(broker = ?k, "broker connection closed");
        }
        gone
    }
}

impl Liveness for BrokerLiveTable {
    fn is_alive(&self, cluster_name: &str, broker_name: &str, broker_id: i64) -> bool {
        let key = BrokerIdentity {
            cluster_name: cluster_name.to_owned(),
            broker_name: broker_name.to_owned(),
            broker_id,
        };
        self.table
            .get(&key)
            .is_some_and(|i| i.last_update_ms + i.heartbeat_timeout_ms >= self.now_ms)
    }

    fn elect_info(
        &self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: i64,
    ) -> Option<ElectInfo> {
        let key = BrokerIdentity {
            cluster_name: cluster_name.to_owned(),
            broker_name: broker_name.to_owned(),
            broker_id,
        };
        self.table.get(&key).map(|i| ElectInfo {
            epoch: i.epoch,
            max_offset: i.max_offset,
            election_priority: i.election_priority,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(id: i64, epoch: i32, max_offset: i64, timeout_ms: i64) -> BrokerHeartbeatRequestHeader {
        BrokerHeartbeatRequestHeader {
            cluster_name: "c".into(),
            broker_addr: format!("h:{id}"),
            broker_name: "b".into(),
            broker_id: Some(id),
            epoch: Some(epoch),
            max_offset: Some(max_offset),
            confirm_offset: None,
            heartbeat_timeout_mills: Some(timeout_ms),
            election_priority: None,
        }
    }

    /// A broker is alive until its own timeout passes; the scan then removes and reports it.
    #[test]
    fn timeout_expires_broker() {
        let mut t = BrokerLiveTable::default();
        t.set_now(1_000);
        t.on_heartbeat(&beat(1, 0, 0, 500), 1, 7);
        t.on_heartbeat(&beat(2, 0, 0, 5_000), 2, 8);
        t.set_now(1_500);
        assert!(t.is_alive("c", "b", 1));
        assert!(t.scan().is_empty());
        t.set_now(1_501);
        assert!(!t.is_alive("c", "b", 1));
        let gone = t.scan();
        assert_eq!(
            gone.iter().map(|g| g.broker_id).collect::<Vec<_>>(),
            vec![1]
        );
        assert!(t.get(&gone[0]).is_none());
        assert!(t.is_alive("c", "b", 2));
    }

    /// Closing a connection removes exactly the brokers whose heartbeats came on it.
    #[test]
    fn closed_connection_removes_its_brokers() {
        let mut t = BrokerLiveTable::default();
        t.on_heartbeat(&beat(1, 0, 0, 10_000), 1, 7);
        t.on_heartbeat(&beat(2, 0, 0, 10_000), 2, 8);
        let gone = t.on_connection_closed(7);
        assert_eq!(gone.len(), 1);
        assert!(!t.is_alive("c", "b", 1) && t.is_alive("c", "b", 2));
        assert!(t.on_connection_closed(7).is_empty());
    }

    /// Epoch and offsets only move forward; a missing priority is the worst (i32::MAX).
    #[test]
    fn progress_only_moves_forward() {
        let mut t = BrokerLiveTable::default();
        t.on_heartbeat(&beat(1, 2, 100, 10_000), 1, 7);
        t.on_heartbeat(&beat(1, 1, 900, 10_000), 1, 7);
        t.on_heartbeat(&beat(1, 2, 50, 10_000), 1, 7);
        let i = t.elect_info("c", "b", 1).unwrap();
        assert_eq!(
            (i.epoch, i.max_offset, i.election_priority),
            (2, 100, i32::MAX)
        );
        t.on_heartbeat(&beat(1, 2, 150, 10_000), 1, 7);
        assert_eq!(t.elect_info("c", "b", 1).unwrap().max_offset, 150);
    }
}
