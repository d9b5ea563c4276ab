//! The broker identity files of RocketMQ 5's controller mode (Java's `BrokerMetadata` and
//! `TempBrokerMetadata`, both `MetadataFile`s written by `ReplicasManager`):
//! `<storePathRootDir>/brokerIdentity` holds `clusterName#brokerName#brokerId` once the
//! controller has confirmed the broker's id; `<storePathRootDir>/brokerIdentity-temp` holds
//! `clusterName#brokerName#brokerId#registerCheckCode` while the broker is applying for an id
//! (the check code is `brokerAddress;currentTimeMillis`, so a retried application is
//! recognised as the same one).
//!
//! Owner: shard 0 (client registration state); reads and writes block (fsync), so they run at
//! start-up or on a helper thread. Java deletes the file and writes the new one in place; ringmq
//! replaces it atomically (`store::text_file::write_atomic`) and, like Java, keeps no backup.
//! A file that is present but not of this form is an error, never a half-read identity.

use std::path::{Path, PathBuf};

use crate::text_file;
use crate::StoreError;

/// The confirmed identity's file name under the store root
/// (Java's `MessageStoreConfig.getStorePathBrokerIdentity`).
pub const BROKER_IDENTITY_FILE_NAME: &str = "brokerIdentity";
/// The applying broker's file name (`ReplicasManager`: the identity file's path + "-temp").
pub const TEMP_BROKER_IDENTITY_FILE_NAME: &str = "brokerIdentity-temp";
/// A larger file is refused unread (the fields are names and a number).
const IDENTITY_FILE_BYTES_MAX: u64 = 64 * 1024;

/// Which broker this store belongs to, as the controller assigned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerIdentity {
    pub cluster_name: String,
    pub broker_name: String,
    pub broker_id: u64,
}

/// A broker's pending application for an id (Java's `TempBrokerMetadata`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TempBrokerIdentity {
    pub identity: BrokerIdentity,
    /// `brokerAddress;currentTimeMillis` when the application was made.
    pub register_check_code: String,
}

impl BrokerIdentity {
    pub fn file_path(root: &Path) -> PathBuf {
        root.join(BROKER_IDENTITY_FILE_NAME)
    }

    /// `cluster#brokerName#brokerId`.
    pub fn encode(&self) -> String {
        format!(
            "{}#{}#{}",
            self.cluster_name, self.broker_name, self.broker_id
        )
    }

    /// Parses `cluster#brokerName#brokerId`; `Err` says what is wrong.
    pub fn decode(text: &str) -> Result<Self, String> {
        match fields(text)?.as_slice() {
            [cluster, broker, id] => identity(cluster, broker, id),
            other => Err(format!("{} '#'-separated fields, expected 3", other.len())),
        }
    }

    /// The identity in the store at `root`; `None` when the file does not exist.
    pub fn read(root: &Path) -> Result<Option<Self>, StoreError> {
        read_decoded(&Self::file_path(root), Self::decode)
    }

    /// Persists the identity (fsynced) in the store at `root`.
    pub fn write(&self, root: &Path) -> Result<(), StoreError> {
        check_fields(&[&self.cluster_name, &self.broker_name])?;
        text_file::write_atomic(&Self::file_path(root), self.encode().as_bytes())
    }

    /// Removes the file (Java's `MetadataFile.clear`).
    pub fn remove(root: &Path) -> Result<(), StoreError> {
        text_file::remove(&Self::file_path(root))
    }
}

impl TempBrokerIdentity {
    pub fn file_path(root: &Path) -> PathBuf {
        root.join(TEMP_BROKER_IDENTITY_FILE_NAME)
    }

    /// `cluster#brokerName#brokerId#registerCheckCode`.
    pub fn encode(&self) -> String {
        format!("{}#{}", self.identity.encode(), self.register_check_code)
    }

    /// Parses `cluster#brokerName#brokerId#registerCheckCode`; `Err` says what is wrong.
    pub fn decode(text: &str) -> Result<Self, String> {
        match fields(text)?.as_slice() {
            [cluster, broker, id, code] => Ok(TempBrokerIdentity {
                identity: identity(cluster, broker, id)?,
                register_check_code: code.to_string(),
            }),
            other => Err(format!("{} '#'-separated fields, expected 4", other.len())),
        }
    }

    /// The pending application in the store at `root`; `None` when there is none.
    pub fn read(root: &Path) -> Result<Option<Self>, StoreError> {
        read_decoded(&Self::file_path(root), Self::decode)
    }

    /// Persists the application (fsynced) in the store at `root`.
    pub fn write(&self, root: &Path) -> Result<(), StoreError> {
        check_fields(&[
            &self.identity.cluster_name,
            &self.identity.broker_name,
            &self.register_check_code,
        ])?;
        text_file::write_atomic(&Self::file_path(root), self.encode().as_bytes())
    }

    /// Removes the file (the application was confirmed or abandoned).
    pub fn remove(root: &Path) -> Result<(), StoreError> {
        text_file::remove(&Self::file_path(root))
    }
}

/// The non-empty `#`-separated fields of `text` (trailing whitespace ignored).
fn fields(text: &str) -> Result<Vec<&str>, String> {
    let parts: Vec<&str> = text.trim_end().split('#').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err("an empty field".into());
    }
    Ok(parts)
}

fn identity(cluster: &str, broker: &str, id: &str) -> Result<BrokerIdentity, String> {
    let broker_id = id
        .parse::<u64>()
        .map_err(|_| format!("broker id {id:?} is not a non-negative number"))?;
    Ok(BrokerIdentity {
        cluster_name: cluster.to_string(),
        broker_name: broker.to_string(),
        broker_id,
    })
}

/// A field that is empty or holds `#` would not read back as written.
fn check_fields(values: &[&str]) -> Result<(), StoreError> {
    for v in values {
        if v.is_empty() || v.contains('#') {
            return Err(StoreError::Invalid(format!(
                "identity field {v:?} is empty or contains '#'"
            )));
        }
    }
    Ok(())
}

fn read_decoded<T>(
    path: &Path,
    decode: fn(&str) -> Result<T, String>,
) -> Result<Option<T>, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        reason,
    };
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.len() > IDENTITY_FILE_BYTES_MAX {
            return Err(corrupt(format!("{} bytes, too large", meta.len())));
        }
    }
    match text_file::read_if_exists(path)? {
        None => Ok(None),
        Some(text) => decode(&text).map(Some).map_err(corrupt),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> BrokerIdentity {
        BrokerIdentity {
            cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 2,
        }
    }

    /// The identity file holds exactly Java's `cluster#brokerName#brokerId` and reads back.
    #[test]
    fn identity_round_trips_in_javas_format() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(BrokerIdentity::read(dir.path()).unwrap(), None);
        id().write(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("brokerIdentity")).unwrap();
        assert_eq!(text, "DefaultCluster#broker-a#2");
        assert_eq!(BrokerIdentity::read(dir.path()).unwrap(), Some(id()));
        BrokerIdentity::remove(dir.path()).unwrap();
        assert_eq!(BrokerIdentity::read(dir.path()).unwrap(), None);
    }

    /// The temporary file is `brokerIdentity-temp` with the check code as a fourth field.
    #[test]
    fn temp_identity_round_trips_in_javas_format() {
        let dir = tempfile::tempdir().unwrap();
        let temp = TempBrokerIdentity {
            identity: id(),
            register_check_code: "10.0.0.1:10911;1733389200000".into(),
        };
        temp.write(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("brokerIdentity-temp")).unwrap();
        assert_eq!(
            text,
            "DefaultCluster#broker-a#2#10.0.0.1:10911;1733389200000"
        );
        assert_eq!(TempBrokerIdentity::read(dir.path()).unwrap(), Some(temp));
        assert_eq!(
            BrokerIdentity::read(dir.path()).unwrap(),
            None,
            "separate files"
        );
        TempBrokerIdentity::remove(dir.path()).unwrap();
        assert_eq!(TempBrokerIdentity::read(dir.path()).unwrap(), None);
    }

    /// A malformed file is a Corrupt error naming the file, not a partial identity.
    #[test]
    fn malformed_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brokerIdentity");
        for bad in ["", "c#b", "c#b#x", "c#b#-1", "c##1", "c#b#1#extra", "\u{0}"] {
            std::fs::write(&path, bad).unwrap();
            match BrokerIdentity::read(dir.path()) {
                Err(StoreError::Corrupt { path: p, .. }) => assert_eq!(p, path),
                other => panic!("{bad:?} read as {other:?}"),
            }
        }
        std::fs::write(dir.path().join("brokerIdentity-temp"), "c#b#1").unwrap();
        assert!(TempBrokerIdentity::read(dir.path()).is_err());
    }

    /// Fields that could not be read back (empty, or holding the separator) are not written.
    #[test]
    fn unwritable_fields_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut bad = id();
        bad.broker_name = "a#b".into();
        assert!(bad.write(dir.path()).is_err());
        assert!(!BrokerIdentity::file_path(dir.path()).exists());
    }
}
