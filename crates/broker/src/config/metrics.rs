//! The metrics exporter's keys, with RocketMQ 5's names and defaults (Java's `BrokerConfig` and
//! `MetricsExporterType`): which exporter runs, where the Prometheus endpoint listens, and the
//! extra labels every point carries. Read by `broker::metrics`.
//!
//! Java knows four exporters; ringmq serves two of them, DISABLE (the default) and PROM (an
//! HTTP endpoint for Prometheus to scrape). OTLP_GRPC and LOG are refused at start-up rather
//! than ignored, so an operator does not believe metrics are being pushed somewhere.

use std::net::IpAddr;

use super::{invalid, num, ConfigError};

/// The most extra labels `metricsLabel` may add (a longer list is a typo, not a policy).
const EXTRA_LABELS_MAX: usize = 32;

/// `metricsExporterType`, by Java's name or ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExporterType {
    Disable,
    OtlpGrpc,
    Prom,
    Log,
}

impl ExporterType {
    fn parse(value: &str) -> Option<ExporterType> {
        Some(match value.trim().to_ascii_uppercase().as_str() {
            "DISABLE" | "0" => ExporterType::Disable,
            "OTLP_GRPC" | "1" => ExporterType::OtlpGrpc,
            "PROM" | "2" => ExporterType::Prom,
            "LOG" | "3" => ExporterType::Log,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            ExporterType::Disable => "DISABLE",
            ExporterType::OtlpGrpc => "OTLP_GRPC",
            ExporterType::Prom => "PROM",
            ExporterType::Log => "LOG",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `metricsExporterType`: DISABLE (no endpoint, nothing exported) or PROM.
    pub exporter_type: ExporterType,
    /// `metricsPromExporterPort`: the Prometheus endpoint's port.
    pub prom_port: u16,
    /// `metricsPromExporterHost`: the address the endpoint binds; `None` is Java's default,
    /// the broker's `brokerIP1`.
    pub prom_host: Option<IpAddr>,
    /// `metricsLabel`: extra `key:value` labels on every point, in the order given.
    pub labels: Vec<(String, String)>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            exporter_type: ExporterType::Disable,
            prom_port: 5557,
            prom_host: None,
            labels: Vec::new(),
        }
    }
}

/// `k:v,k2:v2` as Java's `BrokerMetricsManager` splits it; a label name must be a valid
/// Prometheus name.
fn parse_labels(key: &str, value: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once(':') else {
            return Err(invalid(key, value, "expected key:value[,key:value]"));
        };
        let k = k.trim();
        let valid_name = k
            .chars()
            .enumerate()
            .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
        if k.is_empty() || !valid_name {
            return Err(invalid(key, value, format!("{k:?} is not a label name")));
        }
        out.push((k.to_string(), v.trim().to_string()));
    }
    if out.len() > EXTRA_LABELS_MAX {
        return Err(invalid(
            key,
            value,
            format!("at most {EXTRA_LABELS_MAX} labels"),
        ));
    }
    Ok(out)
}

impl MetricsConfig {
    /// Applies `key` if it is one of this struct's; `None` when the key is not.
    pub fn set(&mut self, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let r = match key {
            "metricsExporterType" => match ExporterType::parse(value) {
                Some(t) => {
                    self.exporter_type = t;
                    Ok(())
                }
                None => Err(invalid(
                    key,
                    value,
                    "expected DISABLE, OTLP_GRPC, PROM or LOG (or 0..3)",
                )),
            },
            "metricsPromExporterPort" => num(key, value).map(|p| self.prom_port = p),
            "metricsPromExporterHost" => {
                let v = value.trim();
                if v.is_empty() {
                    self.prom_host = None;
                    Ok(())
                } else {
                    let bare = v.trim_start_matches('[').trim_end_matches(']');
                    num(key, bare).map(|ip| self.prom_host = Some(ip))
                }
            }
            "metricsLabel" => parse_labels(key, value).map(|l| self.labels = l),
            _ => return None,
        };
        Some(r)
    }

    /// ringmq exports through Prometheus only: the other exporters are refused, not ignored.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self.exporter_type {
            ExporterType::Disable | ExporterType::Prom => Ok(()),
            other => Err(invalid(
                "metricsExporterType",
                other.name(),
                "ringmq implements DISABLE and PROM only (no OTLP gRPC push, no log exporter)",
            )),
        }
    }

    /// Java's names and values, for GET_BROKER_CONFIG.
    pub fn properties(&self, broker_ip1: IpAddr) -> Vec<(&'static str, String)> {
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        vec![
            ("metricsExporterType", self.exporter_type.name().to_string()),
            ("metricsPromExporterPort", self.prom_port.to_string()),
            (
                "metricsPromExporterHost",
                self.prom_host.unwrap_or(broker_ip1).to_string(),
            ),
            ("metricsLabel", labels.join(",")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exporter type is read by Java's name or ordinal, any case; other values are errors.
    #[test]
    fn exporter_type_by_name_or_number() {
        let mut m = MetricsConfig::default();
        for (v, want) in [
            ("PROM", ExporterType::Prom),
            ("0", ExporterType::Disable),
            ("prom", ExporterType::Prom),
            ("3", ExporterType::Log),
            ("OTLP_GRPC", ExporterType::OtlpGrpc),
        ] {
            m.set("metricsExporterType", v).unwrap().unwrap();
            assert_eq!(m.exporter_type, want, "{v}");
        }
        assert!(m.set("metricsExporterType", "4").unwrap().is_err());
        assert!(m.set("metricsExporterType", "PROMETHEUS").unwrap().is_err());
    }

    /// DISABLE and PROM start; OTLP_GRPC and LOG are refused with a message naming the key.
    #[test]
    fn unsupported_exporters_are_refused() {
        let mut m = MetricsConfig::default();
        assert!(m.validate().is_ok());
        m.set("metricsExporterType", "PROM").unwrap().unwrap();
        assert!(m.validate().is_ok());
        for t in ["OTLP_GRPC", "LOG"] {
            m.set("metricsExporterType", t).unwrap().unwrap();
            let e = m.validate().unwrap_err().to_string();
            assert!(e.contains("metricsExporterType") && e.contains(t), "{e}");
        }
    }

    /// `metricsLabel` splits into ordered pairs; a pair without a colon or a bad name is an error.
    #[test]
    fn extra_labels() {
        let mut m = MetricsConfig::default();
        m.set("metricsLabel", "region:eu-1, env:prod")
            .unwrap()
            .unwrap();
        assert_eq!(
            m.labels,
            vec![
                ("region".to_string(), "eu-1".to_string()),
                ("env".to_string(), "prod".to_string())
            ]
        );
        assert!(m.set("metricsLabel", "region").unwrap().is_err());
        assert!(m.set("metricsLabel", "1x:y").unwrap().is_err());
        assert!(m.set("metricsLabel", "a-b:y").unwrap().is_err());
        m.set("metricsLabel", "").unwrap().unwrap();
        assert!(m.labels.is_empty());
    }

    /// The host defaults to brokerIP1 and takes a bracketed IPv6 address; the port is a u16.
    #[test]
    fn host_and_port() {
        let mut m = MetricsConfig::default();
        let ip1: IpAddr = "10.0.0.7".parse().unwrap();
        assert!(m
            .properties(ip1)
            .contains(&("metricsPromExporterHost", "10.0.0.7".into())));
        m.set("metricsPromExporterHost", "[::1]").unwrap().unwrap();
        assert_eq!(m.prom_host, Some("::1".parse().unwrap()));
        assert!(m.set("metricsPromExporterPort", "70000").unwrap().is_err());
        m.set("metricsPromExporterPort", "0").unwrap().unwrap();
        assert_eq!(m.prom_port, 0);
    }
}
