//! ACL 2.0's user and ACL management as typed calls (AUTH_* 3001-3010, as Java's
//! `MQClientAPIImpl` sends them: the name or subject in the header, `UserInfo`/`AclInfo` as
//! the body).

use super::client::malformed;
use super::{AdminClient, AdminError};
use crate::protocol::codes::request_code as req;
use crate::protocol::headers::{
    AclRequestHeader, DeleteAclRequestHeader, ListAclsRequestHeader, ListUsersRequestHeader,
    UserRequestHeader,
};
use crate::protocol::RemotingCommand;
use ringmq_auth::bodies::{AclInfo, UserInfo};

fn user_request(code: i32, username: &str) -> RemotingCommand {
    let mut cmd = RemotingCommand::new_request(code);
    UserRequestHeader {
        username: Some(username.to_string()),
    }
    .write_to(&mut cmd);
    cmd
}

fn acl_request(code: i32, subject: &str) -> RemotingCommand {
    let mut cmd = RemotingCommand::new_request(code);
    AclRequestHeader {
        subject: Some(subject.to_string()),
    }
    .write_to(&mut cmd);
    cmd
}

fn json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    // Serializing these plain structs cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

/// A body that may be absent (Java answers SUCCESS without one for nothing found).
fn optional<T: serde::de::DeserializeOwned>(
    addr: &str,
    bytes: &[u8],
) -> Result<Option<T>, AdminError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(bytes)
        .map(Some)
        .map_err(|e| malformed(addr, e.to_string()))
}

impl AdminClient {
    /// AUTH_CREATE_USER (3001).
    pub fn create_user(&self, addr: &str, user: &UserInfo) -> Result<(), AdminError> {
        let name = user.username.as_deref().unwrap_or_default();
        let cmd = user_request(req::AUTH_CREATE_USER, name).with_body(json(user));
        self.call(addr, &cmd, "AUTH_CREATE_USER").map(drop)
    }

    /// AUTH_UPDATE_USER (3002): the fields given replace the user's.
    pub fn update_user(&self, addr: &str, user: &UserInfo) -> Result<(), AdminError> {
        let name = user.username.as_deref().unwrap_or_default();
        let cmd = user_request(req::AUTH_UPDATE_USER, name).with_body(json(user));
        self.call(addr, &cmd, "AUTH_UPDATE_USER").map(drop)
    }

    /// AUTH_DELETE_USER (3003): the user and its ACL.
    pub fn delete_user(&self, addr: &str, username: &str) -> Result<(), AdminError> {
        let cmd = user_request(req::AUTH_DELETE_USER, username);
        self.call(addr, &cmd, "AUTH_DELETE_USER").map(drop)
    }

    /// AUTH_GET_USER (3004); `None` when the broker has no such user.
    pub fn get_user(&self, addr: &str, username: &str) -> Result<Option<UserInfo>, AdminError> {
        let cmd = user_request(req::AUTH_GET_USER, username);
        let r = self.call(addr, &cmd, "AUTH_GET_USER")?;
        optional(addr, &r.body)
    }

    /// AUTH_LIST_USER (3005): the users whose name contains `filter`.
    pub fn list_users(
        &self,
        addr: &str,
        filter: Option<&str>,
    ) -> Result<Vec<UserInfo>, AdminError> {
        let mut cmd = RemotingCommand::new_request(req::AUTH_LIST_USER);
        ListUsersRequestHeader {
            filter: filter.map(str::to_string),
        }
        .write_to(&mut cmd);
        let r = self.call(addr, &cmd, "AUTH_LIST_USER")?;
        Ok(optional(addr, &r.body)?.unwrap_or_default())
    }

    /// AUTH_CREATE_ACL (3006): merged into the subject's ACL if it has one.
    pub fn create_acl(&self, addr: &str, acl: &AclInfo) -> Result<(), AdminError> {
        let subject = acl.subject.as_deref().unwrap_or_default();
        let cmd = acl_request(req::AUTH_CREATE_ACL, subject).with_body(json(acl));
        self.call(addr, &cmd, "AUTH_CREATE_ACL").map(drop)
    }

    /// AUTH_UPDATE_ACL (3007).
    pub fn update_acl(&self, addr: &str, acl: &AclInfo) -> Result<(), AdminError> {
        let subject = acl.subject.as_deref().unwrap_or_default();
        let cmd = acl_request(req::AUTH_UPDATE_ACL, subject).with_body(json(acl));
        self.call(addr, &cmd, "AUTH_UPDATE_ACL").map(drop)
    }

    /// AUTH_DELETE_ACL (3008): the subject's ACL, or only `resource`'s entry of the
    /// `policy_type` policy (Custom by default).
    pub fn delete_acl(
        &self,
        addr: &str,
        subject: &str,
        policy_type: Option<&str>,
        resource: Option<&str>,
    ) -> Result<(), AdminError> {
        let mut cmd = RemotingCommand::new_request(req::AUTH_DELETE_ACL);
        DeleteAclRequestHeader {
            subject: Some(subject.to_string()),
            policy_type: policy_type.map(str::to_string),
            resource: resource.map(str::to_string),
        }
        .write_to(&mut cmd);
        self.call(addr, &cmd, "AUTH_DELETE_ACL").map(drop)
    }

    /// AUTH_GET_ACL (3009); `None` when the subject has no ACL.
    pub fn get_acl(&self, addr: &str, subject: &str) -> Result<Option<AclInfo>, AdminError> {
        let cmd = acl_request(req::AUTH_GET_ACL, subject);
        let r = self.call(addr, &cmd, "AUTH_GET_ACL")?;
        optional(addr, &r.body)
    }

    /// AUTH_LIST_ACL (3010): the ACLs whose subject contains `subject_filter`, with the
    /// entries whose resource contains `resource_filter`.
    pub fn list_acls(
        &self,
        addr: &str,
        subject_filter: Option<&str>,
        resource_filter: Option<&str>,
    ) -> Result<Vec<AclInfo>, AdminError> {
        let mut cmd = RemotingCommand::new_request(req::AUTH_LIST_ACL);
        ListAclsRequestHeader {
            subject_filter: subject_filter.map(str::to_string),
            resource_filter: resource_filter.map(str::to_string),
        }
        .write_to(&mut cmd);
        let r = self.call(addr, &cmd, "AUTH_LIST_ACL")?;
        Ok(optional(addr, &r.body)?.unwrap_or_default())
    }
}
