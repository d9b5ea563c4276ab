//! The gRPC endpoint's keys (RocketMQ 5's proxy, served in this process): Java's
//! `grpcServerPort` and `enableTopicMessageTypeCheck`, and ringmq's switch, address and client
//! bound. Read by `ringmq serve`/`broker` when they start the endpoint (`ringmq-grpc`).

use std::net::SocketAddr;

use super::{boolean, invalid, num, positive, ConfigError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrpcConfig {
    /// `enableGrpcServer` (ringmq): serve gRPC at all.
    pub enable: bool,
    /// `grpcServerPort`: the port, on the broker's listening address.
    pub port: u16,
    /// `grpcServerPort` or `--grpc-listen` was given: a taken port stops the start instead of
    /// being skipped with a warning.
    pub port_explicit: bool,
    /// `grpcAdvertisedAddress` (ringmq): the address routes give clients (NAT, containers);
    /// by default the broker's advertised host and the endpoint's port.
    pub advertised: Option<SocketAddr>,
    /// `maxGrpcClients` (ringmq): gRPC clients known at once.
    pub max_clients: usize,
    /// `enableTopicMessageTypeCheck`: a message must be of a type its topic's `message.type`
    /// takes.
    pub check_message_type: bool,
    /// `defaultInvisibleTimeMills`: a push consumer's (auto-renewed) receive hides its messages
    /// this long at a time.
    pub default_invisible_ms: i64,
    /// `renewAheadTimeMillis`: a held message is renewed when its deadline is this close.
    pub renew_ahead_ms: i64,
    /// `renewSchedulePeriodMillis`: how often held messages are looked at.
    pub renew_period_ms: i64,
    /// `renewMaxTimeMillis`: a message held longer is no longer renewed (it comes back).
    pub renew_max_ms: i64,
}

impl Default for GrpcConfig {
    fn default() -> Self {
        GrpcConfig {
            enable: true,
            port: 8081,
            port_explicit: false,
            advertised: None,
            max_clients: 10_000,
            check_message_type: true,
            default_invisible_ms: 60_000,
            renew_ahead_ms: 10_000,
            renew_period_ms: 5_000,
            renew_max_ms: 3 * 3600 * 1000,
        }
    }
}

impl GrpcConfig {
    /// Applies `key` if it is one of this struct's; `None` when the key is not.
    pub fn set(&mut self, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let r = match key {
            "enableGrpcServer" => boolean(key, value).map(|v| self.enable = v),
            "grpcServerPort" => num::<u16>(key, value).map(|v| {
                self.port = v;
                self.port_explicit = true;
            }),
            // Empty: unset (what the key's listing shows when none is given).
            "grpcAdvertisedAddress" if value.trim().is_empty() => {
                self.advertised = None;
                Ok(())
            }
            "grpcAdvertisedAddress" => value
                .parse::<SocketAddr>()
                .map(|a| self.advertised = Some(a))
                .map_err(|_| invalid(key, value, "must be ip:port")),
            "maxGrpcClients" => positive(key, value).map(|v| self.max_clients = v as usize),
            "enableTopicMessageTypeCheck" => {
                boolean(key, value).map(|v| self.check_message_type = v)
            }
            "defaultInvisibleTimeMills" => {
                positive(key, value).map(|v| self.default_invisible_ms = v as i64)
            }
            "renewAheadTimeMillis" => positive(key, value).map(|v| self.renew_ahead_ms = v as i64),
            "renewSchedulePeriodMillis" => {
                positive(key, value).map(|v| self.renew_period_ms = v as i64)
            }
            "renewMaxTimeMillis" => positive(key, value).map(|v| self.renew_max_ms = v as i64),
            _ => return None,
        };
        Some(r)
    }

    /// The keys with their values, as GET_BROKER_CONFIG lists them.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        vec![
            ("enableGrpcServer", self.enable.to_string()),
            ("grpcServerPort", self.port.to_string()),
            (
                "grpcAdvertisedAddress",
                self.advertised.map(|a| a.to_string()).unwrap_or_default(),
            ),
            ("maxGrpcClients", self.max_clients.to_string()),
            (
                "enableTopicMessageTypeCheck",
                self.check_message_type.to_string(),
            ),
            (
                "defaultInvisibleTimeMills",
                self.default_invisible_ms.to_string(),
            ),
            ("renewAheadTimeMillis", self.renew_ahead_ms.to_string()),
            (
                "renewSchedulePeriodMillis",
                self.renew_period_ms.to_string(),
            ),
            ("renewMaxTimeMillis", self.renew_max_ms.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_set_the_fields() {
        let mut c = GrpcConfig::default();
        assert!(c.set("grpcServerPort", "18081").unwrap().is_ok());
        assert!(c.port_explicit);
        assert!(c.set("enableGrpcServer", "false").unwrap().is_ok());
        assert!(c
            .set("grpcAdvertisedAddress", "10.0.0.1:8081")
            .unwrap()
            .is_ok());
        assert_eq!((c.port, c.enable), (18081, false));
        assert!(c.set("grpcAdvertisedAddress", "nowhere").unwrap().is_err());
        assert!(c.set("grpcAdvertisedAddress", "").unwrap().is_ok());
        assert_eq!(c.advertised, None);
        assert!(c.set("maxGrpcClients", "0").unwrap().is_err());
        assert!(c.set("brokerName", "x").is_none());
    }
}
