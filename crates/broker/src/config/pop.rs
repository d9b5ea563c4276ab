//! POP consumption's keys, with RocketMQ's names and defaults (Java's `BrokerConfig`): how many
//! pops may be parked on a queue and in all, how often a pop reads the group's retry topic
//! first, which retry-topic form new retries use, and the bound on messages in flight per group
//! (Java leaves that bound off by default; ringmq always keeps one). Read by `broker::pop`.

use super::{boolean, invalid, num, positive, ConfigError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PopConfig {
    /// `popPollingSize`: pops parked on one queue before POLLING_FULL.
    pub polling_size: usize,
    /// `maxPopPollingSize`: pops parked on the broker before POLLING_FULL.
    pub max_polling_size: usize,
    /// `popFromRetryProbability` (percent): how often a pop reads the retry topic first.
    pub from_retry_probability: u32,
    /// `popInflightMessageThreshold`: messages of one group in flight on one queue-owning shard;
    /// past it a pop finds nothing until acks or redeliveries bring the count down.
    pub inflight_threshold: usize,
    /// `enableRetryTopicV2`: redeliveries go to `%RETRY%{group}+{topic}` instead of
    /// `%RETRY%{group}_{topic}` (pops read both).
    pub retry_topic_v2: bool,
}

impl Default for PopConfig {
    fn default() -> Self {
        PopConfig {
            polling_size: 1024,
            max_polling_size: 100_000,
            from_retry_probability: 20,
            inflight_threshold: 10_000,
            retry_topic_v2: false,
        }
    }
}

impl PopConfig {
    /// Applies `key` if it is one of this struct's; `None` when the key is not.
    pub fn set(&mut self, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let r = match key {
            "popPollingSize" => positive(key, value).map(|v| self.polling_size = v as usize),
            "maxPopPollingSize" => positive(key, value).map(|v| self.max_polling_size = v as usize),
            "popFromRetryProbability" => num::<u32>(key, value).and_then(|v| {
                if v <= 100 {
                    self.from_retry_probability = v;
                    Ok(())
                } else {
                    Err(invalid(key, value, "must be a percentage, 0..=100"))
                }
            }),
            "popInflightMessageThreshold" => {
                positive(key, value).map(|v| self.inflight_threshold = v as usize)
            }
            "enableRetryTopicV2" => boolean(key, value).map(|v| self.retry_topic_v2 = v),
            _ => return None,
        };
        Some(r)
    }

    /// The keys with their values, as GET_BROKER_CONFIG lists them.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        vec![
            ("popPollingSize", self.polling_size.to_string()),
            ("maxPopPollingSize", self.max_polling_size.to_string()),
            (
                "popFromRetryProbability",
                self.from_retry_probability.to_string(),
            ),
            (
                "popInflightMessageThreshold",
                self.inflight_threshold.to_string(),
            ),
            ("enableRetryTopicV2", self.retry_topic_v2.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys set the fields; a zero size or a probability over 100 is an error naming the key.
    #[test]
    fn keys_and_ranges() {
        let mut c = PopConfig::default();
        assert!(c.set("popPollingSize", "8").unwrap().is_ok());
        assert!(c.set("popFromRetryProbability", "0").unwrap().is_ok());
        assert!(c.set("enableRetryTopicV2", "true").unwrap().is_ok());
        assert_eq!((c.polling_size, c.from_retry_probability), (8, 0));
        assert!(c.retry_topic_v2);
        let e = c
            .set("popFromRetryProbability", "101")
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains("popFromRetryProbability"));
        assert!(c.set("maxPopPollingSize", "0").unwrap().is_err());
        assert!(c.set("brokerName", "x").is_none());
    }
}
