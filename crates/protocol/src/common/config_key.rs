//! Reading one configuration value: the error that names the key (`ConfigError`), the value
//! parsers every config (broker, TLS, controller) shares, and Java-properties text as
//! key/value pairs.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config key {key}: invalid value {value:?}: {reason}")]
    Invalid {
        key: String,
        value: String,
        reason: String,
    },
}

/// Parses Java-properties text into key/value pairs, as `java.util.Properties.load` reads it
/// (`common::properties_text`), values trimmed.
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    super::properties_text::parse(text)
        .into_iter()
        .map(|(k, v)| (k, v.trim().to_string()))
        .collect()
}

pub fn invalid(key: &str, value: &str, reason: impl ToString) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        value: value.into(),
        reason: reason.to_string(),
    }
}

pub fn num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    value.parse::<T>().map_err(|e| invalid(key, value, e))
}

/// A number above 0.
pub fn positive(key: &str, value: &str) -> Result<u64, ConfigError> {
    match num::<u64>(key, value)? {
        0 => Err(invalid(key, value, "must be positive")),
        v => Ok(v),
    }
}

pub fn boolean(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "expected true or false")),
    }
}

/// Parses `host:port;host:port`.
pub fn parse_addr_list(key: &str, value: &str) -> Result<Vec<SocketAddr>, ConfigError> {
    let mut out = Vec::new();
    for part in value.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let addr = part
            .parse::<SocketAddr>()
            .or_else(|_| {
                use std::net::ToSocketAddrs;
                part.to_socket_addrs()
                    .ok()
                    .and_then(|mut it| it.next())
                    .ok_or(())
            })
            .map_err(|_| invalid(key, value, "expected host:port[;host:port]"))?;
        out.push(addr);
    }
    Ok(out)
}
