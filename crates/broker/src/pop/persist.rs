//! POP's durability: `config/popState.json` (every shard's tables and the state queue's offset
//! they cover, written by shard 0 with the other progress files) and the replay of the state
//! records after that offset into the tables of the shards owning their queues. The replay runs
//! at start-up on the state queue's owner and again whenever the broker becomes a master
//! (controller mode); while it runs, and on a slave, POP requests reaching an owner wait for it.
//!
//! Why a snapshot with offset X is enough: X is read before any shard's tables are gathered, and
//! the tables hold the effect of every record below X. Changes that add (pops, changes of
//! invisible time, orderly blocks) are made in the tables before their record is written;
//! changes that remove (acks, redeliveries) after it, so a snapshot never lacks a message whose
//! removal the log may not hold; and a shard's tables are taken only when none of its removals
//! is between its write and its application (`Shard::pop_quiesced`). The records from X on are
//! replayed, and replaying a record whose effect the tables already hold changes nothing
//! (`state::PopTables::apply`).

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::BrokerError;
use crate::protocol::message;
use crate::runtime;
use crate::shard::{owner_of, Shard};

use super::state::{PopTables, QueueSnapshot, StateRecord};
use super::{POP_STATE_QUEUE, POP_STATE_TOPIC};

/// How long a snapshot waits for a shard's written, unapplied changes to be applied.
const QUIESCE_WAIT: Duration = Duration::from_millis(200);

/// How often the owner of the state queue looks at the broker's role.
const ROLE_CHECK: Duration = Duration::from_millis(200);

/// `popState.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PopStateFile {
    /// The state queue's offset from which records are to be replayed over `queues`.
    pub state_offset: u64,
    pub queues: Vec<QueueSnapshot>,
}

pub fn path(root: &Path) -> PathBuf {
    root.join("config").join("popState.json")
}

/// The shard owning the state queue (it runs the replay).
pub fn state_owner(shard: &Shard) -> usize {
    owner_of(POP_STATE_TOPIC, POP_STATE_QUEUE, shard.ctx.shard_count)
}

/// Starts POP on this shard: the redelivery loop, and on the state queue's owner the replay.
pub fn start(shard: &Rc<Shard>) {
    super::revive::start(shard);
    if state_owner(shard) == shard.id {
        runtime::spawn(follow_role(shard.clone()));
    }
}

/// Loads the state whenever the broker becomes a master, and drops it when it becomes a slave.
async fn follow_role(s: Rc<Shard>) {
    let mut loaded = false;
    while !s.is_stopping() {
        let master = !s.ctx.role.is_slave();
        if master && !loaded {
            match recover(&s).await {
                Ok(n) => {
                    tracing::info!(records = n, "POP state loaded");
                    loaded = true;
                }
                Err(e) => tracing::error!(error = %e, "cannot load POP state; will retry"),
            }
        } else if !master && loaded {
            for i in 0..s.mesh.len() {
                let _ = s
                    .mesh
                    .call(i, |t| async move { t.set_pop_state(None) })
                    .await;
            }
            loaded = false;
        }
        runtime::sleep(ROLE_CHECK).await;
    }
}

/// Reads the snapshot, replays the records after it, and hands each shard its tables.
async fn recover(s: &Rc<Shard>) -> Result<usize, BrokerError> {
    let file = path(&s.ctx.cfg.store.store_path_root_dir);
    let snapshot = runtime::spawn_blocking(move || read(&file)).await?;
    let n = s.mesh.len();
    let mut queues: Vec<Vec<QueueSnapshot>> = vec![Vec::new(); n];
    for q in snapshot.queues {
        queues[owner_of(&q.key.topic, q.key.queue_id, n)].push(q);
    }
    let mut records: Vec<Vec<StateRecord>> = vec![Vec::new(); n];
    let (min, max) = s.queue_bounds(POP_STATE_TOPIC, POP_STATE_QUEUE);
    let mut count = 0;
    for offset in snapshot.state_offset.max(min)..max {
        if let Some(r) = read_record(s, offset) {
            records[owner_of(&r.key().topic, r.key().queue_id, n)].push(r);
            count += 1;
        }
        if offset % 4096 == 0 {
            runtime::yield_now().await;
        }
    }
    for (i, (qs, rs)) in queues.into_iter().zip(records).enumerate() {
        let install = move |t: Rc<Shard>| async move {
            let mut tables = PopTables::default();
            qs.iter().for_each(|q| tables.restore(q));
            rs.iter().for_each(|r| tables.apply(r));
            t.set_pop_state(Some(tables));
        };
        if i == s.id {
            install(s.clone()).await;
        } else {
            s.mesh.call(i, install).await?;
        }
    }
    Ok(count)
}

fn read(file: &Path) -> Result<PopStateFile, BrokerError> {
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| BrokerError::System(format!("{} is not POP state: {e}", file.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PopStateFile::default()),
        Err(e) => Err(BrokerError::System(format!("{}: {e}", file.display()))),
    }
}

/// One state record; an unreadable one is logged and skipped (its change is lost, at worst a
/// message is redelivered or stays acked).
fn read_record(s: &Shard, offset: u64) -> Option<StateRecord> {
    let unit = s.unit_at(POP_STATE_TOPIC, POP_STATE_QUEUE, offset)?;
    let mut reader = s.reader();
    let bytes = reader.read(unit.phy_offset, unit.size).ok()?;
    let parsed = message::decode(bytes, true)
        .map_err(|e| e.to_string())
        .and_then(|m| serde_json::from_slice::<StateRecord>(m.body).map_err(|e| e.to_string()));
    match parsed {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(offset, error = %e, "unreadable POP state record skipped");
            None
        }
    }
}

/// The snapshot's bytes, gathered by shard 0 from every shard; `None` on a slave or while the
/// state is not loaded (the file on disk stays as it is).
pub async fn gather(s0: &Rc<Shard>) -> Option<Vec<u8>> {
    if s0.ctx.role.is_slave() {
        return None;
    }
    let owner = state_owner(s0);
    let (ready, state_offset) = s0
        .mesh
        .call(owner, |s| async move {
            (
                s.pop_ready(),
                s.queue_bounds(POP_STATE_TOPIC, POP_STATE_QUEUE).1,
            )
        })
        .await
        .ok()?;
    if !ready {
        return None;
    }
    let mut queues = Vec::new();
    for i in 0..s0.mesh.len() {
        let part = s0
            .mesh
            .call(i, |s| async move {
                if !s.pop_ready() {
                    return None;
                }
                s.pop_quiesced(QUIESCE_WAIT, |t| t.snapshot()).await
            })
            .await
            .ok()??;
        queues.extend(part);
    }
    let file = PopStateFile {
        state_offset,
        queues,
    };
    serde_json::to_vec(&file).ok()
}
