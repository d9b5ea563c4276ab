//! The broker's place in its replication group, with RocketMQ's key names (Java's
//! `MessageStoreConfig.brokerRole`, `haListenPort`, the `ha*` timings, `BrokerConfig.brokerIP2`,
//! `slaveReadEnable`): whether this broker is a master (ASYNC_MASTER, SYNC_MASTER) or a SLAVE,
//! where its HA port is and how the master paces what it sends there. A slave takes no writes:
//! sends, retries and transaction decisions are refused, the services that store messages
//! (delay levels, timers, transaction checks) do not run, and pulls are served only with
//! `slaveReadEnable`. Read by `broker::start`, `broker::register`, `broker::ha` and the
//! refusing handlers.

use std::net::IpAddr;

use super::{boolean, invalid, num, positive, ConfigError};

/// `brokerRole` (Java's `BrokerRole`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BrokerRole {
    /// Answers a send once it is stored here; slaves follow as they can.
    #[default]
    AsyncMaster,
    /// Answers a send once `inSyncReplicas` copies hold it (the master's included).
    SyncMaster,
    /// Follows a master; takes no writes.
    Slave,
}

impl BrokerRole {
    pub fn parse(value: &str) -> Option<BrokerRole> {
        match value.trim() {
            "ASYNC_MASTER" => Some(BrokerRole::AsyncMaster),
            "SYNC_MASTER" => Some(BrokerRole::SyncMaster),
            "SLAVE" => Some(BrokerRole::Slave),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BrokerRole::AsyncMaster => "ASYNC_MASTER",
            BrokerRole::SyncMaster => "SYNC_MASTER",
            BrokerRole::Slave => "SLAVE",
        }
    }

    pub fn is_slave(self) -> bool {
        self == BrokerRole::Slave
    }
}

/// The largest `haTransferBatchSize` (Java's slave reads into a 4 MiB buffer).
const TRANSFER_BATCH_MAX: usize = 4 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaConfig {
    /// `brokerRole`.
    pub broker_role: BrokerRole,
    /// `haListenPort`; `None` (or a value <= 0, as Java's start-up treats it): listenPort + 1.
    pub ha_listen_port: Option<u16>,
    /// `brokerIP2`: the address the HA port is announced on; `None`: brokerIP1.
    pub broker_ip2: Option<IpAddr>,
    /// `slaveReadEnable`: a slave serves pulls (otherwise it answers them SYSTEM_BUSY).
    pub slave_read_enable: bool,
    /// `haMasterAddress`: where a slave finds its master's HA port (`ip:port`).
    pub ha_master_address: Option<std::net::SocketAddr>,
    /// `haSendHeartbeatInterval` (ms): an idle master sends an empty transfer this often.
    pub heartbeat_interval_ms: u64,
    /// `haHousekeepingInterval` (ms): a connection with nothing read for this long is closed.
    pub housekeeping_interval_ms: u64,
    /// `haTransferBatchSize` (bytes): the largest transfer body.
    pub transfer_batch_size: usize,
    /// `inSyncReplicas`: copies a SYNC_MASTER's send waits for, the master's own included
    /// (RocketMQ 5's meaning: 1, the default, waits for no slave).
    pub in_sync_replicas: usize,
    /// `slaveTimeout` (ms): how long a SYNC_MASTER's send waits for its copies before it is
    /// answered FLUSH_SLAVE_TIMEOUT.
    pub slave_timeout_ms: u64,
    /// `haMaxGapNotInSync` (bytes): a slave further behind than this is reported out of sync
    /// (GET_BROKER_HA_STATUS).
    pub max_gap_not_in_sync: u64,
}

impl Default for HaConfig {
    fn default() -> Self {
        HaConfig {
            broker_role: BrokerRole::default(),
            ha_listen_port: None,
            broker_ip2: None,
            slave_read_enable: false,
            ha_master_address: None,
            heartbeat_interval_ms: 5_000,
            housekeeping_interval_ms: 20_000,
            transfer_batch_size: 32 << 10,
            in_sync_replicas: 1,
            slave_timeout_ms: 3_000,
            max_gap_not_in_sync: 256 << 20,
        }
    }
}

impl HaConfig {
    /// Applies `key` if it is one of this struct's; `None` when the key is not.
    pub fn set(&mut self, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let r = match key {
            "brokerRole" => match BrokerRole::parse(value) {
                Some(role) => {
                    self.broker_role = role;
                    Ok(())
                }
                None => Err(invalid(
                    key,
                    value,
                    "expected ASYNC_MASTER, SYNC_MASTER or SLAVE",
                )),
            },
            "haListenPort" => num::<i64>(key, value).and_then(|p| match p {
                ..=0 => {
                    self.ha_listen_port = None;
                    Ok(())
                }
                1..=65535 => {
                    self.ha_listen_port = Some(p as u16);
                    Ok(())
                }
                _ => Err(invalid(key, value, "must be a port number")),
            }),
            "brokerIP2" => {
                let bare = value.trim().trim_start_matches('[').trim_end_matches(']');
                num::<IpAddr>(key, bare).map(|ip| self.broker_ip2 = Some(ip))
            }
            "slaveReadEnable" => boolean(key, value).map(|v| self.slave_read_enable = v),
            "haMasterAddress" => match value.trim() {
                "" => {
                    self.ha_master_address = None;
                    Ok(())
                }
                v => num::<std::net::SocketAddr>(key, v).map(|a| self.ha_master_address = Some(a)),
            },
            "haSendHeartbeatInterval" => {
                positive(key, value).map(|v| self.heartbeat_interval_ms = v)
            }
            "haHousekeepingInterval" => {
                positive(key, value).map(|v| self.housekeeping_interval_ms = v)
            }
            "haTransferBatchSize" => num::<usize>(key, value).and_then(|v| {
                if (1..=TRANSFER_BATCH_MAX).contains(&v) {
                    self.transfer_batch_size = v;
                    Ok(())
                } else {
                    Err(invalid(
                        key,
                        value,
                        format!("must be 1..={TRANSFER_BATCH_MAX}"),
                    ))
                }
            }),
            "inSyncReplicas" => positive(key, value).map(|v| self.in_sync_replicas = v as usize),
            "slaveTimeout" => positive(key, value).map(|v| self.slave_timeout_ms = v),
            "haMaxGapNotInSync" => positive(key, value).map(|v| self.max_gap_not_in_sync = v),
            _ => return None,
        };
        Some(r)
    }

    /// Whether sends wait for slaves: a SYNC_MASTER with `inSyncReplicas` above 1.
    pub fn needs_slave_acks(&self) -> bool {
        self.broker_role == BrokerRole::SyncMaster && self.in_sync_replicas > 1
    }

    /// The HA port: `haListenPort`, or the broker's listen port + 1.
    pub fn ha_port(&self, listen_port: u16) -> u16 {
        self.ha_listen_port
            .unwrap_or_else(|| listen_port.wrapping_add(1))
    }

    /// The keys with their effective values, in Java's formats.
    pub fn properties(&self, listen_port: u16, broker_ip1: IpAddr) -> Vec<(&'static str, String)> {
        vec![
            ("brokerRole", self.broker_role.as_str().to_string()),
            ("haListenPort", self.ha_port(listen_port).to_string()),
            (
                "brokerIP2",
                self.broker_ip2.unwrap_or(broker_ip1).to_string(),
            ),
            ("slaveReadEnable", self.slave_read_enable.to_string()),
            (
                "haMasterAddress",
                self.ha_master_address
                    .map(|a| a.to_string())
                    .unwrap_or_default(),
            ),
            (
                "haSendHeartbeatInterval",
                self.heartbeat_interval_ms.to_string(),
            ),
            (
                "haHousekeepingInterval",
                self.housekeeping_interval_ms.to_string(),
            ),
            ("haTransferBatchSize", self.transfer_batch_size.to_string()),
            ("inSyncReplicas", self.in_sync_replicas.to_string()),
            ("slaveTimeout", self.slave_timeout_ms.to_string()),
            ("haMaxGapNotInSync", self.max_gap_not_in_sync.to_string()),
        ]
    }

    /// Java's start-up rule: a slave needs a brokerId above 0 ("Slave's brokerId must be >
    /// 0"). A master's is 0 whatever broker.conf says (`BrokerConfig::registered_broker_id`).
    pub fn validate(&self, broker_id: i64) -> Result<(), ConfigError> {
        if self.broker_role.is_slave() && broker_id <= 0 {
            return Err(invalid(
                "brokerId",
                &broker_id.to_string(),
                "a SLAVE's brokerId must be > 0",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Roles by Java's names; bad values and ports refused; the HA port follows listenPort.
    #[test]
    fn keys_parse_and_refuse() {
        let mut h = HaConfig::default();
        assert_eq!(h.broker_role, BrokerRole::AsyncMaster);
        assert!(h.set("brokerRole", "SLAVE").unwrap().is_ok());
        assert!(h.broker_role.is_slave());
        assert!(h.set("brokerRole", "slave").unwrap().is_err());
        assert_eq!(h.ha_port(10911), 10912);
        assert!(h.set("haListenPort", "20912").unwrap().is_ok());
        assert_eq!(h.ha_port(10911), 20912);
        assert!(h.set("haListenPort", "0").unwrap().is_ok());
        assert_eq!(h.ha_port(10911), 10912);
        assert!(h.set("haListenPort", "70000").unwrap().is_err());
        assert!(h.set("brokerIP2", "[::1]").unwrap().is_ok());
        assert!(h.set("brokerIP2", "nowhere").unwrap().is_err());
        assert!(h.set("slaveReadEnable", "true").unwrap().is_ok());
        assert!(h.set("haTransferBatchSize", "5000000").unwrap().is_err());
        assert!(h.set("haSendHeartbeatInterval", "0").unwrap().is_err());
        assert!(h.set("haHousekeepingInterval", "1000").unwrap().is_ok());
        assert!(h.set("inSyncReplicas", "0").unwrap().is_err());
        assert!(h.set("inSyncReplicas", "2").unwrap().is_ok());
        assert!(h.set("slaveTimeout", "-1").unwrap().is_err());
        assert!(h.set("haMaxGapNotInSync", "1048576").unwrap().is_ok());
        assert!(h.set("brokerName", "x").is_none());
    }

    /// A slave needs an id above 0.
    #[test]
    fn broker_id_follows_the_role() {
        let mut h = HaConfig::default();
        assert!(h.validate(0).is_ok());
        assert!(h.validate(1).is_ok());
        h.broker_role = BrokerRole::Slave;
        assert!(h.validate(0).is_err());
        assert!(h.validate(2).is_ok());
    }
}
