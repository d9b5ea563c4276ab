//! The Raft state machine (openraft's `RaftStateMachine`): applies each committed entry's
//! events to `ReplicasInfo`, and snapshots it as JSON to `snapshot.json` under the store path
//! (temporary file, fsync, rename), read back at start-up.
//!
//! The data sits behind `Shared`, a mutex that only the controller's thread takes (openraft's
//! traits need `Send + Sync`): openraft's apply task writes it, the request scheduler reads it
//! to validate requests. Neither holds it across an await.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::RaftStateMachine;
use openraft::{
    Entry, EntryPayload, LogId, RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};

use super::log_store::replace_file;
use super::{Applied, Node, NodeId, TypeConfig};
use crate::replicas::ReplicasInfo;

#[derive(Clone, Default, Serialize, Deserialize)]
pub struct SmData {
    pub last_applied: Option<LogId<NodeId>>,
    pub last_membership: StoredMembership<NodeId, Node>,
    pub replicas: ReplicasInfo,
}

/// The state machine's data, shared on the controller's thread.
#[derive(Clone, Default)]
pub struct Shared(Arc<Mutex<SmData>>);

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, SmData> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<NodeId, Node>,
    data: SmData,
}

/// Snapshots live only in `snapshot.json`: the builder (a copy of this struct) writes it and
/// `get_current_snapshot` reads it, so the two never disagree.
pub struct StateMachine {
    shared: Shared,
    path: PathBuf,
    snapshot_seq: u64,
}

fn sm_err(e: impl std::fmt::Display) -> StorageError<NodeId> {
    let e = std::io::Error::other(e.to_string());
    StorageIOError::write_snapshot(None, openraft::AnyError::new(&e)).into()
}

impl StateMachine {
    /// Opens the state machine at the last snapshot on disk (or empty).
    pub fn open(dir: &Path, shared: Shared) -> std::io::Result<Self> {
        let path = dir.join("snapshot.json");
        if let Some(f) = read_snapshot(&path)? {
            *shared.lock() = f.data;
        }
        Ok(StateMachine {
            shared,
            path,
            snapshot_seq: 0,
        })
    }

    /// Writes the snapshot file; returns the state machine's bytes (what a follower installs).
    fn save(&self, meta: SnapshotMeta<NodeId, Node>, data: SmData) -> std::io::Result<Vec<u8>> {
        let file = SnapshotFile { meta, data };
        let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
        replace_file(&self.path, &bytes)?;
        serde_json::to_vec(&file.data).map_err(std::io::Error::other)
    }
}

/// The snapshot file, if there is one; an unreadable one is an error, not an empty state.
fn read_snapshot(path: &Path) -> std::io::Result<Option<SnapshotFile>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let data = self.shared.lock().clone();
        self.snapshot_seq += 1;
        let snapshot_id = match data.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id, l.index, self.snapshot_seq),
            None => format!("--{}", self.snapshot_seq),
        };
        let meta = SnapshotMeta {
            last_log_id: data.last_applied,
            last_membership: data.last_membership.clone(),
            snapshot_id,
        };
        let bytes = self.save(meta.clone(), data).map_err(sm_err)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, Node>), StorageError<NodeId>> {
        let d = self.shared.lock();
        Ok((d.last_applied, d.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut out = Vec::new();
        let mut d = self.shared.lock();
        for e in entries {
            d.last_applied = Some(e.log_id);
            match e.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(req) => {
                    for ev in &req.events {
                        d.replicas.apply(ev);
                    }
                }
                EntryPayload::Membership(m) => {
                    d.last_membership = StoredMembership::new(Some(e.log_id), m);
                }
            }
            out.push(Applied);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.snapshot_seq += 1;
        StateMachine {
            shared: self.shared.clone(),
            path: self.path.clone(),
            snapshot_seq: self.snapshot_seq,
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, Node>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data: SmData = serde_json::from_slice(snapshot.get_ref()).map_err(sm_err)?;
        self.save(meta.clone(), data.clone()).map_err(sm_err)?;
        *self.shared.lock() = data;
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let Some(f) = read_snapshot(&self.path).map_err(sm_err)? else {
            return Ok(None);
        };
        let data = serde_json::to_vec(&f.data).map_err(sm_err)?;
        Ok(Some(Snapshot {
            meta: f.meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::Request;
    use crate::replicas::Event;
    use openraft::CommittedLeaderId;

    /// Applied events are in the snapshot written to disk, and a reopened state machine starts
    /// from it with the same state and last applied log id.
    #[test]
    fn snapshot_round_trips_through_disk() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut sm = StateMachine::open(dir.path(), Shared::default()).unwrap();
        let event = Event::ApplyBrokerId {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_address: "h:1".into(),
            new_broker_id: 1,
            register_check_code: "h:1;0".into(),
        };
        let e = Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), 1),
            payload: EntryPayload::Normal(Request {
                events: vec![event],
            }),
        };
        rt.block_on(sm.apply(vec![e])).unwrap();
        let mut builder = rt.block_on(sm.get_snapshot_builder());
        let snap = rt.block_on(builder.build_snapshot()).unwrap();
        assert_eq!(snap.meta.last_log_id.map(|l| l.index), Some(1));
        // The state machine serves the snapshot its builder just wrote (to a lagging follower).
        let current = rt.block_on(sm.get_current_snapshot()).unwrap().unwrap();
        assert_eq!(current.meta, snap.meta);
        assert_eq!(current.snapshot.get_ref(), snap.snapshot.get_ref());
        let shared = Shared::default();
        let _sm2 = StateMachine::open(dir.path(), shared.clone()).unwrap();
        let d = shared.lock();
        assert_eq!(d.last_applied.map(|l| l.index), Some(1));
        assert_eq!(d.replicas.next_broker_id("b"), 2);
    }
}
