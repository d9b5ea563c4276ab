//! The name server's KV config: `namespace -> key -> value`, persisted as RocketMQ's
//! `kvConfig.json` (`{"configTable":{"ns":{"k":"v"}}}`, the `KVConfigSerializeWrapper` shape).
//!
//! Owned by `NameServer`; PUT/GET/DELETE_KV_CONFIG and GET_KVLIST_BY_NAMESPACE read and write
//! it. The table itself never does I/O on the request path: a mutation only sets `dirty`, and
//! the caller asks for a snapshot (`take_snapshot`) and writes it with `write_file` off the hot
//! path. Loading happens once at startup. Invariant: `dirty` is true iff the table changed
//! since the last snapshot was taken.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Why a persisted kv config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KvConfigError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not a kv config JSON file: {reason}")]
    BadJson { path: PathBuf, reason: String },
}

/// The persisted shape; field name as Java's `KVConfigSerializeWrapper`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct KvConfigFile {
    #[serde(rename = "configTable", default)]
    config_table: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Debug, Default)]
pub struct KvConfig {
    table: BTreeMap<String, BTreeMap<String, String>>,
    dirty: bool,
}

impl KvConfig {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses the persisted JSON (`configTable` may be absent: an empty table).
    pub fn from_json(bytes: &[u8], path: &Path) -> Result<Self, KvConfigError> {
        let file: KvConfigFile =
            serde_json::from_slice(bytes).map_err(|e| KvConfigError::BadJson {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        Ok(KvConfig {
            table: file.config_table,
            dirty: false,
        })
    }

    /// Loads `path`, falling back to `path.bak` (left by `write_file`) when the main file is
    /// missing or unreadable. Ok(empty) when neither exists: a fresh name server.
    pub fn load(path: &Path) -> Result<Self, KvConfigError> {
        match read_file(path) {
            Ok(Some(bytes)) => match Self::from_json(&bytes, path) {
                Ok(kv) => return Ok(kv),
                Err(e) => {
                    // A torn main file with an intact backup: prefer the backup, say why.
                    tracing::warn!(error = %e, "kv config unreadable, trying the backup");
                    return Self::load_backup(path).and_then(|kv| kv.ok_or(e));
                }
            },
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "kv config unreadable, trying the backup");
                return Self::load_backup(path).and_then(|kv| kv.ok_or(e));
            }
        }
        Ok(Self::load_backup(path)?.unwrap_or_default())
    }

    fn load_backup(path: &Path) -> Result<Option<Self>, KvConfigError> {
        let bak = backup_path(path);
        match read_file(&bak)? {
            Some(bytes) => Self::from_json(&bytes, &bak).map(Some),
            None => Ok(None),
        }
    }

    pub fn put(&mut self, namespace: &str, key: &str, value: &str) {
        let ns = self.table.entry(namespace.to_owned()).or_default();
        let prev = ns.insert(key.to_owned(), value.to_owned());
        if prev.as_deref() != Some(value) {
            self.dirty = true;
        }
    }

    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        self.table.get(namespace)?.get(key).map(String::as_str)
    }

    /// Removes one key; the namespace stays (even empty), as in Java, so GET_KVLIST of it
    /// answers an empty table rather than "not found". Returns whether the key existed.
    pub fn delete(&mut self, namespace: &str, key: &str) -> bool {
        let removed = self
            .table
            .get_mut(namespace)
            .and_then(|ns| ns.remove(key))
            .is_some();
        self.dirty |= removed;
        removed
    }

    pub fn namespace(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.table.get(namespace)
    }

    /// The JSON to persist if the table changed since the last call (pretty, like Java's
    /// `toJson(true)`), else None.
    pub fn take_snapshot(&mut self) -> Option<Vec<u8>> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let file = KvConfigFile {
            config_table: self.table.clone(),
        };
        // Serializing string maps cannot fail.
        Some(serde_json::to_vec_pretty(&file).expect("string maps always serialize"))
    }
}

fn read_file(path: &Path) -> Result<Option<Vec<u8>>, KvConfigError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(KvConfigError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

fn backup_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".bak");
    PathBuf::from(s)
}

/// Persists a snapshot like Java's `MixAll.string2File`: write `path.tmp` and fsync it, keep the
/// previous file as `path.bak`, then rename the tmp file over `path`. A crash at any point
/// leaves either the old or the new content readable through `KvConfig::load`.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), KvConfigError> {
    let io_err = |p: &Path| {
        let p = p.to_owned();
        move |source| KvConfigError::Io { path: p, source }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = fs::File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(bytes).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
    }
    if path.exists() {
        let bak = backup_path(path);
        fs::copy(path, &bak).map_err(io_err(&bak))?;
    }
    fs::rename(&tmp, path).map_err(io_err(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Snapshots appear only after a real change and round-trip through load.
    #[test]
    fn snapshot_only_when_changed_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("namesrv/kvConfig.json");
        let mut kv = KvConfig::load(&path).unwrap();
        assert!(kv.take_snapshot().is_none());
        kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4");
        let snap = kv.take_snapshot().expect("changed");
        assert!(kv.take_snapshot().is_none());
        kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4");
        assert!(kv.take_snapshot().is_none(), "same value is not a change");
        assert!(!kv.delete("ORDER_TOPIC_CONFIG", "missing"));
        assert!(kv.take_snapshot().is_none());

        write_file(&path, &snap).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["configTable"]["ORDER_TOPIC_CONFIG"]["T"], "broker-a:4");
        let back = KvConfig::load(&path).unwrap();
        assert_eq!(back.get("ORDER_TOPIC_CONFIG", "T"), Some("broker-a:4"));
    }

    /// A torn main file falls back to the backup kept by the previous write.
    #[test]
    fn torn_file_falls_back_to_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        write_file(&path, br#"{"configTable":{"ns":{"k":"v1"}}}"#).unwrap();
        write_file(&path, br#"{"configTable":{"ns":{"k":"v2"}}}"#).unwrap();
        fs::write(&path, b"{\"configTab").unwrap();
        let kv = KvConfig::load(&path).unwrap();
        assert_eq!(kv.get("ns", "k"), Some("v1"));
        fs::remove_file(backup_path(&path)).unwrap();
        assert!(matches!(
            KvConfig::load(&path),
            Err(KvConfigError::BadJson { .. })
        ));
    }
}
