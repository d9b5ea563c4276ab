//! The configuration as key=value pairs with RocketMQ's key names and value formats (enum
//! names such as `ASYNC_FLUSH`): what GET_BROKER_CONFIG answers, and the start-up warning that
//! names every key of a broker.conf that ringmq ignores.
//!
//! Every pair rendered here is accepted back by `BrokerConfig::set` (a test checks it), so an
//! operator can copy GET_BROKER_CONFIG's answer into a broker.conf.

use super::BrokerConfig;
use crate::store::config::FlushDiskType;

/// Keys of Java's `BrokerConfig`, `MessageStoreConfig` and `NettyServerConfig` that ringmq
/// recognises but does not act on: HA and controller, ACL 2.0's pluggable providers, DLedger, the
/// transient store pool, thread-pool sizing (ringmq runs one executor per core), tracing
/// topics, POP, timer-wheel tuning and the like. Setting one changes nothing, and the start-up
/// warning says so.
pub const NOT_IMPLEMENTED: &[&str] = &[
    "authenticationProvider",
    "authorizationProvider",
    "authenticationMetadataProvider",
    "authorizationMetadataProvider",
    "authenticationStrategy",
    "authorizationStrategy",
    "syncMasterFlushOffsetWhenStartup",
    "enableSlaveActingMaster",
    "enableAutoInSyncReplicas",
    "totalReplicas",
    "fetchControllerAddrByDnsLookup",
    "enableDLegerCommitLog",
    "dLegerGroup",
    "dLegerPeers",
    "dLegerSelfId",
    "transientStorePoolEnable",
    "transientStorePoolSize",
    "commitIntervalCommitLog",
    "brokerPermission",
    "regionId",
    "traceTopicEnable",
    "msgTraceTopicName",
    "isolateLogEnable",
    "sendMessageThreadPoolNums",
    "pullMessageThreadPoolNums",
    "litePullMessageThreadPoolNums",
    "ackMessageThreadPoolNums",
    "processReplyMessageThreadPoolNums",
    "queryMessageThreadPoolNums",
    "adminBrokerThreadPoolNums",
    "clientManageThreadPoolNums",
    "consumerManageThreadPoolNums",
    "heartbeatThreadPoolNums",
    "endTransactionThreadPoolNums",
    "sendThreadPoolQueueCapacity",
    "pullThreadPoolQueueCapacity",
    "useReentrantLockWhenPutMessage",
    "serverWorkerThreads",
    "serverSelectorThreads",
    "serverCallbackExecutorThreads",
    "serverSocketSndBufSize",
    "serverSocketRcvBufSize",
    "serverPooledByteBufAllocatorEnable",
    "useEpollNativeSelector",
    "enableNotifyConsumerIdsChanged",
    "enableCalcFilterBitMap",
    "filterSupportRetry",
    "timerWheelEnable",
    "timerPrecisionMs",
    "enablePopBufferMerge",
    "popCkStayBufferTime",
    "enableNetWorkFlowControl",
    "isEnableBatchPush",
    "storePathCommitLog",
    "storePathConsumeQueue",
    "storeType",
    "duplicationEnable",
    "autoDeleteUnusedStats",
    "enableMixedMessageType",
    "enableSingleTopicRegister",
    "validateSystemTopicWhenUpdateTopic",
    "clearRetryTopicWhenDeleteTopic",
    "forceRegister",
    "compressedRegister",
];

fn flush_disk_type(t: &FlushDiskType) -> &'static str {
    match t {
        FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
        FlushDiskType::SyncFlush => "SYNC_FLUSH",
    }
}

impl BrokerConfig {
    /// Every key ringmq implements with its effective value, in Java's text formats.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        let s = &self.store;
        let l = &self.limits;
        let t = &self.transaction;
        let namesrv: Vec<String> = self.namesrv_addr.iter().map(|a| a.to_string()).collect();
        let hours: Vec<String> = (0..24)
            .filter(|h| s.delete_when.contains(*h))
            .map(|h| format!("{h:02}"))
            .collect();
        let warm = s.warm_mapped_file.unwrap_or(s.warm_segments());
        let mut all = vec![
            ("brokerClusterName", self.broker_cluster_name.clone()),
            ("brokerName", self.broker_name.clone()),
            ("brokerId", self.registered_broker_id().to_string()),
            ("namesrvAddr", namesrv.join(";")),
            ("brokerIP1", self.broker_ip1().to_string()),
            ("listenPort", self.listen_addr.port().to_string()),
            ("fastListenPort", self.fast_listen_port.to_string()),
            (
                "autoCreateTopicEnable",
                self.auto_create_topic_enable.to_string(),
            ),
            (
                "autoCreateSubscriptionGroup",
                self.auto_create_subscription_group.to_string(),
            ),
            (
                "defaultTopicQueueNums",
                self.default_topic_queue_nums.to_string(),
            ),
            ("longPollingEnable", self.long_polling_enable.to_string()),
            (
                "shortPollingTimeMills",
                self.short_polling_time_mills.to_string(),
            ),
            (
                "registerNameServerPeriod",
                self.register_name_server_period_ms.to_string(),
            ),
            (
                "enablePropertyFilter",
                self.enable_property_filter.to_string(),
            ),
            ("messageDelayLevel", s.delay_levels.spec()),
            ("maxReconsumeTimes", self.max_reconsume_times.to_string()),
            ("traceOn", self.trace_on.to_string()),
            (
                "accessMessageInMemoryMaxRatio",
                self.access_message_in_memory_max_ratio.to_string(),
            ),
            (
                "storeReplyMessageEnable",
                self.store_reply_message_enable.to_string(),
            ),
            ("transactionTimeOut", t.timeout_ms.to_string()),
            ("transactionCheckMax", t.check_max.to_string()),
            ("transactionCheckInterval", t.check_interval_ms.to_string()),
            ("transactionOpMsgMaxSize", t.op_msg_max_size.to_string()),
            (
                "transactionOpBatchInterval",
                t.op_batch_interval_ms.to_string(),
            ),
            (
                "rejectTransactionMessage",
                t.reject_transaction_message.to_string(),
            ),
            ("shardCount", self.shard_count.to_string()),
            ("pinCores", self.pin_cores.to_string()),
            ("frameMaxLength", l.frame_max_length.to_string()),
            ("maxConnections", l.max_connections.to_string()),
            (
                "maxConnectionsPerShard",
                l.max_connections_per_shard.to_string(),
            ),
            (
                "maxInflightPerConnection",
                l.max_inflight_per_connection.to_string(),
            ),
            (
                "connectionOutboxCapacity",
                l.connection_outbox_capacity.to_string(),
            ),
            (
                "serverChannelMaxIdleTimeSeconds",
                l.server_channel_max_idle_time_seconds.to_string(),
            ),
            (
                "writeStallTimeoutMills",
                l.write_stall_timeout_mills.to_string(),
            ),
            (
                "maxLongPollingWaitersPerQueue",
                l.max_long_polling_waiters_per_queue.to_string(),
            ),
            (
                "maxPendingCallsPerConnection",
                l.max_pending_calls_per_connection.to_string(),
            ),
            (
                "callClientTimeoutMills",
                l.call_client_timeout_mills.to_string(),
            ),
            (
                "storePathRootDir",
                s.store_path_root_dir.display().to_string(),
            ),
            (
                "mappedFileSizeCommitLog",
                s.mapped_file_size_commit_log.to_string(),
            ),
            (
                "mappedFileSizeConsumeQueue",
                s.mapped_file_size_consume_queue.to_string(),
            ),
            (
                "flushDiskType",
                flush_disk_type(&s.flush_disk_type).to_string(),
            ),
            (
                "flushIntervalCommitLog",
                s.flush_interval_commit_log_ms.to_string(),
            ),
            (
                "flushCommitLogLeastPages",
                s.flush_commit_log_least_pages.to_string(),
            ),
            ("syncFlushTimeout", s.sync_flush_timeout_ms.to_string()),
            ("fileReservedTime", s.file_reserved_time_hours.to_string()),
            (
                "diskMaxUsedSpaceRatio",
                s.disk_max_used_space_ratio.to_string(),
            ),
            ("deleteWhen", hours.join(";")),
            (
                "diskSpaceCleanForciblyRatio",
                s.disk_space_clean_forcibly_ratio.to_string(),
            ),
            (
                "cleanFileForciblyEnable",
                s.clean_file_forcibly_enable.to_string(),
            ),
            (
                "cleanResourceInterval",
                s.retention_check_interval_ms.to_string(),
            ),
            (
                "deleteConsumeQueueFilesInterval",
                s.delete_consume_queue_files_interval_ms.to_string(),
            ),
            (
                "deleteCommitLogFilesInterval",
                s.delete_commit_log_files_interval_ms.to_string(),
            ),
            ("checkCRCOnRecover", s.check_crc_on_recover.to_string()),
            ("maxMessageSize", s.max_message_size.to_string()),
            ("writerInboxCapacity", s.writer_inbox_capacity.to_string()),
            ("warmMapedFileEnable", warm.to_string()),
            (
                "recycleCommitLogSegments",
                s.recycle_commit_log_segments.to_string(),
            ),
            ("messageIndexEnable", s.message_index_enable.to_string()),
            ("maxHashSlotNum", s.max_hash_slot_num.to_string()),
            ("maxIndexNum", s.max_index_num.to_string()),
        ];
        all.extend(
            self.ha
                .properties(self.listen_addr.port(), self.broker_ip1()),
        );
        all.extend(self.metrics.properties(self.broker_ip1()));
        all.extend(self.auth.properties());
        all.extend(self.pop.properties());
        all.extend(self.grpc.properties());
        all
    }

    /// Java's properties text of `properties()`: one `key=value` line each.
    pub fn properties_text(&self) -> String {
        let mut out = String::new();
        for (k, v) in self.properties() {
            out.push_str(k);
            out.push('=');
            out.push_str(&v);
            out.push('\n');
        }
        out
    }

    /// One line naming the keys that were set but change nothing: those ringmq does not
    /// implement, and those it does not know at all. None when there are neither.
    pub fn ignored_keys_warning(&self) -> Option<String> {
        let (known, unknown): (Vec<&str>, Vec<&str>) = self
            .unknown
            .keys()
            .map(String::as_str)
            .partition(|k| NOT_IMPLEMENTED.contains(k));
        if known.is_empty() && unknown.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if !known.is_empty() {
            parts.push(format!("not implemented by ringmq: {}", known.join(", ")));
        }
        if !unknown.is_empty() {
            parts.push(format!("unknown: {}", unknown.join(", ")));
        }
        Some(format!("configuration keys ignored ({})", parts.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rendered pair is accepted back unchanged, and enum values use Java's names.
    #[test]
    fn properties_round_trip_through_set() {
        let mut cfg = BrokerConfig::default();
        cfg.set("flushDiskType", "SYNC_FLUSH").unwrap();
        cfg.set("deleteWhen", "04;16").unwrap();
        cfg.set("namesrvAddr", "127.0.0.1:9876;127.0.0.1:9877")
            .unwrap();
        let text = cfg.properties_text();
        assert!(text.contains("flushDiskType=SYNC_FLUSH\n"), "{text}");
        assert!(text.contains("deleteWhen=04;16\n"), "{text}");
        let mut again = BrokerConfig::default();
        for (k, v) in cfg.properties() {
            again.set(k, &v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        assert!(again.unknown.is_empty(), "{:?}", again.unknown);
        assert_eq!(again.properties_text(), text);
        let keys: std::collections::BTreeSet<_> = cfg.properties().iter().map(|p| p.0).collect();
        assert_eq!(
            keys.len(),
            cfg.properties().len(),
            "a key is rendered twice"
        );
    }

    /// Ignored keys are named in one line, split into not-implemented and unknown; keys that
    /// ringmq implements are never named.
    #[test]
    fn warning_names_ignored_keys() {
        let mut cfg = BrokerConfig::default();
        assert_eq!(cfg.ignored_keys_warning(), None);
        for (k, v) in [
            ("authenticationProvider", "x.Y"),
            ("enableDLegerCommitLog", "true"),
            ("noSuchKey", "1"),
            ("maxMessageSize", "1024"),
        ] {
            cfg.set(k, v).unwrap();
        }
        let w = cfg.ignored_keys_warning().unwrap();
        assert!(
            w.contains("not implemented by ringmq: authenticationProvider, enableDLegerCommitLog"),
            "{w}"
        );
        assert!(w.contains("unknown: noSuchKey"), "{w}");
        assert!(!w.contains("maxMessageSize"), "{w}");
    }

    /// No implemented key is listed as not implemented.
    #[test]
    fn not_implemented_keys_are_not_implemented() {
        for k in NOT_IMPLEMENTED {
            let mut cfg = BrokerConfig::default();
            let _ = cfg.set(k, "1");
            assert!(cfg.unknown.contains_key(*k), "{k} is implemented");
        }
    }
}
