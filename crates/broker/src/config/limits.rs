//! Limits and back-pressure knobs: frame and message sizes, connection counts, the per-connection
//! outbox and in-flight cap, idle and write-stall timeouts, long-poll waiters, the writer inbox,
//! and the broker's own requests to clients (how many may wait per connection, and how long).
//!
//! Defaults are the constants of `constants.rs` (whose const asserts relate them); configured
//! values are range-checked here and the same relations are checked once at load, so a broker
//! never starts with a bound that is zero, absurdly large, or inconsistent with another bound.
//! RocketMQ's key names where it has one (`serverChannelMaxIdleTimeSeconds`, `maxMessageSize`,
//! `frameMaxLength` after Java's `com.rocketmq.remoting.frameMaxLength`), clear camelCase ones
//! otherwise. Read by `broker::start` (connections) and the broker's shards (waiters); the writer
//! inbox and `maxMessageSize` live in `StoreConfig`, which the writer reads.

use std::time::Duration;

use super::{invalid, num, ConfigError};
use crate::constants::{
    CALL_CLIENT_TIMEOUT_MS, IDLE_TIMEOUT_SECS, MAX_CONNECTIONS, MAX_CONNECTIONS_CEILING,
    MAX_CONNECTIONS_PER_SHARD, MAX_FRAME_LEN, MAX_FRAME_LEN_CEILING, MAX_INFLIGHT_PER_CONN,
    MAX_INFLIGHT_PER_CONN_CEILING, MAX_PENDING_CALLS_PER_CONN, MAX_PENDING_CALLS_PER_CONN_CEILING,
    MAX_RECORD_OVERHEAD, MAX_WAITERS_PER_QUEUE, MAX_WAITERS_PER_QUEUE_CEILING, OUTBOX_CAPACITY,
    OUTBOX_CAPACITY_CEILING, TIMEOUT_SECS_CEILING, WRITER_INBOX_CAPACITY_CEILING,
    WRITE_STALL_TIMEOUT_MS,
};
use crate::store::config::StoreConfig;

/// The broker's connection and queueing limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `frameMaxLength`: largest frame accepted from a client; a larger one closes the connection.
    pub frame_max_length: usize,
    /// `maxConnections`: connections open across all shards; the next one is closed on accept.
    pub max_connections: usize,
    /// `maxConnectionsPerShard`: connections one shard serves (main and fast port together).
    pub max_connections_per_shard: usize,
    /// `maxInflightPerConnection`: requests of one connection served at once; reading pauses.
    pub max_inflight_per_connection: usize,
    /// `connectionOutboxCapacity`: responses queued for one connection; full = disconnect.
    pub connection_outbox_capacity: usize,
    /// `serverChannelMaxIdleTimeSeconds`: a connection with no traffic either way closes.
    pub server_channel_max_idle_time_seconds: u64,
    /// `writeStallTimeoutMills`: a response not written for this long disconnects the client.
    pub write_stall_timeout_mills: u64,
    /// `maxLongPollingWaitersPerQueue`: pulls parked on one queue; more are answered at once.
    pub max_long_polling_waiters_per_queue: usize,
    /// `maxPendingCallsPerConnection`: broker requests waiting for one client's answers; one
    /// more fails at once.
    pub max_pending_calls_per_connection: usize,
    /// `callClientTimeoutMills`: how long the broker waits for a client's answer.
    pub call_client_timeout_mills: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            frame_max_length: MAX_FRAME_LEN,
            max_connections: MAX_CONNECTIONS,
            max_connections_per_shard: MAX_CONNECTIONS_PER_SHARD,
            max_inflight_per_connection: MAX_INFLIGHT_PER_CONN,
            connection_outbox_capacity: OUTBOX_CAPACITY,
            server_channel_max_idle_time_seconds: IDLE_TIMEOUT_SECS,
            write_stall_timeout_mills: WRITE_STALL_TIMEOUT_MS,
            max_long_polling_waiters_per_queue: MAX_WAITERS_PER_QUEUE,
            max_pending_calls_per_connection: MAX_PENDING_CALLS_PER_CONN,
            call_client_timeout_mills: CALL_CLIENT_TIMEOUT_MS,
        }
    }
}

/// Parses `value` and checks it lies in `lo..=hi`.
fn ranged<T>(key: &str, value: &str, lo: T, hi: T) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
    T::Err: std::fmt::Display,
{
    let v: T = num(key, value)?;
    if v < lo || v > hi {
        return Err(invalid(key, value, format!("must be in {lo}..={hi}")));
    }
    Ok(v)
}

impl Limits {
    /// Applies one limits key; `None` when `key` is not a limits key.
    pub fn set(&mut self, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let r = (|| {
            match key {
                // 1 KiB floor: below it not even a heartbeat fits.
                "frameMaxLength" => {
                    self.frame_max_length = ranged(key, value, 1024, MAX_FRAME_LEN_CEILING)?
                }
                "maxConnections" => {
                    self.max_connections = ranged(key, value, 1, MAX_CONNECTIONS_CEILING)?
                }
                "maxConnectionsPerShard" => {
                    self.max_connections_per_shard = ranged(key, value, 1, MAX_CONNECTIONS_CEILING)?
                }
                "maxInflightPerConnection" => {
                    self.max_inflight_per_connection =
                        ranged(key, value, 1, MAX_INFLIGHT_PER_CONN_CEILING)?
                }
                "connectionOutboxCapacity" => {
                    self.connection_outbox_capacity =
                        ranged(key, value, 2, OUTBOX_CAPACITY_CEILING)?
                }
                "serverChannelMaxIdleTimeSeconds" => {
                    self.server_channel_max_idle_time_seconds =
                        ranged(key, value, 1, TIMEOUT_SECS_CEILING)?
                }
                "writeStallTimeoutMills" => {
                    self.write_stall_timeout_mills =
                        ranged(key, value, 1, TIMEOUT_SECS_CEILING * 1000)?
                }
                "maxLongPollingWaitersPerQueue" => {
                    self.max_long_polling_waiters_per_queue =
                        ranged(key, value, 1, MAX_WAITERS_PER_QUEUE_CEILING)?
                }
                "maxPendingCallsPerConnection" => {
                    self.max_pending_calls_per_connection =
                        ranged(key, value, 1, MAX_PENDING_CALLS_PER_CONN_CEILING)?
                }
                "callClientTimeoutMills" => {
                    self.call_client_timeout_mills =
                        ranged(key, value, 1, TIMEOUT_SECS_CEILING * 1000)?
                }
                _ => return Ok(false),
            }
            Ok(true)
        })();
        match r {
            Ok(false) => None,
            Ok(true) => Some(Ok(())),
            Err(e) => Some(Err(e)),
        }
    }

    /// Cross-key rules, checked once at load (ranges were checked as keys were set).
    pub fn validate(&self, store: &StoreConfig) -> Result<(), ConfigError> {
        if self.connection_outbox_capacity <= self.max_inflight_per_connection {
            // Each running request adds at most one response: a larger outbox means a client
            // that reads its responses is never disconnected for a full outbox.
            return Err(invalid(
                "connectionOutboxCapacity",
                &self.connection_outbox_capacity.to_string(),
                format!(
                    "must be larger than maxInflightPerConnection ({})",
                    self.max_inflight_per_connection
                ),
            ));
        }
        let need = store.max_message_size + MAX_RECORD_OVERHEAD;
        if self.frame_max_length < need {
            return Err(invalid(
                "frameMaxLength",
                &self.frame_max_length.to_string(),
                format!(
                    "must hold a maximal message: maxMessageSize ({}) + {MAX_RECORD_OVERHEAD} \
                     bytes of header = {need}",
                    store.max_message_size
                ),
            ));
        }
        let inbox = store.writer_inbox_capacity;
        if inbox == 0 || inbox > WRITER_INBOX_CAPACITY_CEILING {
            return Err(invalid(
                "writerInboxCapacity",
                &inbox.to_string(),
                format!("must be in 1..={WRITER_INBOX_CAPACITY_CEILING}"),
            ));
        }
        Ok(())
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.server_channel_max_idle_time_seconds)
    }

    pub fn write_stall_timeout(&self) -> Duration {
        Duration::from_millis(self.write_stall_timeout_mills)
    }

    pub fn call_client_timeout(&self) -> Duration {
        Duration::from_millis(self.call_client_timeout_mills)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;

    fn with(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        let mut cfg = BrokerConfig::default();
        for (k, v) in pairs {
            cfg.set(k, v)?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Every limit is settable by its key and lands in the field the broker reads.
    #[test]
    fn limit_keys_reach_their_fields() {
        let cfg = with(&[
            ("frameMaxLength", "8388608"),
            ("maxConnections", "50"),
            ("maxConnectionsPerShard", "20"),
            ("maxInflightPerConnection", "16"),
            ("connectionOutboxCapacity", "17"),
            ("serverChannelMaxIdleTimeSeconds", "2"),
            ("writeStallTimeoutMills", "1500"),
            ("maxLongPollingWaitersPerQueue", "3"),
            ("writerInboxCapacity", "8"),
            ("maxPendingCallsPerConnection", "2"),
            ("callClientTimeoutMills", "750"),
        ])
        .unwrap();
        let l = cfg.limits;
        assert_eq!(l.frame_max_length, 8 << 20);
        assert_eq!((l.max_connections, l.max_connections_per_shard), (50, 20));
        assert_eq!(
            (l.max_inflight_per_connection, l.connection_outbox_capacity),
            (16, 17)
        );
        assert_eq!(l.idle_timeout(), Duration::from_secs(2));
        assert_eq!(l.write_stall_timeout(), Duration::from_millis(1500));
        assert_eq!(l.max_long_polling_waiters_per_queue, 3);
        assert_eq!(cfg.store.writer_inbox_capacity, 8);
        assert_eq!(l.max_pending_calls_per_connection, 2);
        assert_eq!(l.call_client_timeout(), Duration::from_millis(750));
        assert!(cfg.unknown.is_empty(), "{:?}", cfg.unknown);
    }

    /// The defaults are the constants, unchanged, and they validate.
    #[test]
    fn defaults_are_the_constants() {
        let cfg = with(&[]).unwrap();
        assert_eq!(cfg.limits.frame_max_length, MAX_FRAME_LEN);
        assert_eq!(cfg.limits.max_connections, MAX_CONNECTIONS);
        assert_eq!(cfg.limits.connection_outbox_capacity, OUTBOX_CAPACITY);
        assert_eq!(cfg.limits.idle_timeout(), Duration::from_secs(120));
        // Java's Broker2Client.callClient waits 10 s.
        assert_eq!(cfg.limits.call_client_timeout(), Duration::from_secs(10));
        assert_eq!(
            cfg.store.writer_inbox_capacity,
            crate::constants::WRITER_INBOX_CAPACITY
        );
        assert_eq!(cfg.store.max_message_size, 4 << 20);
    }

    /// Zero, negative, out-of-range and malformed values are refused, naming the key.
    #[test]
    fn bad_values_are_clear_errors() {
        for (k, v, says) in [
            ("maxConnections", "0", "1..=1000000"),
            ("serverChannelMaxIdleTimeSeconds", "0", "1..=86400"),
            ("serverChannelMaxIdleTimeSeconds", "-5", "invalid digit"),
            ("writeStallTimeoutMills", "ten", "invalid digit"),
            ("frameMaxLength", "3000000000", "1024..="),
            ("connectionOutboxCapacity", "99999999", "2..="),
            ("maxLongPollingWaitersPerQueue", "0", "1..="),
            ("writerInboxCapacity", "0", "1..="),
            ("writerInboxCapacity", "4000000", "1..="),
            ("maxPendingCallsPerConnection", "0", "1..="),
            ("callClientTimeoutMills", "0", "1..="),
        ] {
            let err = with(&[(k, v)]).unwrap_err().to_string();
            assert!(err.contains(k) && err.contains(says), "{k}={v}: {err}");
        }
    }

    /// Relations between keys are checked at load: outbox > in-flight, frame holds a message.
    #[test]
    fn inconsistent_limits_are_refused() {
        let err = with(&[
            ("maxInflightPerConnection", "64"),
            ("connectionOutboxCapacity", "64"),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("maxInflightPerConnection (64)"), "{err}");
        let err = with(&[("frameMaxLength", "1048576")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("frameMaxLength") && err.contains("maxMessageSize"),
            "{err}"
        );
        // Lowering both together is fine.
        with(&[("frameMaxLength", "1048576"), ("maxMessageSize", "524288")]).unwrap();
    }
}
