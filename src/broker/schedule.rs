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

use bytes::BytesMut;

use crate::broker::{now_ms, send, BrokerError, Shard};
use crate::protocol::body;
use crate::protocol::java_hash::tags_code;
use crate::protocol::message::{self, MessageToStore};
use crate::protocol::properties::{self, keys};
use crate::runtime;
use crate::writer::AppendRecord;

pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// How often a level looks for due messages (RocketMQ polls every 100 ms).
const POLL: Duration = Duration::from_millis(100);
/// Messages moved per level per wake-up, so one level cannot monopolise its shard.
const MAX_MOVES_PER_TICK: usize = 256;

/// Parsed `messageDelayLevel`: delay in ms per level (index 0 = level 1).
#[derive(Clone, Debug, PartialEq)]
pub struct DelayLevels(pub Vec<i64>);

impl DelayLevels {
    /// Parses RocketMQ's `"1s 5s 10s 30s 1m ... 2h"` (units s, m, h, d).
    pub fn parse(spec: &str) -> Result<DelayLevels, String> {
        let mut out = Vec::new();
        for item in spec.split_whitespace() {
            let (num, unit) = item.split_at(item.len().saturating_sub(1));
            let n: i64 = num
                .parse()
                .map_err(|_| format!("bad delay level {item:?} in {spec:?}"))?;
            let ms = match unit {
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return Err(format!("bad unit in delay level {item:?}")),
            };
            if n <= 0 {
                return Err(format!("delay level {item:?} must be positive"));
            }
            out.push(n * ms);
        }
        if out.is_empty() {
            return Err("messageDelayLevel is empty".into());
        }
        Ok(DelayLevels(out))
    }

    pub fn max_level(&self) -> i32 {
        self.0.len() as i32
    }

    /// Delay of `level` (clamped to the highest level), `None` for level <= 0.
    pub fn delay_ms(&self, level: i32) -> Option<i64> {
        if level <= 0 {
            return None;
        }
        let l = level.min(self.max_level());
        Some(self.0[(l - 1) as usize])
    }
}

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
    let mut all = s0.delay_progress.borrow().clone();
    for i in 0..s0.mesh.len() {
        if i == s0.id {
            continue;
        }
        match s0
            .mesh
            .call(i, |s| async move { s.delay_progress.borrow().clone() })
            .await
        {
            Ok(t) => all.extend(t),
            Err(e) => tracing::warn!(error = %e, "cannot gather delay progress"),
        }
    }
    progress_file_bytes(all)
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
    while !shard.stopping.get() {
        let mut moved = 0;
        while moved < MAX_MOVES_PER_TICK && !shard.paused.get() {
            let next = shard
                .delay_progress
                .borrow()
                .get(&level)
                .copied()
                .unwrap_or(0);
            let (min, max) = shard.queue_bounds(SCHEDULE_TOPIC, qid);
            let next = next.max(min as i64);
            if next >= max as i64 {
                break;
            }
            let Some(unit) = shard.unit_at(SCHEDULE_TOPIC, qid, next as u64) else {
                // A blank unit: skip it.
                shard.delay_progress.borrow_mut().insert(level, next + 1);
                continue;
            };
            if unit.tags_code > now_ms() {
                break;
            }
            match deliver(&shard, unit.phy_offset, unit.size).await {
                Ok(()) => {
                    shard.delay_progress.borrow_mut().insert(level, next + 1);
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

/// Re-appends one scheduled record to its real topic and queue.
async fn deliver(shard: &Rc<Shard>, phy: u64, size: u32) -> Result<(), BrokerError> {
    let record = {
        let mut reader = shard.reader.borrow_mut();
        let bytes = reader.read(phy, size)?;
        let r = message::decode(bytes, true)
            .map_err(|e| BrokerError::System(format!("corrupt scheduled record at {phy}: {e}")))?;
        let mut props = properties::parse(r.properties);
        let real_topic = take(&mut props, keys::REAL_TOPIC);
        let real_qid = take(&mut props, keys::REAL_QID);
        take(&mut props, keys::DELAY);
        let (Some(topic), Some(qid)) = (real_topic, real_qid.and_then(|q| q.parse::<u32>().ok()))
        else {
            // Unroutable: dropping it would lose it silently, so say so loudly and move on.
            tracing::error!(
                phy,
                "scheduled message without REAL_TOPIC/REAL_QID; skipped"
            );
            return Ok(());
        };
        let tag = props
            .iter()
            .find(|(k, _)| k == keys::TAGS)
            .map(|(_, v)| v.clone());
        let props_str = properties::encode(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let msg = MessageToStore {
            topic: &topic,
            queue_id: qid as i32,
            flag: r.flag,
            sys_flag: r.sys_flag,
            born_timestamp: r.born_timestamp,
            born_host: r.born_host,
            store_host: r.store_host,
            reconsume_times: r.reconsume_times,
            prepared_transaction_offset: r.prepared_transaction_offset,
            body: r.body,
            properties: &props_str,
        };
        let mut bytes = BytesMut::with_capacity(r.total_size as usize);
        message::encode(&msg, &mut bytes)
            .map_err(|e| BrokerError::MessageIllegal(e.to_string()))?;
        AppendRecord {
            keys: send::index_keys(&props),
            topic,
            queue_id: qid,
            tags_code: tags_code(tag.as_deref()),
            dispatch: true,
            bytes,
        }
    };
    send::ensure_topic(shard, &record.topic.clone(), "", 1)
        .await
        .ok();
    send::append(shard, vec![record], true).await.map(|_| ())
}

fn take(props: &mut Vec<(String, String)>, key: &str) -> Option<String> {
    let i = props.iter().position(|(k, _)| k == key)?;
    Some(props.remove(i).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RocketMQ's default level string parses to its 18 delays; bad specs are clear errors.
    #[test]
    fn parses_default_levels() {
        let l = DelayLevels::parse("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
            .unwrap();
        assert_eq!(l.max_level(), 18);
        assert_eq!(l.delay_ms(2), Some(5_000));
        assert_eq!(l.delay_ms(18), Some(7_200_000));
        assert_eq!(l.delay_ms(99), Some(7_200_000));
        assert_eq!(l.delay_ms(0), None);
        assert!(DelayLevels::parse("1x").is_err());
        assert!(DelayLevels::parse("").is_err());
    }

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
