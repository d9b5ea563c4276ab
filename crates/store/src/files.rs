//! The small control files of a store root (as Java's `DefaultMessageStore` and
//! `StoreCheckpoint` keep them): `lock` (exclusive flock held while
//! the store is open), `abort` (exists while running; present at open = crash) and `checkpoint`
//! (4 KiB, big-endian longs at 0/8/16/24/32).
//!
//! Used by `store::open` and the writer (checkpoint writes, abort removal at clean shutdown).
//! Invariant: every write of these files is followed by a checked fsync.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::constants::{CHECKPOINT_FILE_SIZE, CHECKPOINT_USED_LEN};
use crate::mapped_file::sync_dir;
use crate::StoreError;

const LOCK_RETRIES: u32 = 20;
const LOCK_RETRY_SLEEP_MS: u64 = 50;

/// Holds `flock(LOCK_EX)` on `<root>/lock` until dropped.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

impl StoreLock {
    pub fn acquire(root: &Path) -> Result<Self, StoreError> {
        let path = root.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        // A just-exited holder (or a forked child before its exec closes the inherited fd)
        // can hold the lock for a moment: retry briefly before reporting another broker.
        for attempt in 0..=LOCK_RETRIES {
            // SAFETY: plain syscall on a valid, owned fd.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(StoreError::io(&path, e));
            }
            if attempt == LOCK_RETRIES {
                return Err(StoreError::NotWritable(format!(
                    "{} is locked by another running broker",
                    root.display()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(LOCK_RETRY_SLEEP_MS));
        }
        Ok(StoreLock { _file: file })
    }
}

pub fn abort_path(root: &Path) -> PathBuf {
    root.join("abort")
}

/// Creates the abort file (durably): from now on an exit without `remove_abort` is a crash.
pub fn create_abort(root: &Path) -> Result<(), StoreError> {
    let path = abort_path(root);
    let f = File::create(&path).map_err(|e| StoreError::io(&path, e))?;
    f.sync_all().map_err(|e| StoreError::io(&path, e))?;
    sync_dir(root)
}

pub fn remove_abort(root: &Path) -> Result<(), StoreError> {
    let path = abort_path(root);
    match std::fs::remove_file(&path) {
        Ok(()) => sync_dir(root),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(&path, e)),
    }
}

/// The checkpoint values; `logics_msg_timestamp` is shared so the shards that flush consume
/// queues can publish it and the writer persists it with the rest.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    file: File,
    pub physic_msg_timestamp: i64,
    pub logics_msg_timestamp: Arc<AtomicI64>,
    pub index_msg_timestamp: i64,
    pub master_flushed_offset: i64,
    pub confirm_phy_offset: i64,
}

impl Checkpoint {
    /// Opens `<root>/checkpoint`, creating a zeroed 4 KiB file if missing.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        let path = root.join("checkpoint");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        let len = file.metadata().map_err(|e| StoreError::io(&path, e))?.len();
        if len < CHECKPOINT_FILE_SIZE as u64 {
            file.set_len(CHECKPOINT_FILE_SIZE as u64)
                .map_err(|e| StoreError::io(&path, e))?;
        }
        let mut buf = [0u8; CHECKPOINT_USED_LEN];
        file.read_exact_at(&mut buf, 0)
            .map_err(|e| StoreError::io(&path, e))?;
        let long = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[i * 8..i * 8 + 8]);
            i64::from_be_bytes(b)
        };
        Ok(Checkpoint {
            physic_msg_timestamp: long(0),
            logics_msg_timestamp: Arc::new(AtomicI64::new(long(1))),
            index_msg_timestamp: long(2),
            master_flushed_offset: long(3),
            confirm_phy_offset: long(4),
            path,
            file,
        })
    }

    /// `min(physic, logics) - 3000 ms`, floored at 0 (Java's `StoreCheckpoint.getMinTimestamp`).
    pub fn min_timestamp(&self) -> i64 {
        let logics = self.logics_msg_timestamp.load(Ordering::Acquire);
        (self.physic_msg_timestamp.min(logics) - 3000).max(0)
    }

    /// Writes all five longs and fdatasyncs.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        let mut buf = [0u8; CHECKPOINT_USED_LEN];
        let vals = [
            self.physic_msg_timestamp,
            self.logics_msg_timestamp.load(Ordering::Acquire),
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ];
        for (i, v) in vals.iter().enumerate() {
            buf[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
        }
        self.file
            .write_all_at(&buf, 0)
            .map_err(|e| StoreError::io(&self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| StoreError::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves the checkpoint layout: big-endian longs at 0/8/16/24/32 of a 4 KiB file.
    #[test]
    fn checkpoint_layout_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut cp = Checkpoint::open(dir.path()).unwrap();
        cp.physic_msg_timestamp = 0x0102;
        cp.logics_msg_timestamp.store(5000, Ordering::Release);
        cp.index_msg_timestamp = 3;
        cp.confirm_phy_offset = -1;
        cp.flush().unwrap();
        let raw = std::fs::read(dir.path().join("checkpoint")).unwrap();
        assert_eq!(raw.len(), 4096);
        assert_eq!(&raw[0..8], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&raw[8..16], &5000i64.to_be_bytes());
        assert_eq!(&raw[16..24], &3i64.to_be_bytes());
        assert_eq!(&raw[32..40], &[0xFF; 8]);
        let cp2 = Checkpoint::open(dir.path()).unwrap();
        assert_eq!(cp2.physic_msg_timestamp, 0x0102);
        assert_eq!(cp2.min_timestamp(), 0); // min(258, 5000) - 3000 floored at 0
    }

    /// Proves a second open of a locked store root is refused.
    #[test]
    fn lock_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let l = StoreLock::acquire(dir.path()).unwrap();
        assert!(matches!(
            StoreLock::acquire(dir.path()),
            Err(StoreError::NotWritable(_))
        ));
        drop(l);
        StoreLock::acquire(dir.path()).unwrap();
    }
}
