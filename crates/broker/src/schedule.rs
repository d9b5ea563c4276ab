//! Delay levels (RocketMQ's schedule topic). A message with `DELAY` = L > 0 is stored in
//! `SCHEDULE_TOPIC_XXXX` queue L - 1 with its real topic and queue in `REAL_TOPIC`/`REAL_QID` and
//! its delivery time in the ConsumeQueue tag slot. For each level, the shard owning that schedule
//! queue runs a task that re-appends due messages to their real topic through the same writer
//! path as client sends, then advances the level's progress offset. Progress persists in
//! `config/delayOffset.json` (`{"offsetTable":{1:0,2:35}}`), gathered by shard 0, so a restart
//! neither loses nor repeats a delivery that was already recorded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use crate::append;
use crate::common::now_ms;
use crate::error::BrokerError;
use crate::metadata::topic_validator::SCHEDULE_TOPIC;
use crate::protocol::body;
use crate::protocol::properties::keys;
use crate::runtime;
use crate::shard::Shard;

/// How often a level looks for due messages (RocketMQ polls every 100 ms).
const POLL: Duration = Duration::from_millis(100);
/// Messages moved per level per wake-up, so one level cannot monopolise its shard.
const MAX_MOVES_PER_TICK: usize = 256;

#[derive(serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct DelayOffsetFile {
    #[serde(default)]
    offset_table: BTreeMap<i32, i64>,
}

pub fn delay_offsets_path(root: &Path) -> PathBuf {
    root.join("config").join("delayOffset.json")
}

/// Loads delayOffset.json: level -> next ConsumeQueue offset to deliver.
pub fn load_progress(root: &Path) -> BTreeMap<i32, i64> {
    let p = delay_offsets_path(root);
    for path in [p.clone(), p.with_extension("json.bak")] {
        if let Ok(b) = std::fs::read(&path) {
            match body::from_json::<DelayOffsetFile>(&b) {
                Ok(f) => return f.offset_table,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "unparsable delayOffset.json")
                }
            }
        }
    }
    BTreeMap::new()
}

pub fn progress_file_bytes(table: BTreeMap<i32, i64>) -> Vec<u8> {
    body::to_fastjson_legacy(&DelayOffsetFile {
        offset_table: table,
    })
}

/// Shard 0: every shard's level progress merged into the file bytes.
pub async fn gather(s0: &Rc<Shard>) -> Vec<u8> {
    progress_file_bytes(gather_table(s0).await)
}

/// Every shard's level progress merged, asked from any shard (GET_ALL_DELAY_OFFSET too).
pub async fn gather_table(shard: &Rc<Shard>) -> BTreeMap<i32, i64> {
    let mut all = shard.delay_progress().clone();
    for i in 0..shard.mesh.len() {
        if i == shard.id {
            continue;
        }
        match shard
            .mesh
            .call(i, |s| async move { s.delay_progress().clone() })
            .await
        {
            Ok(t) => all.extend(t),
            Err(e) => tracing::warn!(error = %e, "cannot gather delay progress"),
        }
    }
    all
}

/// A slave takes its master's level progress as Java's slave takes its `delayOffset.json`:
/// the whole table is replaced. Each level goes to the shard owning its schedule queue, where
/// it is only kept (the delivery tasks do not run on a slave) and persisted by the gathering.
pub async fn mirror(shard: &Rc<Shard>, table: BTreeMap<i32, i64>) {
    let n = shard.mesh.len();
    let mut parts: Vec<BTreeMap<i32, i64>> = vec![BTreeMap::new(); n];
    for (level, off) in table {
        if level >= 1 {
            parts[shard.owner(SCHEDULE_TOPIC, (level - 1) as u32)].insert(level, off);
        }
    }
    for (i, part) in parts.into_iter().enumerate() {
        if i == shard.id {
            *shard.delay_progress_mut() = part;
            continue;
        }
        let call = shard.mesh.call(i, move |s| async move {
            *s.delay_progress_mut() = part;
        });
        if let Err(e) = call.await {
            tracing::warn!(shard = i, error = %e, "cannot hand mirrored delay progress to its shard");
        }
    }
}

/// Starts one delivery task per level whose schedule queue this shard owns.
pub fn start(shard: &Rc<Shard>) {
    let levels = shard.ctx.delay_levels.max_level();
    for level in 1..=levels {
        let qid = (level - 1) as u32;
        if shard.owner(SCHEDULE_TOPIC, qid) == shard.id {
            runtime::spawn(run_level(shard.clone(), level));
        }
    }
}

async fn run_level(shard: Rc<Shard>, level: i32) {
    let qid = (level - 1) as u32;
    runtime::sleep(Duration::from_secs(1)).await;
    while !shard.is_stopping() {
        let mut moved = 0;
        while moved < MAX_MOVES_PER_TICK && !shard.is_paused() {
            let next = shard.delay_progress().get(&level).copied().unwrap_or(0);
            let (min, max) = shard.queue_bounds(SCHEDULE_TOPIC, qid);
            let next = next.max(min as i64);
            if next >= max as i64 {
                break;
            }
            let Some(unit) = shard.unit_at(SCHEDULE_TOPIC, qid, next as u64) else {
                // A blank unit: skip it.
                shard.delay_progress_mut().insert(level, next + 1);
                continue;
            };
            if unit.tags_code > now_ms() {
                break;
            }
            match deliver(&shard, unit.phy_offset, unit.size).await {
                Ok(()) => {
                    shard.delay_progress_mut().insert(level, next + 1);
                    moved += 1;
                }
                Err(e) => {
                    tracing::warn!(level, offset = next, error = %e, "delayed delivery failed; will retry");
                    break;
                }
            }
        }
        runtime::sleep(POLL).await;
    }
}

/// Re-appends one scheduled record to its real topic and queue, without `DELAY`.
async fn deliver(shard: &Rc<Shard>, phy: u64, size: u32) -> Result<(), BrokerError> {
    append::reappend_to_real_topic(shard, phy, size, &[keys::DELAY]).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The progress file uses fastjson's unquoted integer keys and loads back.
    #[test]
    fn progress_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = BTreeMap::new();
        t.insert(2, 35);
        let bytes = progress_file_bytes(t.clone());
        assert!(String::from_utf8_lossy(&bytes).contains("2:35"));
        let p = delay_offsets_path(dir.path());
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        assert_eq!(load_progress(dir.path()), t);
    }
}
