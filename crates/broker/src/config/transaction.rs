//! The transaction service's keys, with RocketMQ's names and defaults (Java's `BrokerConfig`):
//! how old a half message must be before its producer is asked about it, how often the check
//! runs, how many checks a message gets before it is given up, and whether prepared sends are
//! refused. Read by `broker::transaction`.

use std::time::Duration;

use super::{boolean, invalid, num, positive, ConfigError};

/// The most checks a half message may be given (a larger value is a typo, not a policy).
const CHECK_MAX_CEILING: i32 = 10_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionConfig {
    /// `transactionTimeOut` (ms): a half message younger than this is not checked yet.
    pub timeout_ms: u64,
    /// `transactionCheckMax`: checks before the message moves to TRANS_CHECK_MAX_TIME_TOPIC.
    pub check_max: i32,
    /// `transactionCheckInterval` (ms): the period of the check service.
    pub check_interval_ms: u64,
    /// `transactionOpMsgMaxSize` (bytes): the largest op (decision) record body.
    pub op_msg_max_size: usize,
    /// `transactionOpBatchInterval` (ms): read and accepted for compatibility; ringmq writes each
    /// decision's op record with the decision itself, so there is nothing to batch.
    pub op_batch_interval_ms: u64,
    /// `rejectTransactionMessage`: prepared sends answer NO_PERMISSION.
    pub reject_transaction_message: bool,
}

impl Default for TransactionConfig {
    fn default() -> Self {
        TransactionConfig {
            timeout_ms: 6_000,
            check_max: 15,
            check_interval_ms: 30_000,
            op_msg_max_size: 4_096,
            op_batch_interval_ms: 3_000,
            reject_transaction_message: false,
        }
    }
}

impl TransactionConfig {
    /// Applies `key` if it is one of this struct's; `None` when the key is not.
    pub fn set(&mut self, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let r = match key {
            "transactionTimeOut" => positive(key, value).map(|v| self.timeout_ms = v),
            "transactionCheckMax" => num::<i32>(key, value).and_then(|v| {
                if (1..=CHECK_MAX_CEILING).contains(&v) {
                    self.check_max = v;
                    Ok(())
                } else {
                    Err(invalid(
                        key,
                        value,
                        format!("must be 1..={CHECK_MAX_CEILING}"),
                    ))
                }
            }),
            "transactionCheckInterval" => positive(key, value).map(|v| self.check_interval_ms = v),
            "transactionOpMsgMaxSize" => num::<usize>(key, value).and_then(|v| {
                if v >= 64 {
                    self.op_msg_max_size = v;
                    Ok(())
                } else {
                    Err(invalid(key, value, "must be at least 64 bytes"))
                }
            }),
            "transactionOpBatchInterval" => {
                positive(key, value).map(|v| self.op_batch_interval_ms = v)
            }
            "rejectTransactionMessage" => {
                boolean(key, value).map(|v| self.reject_transaction_message = v)
            }
            _ => return None,
        };
        Some(r)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    pub fn check_interval(&self) -> Duration {
        Duration::from_millis(self.check_interval_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RocketMQ's keys set the fields; zero or out-of-range values are errors naming the key;
    /// other keys are left to the caller.
    #[test]
    fn keys_and_ranges() {
        let mut c = TransactionConfig::default();
        assert!(c.set("transactionTimeOut", "1500").unwrap().is_ok());
        assert!(c.set("transactionCheckMax", "3").unwrap().is_ok());
        assert!(c.set("transactionCheckInterval", "200").unwrap().is_ok());
        assert!(c.set("rejectTransactionMessage", "true").unwrap().is_ok());
        assert_eq!(c.timeout_ms, 1500);
        assert_eq!(c.check_max, 3);
        assert_eq!(c.check_interval_ms, 200);
        assert!(c.reject_transaction_message);
        let e = c.set("transactionCheckMax", "0").unwrap().unwrap_err();
        assert!(e.to_string().contains("transactionCheckMax"));
        assert!(c.set("transactionCheckInterval", "0").unwrap().is_err());
        assert!(c.set("transactionOpMsgMaxSize", "8").unwrap().is_err());
        assert!(c.set("brokerName", "x").is_none());
    }
}
