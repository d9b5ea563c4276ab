//! ACL 2.0's model, as RocketMQ 5.3 defines it: users (a name, a password that is the
//! signature's secret key, Super or Normal, enabled or disabled) and ACLs (a subject
//! `User:<name>` with policies of entries: a resource, actions, source addresses and a
//! decision), and parsing them from the strings the AUTH_* request bodies carry. The
//! decision over them is `authorize`.

use std::net::IpAddr;

/// A resource's kind, by Java's `ResourceType` names (matched ignoring case, as Java does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceType {
    Any,
    Cluster,
    Namespace,
    Topic,
    Group,
}

impl ResourceType {
    pub fn name(self) -> &'static str {
        match self {
            ResourceType::Any => "Any",
            ResourceType::Cluster => "Cluster",
            ResourceType::Namespace => "Namespace",
            ResourceType::Topic => "Topic",
            ResourceType::Group => "Group",
        }
    }

    fn parse(s: &str) -> Option<ResourceType> {
        [
            ResourceType::Any,
            ResourceType::Cluster,
            ResourceType::Namespace,
            ResourceType::Topic,
            ResourceType::Group,
        ]
        .into_iter()
        .find(|t| t.name().eq_ignore_ascii_case(s))
    }
}

/// How a policy's resource name matches a request's: every name, exactly, or by prefix.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ResourcePattern {
    Any,
    Literal(String),
    Prefixed(String),
}

/// A resource a policy entry speaks of: `*` (anything), `Type:*`, `Type:name` or
/// `Type:prefix*` (Java's `Resource.of`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Resource {
    pub kind: ResourceType,
    pub pattern: ResourcePattern,
}

/// What a request touches: one resource of one kind, by its literal name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requested<'a> {
    pub kind: ResourceType,
    pub name: &'a str,
}

const RETRY_PREFIX: &str = "%RETRY%";
const DLQ_PREFIX: &str = "%DLQ%";

impl<'a> Requested<'a> {
    pub fn topic(name: &'a str) -> Self {
        Requested {
            kind: ResourceType::Topic,
            name,
        }
    }

    /// A group, named by itself or by its retry or dead-letter topic (Java's
    /// `Resource.ofGroup` strips the prefix).
    pub fn group(name: &'a str) -> Self {
        let name = name
            .strip_prefix(RETRY_PREFIX)
            .or_else(|| name.strip_prefix(DLQ_PREFIX))
            .unwrap_or(name);
        Requested {
            kind: ResourceType::Group,
            name,
        }
    }

    pub fn cluster(name: &'a str) -> Self {
        Requested {
            kind: ResourceType::Cluster,
            name,
        }
    }

    /// `Type:name`, as refusals name the resource.
    pub fn key(&self) -> String {
        format!("{}:{}", self.kind.name(), self.name)
    }
}

/// Whether a topic name is a retry topic (`%RETRY%group`), which ACLs treat as its group.
pub fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_PREFIX)
}

impl Resource {
    /// Parses a resource key; `None` for a blank key or an unknown type, as Java.
    pub fn parse(key: &str) -> Option<Resource> {
        if key.trim().is_empty() {
            return None;
        }
        if key == "*" {
            return Some(Resource {
                kind: ResourceType::Any,
                pattern: ResourcePattern::Any,
            });
        }
        let (kind, name) = match key.split_once(':') {
            Some((k, n)) => (k, n),
            None => (key, ""),
        };
        let kind = ResourceType::parse(kind)?;
        let pattern = if name == "*" {
            ResourcePattern::Any
        } else if name.ends_with('*') {
            // Java keeps what precedes the first `*` as the prefix.
            let i = name.find('*').unwrap_or(name.len() - 1);
            ResourcePattern::Prefixed(name[..i].to_string())
        } else {
            ResourcePattern::Literal(name.to_string())
        };
        Some(Resource { kind, pattern })
    }

    /// The key this resource is written as (`Topic:orders*`).
    pub fn key(&self) -> String {
        if self.kind == ResourceType::Any {
            return "*".to_string();
        }
        match &self.pattern {
            ResourcePattern::Any => format!("{}:*", self.kind.name()),
            ResourcePattern::Literal(n) => format!("{}:{}", self.kind.name(), n),
            ResourcePattern::Prefixed(p) => format!("{}:{}*", self.kind.name(), p),
        }
    }

    pub fn matches(&self, r: &Requested<'_>) -> bool {
        if self.kind == ResourceType::Any {
            return true;
        }
        if self.kind != r.kind {
            return false;
        }
        match &self.pattern {
            ResourcePattern::Any => true,
            ResourcePattern::Literal(n) => n == r.name,
            ResourcePattern::Prefixed(p) => r.name.starts_with(p.as_str()),
        }
    }
}

/// Java's `Action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    All,
    Any,
    Pub,
    Sub,
    Create,
    Update,
    Delete,
    Get,
    List,
}

impl Action {
    pub const EVERY: [Action; 9] = [
        Action::All,
        Action::Any,
        Action::Pub,
        Action::Sub,
        Action::Create,
        Action::Update,
        Action::Delete,
        Action::Get,
        Action::List,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Action::All => "All",
            Action::Any => "Any",
            Action::Pub => "Pub",
            Action::Sub => "Sub",
            Action::Create => "Create",
            Action::Update => "Update",
            Action::Delete => "Delete",
            Action::Get => "Get",
            Action::List => "List",
        }
    }

    pub fn parse(s: &str) -> Option<Action> {
        Action::EVERY
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s.trim()))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
}

impl Decision {
    pub fn name(self) -> &'static str {
        match self {
            Decision::Allow => "Allow",
            Decision::Deny => "Deny",
        }
    }

    pub fn parse(s: &str) -> Option<Decision> {
        [Decision::Allow, Decision::Deny]
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// A source-address rule: one address, or a CIDR block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceIp {
    text: String,
    net: IpAddr,
    prefix: u8,
}

impl SourceIp {
    /// An address (`10.0.0.7`, `::1`) or a block (`10.0.0.0/8`, `fd00::/8`); `None` for
    /// anything else (Java's `IPAddressUtils.isValidIPOrCidr`).
    pub fn parse(s: &str) -> Option<SourceIp> {
        let s = s.trim();
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p.parse::<u8>().ok()?)),
            None => (s, None),
        };
        let net: IpAddr = addr.parse().ok()?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        if prefix > max {
            return None;
        }
        Some(SourceIp {
            text: s.to_string(),
            net,
            prefix,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `ip` is this address or inside this block. An IPv4 client reached over an
    /// IPv6 socket (`::ffff:a.b.c.d`) is matched as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => {
                masked(u32::from(n) as u128, 32, self.prefix)
                    == masked(u32::from(i) as u128, 32, self.prefix)
            }
            (IpAddr::V6(n), IpAddr::V6(i)) => {
                masked(u128::from(n), 128, self.prefix) == masked(u128::from(i), 128, self.prefix)
            }
            _ => false,
        }
    }
}

fn masked(v: u128, bits: u32, prefix: u8) -> u128 {
    let host = bits - prefix as u32;
    if host >= 128 {
        0
    } else {
        (v >> host) << host
    }
}

/// One rule: on this resource, these actions, from these addresses (empty: any), decide this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyEntry {
    pub resource: Resource,
    pub actions: Vec<Action>,
    pub source_ips: Vec<SourceIp>,
    pub decision: Decision,
}

impl PolicyEntry {
    /// Java's `PolicyEntry.isMatchAction`: a request asking `Any` matches every entry with
    /// actions; otherwise one of the requested actions must be listed, or `All`.
    pub fn matches_actions(&self, requested: &[Action]) -> bool {
        if self.actions.is_empty() {
            return false;
        }
        if requested.contains(&Action::Any) {
            return true;
        }
        requested
            .iter()
            .any(|a| self.actions.contains(a) || self.actions.contains(&Action::All))
    }

    pub fn matches_source(&self, ip: Option<IpAddr>) -> bool {
        if self.source_ips.is_empty() {
            return true;
        }
        match ip {
            Some(ip) => self.source_ips.iter().any(|s| s.contains(ip)),
            None => false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyType {
    Custom,
    Default,
}

impl PolicyType {
    pub fn name(self) -> &'static str {
        match self {
            PolicyType::Custom => "Custom",
            PolicyType::Default => "Default",
        }
    }

    pub fn parse(s: &str) -> Option<PolicyType> {
        [PolicyType::Custom, PolicyType::Default]
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub policy_type: PolicyType,
    pub entries: Vec<PolicyEntry>,
}

/// A subject's policies (the subject is `User:<name>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    pub subject: String,
    pub policies: Vec<Policy>,
}

impl Acl {
    pub fn policy(&self, t: PolicyType) -> Option<&Policy> {
        self.policies.iter().find(|p| p.policy_type == t)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserType {
    Super,
    Normal,
}

impl UserType {
    pub fn name(self) -> &'static str {
        match self {
            UserType::Super => "Super",
            UserType::Normal => "Normal",
        }
    }

    pub fn parse(s: &str) -> Option<UserType> {
        [UserType::Super, UserType::Normal]
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s.trim()))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserStatus {
    Enable,
    Disable,
}

impl UserStatus {
    pub fn name(self) -> &'static str {
        match self {
            UserStatus::Enable => "enable",
            UserStatus::Disable => "disable",
        }
    }

    pub fn parse(s: &str) -> Option<UserStatus> {
        [UserStatus::Enable, UserStatus::Disable]
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// A user: `password` is the secret key requests are signed with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub username: String,
    pub password: String,
    pub user_type: UserType,
    pub user_status: UserStatus,
}

/// The subject key of a user (`User:<name>`).
pub fn user_subject(username: &str) -> String {
    format!("User:{username}")
}
