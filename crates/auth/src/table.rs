//! The access check of one request: the users, ACLs and ACL 1.0 whitelists a broker knows, and
//! [`AuthTable::check`], which authenticates a request (its `AccessKey` names an enabled
//! user, and its `Signature` is that user's) and then authorizes it (a Super user may do
//! anything; a Normal user needs an ACL allowing each resource and action the request
//! touches, see `request` and `authorize`).
//!
//! The table is immutable: the broker builds a new one on every change and publishes it to
//! every shard, which checks requests against its copy without a lock.

use std::collections::HashMap;
use std::net::IpAddr;

use super::authorize::decide;
use super::model::{user_subject, Acl, Action, ResourceType, User, UserStatus, UserType};
use super::plain_acl::{AddressRule, PlainAclConfig};
use super::request::checks;
use super::signature::{self, SignatureError, ACCESS_KEY};
use crate::protocol::codes::request_code as rc;
use crate::protocol::command::RemotingCommand;

/// Which checks run (`authenticationEnabled`/`authorizationEnabled`, or both for ACL 1.0's
/// `aclEnable`), the cluster whose name admin requests are checked against, and the request
/// codes that need no check (`authenticationWhitelist`/`authorizationWhitelist`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthSettings {
    pub authentication: bool,
    pub authorization: bool,
    /// ACL 1.0's rules (`aclEnable` without `authorizationEnabled`): only the requests ACL 1.0
    /// checked resources for are authorized against the user's rules ([`V1_RESOURCE_CODES`]);
    /// a request that changes what a broker holds, or touches the cluster, needs an admin
    /// account; any other request needs only its signature.
    pub v1_rules: bool,
    pub cluster: String,
    pub authentication_whitelist: Vec<i32>,
    pub authorization_whitelist: Vec<i32>,
}

/// Why a request was refused: the remark a client sees with NO_PERMISSION.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthRefusal {
    #[error("{0}")]
    Authentication(String),
    #[error("{0}")]
    Authorization(String),
}

/// How a request proves who sent it.
#[derive(Clone, Copy, Debug)]
pub enum Proof<'a> {
    /// Remoting: the `Signature` ext field over the other fields and the body.
    Remoting,
    /// gRPC: the `authorization` header's signature over the `x-mq-date-time` value.
    Grpc {
        date_time: &'a str,
        signature: &'a str,
    },
}

/// The requests ACL 1.0 (`PlainAccessResource.parse`) checks against an account's topic and
/// group permissions.
pub const V1_RESOURCE_CODES: &[i32] = &[
    rc::SEND_MESSAGE,
    rc::SEND_MESSAGE_V2,
    rc::SEND_BATCH_MESSAGE,
    rc::RECALL_MESSAGE,
    rc::CONSUMER_SEND_MSG_BACK,
    rc::PULL_MESSAGE,
    rc::LITE_PULL_MESSAGE,
    rc::QUERY_MESSAGE,
    rc::HEART_BEAT,
    rc::UNREGISTER_CLIENT,
    rc::GET_CONSUMER_LIST_BY_GROUP,
    rc::UPDATE_CONSUMER_OFFSET,
];

/// The key ACLs are kept under: a subject's user name (`User:<name>`), so a request's ACL is
/// found by its user name without building the subject.
fn subject_key(subject: &str) -> &str {
    subject.strip_prefix("User:").unwrap_or(subject)
}

#[derive(Clone, Debug, Default)]
pub struct AuthTable {
    users: HashMap<String, User>,
    /// By the subject's user name ([`subject_key`]).
    acls: HashMap<String, Acl>,
    global_white: Vec<AddressRule>,
    /// ACL 1.0 per-account whitelists: from these addresses the account's requests need the
    /// access key but no signature.
    account_white: HashMap<String, AddressRule>,
}

impl AuthTable {
    pub fn new(users: Vec<User>, acls: Vec<Acl>) -> AuthTable {
        AuthTable {
            users: users.into_iter().map(|u| (u.username.clone(), u)).collect(),
            acls: acls
                .into_iter()
                .map(|a| (subject_key(&a.subject).to_string(), a))
                .collect(),
            ..AuthTable::default()
        }
    }

    /// Adds ACL 1.0's accounts and whitelists. A user or ACL of the same name already in the
    /// table is kept, as Java's migration keeps an existing user.
    pub fn with_plain_acl(mut self, plain: &PlainAclConfig) -> AuthTable {
        self.global_white.extend(plain.global_white.iter().cloned());
        for a in &plain.accounts {
            if self.users.contains_key(&a.access_key) {
                continue;
            }
            self.users.insert(a.access_key.clone(), a.user());
            if let Some(acl) = a.acl() {
                self.acls
                    .entry(subject_key(&acl.subject).to_string())
                    .or_insert(acl);
            }
            if let Some(w) = &a.white {
                self.account_white.insert(a.access_key.clone(), w.clone());
            }
        }
        self
    }

    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    pub fn acl(&self, subject: &str) -> Option<&Acl> {
        self.acls.get(subject_key(subject))
    }

    pub fn acls(&self) -> impl Iterator<Item = &Acl> {
        self.acls.values()
    }

    /// Checks one request from `peer`. Runs before the request is decoded any further: the
    /// signature check allocates nothing, and only an authenticated request is looked into
    /// for authorization.
    pub fn check(
        &self,
        settings: &AuthSettings,
        cmd: &RemotingCommand,
        peer: IpAddr,
    ) -> Result<(), AuthRefusal> {
        self.check_proved(settings, cmd, peer, Proof::Remoting)
    }

    /// As `check`, the user (`AccessKey`) proved by `proof`.
    pub fn check_proved(
        &self,
        settings: &AuthSettings,
        cmd: &RemotingCommand,
        peer: IpAddr,
        proof: Proof<'_>,
    ) -> Result<(), AuthRefusal> {
        if self.global_white.iter().any(|w| w.contains(peer)) {
            return Ok(());
        }
        let authn =
            settings.authentication && !settings.authentication_whitelist.contains(&cmd.code);
        let authz = settings.authorization && !settings.authorization_whitelist.contains(&cmd.code);
        if !authn && !authz {
            return Ok(());
        }
        let name = cmd.ext(ACCESS_KEY).filter(|k| !k.is_empty());
        let user = match name {
            None if authn => {
                return Err(AuthRefusal::Authentication(
                    "username cannot be null.".into(),
                ))
            }
            None => None,
            Some(name) => match self.users.get(name) {
                None => {
                    return Err(AuthRefusal::Authentication(format!(
                        "User:{name} is not found."
                    )))
                }
                Some(u) if u.user_status == UserStatus::Disable => {
                    return Err(AuthRefusal::Authentication(format!(
                        "User:{name} is disabled."
                    )))
                }
                Some(u) => Some(u),
            },
        };
        if authn {
            // `user` is Some here: a missing key was refused above.
            let Some(user) = user else {
                return Err(AuthRefusal::Authentication(
                    "username cannot be null.".into(),
                ));
            };
            let whitelisted = self
                .account_white
                .get(&user.username)
                .is_some_and(|w| w.contains(peer));
            if !whitelisted {
                let verified = match proof {
                    Proof::Remoting => {
                        signature::verify(&user.password, &cmd.ext_fields, &cmd.body, cmd.version)
                    }
                    Proof::Grpc {
                        date_time,
                        signature,
                    } => signature::verify_grpc(&user.password, date_time, signature),
                };
                verified.map_err(|e| {
                    AuthRefusal::Authentication(match e {
                        SignatureError::TooManyFields(_) => e.to_string(),
                        _ => "check signature failed.".into(),
                    })
                })?;
            }
        }
        if !authz {
            return Ok(());
        }
        if user.is_some_and(|u| u.user_type == UserType::Super) {
            return Ok(());
        }
        let subject = || match user {
            Some(u) => user_subject(&u.username),
            None => "anonymous".to_string(),
        };
        let wanted = checks(cmd, &settings.cluster)
            .map_err(|_| AuthRefusal::Authorization("parse authorization context error.".into()))?;
        if settings.v1_rules && !V1_RESOURCE_CODES.contains(&cmd.code) {
            let changes_or_cluster = wanted.iter().any(|c| {
                c.kind == ResourceType::Cluster
                    || c.actions
                        .iter()
                        .any(|a| matches!(a, Action::Create | Action::Update | Action::Delete))
            });
            if changes_or_cluster {
                let name = user.map(|u| u.username.as_str()).unwrap_or_default();
                return Err(AuthRefusal::Authorization(format!(
                    "Need admin permission for request code={}, but accessKey={name} is not",
                    cmd.code
                )));
            }
            return Ok(());
        }
        let acl = user.and_then(|u| self.acls.get(u.username.as_str()));
        for c in &wanted {
            let requested = c.requested();
            if let Err(r) = decide(acl, &requested, c.actions, Some(peer)) {
                let actions: Vec<&str> = c.actions.iter().map(|a| a.name()).collect();
                return Err(AuthRefusal::Authorization(format!(
                    "{} has no permission to access {} from {peer}, {} (needs {})",
                    subject(),
                    requested.key(),
                    r.detail(),
                    actions.join(" or ")
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
