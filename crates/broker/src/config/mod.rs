//! Broker configuration: RocketMQ's `broker.conf` (Java properties, key=value with RocketMQ's
//! key names) plus command-line overrides, validated once at start and logged.
//!
//! Unknown keys, and Java's keys that ringmq does not implement (`keys::NOT_IMPLEMENTED`), are
//! kept and named in one warning at start-up (an operator's existing broker.conf carries many
//! keys we do not act on); malformed values are an error naming the key.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use crate::common::config_key::{boolean, invalid, num, positive};
pub use crate::common::config_key::{parse_addr_list, parse_properties, ConfigError};
use crate::constants::DELETE_COMMIT_LOG_FILES_INTERVAL_MAX_MS;
use crate::store::config::{DeleteWhen, FlushDiskType, StoreConfig};

pub mod auth;
pub mod controller_mode;
pub mod grpc;
pub mod ha;
pub mod keys;
pub mod limits;
pub mod local_address;
pub mod metrics;
pub mod pop;
pub use ringmq_remoting::tls::settings as tls;
pub mod transaction;

pub use auth::AuthConfig;
pub use controller_mode::ControllerModeConfig;
pub use grpc::GrpcConfig;
pub use ha::{BrokerRole, HaConfig};
pub use limits::Limits;
pub use metrics::MetricsConfig;
pub use pop::PopConfig;
pub use tls::TlsSettings;
pub use transaction::TransactionConfig;

/// Everything the broker process needs to start.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub broker_cluster_name: String,
    pub broker_name: String,
    pub broker_id: i64,
    /// Name servers to register with, `host:port;host:port`.
    pub namesrv_addr: Vec<SocketAddr>,
    /// `brokerIP1` as configured; `None` when no key set it. The address actually announced
    /// is [`BrokerConfig::broker_ip1`].
    pub broker_ip1: Option<IpAddr>,
    /// Address the main listener binds to (listenPort).
    pub listen_addr: SocketAddr,
    /// RocketMQ's "fast"/VIP port, listenPort - 2 by default; 0 disables it.
    pub fast_listen_port: u16,
    /// The broker.conf this config was read from (Java's `brokerConfigPath`), where
    /// UPDATE_BROKER_CONFIG persists a change; None without one.
    pub broker_config_path: Option<PathBuf>,
    pub auto_create_topic_enable: bool,
    pub auto_create_subscription_group: bool,
    pub default_topic_queue_nums: u32,
    pub long_polling_enable: bool,
    pub short_polling_time_mills: u64,
    pub register_name_server_period_ms: u64,
    pub enable_property_filter: bool,
    /// Replies of request-reply are stored in the reply topic as well as pushed (Java's default).
    pub store_reply_message_enable: bool,
    pub max_reconsume_times: i32,
    /// `traceOn`: the TRACE_ON switch of every send response (Java clients skip producer
    /// traces when it is false).
    pub trace_on: bool,
    /// `accessMessageInMemoryMaxRatio`: the share of physical memory (percent) taken as page
    /// cache when deciding whether a queue's first message is still "in memory" (a new
    /// consumer group then starts at offset 0, see `broker::offsets`).
    pub access_message_in_memory_max_ratio: u32,
    /// ringmq: number of shard executors (0 = one per core minus the writer core, at least 1).
    pub shard_count: usize,
    /// ringmq: pin shards and the writer to cores.
    pub pin_cores: bool,
    /// Connection and queueing limits (see `limits`).
    pub limits: Limits,
    /// The transaction service (see `transaction`).
    pub transaction: TransactionConfig,
    /// POP consumption (see `pop`).
    pub pop: PopConfig,
    /// The gRPC endpoint (see `grpc`).
    pub grpc: GrpcConfig,
    /// The broker's role in its replication group (see `ha`).
    pub ha: HaConfig,
    /// RocketMQ 5's controller mode (see `controller_mode`).
    pub controller_mode: ControllerModeConfig,
    /// The metrics exporter (see `metrics`).
    pub metrics: MetricsConfig,
    /// Access control (see `auth`).
    pub auth: AuthConfig,
    /// TLS on the remoting ports and the broker's own connections (see `tls`).
    pub tls: TlsSettings,
    pub store: StoreConfig,
    /// Keys we read but do not act on.
    pub unknown: BTreeMap<String, String>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        let store = StoreConfig {
            store_path_root_dir: PathBuf::from("./data"),
            ..StoreConfig::default()
        };
        BrokerConfig {
            broker_cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 0,
            namesrv_addr: Vec::new(),
            broker_ip1: None,
            listen_addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 10911),
            fast_listen_port: 10909,
            broker_config_path: None,
            auto_create_topic_enable: true,
            auto_create_subscription_group: true,
            default_topic_queue_nums: 8,
            long_polling_enable: true,
            short_polling_time_mills: 1000,
            register_name_server_period_ms: 30_000,
            enable_property_filter: false,
            store_reply_message_enable: true,
            max_reconsume_times: 16,
            trace_on: true,
            access_message_in_memory_max_ratio: 40,
            shard_count: 0,
            pin_cores: true,
            limits: Limits::default(),
            transaction: TransactionConfig::default(),
            pop: PopConfig::default(),
            grpc: GrpcConfig::default(),
            ha: HaConfig::default(),
            controller_mode: ControllerModeConfig::default(),
            metrics: MetricsConfig::default(),
            auth: AuthConfig::default(),
            tls: TlsSettings::default(),
            store,
            unknown: BTreeMap::new(),
        }
    }
}

impl BrokerConfig {
    /// Reads a broker.conf file on top of the defaults.
    pub fn from_file(path: &Path) -> Result<BrokerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        let mut cfg = BrokerConfig::default();
        for (k, v) in parse_properties(&text) {
            cfg.set(&k, &v)?;
        }
        cfg.broker_config_path = Some(path.to_path_buf());
        Ok(cfg)
    }

    /// Applies one RocketMQ-named key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if let Some(done) = self.limits.set(key, value) {
            return done;
        }
        if let Some(done) = self.transaction.set(key, value) {
            return done;
        }
        if let Some(done) = self.pop.set(key, value) {
            return done;
        }
        if let Some(done) = self.grpc.set(key, value) {
            return done;
        }
        if let Some(done) = self.ha.set(key, value) {
            return done;
        }
        if let Some(done) = self.controller_mode.set(key, value) {
            return done;
        }
        if let Some(done) = self.metrics.set(key, value) {
            return done;
        }
        if let Some(done) = self.auth.set(key, value) {
            return done;
        }
        if let Some(done) = self.tls.set(key, value) {
            return done;
        }
        let s = &mut self.store;
        match key {
            "brokerClusterName" => self.broker_cluster_name = value.into(),
            "brokerName" => self.broker_name = value.into(),
            "brokerId" => self.broker_id = num(key, value)?,
            "namesrvAddr" => self.namesrv_addr = parse_addr_list(key, value)?,
            "brokerIP1" => {
                // Java writes an IPv6 address in brackets (`NetworkUtil.normalizeHostAddress`).
                let bare = value.trim_start_matches('[').trim_end_matches(']');
                self.broker_ip1 = Some(num(key, bare)?)
            }
            "listenPort" => {
                let port: u16 = num(key, value)?;
                self.listen_addr.set_port(port);
                self.fast_listen_port = port.saturating_sub(2);
            }
            "fastListenPort" => self.fast_listen_port = num(key, value)?,
            "autoCreateTopicEnable" => self.auto_create_topic_enable = boolean(key, value)?,
            "autoCreateSubscriptionGroup" => {
                self.auto_create_subscription_group = boolean(key, value)?
            }
            "defaultTopicQueueNums" => self.default_topic_queue_nums = num(key, value)?,
            "longPollingEnable" => self.long_polling_enable = boolean(key, value)?,
            "shortPollingTimeMills" => self.short_polling_time_mills = num(key, value)?,
            "registerNameServerPeriod" => {
                let ms: u64 = num(key, value)?;
                self.register_name_server_period_ms = ms.clamp(10_000, 60_000);
            }
            "enablePropertyFilter" => self.enable_property_filter = boolean(key, value)?,
            "storeReplyMessageEnable" => self.store_reply_message_enable = boolean(key, value)?,
            "messageDelayLevel" => {
                s.delay_levels =
                    crate::store::DelayLevels::parse(value).map_err(|r| invalid(key, value, r))?
            }
            "maxReconsumeTimes" => self.max_reconsume_times = num(key, value)?,
            "traceOn" => self.trace_on = boolean(key, value)?,
            "accessMessageInMemoryMaxRatio" => {
                let v: u32 = num(key, value)?;
                if v > 100 {
                    return Err(invalid(key, value, "must be a percentage (0..=100)"));
                }
                self.access_message_in_memory_max_ratio = v;
            }
            "shardCount" => self.shard_count = num(key, value)?,
            "pinCores" => self.pin_cores = boolean(key, value)?,
            "storePathRootDir" => s.store_path_root_dir = PathBuf::from(value),
            "mappedFileSizeCommitLog" => s.mapped_file_size_commit_log = num(key, value)?,
            "mappedFileSizeConsumeQueue" => {
                let v: u64 = num(key, value)?;
                if v == 0 || !v.is_multiple_of(20) {
                    return Err(invalid(key, value, "must be a positive multiple of 20"));
                }
                s.mapped_file_size_consume_queue = v;
            }
            "flushDiskType" => {
                s.flush_disk_type = match value {
                    "ASYNC_FLUSH" => FlushDiskType::AsyncFlush,
                    "SYNC_FLUSH" => FlushDiskType::SyncFlush,
                    _ => return Err(invalid(key, value, "expected ASYNC_FLUSH or SYNC_FLUSH")),
                }
            }
            "flushIntervalCommitLog" => s.flush_interval_commit_log_ms = num(key, value)?,
            "flushCommitLogLeastPages" => s.flush_commit_log_least_pages = num(key, value)?,
            "syncFlushTimeout" => s.sync_flush_timeout_ms = num(key, value)?,
            "fileReservedTime" => s.file_reserved_time_hours = num(key, value)?,
            "diskMaxUsedSpaceRatio" => s.disk_max_used_space_ratio = num(key, value)?,
            "deleteWhen" => {
                s.delete_when = DeleteWhen::parse(value).map_err(|e| invalid(key, value, e))?
            }
            "diskSpaceCleanForciblyRatio" => s.disk_space_clean_forcibly_ratio = num(key, value)?,
            "cleanFileForciblyEnable" => s.clean_file_forcibly_enable = boolean(key, value)?,
            "cleanResourceInterval" => s.retention_check_interval_ms = num(key, value)?,
            "deleteConsumeQueueFilesInterval" => {
                s.delete_consume_queue_files_interval_ms = num(key, value)?
            }
            "deleteCommitLogFilesInterval" => {
                let ms: u64 = num(key, value)?;
                if ms > DELETE_COMMIT_LOG_FILES_INTERVAL_MAX_MS {
                    return Err(invalid(
                        key,
                        value,
                        format!("must be at most {DELETE_COMMIT_LOG_FILES_INTERVAL_MAX_MS} ms"),
                    ));
                }
                s.delete_commit_log_files_interval_ms = ms;
            }
            "checkCRCOnRecover" => s.check_crc_on_recover = boolean(key, value)?,
            "maxMessageSize" => {
                s.max_message_size = num(key, value)?;
                if s.max_message_size == 0 {
                    return Err(invalid(key, value, "must be at least 1 byte"));
                }
            }
            "writerInboxCapacity" => s.writer_inbox_capacity = num(key, value)?,
            "warmMapedFileEnable" | "warmMappedFileEnable" => {
                s.warm_mapped_file = Some(boolean(key, value)?)
            }
            "recycleCommitLogSegments" => s.recycle_commit_log_segments = num(key, value)?,
            "messageIndexEnable" => s.message_index_enable = boolean(key, value)?,
            "maxHashSlotNum" => s.max_hash_slot_num = num(key, value)?,
            "maxIndexNum" => s.max_index_num = num(key, value)?,
            _ => {
                self.unknown.insert(key.into(), value.into());
            }
        }
        Ok(())
    }

    /// Checks cross-field rules once, before anything starts.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.store.mapped_file_size_commit_log < 64 * 1024 {
            return Err(invalid(
                "mappedFileSizeCommitLog",
                &self.store.mapped_file_size_commit_log.to_string(),
                "must be at least 65536 bytes",
            ));
        }
        if self.store.max_message_size as u64 + 1024 > self.store.mapped_file_size_commit_log {
            return Err(invalid(
                "maxMessageSize",
                &self.store.max_message_size.to_string(),
                "must fit in one commit log segment",
            ));
        }
        self.limits.validate(&self.store)?;
        self.controller_mode.validate()?;
        self.metrics.validate()?;
        // In controller mode the controller assigns the id and the role (Java's quick start
        // writes brokerId=-1 and brokerRole=SLAVE).
        if !self.controller_mode.enabled {
            self.ha.validate(self.broker_id)?;
        }
        if self.broker_name.is_empty() || self.broker_cluster_name.is_empty() {
            return Err(invalid(
                "brokerName",
                &self.broker_name,
                "must not be empty",
            ));
        }
        Ok(())
    }

    /// The brokerId announced to name servers: a master's is always 0 (Java's start-up sets it
    /// so whatever broker.conf says), a slave's is its own.
    pub fn registered_broker_id(&self) -> i64 {
        if self.ha.broker_role.is_slave() {
            self.broker_id
        } else {
            0
        }
    }

    /// The IP announced to name servers and written as store host into every record (so into
    /// every message id): `brokerIP1` when a key set it; otherwise the listener's address when
    /// the broker listens on one address (a broker on 127.0.0.1 must not send clients to the
    /// host's LAN address, where nothing listens); otherwise, listening on every address, the
    /// host's address as Java picks it (`local_address`).
    pub fn broker_ip1(&self) -> IpAddr {
        match self.broker_ip1 {
            Some(ip) => ip,
            None if !self.listen_addr.ip().is_unspecified() => self.listen_addr.ip(),
            None => local_address::host_address(),
        }
    }

    /// The address written into records and announced to name servers.
    pub fn store_host(&self, actual_listen_port: u16) -> SocketAddr {
        SocketAddr::new(self.broker_ip1(), actual_listen_port)
    }

    /// Why clients sent to the announced address may not reach this broker, if they may not:
    /// a listener bound to another address, or (listening everywhere) an address none of this
    /// host's interfaces has. Behind NAT or a proxy this is expected.
    pub fn advertised_address_warning(&self) -> Option<String> {
        let ip = self.broker_ip1();
        let listen = self.listen_addr.ip();
        if !listen.is_unspecified() && listen != ip {
            return Some(format!(
                "brokerIP1={ip} is announced to clients, but the broker listens on {listen} only: \
                 clients that find it through the name server cannot connect unless {ip} reaches \
                 {listen} (NAT, a proxy)"
            ));
        }
        if listen.is_unspecified() && !ip.is_loopback() && !local_address::is_local(ip) {
            return Some(format!(
                "brokerIP1={ip} is announced to clients, but no interface of this host has it: \
                 clients that find the broker through the name server cannot connect unless {ip} \
                 reaches this host (NAT, a proxy)"
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RocketMQ broker.conf with comments, spaces and unknown keys parses into our config.
    #[test]
    fn parses_rocketmq_broker_conf() {
        let text = "# comment\nbrokerClusterName = C1\nbrokerName=b\nbrokerId=0\n\
                    listenPort=20911\nflushDiskType=SYNC_FLUSH\nnamesrvAddr=127.0.0.1:9876;127.0.0.1:9877\n\
                    deleteWhen=04\n";
        let mut cfg = BrokerConfig::default();
        for (k, v) in parse_properties(text) {
            cfg.set(&k, &v).unwrap();
        }
        assert_eq!(cfg.broker_cluster_name, "C1");
        assert_eq!(cfg.listen_addr.port(), 20911);
        assert_eq!(cfg.fast_listen_port, 20909);
        assert!(matches!(
            cfg.store.flush_disk_type,
            FlushDiskType::SyncFlush
        ));
        assert_eq!(cfg.namesrv_addr.len(), 2);
        assert!(cfg.store.delete_when.contains(4));
        assert!(!cfg.store.delete_when.contains(16));
        assert!(!cfg.unknown.contains_key("deleteWhen"));
    }

    /// A malformed value names its key.
    #[test]
    fn bad_value_is_a_clear_error() {
        let mut cfg = BrokerConfig::default();
        let err = cfg.set("listenPort", "abc").unwrap_err().to_string();
        assert!(err.contains("listenPort"), "{err}");
        let err = cfg
            .set("flushDiskType", "SOMETIMES")
            .unwrap_err()
            .to_string();
        assert!(err.contains("ASYNC_FLUSH"), "{err}");
        let err = cfg.set("deleteWhen", "04;25").unwrap_err().to_string();
        assert!(err.contains("deleteWhen"), "{err}");
        for bad in ["-1", "abc", "60001"] {
            let err = cfg
                .set("deleteCommitLogFilesInterval", bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains("deleteCommitLogFilesInterval"), "{err}");
        }
    }

    /// `deleteCommitLogFilesInterval` defaults to RocketMQ's 100 ms and reaches the store config.
    #[test]
    fn delete_commit_log_files_interval_is_a_store_key() {
        let mut cfg = BrokerConfig::default();
        assert_eq!(cfg.store.delete_commit_log_files_interval_ms, 100);
        cfg.set("deleteCommitLogFilesInterval", "250").unwrap();
        assert_eq!(cfg.store.delete_commit_log_files_interval_ms, 250);
        cfg.set("deleteCommitLogFilesInterval", "0").unwrap();
        assert_eq!(cfg.store.delete_commit_log_files_interval_ms, 0);
        assert!(!cfg.unknown.contains_key("deleteCommitLogFilesInterval"));
    }

    /// `recycleCommitLogSegments` (ringmq's own) defaults to 2, takes 0 (off) and rejects junk.
    #[test]
    fn recycle_commit_log_segments_is_a_store_key() {
        let mut cfg = BrokerConfig::default();
        assert_eq!(cfg.store.recycle_commit_log_segments, 2);
        cfg.set("recycleCommitLogSegments", "0").unwrap();
        assert_eq!(cfg.store.recycle_commit_log_segments, 0);
        assert!(cfg.set("recycleCommitLogSegments", "-1").is_err());
        assert!(!cfg.unknown.contains_key("recycleCommitLogSegments"));
    }

    /// `messageDelayLevel` is a store key (recovery needs the delays): parsed when set, bad
    /// values refused with the key named.
    #[test]
    fn message_delay_level_is_a_store_key() {
        let mut cfg = BrokerConfig::default();
        assert_eq!(cfg.store.delay_levels.max_level(), 18);
        cfg.set("messageDelayLevel", "1s 4s").unwrap();
        assert_eq!(cfg.store.delay_levels.0, vec![1_000, 4_000]);
        let err = cfg
            .set("messageDelayLevel", "1s 4x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("messageDelayLevel"), "{err}");
        assert_eq!(
            cfg.store.delay_levels.0,
            vec![1_000, 4_000],
            "kept on error"
        );
        assert!(!cfg.unknown.contains_key("messageDelayLevel"));
    }

    /// The announced address follows the listener unless brokerIP1 says otherwise; listening
    /// everywhere, it is the host's address as Java picks it.
    #[test]
    fn broker_ip1_follows_the_listener_unless_set() {
        let mut cfg = BrokerConfig::default();
        assert_eq!(cfg.broker_ip1(), local_address::host_address());
        cfg.listen_addr = "127.0.0.1:10911".parse().unwrap();
        assert_eq!(cfg.broker_ip1(), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(
            cfg.store_host(20911),
            "127.0.0.1:20911".parse::<SocketAddr>().unwrap()
        );
        assert!(cfg.advertised_address_warning().is_none());
        let lines = cfg.properties();
        assert!(lines.contains(&("brokerIP1", "127.0.0.1".to_string())));
        assert!(lines.contains(&("brokerIP2", "127.0.0.1".to_string())));
        cfg.set("brokerIP1", "127.0.0.2").unwrap();
        assert_eq!(cfg.broker_ip1(), IpAddr::from([127, 0, 0, 2]));
        let w = cfg.advertised_address_warning().expect("a warning");
        assert!(w.contains("brokerIP1=127.0.0.2"), "{w}");
        assert!(w.contains("listens on 127.0.0.1 only"), "{w}");
        cfg.set("brokerIP1", "[::1]").unwrap();
        assert_eq!(cfg.broker_ip1(), "::1".parse::<IpAddr>().unwrap());
    }

    /// Listening everywhere, an explicit brokerIP1 that no interface has is warned about (NAT);
    /// one the host has is not.
    #[test]
    fn broker_ip1_not_on_this_host_is_warned_about() {
        let mut cfg = BrokerConfig::default();
        assert!(cfg.advertised_address_warning().is_none());
        cfg.set("brokerIP1", "192.0.2.7").unwrap();
        let w = cfg.advertised_address_warning().expect("a warning");
        assert!(w.contains("no interface of this host has it"), "{w}");
        cfg.set("brokerIP1", "127.0.0.1").unwrap();
        assert!(cfg.advertised_address_warning().is_none());
    }
}
