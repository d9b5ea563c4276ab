//! The replacement of the store root's small text files (the epoch file, the broker identity
//! files): RocketMQ keeps the previous version of the epoch file as `<name>.bak`
//! (`MixAll.string2File`), but writes the new one in place; ringmq writes it to `<name>.tmp`,
//! fsyncs it and renames it over the old one, so a crash leaves either the old file or the new
//! one, never half of one.
//!
//! Blocking (fsync): callers run it on the main thread at start-up or on a helper thread, never
//! on a shard core.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::mapped_file::sync_dir;
use crate::StoreError;

/// `path` with `suffix` appended to its file name (`epochFileCheckpoint` -> `epochFileCheckpoint.bak`).
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Replaces `path` with `bytes`: the current file (if any) is copied to `.bak` first, the new
/// content goes through a fsynced `.tmp` renamed into place, and the directory is fsynced.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = parent(path);
    std::fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
    if path.exists() {
        let bak = sibling(path, ".bak");
        let previous = std::fs::read(path).map_err(|e| StoreError::io(path, e))?;
        write_synced(&sibling(&bak, ".tmp"), &previous)?;
        rename(&sibling(&bak, ".tmp"), &bak)?;
    }
    write_atomic(path, bytes)
}

/// Replaces `path` with `bytes` keeping no backup: a fsynced `.tmp` renamed into place, then
/// the directory fsynced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = parent(path);
    std::fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
    let tmp = sibling(path, ".tmp");
    write_synced(&tmp, bytes)?;
    rename(&tmp, path)?;
    sync_dir(&dir)
}

/// Removes `path` (a missing file is fine), then fsyncs the directory.
pub fn remove(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_file(path) {
        Ok(()) => sync_dir(&parent(path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

/// Removes `path` and its `.bak` (missing files are fine), then fsyncs the directory.
pub fn remove_with_backup(path: &Path) -> Result<(), StoreError> {
    remove(path)?;
    remove(&sibling(path, ".bak"))
}

/// The file's text, `None` when it does not exist.
pub fn read_if_exists(path: &Path) -> Result<Option<String>, StoreError> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path: path.to_path_buf(),
                offset: e.utf8_error().valid_up_to() as u64,
                reason: "not UTF-8".into(),
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut f = std::fs::File::create(path).map_err(|e| StoreError::io(path, e))?;
    f.write_all(bytes).map_err(|e| StoreError::io(path, e))?;
    f.sync_all().map_err(|e| StoreError::io(path, e))
}

fn rename(from: &Path, to: &Path) -> Result<(), StoreError> {
    std::fs::rename(from, to).map_err(|e| StoreError::io(to, e))
}
