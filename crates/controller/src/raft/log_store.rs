//! The Raft log and hard state on disk under `controllerStorePath` (openraft's
//! `RaftLogStorage`).
//!
//! `raft-log`: an append-only file of records `[len u32 BE][crc32 u32 BE][JSON]`, each an entry,
//! a truncation (drop entries from an index on) or a purge (drop entries up to a log id). Every
//! append is fdatasynced before openraft is told it is flushed. On open the file is replayed; a
//! torn or corrupt tail (short record, bad CRC, unreadable JSON) is cut off with a log line,
//! never a panic. When purged entries make up most of the file it is rewritten (temporary file,
//! fsync, rename), so the file stays bounded by the entries openraft keeps.
//!
//! `raft-state.json`: the vote and the committed log id, replaced (temporary file, fsync, rename,
//! directory fsync) on every change.
//!
//! Owned by the controller's thread; the in-memory copy of the log serves reads.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{Entry, LogId, LogState, RaftLogReader, StorageError, StorageIOError, Vote};
use serde::{Deserialize, Serialize};

use super::{NodeId, TypeConfig};

/// A record larger than this is corrupt (the controller's entries are a few hundred bytes).
const MAX_RECORD_LEN: usize = 16 * 1024 * 1024;
/// Rewrite the file when it holds this many records more than the live entries.
const COMPACT_SLACK_RECORDS: usize = 4096;

#[derive(Serialize, Deserialize)]
enum Record {
    Entry(Entry<TypeConfig>),
    /// Drop every entry with index >= this.
    Truncate(u64),
    Purge(LogId<NodeId>),
}

#[derive(Default, Serialize, Deserialize)]
struct HardState {
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
}

/// Shared read side: openraft asks for a reader besides the store itself.
#[derive(Clone, Default)]
pub struct LogReader {
    entries: std::sync::Arc<std::sync::Mutex<BTreeMap<u64, Entry<TypeConfig>>>>,
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        Ok(entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

pub struct LogStore {
    dir: PathBuf,
    file: File,
    records: usize,
    reader: LogReader,
    last_purged: Option<LogId<NodeId>>,
    state: HardState,
}

fn io_err(e: impl std::error::Error + Send + Sync + 'static) -> StorageError<NodeId> {
    StorageIOError::write_logs(openraft::AnyError::new(&e)).into()
}

fn encode(r: &Record, out: &mut Vec<u8>) -> io::Result<()> {
    let json = serde_json::to_vec(r).map_err(io::Error::other)?;
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&json).to_be_bytes());
    out.extend_from_slice(&json);
    Ok(())
}

/// Replaces `path` with `bytes` durably: temporary file, fsync, rename, directory fsync.
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

impl LogStore {
    pub fn open(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let state = match std::fs::read(dir.join("raft-state.json")) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("raft-state.json: {e}"))
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => HardState::default(),
            Err(e) => return Err(e),
        };
        let path = dir.join("raft-log");
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .append(true)
            .open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut entries = BTreeMap::new();
        let mut last_purged = None;
        let (good_len, records) = replay(&bytes, &mut entries, &mut last_purged);
        if good_len < bytes.len() {
            tracing::warn!(
                path = %path.display(),
                kept = good_len,
                cut = bytes.len() - good_len,
                "raft log has a torn or corrupt tail; truncated"
            );
            file.set_len(good_len as u64)?;
            file.sync_all()?;
        }
        Ok(LogStore {
            dir: dir.to_owned(),
            file,
            records,
            reader: LogReader {
                entries: std::sync::Arc::new(std::sync::Mutex::new(entries)),
            },
            last_purged,
            state,
        })
    }

    fn write_records(&mut self, records: &[Record]) -> io::Result<()> {
        let mut buf = Vec::new();
        for r in records {
            encode(r, &mut buf)?;
        }
        self.file.write_all(&buf)?;
        self.file.sync_data()?;
        self.records += records.len();
        Ok(())
    }

    fn save_state(&self) -> io::Result<()> {
        let bytes = serde_json::to_vec(&self.state).map_err(io::Error::other)?;
        replace_file(&self.dir.join("raft-state.json"), &bytes)
    }

    /// Rewrites the log with only the live entries once purges left it mostly dead.
    fn maybe_compact(&mut self) -> io::Result<()> {
        let live = self.entries().len();
        if self.records < live + COMPACT_SLACK_RECORDS {
            return Ok(());
        }
        let mut buf = Vec::new();
        if let Some(p) = self.last_purged {
            encode(&Record::Purge(p), &mut buf)?;
        }
        for e in self.entries().values() {
            encode(&Record::Entry(e.clone()), &mut buf)?;
        }
        let path = self.dir.join("raft-log");
        replace_file(&path, &buf)?;
        self.file = OpenOptions::new().append(true).read(true).open(&path)?;
        self.records = live + 1;
        Ok(())
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry<TypeConfig>>> {
        self.reader
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

/// Replays records into `entries`; returns the length of the good prefix and its record count.
fn replay(
    bytes: &[u8],
    entries: &mut BTreeMap<u64, Entry<TypeConfig>>,
    last_purged: &mut Option<LogId<NodeId>>,
) -> (usize, usize) {
    let mut pos = 0;
    let mut records = 0;
    while let Some(head) = bytes.get(pos..pos + 8) {
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if len > MAX_RECORD_LEN {
            break;
        }
        let Some(json) = bytes.get(pos + 8..pos + 8 + len) else {
            break;
        };
        if crc32fast::hash(json) != crc {
            break;
        }
        let Ok(record) = serde_json::from_slice::<Record>(json) else {
            break;
        };
        match record {
            Record::Entry(e) => {
                entries.insert(e.log_id.index, e);
            }
            Record::Truncate(from) => {
                entries.split_off(&from);
            }
            Record::Purge(id) => {
                *entries = entries.split_off(&(id.index + 1));
                *last_purged = Some(id);
            }
        }
        pos += 8 + len;
        records += 1;
    }
    (pos, records)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        self.reader.try_get_log_entries(range).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let last = self
            .entries()
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(self.last_purged);
        Ok(LogState {
            last_purged_log_id: self.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.reader.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.state.vote = Some(*vote);
        self.save_state()
            .map_err(|e| StorageIOError::write_vote(openraft::AnyError::new(&e)).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.state.vote)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        self.state.committed = committed;
        self.save_state().map_err(io_err)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.state.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        let records: Vec<Record> = entries.iter().cloned().map(Record::Entry).collect();
        let written = self.write_records(&records);
        if written.is_ok() {
            let mut map = self.entries();
            for e in entries {
                map.insert(e.log_id.index, e);
            }
        }
        let err = written
            .as_ref()
            .err()
            .map(|e| io::Error::new(e.kind(), e.to_string()));
        callback.log_io_completed(err.map_or(Ok(()), Err));
        written.map_err(io_err)
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.write_records(&[Record::Truncate(log_id.index)])
            .map_err(io_err)?;
        self.entries().split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.write_records(&[Record::Purge(log_id)])
            .map_err(io_err)?;
        {
            let mut map = self.entries();
            let kept = map.split_off(&(log_id.index + 1));
            *map = kept;
        }
        self.last_purged = Some(log_id);
        self.maybe_compact().map_err(io_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::Request;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(term: u64, index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 0), index),
            payload: EntryPayload::Normal(Request { events: Vec::new() }),
        }
    }

    fn indexes(s: &LogStore) -> Vec<u64> {
        s.entries().keys().copied().collect()
    }

    fn append(s: &mut LogStore, range: std::ops::RangeInclusive<u64>) {
        let records: Vec<Record> = range.clone().map(|i| Record::Entry(entry(1, i))).collect();
        s.write_records(&records).unwrap();
        for i in range {
            s.entries().insert(i, entry(1, i));
        }
    }

    /// Entries, truncations, purges and the vote survive a reopen.
    #[test]
    fn reopen_replays_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogStore::open(dir.path()).unwrap();
        append(&mut s, 1..=6);
        s.write_records(&[Record::Truncate(5)]).unwrap();
        s.write_records(&[Record::Purge(entry(1, 2).log_id)])
            .unwrap();
        s.state.vote = Some(Vote::new(3, 1));
        s.save_state().unwrap();
        drop(s);
        let s = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&s), vec![3, 4]);
        assert_eq!(s.last_purged.map(|l| l.index), Some(2));
        assert_eq!(s.state.vote, Some(Vote::new(3, 1)));
    }

    /// A torn record at the end (a crash mid-append) or a record with a bad CRC is cut off
    /// on open; the records before it are kept and later appends follow them.
    #[test]
    fn torn_or_corrupt_tail_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("raft-log");
        let mut s = LogStore::open(dir.path()).unwrap();
        append(&mut s, 1..=3);
        drop(s);
        let good = std::fs::metadata(&path).unwrap().len();
        let mut whole = Vec::new();
        encode(&Record::Entry(entry(1, 4)), &mut whole).unwrap();
        for cut in [3, 9, whole.len() - 1] {
            let mut f = OpenOptions::new().append(true).open(&path).unwrap();
            f.write_all(&whole[..cut]).unwrap();
            drop(f);
            let s = LogStore::open(dir.path()).unwrap();
            assert_eq!(indexes(&s), vec![1, 2, 3], "cut at {cut}");
            assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
        }
        let mut bad = whole.clone();
        let last = bad.len() - 2;
        bad[last] ^= 0x55;
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&bad)
            .unwrap();
        let mut s = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&s), vec![1, 2, 3]);
        append(&mut s, 4..=4);
        drop(s);
        assert_eq!(
            indexes(&LogStore::open(dir.path()).unwrap()),
            vec![1, 2, 3, 4]
        );
    }

    /// Purging most of a long log rewrites the file down to the live entries.
    #[test]
    fn purge_compacts_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogStore::open(dir.path()).unwrap();
        let n = COMPACT_SLACK_RECORDS as u64 + 10;
        append(&mut s, 1..=n);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(s.purge(entry(1, n - 5).log_id)).unwrap();
        assert_eq!(s.records, 6, "one purge record and five entries");
        drop(s);
        let s = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&s), ((n - 4)..=n).collect::<Vec<_>>());
        assert_eq!(s.last_purged.map(|l| l.index), Some(n - 5));
    }
}
