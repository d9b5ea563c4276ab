//! The JSON bodies of ACL 2.0's management requests, Java's `UserInfo` and `AclInfo` (with
//! its `PolicyInfo` and `PolicyEntryInfo`), with Java's field names, fields in fastjson's
//! order (by name) and null fields left out; and their conversion to and from `model`, with
//! the validation and messages of Java's `UserConverter`, `AclConverter` and the metadata
//! managers (`AuthenticationMetadataManagerImpl`, `AuthorizationMetadataManagerImpl`).
//!
//! `users.json` and `acls.json` hold the same bodies, so what an admin reads back is what the
//! broker keeps.

use serde::{Deserialize, Serialize};

use super::model::{
    user_subject, Acl, Action, Decision, Policy, PolicyEntry, PolicyType, Resource, SourceIp, User,
    UserStatus, UserType,
};

/// Java's `UserInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

/// Java's `AclInfo`: a subject (`User:<name>`) and its policies.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AclInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<PolicyInfo>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// Java's `AclInfo.PolicyInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<PolicyEntryInfo>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_type: Option<String>,
}

/// Java's `AclInfo.PolicyEntryInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyEntryInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ips: Option<Vec<String>>,
}

impl From<&User> for UserInfo {
    fn from(u: &User) -> UserInfo {
        UserInfo {
            username: Some(u.username.clone()),
            password: Some(u.password.clone()),
            user_type: Some(u.user_type.name().to_string()),
            user_status: Some(u.user_status.name().to_string()),
        }
    }
}

/// What a create or update request asks of a user: each field absent when not given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserChange {
    pub username: String,
    pub password: Option<String>,
    pub user_type: Option<UserType>,
    pub user_status: Option<UserStatus>,
}

impl UserChange {
    /// Reads a `UserInfo` for the user `username` (the header's name wins, as Java's). An
    /// unknown user type or status is refused (Java reads it as absent).
    pub fn from_info(username: &str, info: &UserInfo) -> Result<UserChange, String> {
        let user_type =
            match blank_to_none(info.user_type.as_deref()) {
                None => None,
                Some(t) => Some(UserType::parse(t).ok_or_else(|| {
                    format!("The userType {t} is illegal, it is Super or Normal.")
                })?),
            };
        let user_status = match blank_to_none(info.user_status.as_deref()) {
            None => None,
            Some(s) => Some(UserStatus::parse(s).ok_or_else(|| {
                format!("The userStatus {s} is illegal, it is enable or disable.")
            })?),
        };
        Ok(UserChange {
            username: username.to_string(),
            password: info.password.clone(),
            user_type,
            user_status,
        })
    }
}

fn blank_to_none(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

/// The user a stored `UserInfo` describes (`users.json`).
pub fn user_of_info(info: &UserInfo) -> Result<User, String> {
    let name = blank_to_none(info.username.as_deref()).ok_or("a user without a username")?;
    let c = UserChange::from_info(name, info)?;
    let password = c
        .password
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| format!("the user {name} has no password"))?;
    Ok(User {
        username: name.to_string(),
        password,
        user_type: c.user_type.unwrap_or(UserType::Normal),
        user_status: c.user_status.unwrap_or(UserStatus::Enable),
    })
}

/// Java's `Subject.of` for a user: `User:<name>` (the type's case ignored) to the canonical
/// subject key; `None` for any other subject.
pub fn parse_subject(s: &str) -> Option<(String, String)> {
    let (kind, name) = s.trim().split_once(':')?;
    if !kind.eq_ignore_ascii_case("User") || name.is_empty() {
        return None;
    }
    Some((user_subject(name), name.to_string()))
}

/// Converts and validates an ACL body, as Java's `AclConverter.convertAcl` followed by
/// `AuthorizationMetadataManagerImpl.validate`: the body's subject, or `header_subject`;
/// policies without entries are skipped; a policy without a type is Custom. The messages are
/// Java's, and an unknown action is refused (Java drops it).
pub fn acl_of_info(info: &AclInfo, header_subject: Option<&str>) -> Result<Acl, String> {
    let raw = blank_to_none(info.subject.as_deref())
        .or(blank_to_none(header_subject))
        .ok_or("The subject is null.")?;
    let (subject, _) = parse_subject(raw).ok_or("The subject type is null.")?;
    let mut policies = Vec::new();
    for p in info.policies.iter().flatten() {
        let entries = match &p.entries {
            Some(e) if !e.is_empty() => e,
            _ => continue,
        };
        let policy_type = blank_to_none(p.policy_type.as_deref())
            .and_then(PolicyType::parse)
            .unwrap_or(PolicyType::Custom);
        let entries = entries
            .iter()
            .map(entry_of_info)
            .collect::<Result<Vec<_>, String>>()?;
        policies.push(Policy {
            policy_type,
            entries,
        });
    }
    if policies.is_empty() {
        return Err("The policies is empty.".into());
    }
    Ok(Acl { subject, policies })
}

fn entry_of_info(e: &PolicyEntryInfo) -> Result<PolicyEntry, String> {
    let resource = e
        .resource
        .as_deref()
        .and_then(Resource::parse)
        .ok_or_else(|| match &e.resource {
            Some(r) => format!("The resource {r} is illegal."),
            None => "The resource is null.".to_string(),
        })?;
    let mut actions = Vec::new();
    for a in e.actions.iter().flatten() {
        if a.trim().is_empty() {
            continue;
        }
        let action = Action::parse(a).ok_or_else(|| format!("The action {a} is illegal."))?;
        if !actions.contains(&action) {
            actions.push(action);
        }
    }
    if actions.is_empty() {
        return Err("The actions is empty.".into());
    }
    if actions.contains(&Action::Any) {
        return Err("The actions can not be Any.".into());
    }
    let mut source_ips = Vec::new();
    for ip in e.source_ips.iter().flatten() {
        if ip.trim().is_empty() {
            return Err("The source ip is empty.".into());
        }
        source_ips.push(SourceIp::parse(ip).ok_or("The source ip is invalid.")?);
    }
    let decision = e
        .decision
        .as_deref()
        .and_then(Decision::parse)
        .ok_or("The decision is null or illegal.")?;
    Ok(PolicyEntry {
        resource,
        actions,
        source_ips,
        decision,
    })
}

impl From<&Acl> for AclInfo {
    /// Java's `AclConverter.convertAcl(Acl)`.
    fn from(acl: &Acl) -> AclInfo {
        AclInfo {
            subject: Some(acl.subject.clone()),
            policies: Some(acl.policies.iter().map(PolicyInfo::from).collect()),
        }
    }
}

impl From<&Policy> for PolicyInfo {
    fn from(p: &Policy) -> PolicyInfo {
        PolicyInfo {
            policy_type: Some(p.policy_type.name().to_string()),
            entries: Some(p.entries.iter().map(PolicyEntryInfo::from).collect()),
        }
    }
}

impl From<&PolicyEntry> for PolicyEntryInfo {
    fn from(e: &PolicyEntry) -> PolicyEntryInfo {
        PolicyEntryInfo {
            resource: Some(e.resource.key()),
            actions: Some(e.actions.iter().map(|a| a.name().to_string()).collect()),
            source_ips: (!e.source_ips.is_empty()).then(|| {
                e.source_ips
                    .iter()
                    .map(|s| s.as_str().to_string())
                    .collect()
            }),
            decision: Some(e.decision.name().to_string()),
        }
    }
}

impl AclInfo {
    /// Java's `AclInfo.of`: one Custom policy with an entry per resource, each with the same
    /// actions, source addresses and decision (what mqadmin's createAcl sends).
    pub fn of(
        subject: &str,
        resources: &[String],
        actions: &[String],
        source_ips: &[String],
        decision: &str,
    ) -> AclInfo {
        let entries = resources
            .iter()
            .map(|r| PolicyEntryInfo {
                resource: Some(r.clone()),
                actions: Some(actions.to_vec()),
                source_ips: Some(source_ips.to_vec()),
                decision: Some(decision.to_string()),
            })
            .collect();
        AclInfo {
            subject: Some(subject.to_string()),
            policies: Some(vec![PolicyInfo {
                policy_type: None,
                entries: Some(entries),
            }]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's field names, in fastjson's order, nulls left out.
    #[test]
    fn json_field_names_are_javas() {
        let u = User {
            username: "alice".into(),
            password: "pw".into(),
            user_type: UserType::Normal,
            user_status: UserStatus::Enable,
        };
        assert_eq!(
            serde_json::to_string(&UserInfo::from(&u)).unwrap(),
            r#"{"password":"pw","userStatus":"enable","userType":"Normal","username":"alice"}"#
        );
        let info = AclInfo::of(
            "User:alice",
            &["Topic:orders".into()],
            &["Pub".into(), "sub".into()],
            &[],
            "allow",
        );
        let acl = acl_of_info(&info, None).unwrap();
        assert_eq!(
            serde_json::to_string(&AclInfo::from(&acl)).unwrap(),
            r#"{"policies":[{"entries":[{"actions":["Pub","Sub"],"decision":"Allow","resource":"Topic:orders"}],"policyType":"Custom"}],"subject":"User:alice"}"#
        );
    }

    /// Each invalid part of an ACL gets Java's message (an unknown action is named).
    #[test]
    fn acl_validation_messages() {
        let bad = |r: &str, a: &str, ip: &str, d: &str| {
            let ips: Vec<String> = if ip.is_empty() {
                vec![]
            } else {
                vec![ip.into()]
            };
            acl_of_info(
                &AclInfo::of("User:a", &[r.into()], &[a.into()], &ips, d),
                None,
            )
            .unwrap_err()
        };
        assert_eq!(
            bad("Queue:x", "Pub", "", "Allow"),
            "The resource Queue:x is illegal."
        );
        assert_eq!(
            bad("Topic:x", "Pubb", "", "Allow"),
            "The action Pubb is illegal."
        );
        assert_eq!(
            bad("Topic:x", "Any", "", "Allow"),
            "The actions can not be Any."
        );
        assert_eq!(bad("Topic:x", "", "", "Allow"), "The actions is empty.");
        assert_eq!(
            bad("Topic:x", "Pub", "10.0.0.300", "Allow"),
            "The source ip is invalid."
        );
        assert_eq!(
            bad("Topic:x", "Pub", "10.0.0.0/8", "Maybe"),
            "The decision is null or illegal."
        );
        let no_subject = AclInfo::of("", &["Topic:x".into()], &["Pub".into()], &[], "Allow");
        assert_eq!(
            acl_of_info(&no_subject, None).unwrap_err(),
            "The subject is null."
        );
        let acl = acl_of_info(&no_subject, Some("user:bob")).unwrap();
        assert_eq!(acl.subject, "User:bob");
        assert_eq!(
            acl_of_info(&no_subject, Some("Group:g")).unwrap_err(),
            "The subject type is null."
        );
        let empty = AclInfo {
            subject: Some("User:a".into()),
            policies: Some(vec![PolicyInfo::default()]),
        };
        assert_eq!(
            acl_of_info(&empty, None).unwrap_err(),
            "The policies is empty."
        );
    }

    /// A stored user needs a name and a password; type and status default as Java's.
    #[test]
    fn stored_user_defaults() {
        let info = UserInfo {
            username: Some("a".into()),
            password: Some("p".into()),
            ..UserInfo::default()
        };
        let u = user_of_info(&info).unwrap();
        assert_eq!(
            (u.user_type, u.user_status),
            (UserType::Normal, UserStatus::Enable)
        );
        let info = UserInfo {
            username: Some("a".into()),
            ..UserInfo::default()
        };
        assert!(user_of_info(&info).unwrap_err().contains("no password"));
        let info = UserInfo {
            username: Some("a".into()),
            password: Some("p".into()),
            user_type: Some("Admin".into()),
            ..UserInfo::default()
        };
        assert!(user_of_info(&info).unwrap_err().contains("Admin"));
    }
}
