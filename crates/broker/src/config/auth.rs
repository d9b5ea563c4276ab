//! Access control's keys, with RocketMQ's names: ACL 2.0's (`AuthConfig`:
//! `authenticationEnabled`, `authorizationEnabled`, their request-code whitelists, the first
//! Super user, the credentials the broker signs its own requests with, and the import of
//! ACL 1.0's file) and ACL 1.0's `aclEnable`, which turns both checks on and reads
//! `plain_acl.yml`. Read by `broker::auth_gate`.
//!
//! The plain ACL file is where Java 1.0 looks, `$ROCKETMQ_HOME/conf/plain_acl.yml`, unless
//! `rocketmq.acl.plain.file` (Java's system property, here a broker.conf key) names another:
//! an absolute path, or one relative to `$ROCKETMQ_HOME`.

use std::path::{Path, PathBuf};

use super::{boolean, invalid, ConfigError};

/// A user name and its secret key, as `initAuthenticationUser` (`username`/`password`) or
/// `innerClientAuthenticationCredentials` (`accessKey`/`secretKey`) give them in JSON.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub name: String,
    pub secret: String,
}

impl std::fmt::Debug for Credentials {
    /// The secret is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, <secret>)", self.name)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthConfig {
    /// `authenticationEnabled`: every request must carry a known user's signature.
    pub authentication_enabled: bool,
    /// `authorizationEnabled`: every request must be allowed by its user's ACL.
    pub authorization_enabled: bool,
    /// `aclEnable` (ACL 1.0): both checks, and `plain_acl.yml` read.
    pub acl_enable: bool,
    /// `authenticationWhitelist`: request codes that need no authentication.
    pub authentication_whitelist: Vec<i32>,
    /// `authorizationWhitelist`: request codes that need no authorization.
    pub authorization_whitelist: Vec<i32>,
    /// `initAuthenticationUser`: created as a Super user at start-up when no user of that
    /// name exists.
    pub init_authentication_user: Option<Credentials>,
    /// `innerClientAuthenticationCredentials`: what a slave signs its requests to its master
    /// with.
    pub inner_client_credentials: Option<Credentials>,
    /// `migrateAuthFromV1Enabled`: read `plain_acl.yml` under ACL 2.0 too.
    pub migrate_auth_from_v1_enabled: bool,
    /// `rocketmq.acl.plain.file`: where `plain_acl.yml` is.
    pub plain_acl_file: Option<PathBuf>,
}

impl AuthConfig {
    /// Applies `key` if it is one of this struct's; `None` when the key is not.
    pub fn set(&mut self, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let v = value.trim();
        let r = match key {
            "authenticationEnabled" => boolean(key, v).map(|b| self.authentication_enabled = b),
            "authorizationEnabled" => boolean(key, v).map(|b| self.authorization_enabled = b),
            "aclEnable" => boolean(key, v).map(|b| self.acl_enable = b),
            "migrateAuthFromV1Enabled" => {
                boolean(key, v).map(|b| self.migrate_auth_from_v1_enabled = b)
            }
            "authenticationWhitelist" => codes(key, v).map(|c| self.authentication_whitelist = c),
            "authorizationWhitelist" => codes(key, v).map(|c| self.authorization_whitelist = c),
            "initAuthenticationUser" => credentials(key, v, "username", "password")
                .map(|c| self.init_authentication_user = c),
            "innerClientAuthenticationCredentials" => credentials(key, v, "accessKey", "secretKey")
                .map(|c| self.inner_client_credentials = c),
            "rocketmq.acl.plain.file" => {
                self.plain_acl_file = (!v.is_empty()).then(|| PathBuf::from(v));
                Ok(())
            }
            _ => return None,
        };
        Some(r)
    }

    /// Whether requests are authenticated (ACL 2.0's key, or 1.0's).
    pub fn authentication(&self) -> bool {
        self.authentication_enabled || self.acl_enable
    }

    /// Whether requests are authorized (ACL 2.0's key, or 1.0's).
    pub fn authorization(&self) -> bool {
        self.authorization_enabled || self.acl_enable
    }

    /// The `plain_acl.yml` to read, if any: under `aclEnable` or `migrateAuthFromV1Enabled`,
    /// the configured path or `$ROCKETMQ_HOME/conf/plain_acl.yml`. `explicit` says the path was
    /// named in the config (a missing file is then an error, not an absent file).
    pub fn plain_acl_path(&self, rocketmq_home: Option<&Path>) -> Option<(PathBuf, bool)> {
        if !self.acl_enable && !self.migrate_auth_from_v1_enabled {
            return None;
        }
        match (&self.plain_acl_file, rocketmq_home) {
            (Some(p), _) if p.is_absolute() => Some((p.clone(), true)),
            (Some(p), Some(home)) => Some((home.join(p), true)),
            (Some(p), None) => Some((p.clone(), true)),
            (None, Some(home)) => Some((home.join("conf").join("plain_acl.yml"), false)),
            (None, None) => None,
        }
    }

    /// Java's names and values, for GET_BROKER_CONFIG. The two credentials keys are left out:
    /// an admin who may read the config is not thereby given secrets.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        let list = |c: &[i32]| c.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        let mut out = vec![
            (
                "authenticationEnabled",
                self.authentication_enabled.to_string(),
            ),
            (
                "authorizationEnabled",
                self.authorization_enabled.to_string(),
            ),
            ("aclEnable", self.acl_enable.to_string()),
            (
                "migrateAuthFromV1Enabled",
                self.migrate_auth_from_v1_enabled.to_string(),
            ),
            (
                "authenticationWhitelist",
                list(&self.authentication_whitelist),
            ),
            (
                "authorizationWhitelist",
                list(&self.authorization_whitelist),
            ),
        ];
        if let Some(p) = &self.plain_acl_file {
            out.push(("rocketmq.acl.plain.file", p.display().to_string()));
        }
        out
    }
}

/// A comma-separated list of request codes.
fn codes(key: &str, value: &str) -> Result<Vec<i32>, ConfigError> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i32>()
                .map_err(|_| invalid(key, value, format!("{s:?} is not a request code")))
        })
        .collect()
}

/// `{"<name_key>":"..","<secret_key>":".."}`; an empty value means none.
fn credentials(
    key: &str,
    value: &str,
    name_key: &str,
    secret_key: &str,
) -> Result<Option<Credentials>, ConfigError> {
    if value.is_empty() {
        return Ok(None);
    }
    // The value is never echoed back: it holds a secret.
    let shown = "<the JSON given>";
    let json: serde_json::Value =
        serde_json::from_str(value).map_err(|e| invalid(key, shown, format!("not JSON: {e}")))?;
    let field = |k: &str| {
        json.get(k)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| invalid(key, shown, format!("expected a non-empty string {k:?}")))
    };
    Ok(Some(Credentials {
        name: field(name_key)?,
        secret: field(secret_key)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// aclEnable turns both checks on; ACL 2.0's keys turn on one each.
    #[test]
    fn switches() {
        let mut a = AuthConfig::default();
        assert!(!a.authentication() && !a.authorization());
        a.set("authenticationEnabled", "true").unwrap().unwrap();
        assert!(a.authentication() && !a.authorization());
        let mut b = AuthConfig::default();
        b.set("aclEnable", "TRUE").unwrap().unwrap();
        assert!(b.authentication() && b.authorization());
        assert!(b.set("aclEnable", "yes").unwrap().is_err());
        assert!(b.set("listenPort", "1").is_none());
    }

    /// Whitelists are request codes; anything else names the bad entry.
    #[test]
    fn whitelists() {
        let mut a = AuthConfig::default();
        a.set("authenticationWhitelist", "34, 10 ,")
            .unwrap()
            .unwrap();
        assert_eq!(a.authentication_whitelist, vec![34, 10]);
        let e = a
            .set("authorizationWhitelist", "34,HEART_BEAT")
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(e.contains("HEART_BEAT"), "{e}");
    }

    /// Credentials come from Java's JSON; a malformed value is refused without echoing it.
    #[test]
    fn credentials_json() {
        let mut a = AuthConfig::default();
        a.set(
            "initAuthenticationUser",
            r#"{"username":"rocketmq","password":"12345678"}"#,
        )
        .unwrap()
        .unwrap();
        let c = a.init_authentication_user.clone().unwrap();
        assert_eq!(
            (c.name.as_str(), c.secret.as_str()),
            ("rocketmq", "12345678")
        );
        assert!(!format!("{c:?}").contains("12345678"));
        let e = a
            .set(
                "innerClientAuthenticationCredentials",
                r#"{"accessKey":"k"}"#,
            )
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(e.contains("secretKey"), "{e}");
        let e = a
            .set("initAuthenticationUser", "{secret-ish")
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(!e.contains("secret-ish"), "{e}");
        assert!(!a
            .properties()
            .iter()
            .any(|(k, _)| k.contains("Credentials") || k.contains("User")));
    }

    /// The plain ACL file: read only under aclEnable or the migration, at Java's place unless
    /// named.
    #[test]
    fn plain_acl_path() {
        let home = Path::new("/opt/rocketmq");
        let mut a = AuthConfig::default();
        assert_eq!(a.plain_acl_path(Some(home)), None);
        a.set("aclEnable", "true").unwrap().unwrap();
        assert_eq!(
            a.plain_acl_path(Some(home)),
            Some((PathBuf::from("/opt/rocketmq/conf/plain_acl.yml"), false))
        );
        assert_eq!(a.plain_acl_path(None), None);
        a.set("rocketmq.acl.plain.file", "conf/acl.yml")
            .unwrap()
            .unwrap();
        assert_eq!(
            a.plain_acl_path(Some(home)),
            Some((PathBuf::from("/opt/rocketmq/conf/acl.yml"), true))
        );
        a.set("rocketmq.acl.plain.file", "/etc/acl.yml")
            .unwrap()
            .unwrap();
        assert_eq!(
            a.plain_acl_path(None),
            Some((PathBuf::from("/etc/acl.yml"), true))
        );
    }
}
