//! RocketMQ 5's controller mode (Java's `BrokerConfig.enableControllerMode`, `controllerAddr`
//! and the periods of `ReplicasManager`, `MessageStoreConfig.allAckInSyncStateSet`,
//! `haMaxTimeSlaveNotCatchup`, `syncFromLastFile`, `asyncLearner`, `minInSyncReplicas`): a
//! broker whose role and id a controller group decides, replicating with the AutoSwitch HA
//! protocol. Read by `broker::start`, `broker::replicas` and the AutoSwitch HA connections.

use std::net::SocketAddr;

use super::{boolean, invalid, num, parse_addr_list, positive, ConfigError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerModeConfig {
    /// `enableControllerMode`.
    pub enabled: bool,
    /// `controllerAddr`: every controller, `;`-separated.
    pub controller_addrs: Vec<SocketAddr>,
    /// `syncBrokerMetadataPeriod` (ms): how often the broker asks the controller for its
    /// group's master and SyncStateSet.
    pub sync_broker_metadata_period_ms: u64,
    /// `checkSyncStateSetPeriod` (ms): how often a master shrinks its SyncStateSet.
    pub check_sync_state_set_period_ms: u64,
    /// `syncControllerMetadataPeriod` (ms): how often the broker looks for the controller leader.
    pub sync_controller_metadata_period_ms: u64,
    /// `controllerHeartBeatTimeoutMills` (ms): sent with each heartbeat; the controller deems
    /// the broker dead after this long without one.
    pub heartbeat_timeout_ms: u64,
    /// `brokerHeartbeatInterval` (ms): heartbeats to every controller this often.
    pub heartbeat_interval_ms: u64,
    /// `brokerElectionPriority`: lower is preferred when the controller elects a master.
    pub election_priority: i32,
    /// `allAckInSyncStateSet`: a send waits for every member of the SyncStateSet.
    pub all_ack_in_sync_state_set: bool,
    /// `minInSyncReplicas`: sends are refused while the SyncStateSet is smaller.
    pub min_in_sync_replicas: usize,
    /// `haMaxTimeSlaveNotCatchup` (ms): a slave behind for this long leaves the SyncStateSet.
    pub max_time_slave_not_catchup_ms: u64,
    /// `syncFromLastFile`: an empty slave starts at the master's last segment.
    pub sync_from_last_file: bool,
    /// `asyncLearner`: this slave never joins the SyncStateSet.
    pub async_learner: bool,
}

impl Default for ControllerModeConfig {
    fn default() -> Self {
        ControllerModeConfig {
            enabled: false,
            controller_addrs: Vec::new(),
            sync_broker_metadata_period_ms: 5_000,
            check_sync_state_set_period_ms: 5_000,
            sync_controller_metadata_period_ms: 10_000,
            heartbeat_timeout_ms: 10_000,
            heartbeat_interval_ms: 1_000,
            election_priority: i32::MAX,
            all_ack_in_sync_state_set: false,
            min_in_sync_replicas: 1,
            max_time_slave_not_catchup_ms: 15_000,
            sync_from_last_file: false,
            async_learner: false,
        }
    }
}

impl ControllerModeConfig {
    /// Applies `key` if it is one of this struct's; `None` when the key is not.
    pub fn set(&mut self, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let r = match key {
            "enableControllerMode" => boolean(key, value).map(|v| self.enabled = v),
            "controllerAddr" => parse_addr_list(key, value).map(|v| self.controller_addrs = v),
            "syncBrokerMetadataPeriod" => {
                positive(key, value).map(|v| self.sync_broker_metadata_period_ms = v)
            }
            "checkSyncStateSetPeriod" => {
                positive(key, value).map(|v| self.check_sync_state_set_period_ms = v)
            }
            "syncControllerMetadataPeriod" => {
                positive(key, value).map(|v| self.sync_controller_metadata_period_ms = v)
            }
            "controllerHeartBeatTimeoutMills" => {
                positive(key, value).map(|v| self.heartbeat_timeout_ms = v)
            }
            "brokerHeartbeatInterval" => {
                positive(key, value).map(|v| self.heartbeat_interval_ms = v)
            }
            "brokerElectionPriority" => num(key, value).map(|v| self.election_priority = v),
            "allAckInSyncStateSet" => {
                boolean(key, value).map(|v| self.all_ack_in_sync_state_set = v)
            }
            "minInSyncReplicas" => {
                positive(key, value).map(|v| self.min_in_sync_replicas = v as usize)
            }
            "haMaxTimeSlaveNotCatchup" => {
                positive(key, value).map(|v| self.max_time_slave_not_catchup_ms = v)
            }
            "syncFromLastFile" => boolean(key, value).map(|v| self.sync_from_last_file = v),
            "asyncLearner" => boolean(key, value).map(|v| self.async_learner = v),
            _ => return None,
        };
        Some(r)
    }

    /// The keys with their effective values, in Java's formats.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        let addrs: Vec<String> = self
            .controller_addrs
            .iter()
            .map(|a| a.to_string())
            .collect();
        vec![
            ("enableControllerMode", self.enabled.to_string()),
            ("controllerAddr", addrs.join(";")),
            (
                "syncBrokerMetadataPeriod",
                self.sync_broker_metadata_period_ms.to_string(),
            ),
            (
                "checkSyncStateSetPeriod",
                self.check_sync_state_set_period_ms.to_string(),
            ),
            (
                "syncControllerMetadataPeriod",
                self.sync_controller_metadata_period_ms.to_string(),
            ),
            (
                "controllerHeartBeatTimeoutMills",
                self.heartbeat_timeout_ms.to_string(),
            ),
            (
                "brokerHeartbeatInterval",
                self.heartbeat_interval_ms.to_string(),
            ),
            ("brokerElectionPriority", self.election_priority.to_string()),
            (
                "allAckInSyncStateSet",
                self.all_ack_in_sync_state_set.to_string(),
            ),
            ("minInSyncReplicas", self.min_in_sync_replicas.to_string()),
            (
                "haMaxTimeSlaveNotCatchup",
                self.max_time_slave_not_catchup_ms.to_string(),
            ),
            ("syncFromLastFile", self.sync_from_last_file.to_string()),
            ("asyncLearner", self.async_learner.to_string()),
        ]
    }

    /// Controller mode needs at least one controller.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.enabled && self.controller_addrs.is_empty() {
            return Err(invalid(
                "controllerAddr",
                "",
                "enableControllerMode=true needs at least one controller address",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's defaults, and the keys read with their Java names.
    #[test]
    fn keys_and_defaults() {
        let mut c = ControllerModeConfig::default();
        assert!(c.validate().is_ok());
        c.set("enableControllerMode", "true").unwrap().unwrap();
        assert!(c.validate().is_err(), "controller mode without controllers");
        c.set("controllerAddr", "127.0.0.1:9878;127.0.0.1:9868")
            .unwrap()
            .unwrap();
        assert_eq!(c.controller_addrs.len(), 2);
        assert!(c.validate().is_ok());
        c.set("allAckInSyncStateSet", "true").unwrap().unwrap();
        assert!(c.all_ack_in_sync_state_set);
        assert!(c.set("minInSyncReplicas", "0").unwrap().is_err());
        assert!(c.set("controllerAddr", "nohost").unwrap().is_err());
        assert!(c.set("brokerRole", "SLAVE").is_none());
        let keys: Vec<_> = c.properties().iter().map(|p| p.0).collect();
        assert!(keys.contains(&"haMaxTimeSlaveNotCatchup"));
    }
}
