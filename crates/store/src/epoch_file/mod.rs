//! The epoch file of RocketMQ 5's AutoSwitch replication (Java's `EpochFileCache` over a
//! `CheckpointFile`): which controller epoch wrote which stretch of the commit log. A new master
//! appends `(its epoch, its commit log's end)`; a slave compares its epochs with its master's to
//! find where their logs agree (`find_consistent_point`) and truncates its own log there.
//!
//! On disk: `<storePathRootDir>/epochFileCheckpoint`, text lines ended by `\n`: the entry count,
//! the CRC32 of the entry lines (UTF-8, each with its `\n`) masked with `0x7FFFFFFF` (0 means
//! "not checked"), then one `epoch-startOffset` line per entry. The previous version stays as
//! `epochFileCheckpoint.bak`; reading falls back to it when the main file is missing, empty or
//! fails its checks (as Java's `CheckpointFile.read` does).
//!
//! Owner: whoever drives replication (shard 0 on a broker in controller mode). Every mutation
//! is persisted (fsync, see `store::text_file`) before it shows in memory, so the cache and the
//! file never disagree; persisting blocks, so it runs at start-up or on a helper thread.
//! Invariant: epochs and start offsets strictly increase; each entry ends where the next one
//! starts, and the last is open (`OPEN_END`, Java's `Long.MAX_VALUE`) until `set_last_end`.

use std::path::{Path, PathBuf};

use crate::protocol::body::EpochEntry;
use crate::text_file;
use crate::StoreError;

/// The file's name under the store root (Java's `MessageStoreConfig.getStorePathEpochFile`).
pub const EPOCH_FILE_NAME: &str = "epochFileCheckpoint";
/// The end of the last epoch while it is open (Java's `Long.MAX_VALUE`).
pub const OPEN_END: u64 = i64::MAX as u64;
/// A larger file is refused unread: one entry per election, 30 bytes each, so a real file is
/// a few KiB.
pub const EPOCH_FILE_BYTES_MAX: u64 = 1 << 20;

/// One epoch: the commit log's bytes `[start_offset, end_offset)` were written under `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epoch {
    pub epoch: u32,
    pub start_offset: u64,
    pub end_offset: u64,
}

impl Epoch {
    /// The wire/JSON form (`protocol::body::EpochEntry`).
    pub fn to_entry(self) -> EpochEntry {
        EpochEntry {
            epoch: self.epoch as i32,
            start_offset: self.start_offset as i64,
            end_offset: self.end_offset.min(OPEN_END) as i64,
        }
    }
}

/// The epochs of a commit log, in memory and (when it has a path) in the epoch file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochFileCache {
    path: Option<PathBuf>,
    epochs: Vec<Epoch>,
}

impl EpochFileCache {
    /// The epoch file of the store at `root`.
    pub fn file_path(root: &Path) -> PathBuf {
        root.join(EPOCH_FILE_NAME)
    }

    /// An empty cache backed by no file (Java's `new EpochFileCache()`), e.g. to hold a
    /// master's epochs during a slave's handshake.
    pub fn in_memory() -> Self {
        EpochFileCache::default()
    }

    /// A cache of `entries` (epoch and start offset taken, ends recomputed) backed by no file.
    /// Refuses negative values and entries whose epoch or start does not increase.
    pub fn from_entries(entries: &[EpochEntry]) -> Result<Self, StoreError> {
        let mut starts = Vec::with_capacity(entries.len());
        for e in entries {
            let (Ok(epoch), Ok(start)) = (u32::try_from(e.epoch), u64::try_from(e.start_offset))
            else {
                return Err(StoreError::Invalid(format!(
                    "epoch entry {}-{} is negative",
                    e.epoch, e.start_offset
                )));
            };
            starts.push((epoch, start));
        }
        let epochs = chain(&starts).map_err(StoreError::Invalid)?;
        Ok(EpochFileCache { path: None, epochs })
    }

    /// Loads the epoch file of the store at `root` (empty when neither it nor its `.bak`
    /// exists). A main file that is bad is replaced by its `.bak`; both bad is an error.
    pub fn load(root: &Path) -> Result<Self, StoreError> {
        let path = Self::file_path(root);
        let bak = text_file::sibling(&path, ".bak");
        let main = read_checkpoint(&path);
        let epochs = match main {
            Ok(Some(s)) if !s.is_empty() => s,
            Ok(_) => match read_checkpoint(&bak) {
                Ok(s) => s.unwrap_or_default(),
                Err(e) => return Err(e),
            },
            Err(main_err) => match read_checkpoint(&bak) {
                Ok(Some(s)) if !s.is_empty() => {
                    tracing::warn!(error = %main_err, "epoch file unreadable, using its .bak");
                    s
                }
                Ok(_) => return Err(main_err),
                Err(bak_err) => {
                    return Err(StoreError::Corrupt {
                        path,
                        offset: 0,
                        reason: format!("{main_err}; and its backup: {bak_err}"),
                    })
                }
            },
        };
        Ok(EpochFileCache {
            path: Some(path),
            epochs,
        })
    }

    pub fn len(&self) -> usize {
        self.epochs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.epochs.is_empty()
    }

    /// Every epoch, oldest first.
    pub fn epochs(&self) -> &[Epoch] {
        &self.epochs
    }

    /// Every epoch as `EpochEntry` (the last one's end is `i64::MAX` while open).
    pub fn entries(&self) -> Vec<EpochEntry> {
        self.epochs.iter().map(|e| e.to_entry()).collect()
    }

    pub fn first_entry(&self) -> Option<Epoch> {
        self.epochs.first().copied()
    }

    pub fn last_entry(&self) -> Option<Epoch> {
        self.epochs.last().copied()
    }

    /// The newest epoch (Java answers -1 for an empty cache).
    pub fn last_epoch(&self) -> Option<u32> {
        self.epochs.last().map(|e| e.epoch)
    }

    pub fn entry(&self, epoch: u32) -> Option<Epoch> {
        self.epochs.iter().find(|e| e.epoch == epoch).copied()
    }

    /// The first epoch after `epoch`.
    pub fn next_entry(&self, epoch: u32) -> Option<Epoch> {
        self.epochs.iter().find(|e| e.epoch > epoch).copied()
    }

    /// The epoch whose `[start, end)` holds `offset`.
    pub fn find_epoch_entry_by_offset(&self, offset: u64) -> Option<Epoch> {
        self.epochs
            .iter()
            .find(|e| e.start_offset <= offset && offset < e.end_offset)
            .copied()
    }

    /// Appends `(epoch, start_offset)`, closing the previous last epoch at `start_offset`.
    /// Refused (nothing changes) unless both are greater than the last entry's.
    pub fn append(&mut self, epoch: u32, start_offset: u64) -> Result<(), StoreError> {
        if let Some(last) = self.epochs.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                return Err(StoreError::Invalid(format!(
                    "epoch {epoch} at {start_offset} does not follow epoch {} at {}",
                    last.epoch, last.start_offset
                )));
            }
        }
        let mut next = self.epochs.clone();
        if let Some(last) = next.last_mut() {
            last.end_offset = start_offset;
        }
        next.push(Epoch {
            epoch,
            start_offset,
            end_offset: OPEN_END,
        });
        self.replace(next)
    }

    /// Closes the last epoch at `end_offset` (the commit log's end; Java's
    /// `setLastEpochEntryEndOffset`), unless that is below its start. Memory only, as in Java:
    /// the file holds no ends.
    pub fn set_last_end(&mut self, end_offset: u64) {
        if let Some(last) = self.epochs.last_mut() {
            if last.start_offset <= end_offset {
                last.end_offset = end_offset;
            }
        }
    }

    /// Where this log and `other` last agree: walking this cache's epochs from the newest, the
    /// first one `other` has with the same start gives the lower of the two ends. `None` (Java's
    /// -1) when no epoch matches. Call `set_last_end` on both with their logs' ends first.
    pub fn find_consistent_point(&self, other: &EpochFileCache) -> Option<u64> {
        self.epochs.iter().rev().find_map(|local| {
            other
                .entry(local.epoch)
                .filter(|o| o.start_offset == local.start_offset)
                .map(|o| local.end_offset.min(o.end_offset))
        })
    }

    /// Removes the epochs that start at or after `offset` (a log truncated to `offset`); the
    /// epoch holding `offset` stays and becomes the open last one.
    pub fn truncate_suffix_by_offset(&mut self, offset: u64) -> Result<(), StoreError> {
        self.truncate_suffix(|e| e.start_offset >= offset)
    }

    /// Removes the epochs numbered `epoch` or later; the one before becomes the open last one.
    pub fn truncate_suffix_by_epoch(&mut self, epoch: u32) -> Result<(), StoreError> {
        self.truncate_suffix(|e| e.epoch >= epoch)
    }

    /// Removes the epochs that end at or before `offset` (the log's start moved to `offset`);
    /// the epoch holding `offset` stays with its start unchanged, as in Java.
    pub fn truncate_prefix_by_offset(&mut self, offset: u64) -> Result<(), StoreError> {
        let next: Vec<Epoch> = self
            .epochs
            .iter()
            .filter(|e| e.end_offset > offset)
            .copied()
            .collect();
        self.replace(next)
    }

    fn truncate_suffix(&mut self, remove: impl Fn(&Epoch) -> bool) -> Result<(), StoreError> {
        let mut next: Vec<Epoch> = self.epochs.iter().filter(|e| !remove(e)).copied().collect();
        // Java means to reopen the new last epoch here, but sets the end on a copy of it; the
        // stale end would hide the offsets past it until the next append or restart.
        if let Some(last) = next.last_mut() {
            last.end_offset = OPEN_END;
        }
        self.replace(next)
    }

    /// Persists `next` (when backed by a file), then takes it.
    fn replace(&mut self, next: Vec<Epoch>) -> Result<(), StoreError> {
        if let Some(path) = &self.path {
            if next.is_empty() {
                // Java's CheckpointFile writes nothing for no entries (the old file would come
                // back at the next start), and reads an empty file as "use the .bak": no file
                // at all is the only way to say "no epochs" that both read alike.
                text_file::remove_with_backup(path)?;
            } else {
                text_file::replace(path, encode(&next).as_bytes())?;
            }
        }
        self.epochs = next;
        Ok(())
    }
}

/// Java's `UtilAll.crc32`: CRC32 masked to a non-negative int.
pub fn java_crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes) & 0x7FFF_FFFF
}

/// The file's text for `epochs`.
pub fn encode(epochs: &[Epoch]) -> String {
    let mut lines = String::new();
    for e in epochs {
        lines.push_str(&format!("{}-{}\n", e.epoch, e.start_offset));
    }
    format!(
        "{}\n{}\n{}",
        epochs.len(),
        java_crc32(lines.as_bytes()),
        lines
    )
}

/// Parses the file's text into `(epoch, start)` pairs; `Err` says why it is not a valid file.
pub fn decode(text: &str) -> Result<Vec<(u32, u64)>, String> {
    let mut lines = text.lines();
    let count: usize = parse_line(lines.next(), "entry count")?;
    let crc: u32 = parse_line(lines.next(), "crc32")?;
    let mut body = String::new();
    let mut starts = Vec::new();
    for line in lines {
        body.push_str(line);
        body.push('\n');
        // Java skips a line that is not two '-'-separated parts (and counts it in the CRC).
        let mut parts = line.split('-');
        let (Some(e), Some(s), None) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let epoch = e
            .parse::<u32>()
            .map_err(|_| format!("bad epoch in line {line:?}"))?;
        let start = s
            .parse::<u64>()
            .map_err(|_| format!("bad start offset in line {line:?}"))?;
        starts.push((epoch, start));
    }
    if starts.len() != count {
        return Err(format!("expected {count} entries, found {}", starts.len()));
    }
    let truth = java_crc32(body.as_bytes());
    if crc != 0 && crc != truth {
        return Err(format!("crc32 {crc} does not match the entries' {truth}"));
    }
    Ok(starts)
}

fn parse_line<T: std::str::FromStr>(line: Option<&str>, what: &str) -> Result<T, String> {
    let line = line.ok_or_else(|| format!("no {what} line"))?;
    line.trim_end()
        .parse()
        .map_err(|_| format!("bad {what} line {line:?}"))
}

/// Reads and checks one checkpoint file: `None` when it does not exist.
fn read_checkpoint(path: &Path) -> Result<Option<Vec<Epoch>>, StoreError> {
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.len() > EPOCH_FILE_BYTES_MAX {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                reason: format!("{} bytes, more than an epoch file holds", meta.len()),
            });
        }
    }
    let Some(text) = text_file::read_if_exists(path)? else {
        return Ok(None);
    };
    let epochs = decode(&text).and_then(|starts| chain(&starts));
    epochs.map(Some).map_err(|reason| StoreError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        reason,
    })
}

/// Epochs from `(epoch, start)` pairs: each ends at the next one's start, the last is open.
/// `Err` when an epoch or start does not increase.
fn chain(starts: &[(u32, u64)]) -> Result<Vec<Epoch>, String> {
    let mut epochs: Vec<Epoch> = Vec::with_capacity(starts.len());
    for &(epoch, start_offset) in starts {
        if let Some(prev) = epochs.last_mut() {
            if prev.epoch >= epoch || prev.start_offset >= start_offset {
                return Err(format!(
                    "epoch {epoch} at {start_offset} does not follow epoch {} at {}",
                    prev.epoch, prev.start_offset
                ));
            }
            prev.end_offset = start_offset;
        }
        epochs.push(Epoch {
            epoch,
            start_offset,
            end_offset: OPEN_END,
        });
    }
    Ok(epochs)
}

#[cfg(test)]
mod tests;
