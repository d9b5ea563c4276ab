//! The broker's role as it stands now. Outside controller mode it is `brokerRole` and
//! `brokerId` from broker.conf, for the broker's life. In controller mode (RocketMQ 5's
//! `ReplicasManager`) the controller decides it, and a running broker changes from slave to
//! master and back: shard 0's `replicas` service is the only writer; every shard reads it per
//! request (sends refused on a slave, pull rules, registrations, the HA side that runs). Also
//! the group's SyncStateSet as this broker last learned it, which a master's sends wait for
//! under `allAckInSyncStateSet`.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};

use crate::config::BrokerConfig;

/// Broker ids a SyncStateSet can name here (one bit each).
pub const MAX_SYNC_STATE_ID: i64 = 63;

pub struct RoleState {
    slave: AtomicBool,
    /// Whether the controller decided yet (controller mode); always true outside it.
    decided: AtomicBool,
    /// This broker's own id: broker.conf's, or the one the controller assigned.
    own_id: AtomicI64,
    master_epoch: AtomicI32,
    /// One bit per broker id.
    sync_state_set: AtomicU64,
    sync_state_set_epoch: AtomicI32,
}

impl RoleState {
    /// The role broker.conf gives; in controller mode a slave with no id until the controller
    /// answers, which takes no writes.
    pub fn from_config(cfg: &BrokerConfig) -> RoleState {
        let controlled = cfg.controller_mode.enabled;
        RoleState {
            slave: AtomicBool::new(controlled || cfg.ha.broker_role.is_slave()),
            decided: AtomicBool::new(!controlled),
            own_id: AtomicI64::new(if controlled { -1 } else { cfg.broker_id }),
            master_epoch: AtomicI32::new(0),
            sync_state_set: AtomicU64::new(0),
            sync_state_set_epoch: AtomicI32::new(0),
        }
    }

    pub fn is_slave(&self) -> bool {
        self.slave.load(Ordering::Acquire)
    }

    /// Whether the controller has told this broker its role yet (always, outside controller
    /// mode).
    pub fn is_decided(&self) -> bool {
        self.decided.load(Ordering::Acquire)
    }

    /// The id this broker announces to name servers: a master's is 0 (Java's start-up and
    /// `changeToMaster` set it so), a slave's its own.
    pub fn registered_broker_id(&self) -> i64 {
        if self.is_slave() {
            self.own_id()
        } else {
            0
        }
    }

    /// This broker's id in its group (the controller's, in controller mode; -1 before it
    /// assigned one).
    pub fn own_id(&self) -> i64 {
        self.own_id.load(Ordering::Acquire)
    }

    pub fn set_own_id(&self, id: i64) {
        self.own_id.store(id, Ordering::Release);
    }

    pub fn master_epoch(&self) -> i32 {
        self.master_epoch.load(Ordering::Acquire)
    }

    /// Becomes the group's master in `epoch`.
    pub fn become_master(&self, epoch: i32) {
        self.master_epoch.store(epoch, Ordering::Release);
        self.slave.store(false, Ordering::Release);
        self.decided.store(true, Ordering::Release);
    }

    /// Becomes a slave of the master of `epoch`.
    pub fn become_slave(&self, epoch: i32) {
        self.slave.store(true, Ordering::Release);
        self.master_epoch.store(epoch, Ordering::Release);
        self.decided.store(true, Ordering::Release);
    }

    /// The SyncStateSet's members as a bit set (bit i: broker id i) and its epoch.
    pub fn sync_state_set(&self) -> (u64, i32) {
        (
            self.sync_state_set.load(Ordering::Acquire),
            self.sync_state_set_epoch.load(Ordering::Acquire),
        )
    }

    /// Records the group's SyncStateSet; ids above [`MAX_SYNC_STATE_ID`] cannot be counted
    /// and are left out with an error (none are assigned unless ids are never reused).
    pub fn set_sync_state_set(&self, ids: impl IntoIterator<Item = i64>, epoch: i32) {
        self.sync_state_set.store(to_mask(ids), Ordering::Release);
        self.sync_state_set_epoch.store(epoch, Ordering::Release);
    }
}

/// The bit set of `ids`.
pub fn to_mask(ids: impl IntoIterator<Item = i64>) -> u64 {
    let mut mask = 0;
    for id in ids {
        if (0..=MAX_SYNC_STATE_ID).contains(&id) {
            mask |= 1u64 << id;
        } else {
            tracing::error!(
                id,
                "a broker id above {MAX_SYNC_STATE_ID} cannot join a SyncStateSet here"
            );
        }
    }
    mask
}

/// The ids of a bit set, ascending.
pub fn from_mask(mask: u64) -> impl Iterator<Item = i64> {
    (0..=MAX_SYNC_STATE_ID).filter(move |i| mask & (1u64 << i) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A controlled broker starts as an undecided slave and follows the controller's word.
    #[test]
    fn controller_mode_roles() {
        let mut cfg = BrokerConfig::default();
        cfg.controller_mode.enabled = true;
        let r = RoleState::from_config(&cfg);
        assert!(r.is_slave() && !r.is_decided());
        r.set_own_id(2);
        assert_eq!(r.registered_broker_id(), 2);
        r.become_master(3);
        assert!(!r.is_slave() && r.is_decided());
        assert_eq!((r.registered_broker_id(), r.master_epoch()), (0, 3));
        r.set_sync_state_set([2, 3, 64], 5);
        let (mask, epoch) = r.sync_state_set();
        assert_eq!(
            (from_mask(mask).collect::<Vec<_>>(), epoch),
            (vec![2, 3], 5)
        );
        let plain = RoleState::from_config(&BrokerConfig::default());
        assert!(!plain.is_slave() && plain.is_decided());
    }
}
