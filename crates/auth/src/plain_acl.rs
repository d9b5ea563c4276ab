//! ACL 1.0's `plain_acl.yml` (RocketMQ up to 5.3.2, `aclEnable=true`): global and per-account
//! address whitelists, and accounts with an access key, a secret key, an admin flag, default
//! topic and group permissions and per-topic and per-group permissions (`DENY`, `PUB`, `SUB`,
//! `PUB|SUB`).
//!
//! Accounts become ACL 2.0 users and ACLs the way Java 5.3's `AuthMigrator` turns them: an admin
//! is a Super user; `topicPerms`/`groupPerms` become Custom entries on the literal resource,
//! the defaults Default entries on `Topic:*` and `Group:*`; `DENY` is a Deny of everything,
//! other permissions an Allow of their actions. The whitelists keep their 1.0 meaning (checked
//! by the caller): a client from a global whitelist address needs nothing; a client from its
//! account's whitelist needs the access key but no signature. Whitelist patterns are 1.0's
//! IPv4 forms (`*`, `10.1.*`, `10.1.2.3-9`, `10.1.2.{3,4}`, `a,b`) and exact IPv6 addresses.

use std::net::{IpAddr, Ipv4Addr};

use yaml_rust2::{Yaml, YamlLoader};

use super::model::{
    user_subject, Acl, Action, Decision, Policy, PolicyEntry, PolicyType, Resource,
    ResourcePattern, ResourceType, User, UserStatus, UserType,
};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlainAclError {
    #[error("plain_acl.yml is not YAML: {0}")]
    Yaml(String),
    #[error("plain_acl.yml: {0}")]
    Invalid(String),
}

/// The file's content.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlainAclConfig {
    pub global_white: Vec<AddressRule>,
    pub accounts: Vec<PlainAccount>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlainAccount {
    pub access_key: String,
    pub secret_key: String,
    pub white: Option<AddressRule>,
    pub admin: bool,
    pub default_topic_perm: Option<String>,
    pub default_group_perm: Option<String>,
    pub topic_perms: Vec<String>,
    pub group_perms: Vec<String>,
}

/// One 1.0 whitelist pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressRule {
    Any,
    /// Per IPv4 octet, an inclusive range.
    V4([(u8, u8); 4]),
    Exact(IpAddr),
    OneOf(Vec<AddressRule>),
}

impl AddressRule {
    pub fn parse(s: &str) -> Result<AddressRule, PlainAclError> {
        let s = s.trim();
        let bad = || {
            PlainAclError::Invalid(format!(
                "whitelist address {s:?} is not a pattern ringmq reads"
            ))
        };
        if s.is_empty() {
            return Err(bad());
        }
        if s == "*" || s == "*.*.*.*" || s == "*:*:*:*:*:*:*:*" {
            return Ok(AddressRule::Any);
        }
        if let Some(open) = s
            .strip_suffix('}')
            .and_then(|t| t.rfind('{').map(|i| (t, i)))
        {
            let (t, i) = open;
            let prefix = &t[..i];
            let rules = t[i + 1..]
                .split(',')
                .map(|last| AddressRule::parse(&format!("{prefix}{}", last.trim())))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(AddressRule::OneOf(rules));
        }
        if s.contains(',') {
            let rules = s
                .split(',')
                .filter(|p| !p.trim().is_empty())
                .map(AddressRule::parse)
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(AddressRule::OneOf(rules));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(AddressRule::Exact(ip));
        }
        // 1.0's range form: up to four octets, each a number, `*` or `lo-hi`; missing ones are `*`.
        let parts: Vec<&str> = s.split('.').filter(|p| !p.is_empty()).collect();
        if parts.is_empty() || parts.len() > 4 {
            return Err(bad());
        }
        let mut octets = [(0u8, 255u8); 4];
        for (i, p) in parts.iter().enumerate() {
            octets[i] = if *p == "*" {
                (0, 255)
            } else if let Some((lo, hi)) = p.split_once('-') {
                let lo: u8 = lo.parse().map_err(|_| bad())?;
                let hi: u8 = hi.parse().map_err(|_| bad())?;
                if lo > hi {
                    return Err(bad());
                }
                (lo, hi)
            } else {
                let v: u8 = p.parse().map_err(|_| bad())?;
                (v, v)
            };
        }
        Ok(AddressRule::V4(octets))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match self {
            AddressRule::Any => true,
            AddressRule::Exact(e) => *e == ip,
            AddressRule::OneOf(rules) => rules.iter().any(|r| r.contains(ip)),
            AddressRule::V4(octets) => match ip {
                IpAddr::V4(v4) => in_ranges(v4, octets),
                IpAddr::V6(_) => false,
            },
        }
    }
}

fn in_ranges(ip: Ipv4Addr, octets: &[(u8, u8); 4]) -> bool {
    ip.octets()
        .iter()
        .zip(octets.iter())
        .all(|(b, (lo, hi))| lo <= b && b <= hi)
}

/// Parses the file's text.
pub fn parse(text: &str) -> Result<PlainAclConfig, PlainAclError> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| PlainAclError::Yaml(e.to_string()))?;
    let Some(doc) = docs.into_iter().next() else {
        return Ok(PlainAclConfig::default());
    };
    let mut cfg = PlainAclConfig::default();
    for a in strings(
        &doc["globalWhiteRemoteAddresses"],
        "globalWhiteRemoteAddresses",
    )? {
        cfg.global_white.push(AddressRule::parse(&a)?);
    }
    match &doc["accounts"] {
        Yaml::BadValue | Yaml::Null => {}
        Yaml::Array(accounts) => {
            for (i, a) in accounts.iter().enumerate() {
                cfg.accounts.push(account(a, i)?);
            }
        }
        _ => return Err(PlainAclError::Invalid("accounts is not a list".into())),
    }
    Ok(cfg)
}

fn account(a: &Yaml, i: usize) -> Result<PlainAccount, PlainAclError> {
    let access_key = scalar(&a["accessKey"])
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| PlainAclError::Invalid(format!("account {} has no accessKey", i + 1)))?;
    let secret_key = scalar(&a["secretKey"])
        .filter(|k| !k.is_empty())
        .ok_or_else(|| PlainAclError::Invalid(format!("account {access_key} has no secretKey")))?;
    let white = match scalar(&a["whiteRemoteAddress"]).filter(|w| !w.trim().is_empty()) {
        Some(w) => Some(AddressRule::parse(&w)?),
        None => None,
    };
    let admin = match &a["admin"] {
        Yaml::Boolean(b) => *b,
        Yaml::String(s) => s.eq_ignore_ascii_case("true"),
        _ => false,
    };
    Ok(PlainAccount {
        topic_perms: strings(&a["topicPerms"], "topicPerms")?,
        group_perms: strings(&a["groupPerms"], "groupPerms")?,
        default_topic_perm: scalar(&a["defaultTopicPerm"]).filter(|p| !p.trim().is_empty()),
        default_group_perm: scalar(&a["defaultGroupPerm"]).filter(|p| !p.trim().is_empty()),
        access_key,
        secret_key,
        white,
        admin,
    })
}

/// A scalar as text: YAML reads `secretKey: 12345678` as a number.
fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn strings(y: &Yaml, what: &str) -> Result<Vec<String>, PlainAclError> {
    match y {
        Yaml::BadValue | Yaml::Null => Ok(Vec::new()),
        Yaml::Array(items) => items
            .iter()
            .map(|i| {
                scalar(i)
                    .ok_or_else(|| PlainAclError::Invalid(format!("{what} holds a non-scalar")))
            })
            .collect(),
        other => scalar(other)
            .map(|s| vec![s])
            .ok_or_else(|| PlainAclError::Invalid(format!("{what} is not a list"))),
    }
}

impl PlainAccount {
    pub fn user(&self) -> User {
        User {
            username: self.access_key.clone(),
            password: self.secret_key.clone(),
            user_type: if self.admin {
                UserType::Super
            } else {
                UserType::Normal
            },
            user_status: UserStatus::Enable,
        }
    }

    /// The account's permissions as an ACL; `None` when it names none.
    pub fn acl(&self) -> Option<Acl> {
        let mut custom = Vec::new();
        for (perms, kind) in [
            (&self.topic_perms, ResourceType::Topic),
            (&self.group_perms, ResourceType::Group),
        ] {
            for p in perms {
                let Some((name, perm)) = p.split_once('=') else {
                    continue;
                };
                let name = name.trim();
                let name = match kind {
                    ResourceType::Group => name
                        .strip_prefix("%RETRY%")
                        .or_else(|| name.strip_prefix("%DLQ%"))
                        .unwrap_or(name),
                    _ => name,
                };
                custom.push(entry(
                    kind,
                    ResourcePattern::Literal(name.to_string()),
                    perm,
                ));
            }
        }
        let mut default = Vec::new();
        for (perm, kind) in [
            (&self.default_topic_perm, ResourceType::Topic),
            (&self.default_group_perm, ResourceType::Group),
        ] {
            if let Some(perm) = perm {
                default.push(entry(kind, ResourcePattern::Any, perm));
            }
        }
        let mut policies = Vec::new();
        if !custom.is_empty() {
            policies.push(Policy {
                policy_type: PolicyType::Custom,
                entries: custom,
            });
        }
        if !default.is_empty() {
            policies.push(Policy {
                policy_type: PolicyType::Default,
                entries: default,
            });
        }
        (!policies.is_empty()).then(|| Acl {
            subject: user_subject(&self.access_key),
            policies,
        })
    }
}

/// A 1.0 permission as an entry: `DENY` denies everything; `PUB`, `SUB`, `PUB|SUB` (or
/// `SUB|PUB`) allow those; anything else allows everything, as Java's migration reads it.
fn entry(kind: ResourceType, pattern: ResourcePattern, perm: &str) -> PolicyEntry {
    let perm = perm.trim();
    let (actions, decision) = match perm {
        "DENY" => (vec![Action::All], Decision::Deny),
        "PUB" => (vec![Action::Pub], Decision::Allow),
        "SUB" => (vec![Action::Sub], Decision::Allow),
        "PUB|SUB" | "SUB|PUB" => (vec![Action::Pub, Action::Sub], Decision::Allow),
        _ => (vec![Action::All], Decision::Allow),
    };
    PolicyEntry {
        resource: Resource { kind, pattern },
        actions,
        source_ips: Vec::new(),
        decision,
    }
}

#[cfg(test)]
mod tests;
