//! Access control's state without a shard: which checks the config turns on
//! ([`settings_of`]), and what shard 0 owns ([`AuthOwner`]): the users and ACLs an admin
//! manages and ACL 1.0's `plain_acl.yml` accounts, from which every published `AuthTable` is
//! built (`auth_gate::publish`).

use std::path::{Path, PathBuf};

use crate::auth::metadata::{AuthMetadata, MetadataError};
use crate::auth::plain_acl::{self, PlainAclConfig, PlainAclError};
use crate::auth::table::{AuthSettings, AuthTable};
use crate::config::BrokerConfig;

#[derive(Debug, thiserror::Error)]
pub enum AuthStartError {
    #[error("auth metadata: {0}")]
    Metadata(#[from] MetadataError),
    #[error("cannot read the plain ACL file {path}: {source}")]
    ReadPlainAcl {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    PlainAcl {
        path: PathBuf,
        #[source]
        source: PlainAclError,
    },
}

/// Which checks run, from the config.
pub fn settings_of(cfg: &BrokerConfig) -> AuthSettings {
    AuthSettings {
        authentication: cfg.auth.authentication(),
        authorization: cfg.auth.authorization(),
        v1_rules: cfg.auth.acl_enable && !cfg.auth.authorization_enabled,
        cluster: cfg.broker_cluster_name.clone(),
        authentication_whitelist: cfg.auth.authentication_whitelist.clone(),
        authorization_whitelist: cfg.auth.authorization_whitelist.clone(),
    }
}

/// Shard 0's access-control state: the managed users and ACLs and the ACL 1.0 file's
/// accounts, and the version of the last table published.
pub struct AuthOwner {
    pub meta: AuthMetadata,
    pub plain: Option<PlainAclConfig>,
    /// Where `plain_acl.yml` is read from (when it is read at all), and the modification time
    /// and length it had when last read, so a change can be noticed and the file read again.
    pub plain_path: Option<PathBuf>,
    pub plain_stamp: Option<FileStamp>,
    pub version: u64,
}

/// A file's modification time and length.
pub type FileStamp = (std::time::SystemTime, u64);

/// `path`'s stamp now; `None` when it cannot be read. Blocking.
pub fn file_stamp(path: &Path) -> Option<FileStamp> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Reads `plain_acl.yml` again after a change (a missing file is an error here). Blocking.
pub fn reread_plain_acl(path: &Path) -> Result<PlainAclConfig, AuthStartError> {
    read_plain_acl(path, true).map(|p| p.unwrap_or_default())
}

impl AuthOwner {
    /// Reads what the broker starts with: the managed users and ACLs from the store's config
    /// directory, `initAuthenticationUser` added as a Super user if absent, and the plain ACL
    /// file when `aclEnable` or `migrateAuthFromV1Enabled` asks for it. Blocking; runs before
    /// the shards start.
    pub fn load(cfg: &BrokerConfig) -> Result<AuthOwner, AuthStartError> {
        let dir = cfg.store.store_path_root_dir.join("config");
        let mut meta = AuthMetadata::load(&dir)?;
        // Both are created as Super users when absent, as Java's `initUser` does: the inner
        // credentials are what this broker's slaves sign their sync requests with.
        let initial = [
            ("initAuthenticationUser", &cfg.auth.init_authentication_user),
            (
                "innerClientAuthenticationCredentials",
                &cfg.auth.inner_client_credentials,
            ),
        ];
        for (key, creds) in initial {
            if let Some(c) = creds {
                if meta.ensure_super_user(&c.name, &c.secret) {
                    tracing::info!(user = %c.name, key, "user created as a Super user");
                }
            }
        }
        let home = std::env::var_os("ROCKETMQ_HOME").map(PathBuf::from);
        let (plain, plain_path) = match cfg.auth.plain_acl_path(home.as_deref()) {
            Some((path, explicit)) => (read_plain_acl(&path, explicit)?, Some(path)),
            None => (None, None),
        };
        Ok(AuthOwner {
            meta,
            plain,
            plain_stamp: plain_path.as_deref().and_then(file_stamp),
            plain_path,
            version: 0,
        })
    }

    /// The table of the present users, ACLs and plain ACL accounts.
    pub fn table(&self) -> AuthTable {
        let table = self.meta.table();
        match &self.plain {
            Some(p) => table.with_plain_acl(p),
            None => table,
        }
    }
}

/// Reads and parses `plain_acl.yml`. A file at the default place may be absent; one named in
/// the config must exist.
fn read_plain_acl(path: &Path, explicit: bool) -> Result<Option<PlainAclConfig>, AuthStartError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
            tracing::info!(path = %path.display(), "no plain ACL file");
            return Ok(None);
        }
        Err(source) => {
            return Err(AuthStartError::ReadPlainAcl {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let parsed = plain_acl::parse(&text).map_err(|source| AuthStartError::PlainAcl {
        path: path.to_path_buf(),
        source,
    })?;
    tracing::info!(
        path = %path.display(),
        accounts = parsed.accounts.len(),
        "plain ACL file read"
    );
    Ok(Some(parsed))
}
