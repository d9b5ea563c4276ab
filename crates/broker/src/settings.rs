//! The broker settings an admin may change while the broker runs (UPDATE_BROKER_CONFIG, 25),
//! as every shard sees them: a small `Copy` value that shard 0 owns and publishes to each
//! shard after a change, as it publishes topic snapshots. Everything else in `BrokerConfig` is
//! fixed at start-up; the handlers that read one of these keys read it here, not from the
//! start-up config.

use crate::config::{BrokerConfig, ConfigError};

/// Keys of [`Settings`], with RocketMQ's names.
pub const RUNTIME_KEYS: &[&str] = &[
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "maxReconsumeTimes",
    "enablePropertyFilter",
    "longPollingEnable",
    "shortPollingTimeMills",
    "storeReplyMessageEnable",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Counts the changes: a shard keeps the newest it was given, whatever order two
    /// concurrent changes reach it in.
    pub version: u64,
    pub auto_create_topic_enable: bool,
    pub auto_create_subscription_group: bool,
    pub max_reconsume_times: i32,
    pub enable_property_filter: bool,
    pub long_polling_enable: bool,
    pub short_polling_time_mills: u64,
    pub store_reply_message_enable: bool,
}

impl Settings {
    pub fn from_config(c: &BrokerConfig) -> Settings {
        Settings {
            version: 0,
            auto_create_topic_enable: c.auto_create_topic_enable,
            auto_create_subscription_group: c.auto_create_subscription_group,
            max_reconsume_times: c.max_reconsume_times,
            enable_property_filter: c.enable_property_filter,
            long_polling_enable: c.long_polling_enable,
            short_polling_time_mills: c.short_polling_time_mills,
            store_reply_message_enable: c.store_reply_message_enable,
        }
    }

    /// Writes these values over `c`'s (GET_BROKER_CONFIG shows the config as it is now).
    pub fn apply_to(&self, c: &mut BrokerConfig) {
        c.auto_create_topic_enable = self.auto_create_topic_enable;
        c.auto_create_subscription_group = self.auto_create_subscription_group;
        c.max_reconsume_times = self.max_reconsume_times;
        c.enable_property_filter = self.enable_property_filter;
        c.long_polling_enable = self.long_polling_enable;
        c.short_polling_time_mills = self.short_polling_time_mills;
        c.store_reply_message_enable = self.store_reply_message_enable;
    }

    /// These settings with `pairs` applied, each value parsed as broker.conf parses it. Every
    /// key must be one of [`RUNTIME_KEYS`] (the caller checks).
    pub fn with_changes(
        &self,
        base: &BrokerConfig,
        pairs: &[(String, String)],
    ) -> Result<Settings, ConfigError> {
        let mut c = base.clone();
        self.apply_to(&mut c);
        for (k, v) in pairs {
            c.set(k, v.trim())?;
        }
        Ok(Settings {
            version: self.version + 1,
            ..Settings::from_config(&c)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every runtime key parses into its own field and nothing else changes; a bad value is
    /// refused.
    #[test]
    fn runtime_keys_round_trip() {
        let base = BrokerConfig::default();
        let s = Settings::from_config(&base);
        let pairs: Vec<(String, String)> = vec![
            (
                "autoCreateTopicEnable".into(),
                (!s.auto_create_topic_enable).to_string(),
            ),
            ("maxReconsumeTimes".into(), "3".into()),
            ("shortPollingTimeMills".into(), " 250".into()),
        ];
        let n = s.with_changes(&base, &pairs).unwrap();
        assert_eq!(n.version, s.version + 1);
        assert_eq!(n.auto_create_topic_enable, !s.auto_create_topic_enable);
        assert_eq!(n.max_reconsume_times, 3);
        assert_eq!(n.short_polling_time_mills, 250);
        assert_eq!(n.enable_property_filter, s.enable_property_filter);
        let mut c = base.clone();
        n.apply_to(&mut c);
        assert!(c.properties_text().contains("maxReconsumeTimes=3\n"));
        let bad = vec![("maxReconsumeTimes".to_string(), "many".to_string())];
        assert!(s.with_changes(&base, &bad).is_err());
        for k in RUNTIME_KEYS {
            assert!(
                c.properties().iter().any(|(key, _)| key == k),
                "{k} is rendered"
            );
        }
    }
}
