//! The TLS keys, with RocketMQ's names (Java's `TlsSystemConfig`, there system properties, here
//! broker.conf keys and `-o` options): the server side of the remoting ports (`tls.server.*`),
//! the client side of the broker's own connections (`tls.enable`, `tls.client.*`), and the
//! properties file that may hold them (`tls.config.file`). Only the values are checked here;
//! the parent module reads the files they name at start-up.
//!
//! ringmq's defaults differ from Java's in two places, both so that a broker.conf without TLS
//! keys runs as before: `tls.server.mode` is `disabled` unless a server certificate is
//! configured (then `permissive`, Java's default), and `tls.test.mode.enable` is false (Java's
//! test mode makes a self-signed server certificate and trusts every peer).

use std::path::PathBuf;

use crate::common::config_key::{boolean, invalid, ConfigError};

/// `tls.server.mode`, as Java names its modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain connections only (a TLS handshake is closed like any bad frame).
    Disabled,
    /// TLS and plain connections on the same port, told apart by their first byte.
    Permissive,
    /// TLS only: a connection whose first byte is not a TLS handshake is closed unanswered.
    Enforcing,
}

impl TlsMode {
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Permissive => "permissive",
            TlsMode::Enforcing => "enforcing",
        }
    }
}

/// `tls.server.need.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Optional,
    Require,
}

/// The TLS keys as given; `None` for a key not given (the properties file may give it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSettings {
    pub server_mode: Option<TlsMode>,
    pub server_cert_path: Option<PathBuf>,
    pub server_key_path: Option<PathBuf>,
    pub server_key_password: Option<String>,
    pub server_need_client_auth: Option<ClientAuth>,
    pub server_auth_client: Option<bool>,
    pub server_trust_cert_path: Option<PathBuf>,
    pub client_cert_path: Option<PathBuf>,
    pub client_key_path: Option<PathBuf>,
    pub client_key_password: Option<String>,
    pub client_trust_cert_path: Option<PathBuf>,
    pub client_auth_server: Option<bool>,
    /// `tls.enable`: the broker's connections to name servers and to its master use TLS.
    pub enable: Option<bool>,
    pub test_mode_enable: Option<bool>,
    /// `tls.ha.enable` (ringmq's own; Java's HA port has no TLS): the HA port speaks TLS, a
    /// master's with its server certificate, a slave's connection with `tls.enable`'s client.
    pub ha_enable: Option<bool>,
    /// `tls.config.file`: a properties file with more of these keys (read at start-up; a key
    /// given in broker.conf or with `-o` wins over the file's).
    pub config_file: Option<PathBuf>,
}

fn path(key: &str, value: &str) -> Result<Option<PathBuf>, ConfigError> {
    let v = value.trim();
    if v.is_empty() {
        return Err(invalid(key, value, "expected a file path"));
    }
    Ok(Some(PathBuf::from(v)))
}

impl TlsSettings {
    /// Applies `key` if it is a TLS key; `None` when it is not.
    pub fn set(&mut self, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let r = (|| {
            match key {
                "tls.server.mode" => {
                    self.server_mode = Some(match value.trim().to_ascii_lowercase().as_str() {
                        "disabled" => TlsMode::Disabled,
                        "permissive" => TlsMode::Permissive,
                        "enforcing" => TlsMode::Enforcing,
                        _ => {
                            return Err(invalid(
                                key,
                                value,
                                "expected disabled, permissive or enforcing",
                            ))
                        }
                    })
                }
                "tls.server.need.client.auth" => {
                    self.server_need_client_auth =
                        Some(match value.trim().to_ascii_lowercase().as_str() {
                            "none" => ClientAuth::None,
                            "optional" => ClientAuth::Optional,
                            "require" => ClientAuth::Require,
                            _ => {
                                return Err(invalid(
                                    key,
                                    value,
                                    "expected none, optional or require",
                                ))
                            }
                        })
                }
                "tls.server.certPath" => self.server_cert_path = path(key, value)?,
                "tls.server.keyPath" => self.server_key_path = path(key, value)?,
                "tls.server.keyPassword" => self.server_key_password = Some(value.into()),
                "tls.server.authClient" => self.server_auth_client = Some(boolean(key, value)?),
                "tls.server.trustCertPath" => self.server_trust_cert_path = path(key, value)?,
                "tls.client.certPath" => self.client_cert_path = path(key, value)?,
                "tls.client.keyPath" => self.client_key_path = path(key, value)?,
                "tls.client.keyPassword" => self.client_key_password = Some(value.into()),
                "tls.client.trustCertPath" => self.client_trust_cert_path = path(key, value)?,
                "tls.client.authServer" => self.client_auth_server = Some(boolean(key, value)?),
                "tls.enable" => self.enable = Some(boolean(key, value)?),
                "tls.test.mode.enable" => self.test_mode_enable = Some(boolean(key, value)?),
                "tls.ha.enable" => self.ha_enable = Some(boolean(key, value)?),
                "tls.config.file" => self.config_file = path(key, value)?,
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

    /// Fills the keys not given from `other` (the properties file's).
    pub fn or(self, other: TlsSettings) -> TlsSettings {
        TlsSettings {
            server_mode: self.server_mode.or(other.server_mode),
            server_cert_path: self.server_cert_path.or(other.server_cert_path),
            server_key_path: self.server_key_path.or(other.server_key_path),
            server_key_password: self.server_key_password.or(other.server_key_password),
            server_need_client_auth: self
                .server_need_client_auth
                .or(other.server_need_client_auth),
            server_auth_client: self.server_auth_client.or(other.server_auth_client),
            server_trust_cert_path: self.server_trust_cert_path.or(other.server_trust_cert_path),
            client_cert_path: self.client_cert_path.or(other.client_cert_path),
            client_key_path: self.client_key_path.or(other.client_key_path),
            client_key_password: self.client_key_password.or(other.client_key_password),
            client_trust_cert_path: self.client_trust_cert_path.or(other.client_trust_cert_path),
            client_auth_server: self.client_auth_server.or(other.client_auth_server),
            enable: self.enable.or(other.enable),
            test_mode_enable: self.test_mode_enable.or(other.test_mode_enable),
            ha_enable: self.ha_enable.or(other.ha_enable),
            config_file: self.config_file,
        }
    }

    /// The server mode in force: as given, else `permissive` when a server certificate is
    /// configured (Java's default), else `disabled`.
    pub fn effective_mode(&self) -> TlsMode {
        match self.server_mode {
            Some(m) => m,
            None if self.server_cert_path.is_some() => TlsMode::Permissive,
            None => TlsMode::Disabled,
        }
    }

    /// True when no TLS key was given.
    pub fn is_empty(&self) -> bool {
        *self == TlsSettings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key is taken by its Java name; bad values name the key; other keys pass through.
    #[test]
    fn keys_and_values() {
        let mut t = TlsSettings::default();
        assert!(t.set("listenPort", "1").is_none());
        t.set("tls.server.mode", "Enforcing").unwrap().unwrap();
        t.set("tls.server.need.client.auth", "require")
            .unwrap()
            .unwrap();
        t.set("tls.server.certPath", "/c.pem").unwrap().unwrap();
        t.set("tls.enable", "true").unwrap().unwrap();
        assert_eq!(t.server_mode, Some(TlsMode::Enforcing));
        assert_eq!(t.server_need_client_auth, Some(ClientAuth::Require));
        assert_eq!(t.enable, Some(true));
        for (k, v) in [
            ("tls.server.mode", "strict"),
            ("tls.server.need.client.auth", "always"),
            ("tls.enable", "yes"),
            ("tls.server.keyPath", " "),
        ] {
            let err = t.set(k, v).unwrap().unwrap_err().to_string();
            assert!(err.contains(k), "{err}");
        }
    }

    /// Without a mode: disabled, or permissive once a server certificate is given; the
    /// properties file fills only what was not given.
    #[test]
    fn default_mode_and_file_precedence() {
        let mut t = TlsSettings::default();
        assert_eq!(t.effective_mode(), TlsMode::Disabled);
        let mut file = TlsSettings::default();
        file.set("tls.server.certPath", "/f.pem").unwrap().unwrap();
        file.set("tls.server.mode", "enforcing").unwrap().unwrap();
        t.set("tls.server.mode", "permissive").unwrap().unwrap();
        let merged = t.clone().or(file);
        assert_eq!(merged.server_mode, Some(TlsMode::Permissive));
        assert_eq!(merged.server_cert_path, Some(PathBuf::from("/f.pem")));
        let mut c = TlsSettings::default();
        c.set("tls.server.certPath", "/c.pem").unwrap().unwrap();
        assert_eq!(c.effective_mode(), TlsMode::Permissive);
    }
}
