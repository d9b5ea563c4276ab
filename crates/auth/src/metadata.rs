//! The users and ACLs an admin manages (AUTH_* requests), owned by the broker's shard 0 and
//! kept in its config directory as `users.json` and `acls.json` (JSON arrays of Java's
//! `UserInfo` and `AclInfo`). Each change yields a new [`AuthTable`] that the broker
//! publishes to every shard.
//!
//! This module is pure: it applies a change in memory with the rules and messages of Java's
//! `AuthenticationMetadataManagerImpl` and `AuthorizationMetadataManagerImpl` (a change
//! that breaks them is [`MetadataError::Rejected`]), and renders the files' bytes; the
//! broker writes them on a helper thread ([`write_file`], mode 0600: they hold secret keys).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::bodies::{acl_of_info, user_of_info, AclInfo, UserChange, UserInfo};
use super::model::{user_subject, Acl, PolicyType, Resource, User, UserStatus, UserType};
use super::table::AuthTable;

/// The users file in the broker's config directory.
pub const USERS_FILE: &str = "users.json";
/// The ACLs file in the broker's config directory.
pub const ACLS_FILE: &str = "acls.json";

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid auth metadata file: {reason}")]
    Malformed { path: PathBuf, reason: String },
    /// A change Java's metadata managers refuse (an AuthenticationException or
    /// AuthorizationException there): the message is Java's.
    #[error("{0}")]
    Rejected(String),
}

fn rejected(m: impl Into<String>) -> MetadataError {
    MetadataError::Rejected(m.into())
}

/// Which files a change touched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    pub users: bool,
    pub acls: bool,
}

/// The managed users and ACLs, by name and by subject.
#[derive(Clone, Debug, Default)]
pub struct AuthMetadata {
    dir: PathBuf,
    users: BTreeMap<String, User>,
    acls: BTreeMap<String, Acl>,
}

impl AuthMetadata {
    /// Reads the users and ACLs kept in `config_dir` (none when the files do not exist yet).
    /// Blocking. A file that is not what [`AuthMetadata::users_file_bytes`] writes is an
    /// error naming it.
    pub fn load(config_dir: &Path) -> Result<AuthMetadata, MetadataError> {
        let mut meta = AuthMetadata {
            dir: config_dir.to_path_buf(),
            ..AuthMetadata::default()
        };
        let path = meta.users_path();
        if let Some(infos) = read_json::<UserInfo>(&path)? {
            for info in &infos {
                let u = user_of_info(info).map_err(|reason| malformed(&path, reason))?;
                if meta.users.contains_key(&u.username) {
                    return Err(malformed(&path, format!("user {} twice", u.username)));
                }
                meta.users.insert(u.username.clone(), u);
            }
        }
        let path = meta.acls_path();
        if let Some(infos) = read_json::<AclInfo>(&path)? {
            for info in &infos {
                let acl = acl_of_info(info, None).map_err(|reason| malformed(&path, reason))?;
                if meta.acls.contains_key(&acl.subject) {
                    return Err(malformed(&path, format!("subject {} twice", acl.subject)));
                }
                meta.acls.insert(acl.subject.clone(), acl);
            }
        }
        Ok(meta)
    }

    /// Creates `name` as an enabled Super user unless a user of that name exists
    /// (`initAuthenticationUser`). True when it was created.
    pub fn ensure_super_user(&mut self, name: &str, password: &str) -> bool {
        if self.users.contains_key(name) {
            return false;
        }
        self.users.insert(
            name.to_string(),
            User {
                username: name.to_string(),
                password: password.to_string(),
                user_type: UserType::Super,
                user_status: UserStatus::Enable,
            },
        );
        true
    }

    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    pub fn acl_of_user(&self, name: &str) -> Option<&Acl> {
        self.acls.get(&user_subject(name))
    }

    /// The ACL of a subject key (`User:<name>`).
    pub fn acl(&self, subject: &str) -> Option<&Acl> {
        self.acls.get(subject)
    }

    /// Whether `name` is a Super user; Java's `isSuperUser` (an unknown user is an error).
    pub fn is_super_user(&self, name: &str) -> Result<bool, MetadataError> {
        self.users
            .get(name)
            .map(|u| u.user_type == UserType::Super)
            .ok_or_else(|| rejected(format!("User:{name} is not found")))
    }

    /// The users whose name contains `filter` (every user for a blank one), by name.
    pub fn list_users(&self, filter: Option<&str>) -> Vec<&User> {
        let filter = filter.filter(|f| !f.trim().is_empty());
        self.users
            .values()
            .filter(|u| filter.is_none_or(|f| u.username.contains(f)))
            .collect()
    }

    /// Java's `listAcl`: the ACLs whose subject contains `subject_filter`; with a
    /// `resource_filter` the subject does not contain, only the entries whose resource
    /// contains it (a policy left empty is dropped, an ACL left empty too).
    pub fn list_acls(
        &self,
        subject_filter: Option<&str>,
        resource_filter: Option<&str>,
    ) -> Vec<Acl> {
        let sf = subject_filter.filter(|f| !f.trim().is_empty());
        let rf = resource_filter.filter(|f| !f.trim().is_empty());
        let mut out = Vec::new();
        for acl in self.acls.values() {
            if sf.is_some_and(|f| !acl.subject.contains(f)) {
                continue;
            }
            let mut acl = acl.clone();
            if let Some(f) = rf.filter(|f| !acl.subject.contains(f)) {
                for p in &mut acl.policies {
                    p.entries.retain(|e| e.resource.key().contains(f));
                }
            }
            acl.policies.retain(|p| !p.entries.is_empty());
            if !acl.policies.is_empty() {
                out.push(acl);
            }
        }
        out
    }

    /// Java's `createUser`: a name and a password needed, an existing user refused; Normal
    /// and enabled unless said otherwise.
    pub fn create_user(&mut self, c: &UserChange) -> Result<Touched, MetadataError> {
        validate_user(c, true)?;
        if self.users.contains_key(&c.username) {
            return Err(rejected("The user is existed"));
        }
        let u = User {
            username: c.username.clone(),
            password: c.password.clone().unwrap_or_default(),
            user_type: c.user_type.unwrap_or(UserType::Normal),
            user_status: c.user_status.unwrap_or(UserStatus::Enable),
        };
        self.users.insert(u.username.clone(), u);
        Ok(Touched {
            users: true,
            acls: false,
        })
    }

    /// Java's `updateUser`: the fields given replace the user's (a blank password is no
    /// change); an unknown user is refused.
    pub fn update_user(&mut self, c: &UserChange) -> Result<Touched, MetadataError> {
        validate_user(c, false)?;
        let u = self
            .users
            .get_mut(&c.username)
            .ok_or_else(|| rejected("The user is not exist"))?;
        if let Some(p) = c.password.as_ref().filter(|p| !p.trim().is_empty()) {
            u.password = p.clone();
        }
        if let Some(t) = c.user_type {
            u.user_type = t;
        }
        if let Some(s) = c.user_status {
            u.user_status = s;
        }
        Ok(Touched {
            users: true,
            acls: false,
        })
    }

    /// Java's `deleteUser`: the user and its ACL; an unknown user is no error and no change.
    pub fn delete_user(&mut self, name: &str) -> Result<Touched, MetadataError> {
        if name.trim().is_empty() {
            return Err(rejected("username can not be blank"));
        }
        let users = self.users.remove(name).is_some();
        let acls = self.acls.remove(&user_subject(name)).is_some();
        Ok(Touched { users, acls })
    }

    /// Java's `createAcl` and `updateAcl` (the same): the subject's user must exist; an
    /// existing ACL gets the new policies merged in (a policy of the same type gets the new
    /// entries, an entry of the same resource replaced).
    pub fn put_acl(&mut self, acl: Acl) -> Result<Touched, MetadataError> {
        self.subject_user(&acl.subject)
            .ok_or_else(|| rejected(format!("The subject of {} is not exist.", acl.subject)))?;
        match self.acls.get_mut(&acl.subject) {
            None => {
                self.acls.insert(acl.subject.clone(), acl);
            }
            Some(old) => {
                for p in acl.policies {
                    match old
                        .policies
                        .iter_mut()
                        .find(|o| o.policy_type == p.policy_type)
                    {
                        None => old.policies.push(p),
                        Some(o) => {
                            for e in p.entries {
                                match o.entries.iter_mut().find(|x| x.resource == e.resource) {
                                    Some(x) => *x = e,
                                    None => o.entries.push(e),
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(Touched {
            users: false,
            acls: true,
        })
    }

    /// Java's `deleteAcl`: the subject's whole ACL, or with a resource only that entry of the
    /// `policy_type` policy (Custom when absent), the ACL going when nothing is left. The
    /// subject's user and its ACL must exist.
    pub fn delete_acl(
        &mut self,
        subject: &str,
        policy_type: Option<PolicyType>,
        resource: Option<&Resource>,
    ) -> Result<Touched, MetadataError> {
        if self.subject_user(subject).is_none() {
            return Err(rejected("The subject is not exist."));
        }
        let Some(acl) = self.acls.get_mut(subject) else {
            return Err(rejected("The acl is not exist."));
        };
        if let Some(r) = resource {
            let t = policy_type.unwrap_or(PolicyType::Custom);
            if let Some(p) = acl.policies.iter_mut().find(|p| p.policy_type == t) {
                p.entries.retain(|e| &e.resource != r);
            }
            acl.policies.retain(|p| !p.entries.is_empty());
        }
        if resource.is_none() || acl.policies.is_empty() {
            self.acls.remove(subject);
        }
        Ok(Touched {
            users: false,
            acls: true,
        })
    }

    /// Java's `getAcl`: the subject's user must exist; `None` when it has no ACL.
    pub fn get_acl(&self, subject: &str) -> Result<Option<&Acl>, MetadataError> {
        if self.subject_user(subject).is_none() {
            return Err(rejected("The subject is not exist."));
        }
        Ok(self.acls.get(subject))
    }

    fn subject_user(&self, subject: &str) -> Option<&User> {
        subject
            .strip_prefix("User:")
            .and_then(|name| self.users.get(name))
    }

    /// The table requests are checked against: these users and ACLs.
    pub fn table(&self) -> AuthTable {
        AuthTable::new(
            self.users.values().cloned().collect(),
            self.acls.values().cloned().collect(),
        )
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn users_path(&self) -> PathBuf {
        self.dir.join(USERS_FILE)
    }

    pub fn acls_path(&self) -> PathBuf {
        self.dir.join(ACLS_FILE)
    }

    /// `users.json`'s content: a JSON array of `UserInfo`, by name.
    pub fn users_file_bytes(&self) -> Vec<u8> {
        let infos: Vec<UserInfo> = self.users.values().map(UserInfo::from).collect();
        pretty(&infos)
    }

    /// `acls.json`'s content: a JSON array of `AclInfo`, by subject.
    pub fn acls_file_bytes(&self) -> Vec<u8> {
        let infos: Vec<AclInfo> = self.acls.values().map(AclInfo::from).collect();
        pretty(&infos)
    }

    /// The files a change touched, with their new content.
    pub fn files_of(&self, t: Touched) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        if t.users {
            out.push((self.users_path(), self.users_file_bytes()));
        }
        if t.acls {
            out.push((self.acls_path(), self.acls_file_bytes()));
        }
        out
    }
}

/// Writes one of these files as every config file is written (`.bak`, temporary file, fsync,
/// rename), readable by the broker's user only. Blocking.
pub fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::common::config_file::write_private(path, bytes)
}

fn validate_user(c: &UserChange, create: bool) -> Result<(), MetadataError> {
    if c.username.trim().is_empty() {
        return Err(rejected("username can not be blank"));
    }
    if create && c.password.as_deref().is_none_or(|p| p.trim().is_empty()) {
        return Err(rejected("password can not be blank"));
    }
    Ok(())
}

fn pretty<T: serde::Serialize>(v: &T) -> Vec<u8> {
    // Serializing these plain structs cannot fail.
    serde_json::to_vec_pretty(v).unwrap_or_default()
}

fn malformed(path: &Path, reason: impl Into<String>) -> MetadataError {
    MetadataError::Malformed {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// A JSON array file, or `None` when it does not exist.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<Vec<T>>, MetadataError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(MetadataError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| malformed(path, e.to_string()))
}

#[cfg(test)]
#[path = "metadata/tests.rs"]
mod tests;
