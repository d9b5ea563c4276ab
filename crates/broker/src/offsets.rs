//! Consumer offsets and queue offsets: QUERY/UPDATE_CONSUMER_OFFSET (14/15), GET_MAX_OFFSET (30),
//! GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32),
//! GET_ALL_CONSUMER_OFFSET (43), and a slave's copy of its master's offsets (`mirror`).
//!
//! A queue's consumer offsets live on its owner shard. Shard 0 gathers every shard's table every
//! few seconds and on shutdown and writes RocketMQ's `config/consumerOffset.json`
//! (`{"offsetTable":{"topic@group":{0:12}}}`, fastjson's unquoted integer keys).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::error::BrokerError;
use crate::protocol::body;
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::{
    GetEarliestMsgStoretimeRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use crate::protocol::{message, RemotingCommand};
use crate::shard::{OffsetTable, Shard};

#[derive(serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct OffsetFile {
    #[serde(default)]
    offset_table: BTreeMap<String, BTreeMap<u32, i64>>,
}

pub fn offsets_path(root: &Path) -> PathBuf {
    root.join("config").join("consumerOffset.json")
}

/// Loads `consumerOffset.json` (or its .bak) and splits it by owner shard.
pub fn load(root: &Path, shards: usize) -> Vec<OffsetTable> {
    let mut out = vec![OffsetTable::new(); shards];
    let path = offsets_path(root);
    let mut file = None;
    for p in [path.clone(), path.with_extension("json.bak")] {
        if let Ok(bytes) = std::fs::read(&p) {
            match body::from_json::<OffsetFile>(&bytes) {
                Ok(f) => {
                    file = Some(f);
                    break;
                }
                Err(e) => {
                    tracing::warn!(path = %p.display(), error = %e, "unparsable offsets file")
                }
            }
        }
    }
    for (key, queues) in file.unwrap_or_default().offset_table {
        let topic = key.split('@').next().unwrap_or("").to_string();
        for (qid, off) in queues {
            let o = super::owner_of(&topic, qid, shards);
            out[o].entry(key.clone()).or_default().insert(qid, off);
        }
    }
    out
}

/// Serialises merged tables in RocketMQ's shape.
pub fn file_bytes(tables: Vec<OffsetTable>) -> Vec<u8> {
    let mut f = OffsetFile::default();
    for t in tables {
        for (k, q) in t {
            f.offset_table.entry(k).or_default().extend(q);
        }
    }
    body::to_fastjson_legacy(&f)
}

/// Stores an offset on the owner shard.
pub fn commit_local(s: &Shard, topic: &str, group: &str, queue_id: u32, offset: i64) {
    s.offsets_mut()
        .entry(format!("{topic}@{group}"))
        .or_default()
        .insert(queue_id, offset);
}

pub fn query_local(s: &Shard, topic: &str, group: &str, queue_id: u32) -> Option<i64> {
    s.offsets()
        .get(&format!("{topic}@{group}"))
        .and_then(|q| q.get(&queue_id).copied())
}

/// Runs `f` on the owner of (topic, queue_id).
pub(crate) async fn on_owner<R: Send + 'static>(
    shard: &Rc<Shard>,
    topic: &str,
    queue_id: u32,
    f: impl FnOnce(&Shard) -> R + Send + 'static,
) -> Result<R, BrokerError> {
    let owner = shard.owner(topic, queue_id);
    if owner == shard.id {
        return Ok(f(shard));
    }
    Ok(shard
        .mesh
        .call(owner, move |s| async move { f(&s) })
        .await?)
}

fn queue_id(q: i32) -> Result<u32, BrokerError> {
    u32::try_from(q).map_err(|_| BrokerError::InvalidParameter(format!("queueId {q} is negative")))
}

/// Bytes of the commit log taken to be in the page cache: `accessMessageInMemoryMaxRatio`
/// percent of physical memory, Java's own estimate (`estimateInMemByCommitOffset`); pulls use
/// it too, to suggest a slave to a consumer reading far behind (`broker::pull`).
pub(crate) fn in_memory_budget(ratio_percent: u32) -> u64 {
    static PHYSICAL: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let physical = *PHYSICAL.get_or_init(|| {
        // SAFETY: sysconf only reads system constants.
        let (pages, page) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        (pages.max(0) as u64).saturating_mul(page.max(0) as u64)
    });
    physical / 100 * ratio_percent as u64
}

/// Where a group with no stored offset starts (Java 5.3's `queryConsumerOffset`): at 0 only
/// when the queue still begins at 0 and its first message is still in memory, else
/// QUERY_NOT_FOUND (the client then applies its ConsumeFromWhere: a CONSUME_FROM_LAST_OFFSET
/// group starts at the tail instead of replaying a large backlog).
///
/// Java asks the kernel whether the first message's pages are resident (mincore). ringmq uses
/// the estimate Java applies to pulls: the message is in memory when at most `budget` bytes of
/// the commit log were written after it (`max_phy - first_phy`). `first_phy` is None for a
/// queue without a unit at offset 0 (empty, or trimmed).
fn start_offset_without_stored(
    set_zero_if_not_found: Option<bool>,
    min: u64,
    first_phy: Option<u64>,
    max_phy: u64,
    budget: u64,
) -> Result<i64, &'static str> {
    if set_zero_if_not_found == Some(false) {
        return Err("Not found, do not set to zero, maybe this group boot first");
    }
    match first_phy {
        Some(phy) if min == 0 && max_phy.saturating_sub(phy) <= budget => Ok(0),
        _ => Err("Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"),
    }
}

pub async fn query_consumer_offset(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = QueryConsumerOffsetRequestHeader::from_command(cmd)?;
    let qid = queue_id(h.queue_id)?;
    let (t, g) = (h.topic.clone(), h.consumer_group.clone());
    let (found, min, first_phy) = on_owner(&shard, &h.topic, qid, move |s| {
        let stored = query_local(s, &t, &g, qid);
        let min = s.queue_bounds(&t, qid).0;
        let first = stored
            .is_none()
            .then(|| s.unit_at(&t, qid, 0).map(|u| u.phy_offset))
            .flatten();
        (stored, min, first)
    })
    .await?;
    let offset = match found {
        Some(o) => Ok(o),
        None => start_offset_without_stored(
            h.set_zero_if_not_found,
            min,
            first_phy,
            shard.ctx.writer.max_phy_offset(),
            in_memory_budget(shard.ctx.cfg.access_message_in_memory_max_ratio),
        ),
    };
    match offset {
        Ok(o) => Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_ext("offset", o)),
        Err(remark) => Ok(RemotingCommand::response_for(
            cmd,
            rc::QUERY_NOT_FOUND,
            Some(remark.into()),
        )),
    }
}

pub async fn update_consumer_offset(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = UpdateConsumerOffsetRequestHeader::from_command(cmd)?;
    let qid = queue_id(h.queue_id)?;
    let (t, g, off) = (h.topic.clone(), h.consumer_group.clone(), h.commit_offset);
    on_owner(&shard, &h.topic, qid, move |s| {
        commit_local(s, &t, &g, qid, off)
    })
    .await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

pub async fn get_max_offset(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetMaxOffsetRequestHeader::from_command(cmd)?;
    let qid = queue_id(h.queue_id)?;
    let t = h.topic.clone();
    let max = on_owner(&shard, &h.topic, qid, move |s| s.queue_bounds(&t, qid).1).await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_ext("offset", max))
}

pub async fn get_min_offset(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetMinOffsetRequestHeader::from_command(cmd)?;
    let qid = queue_id(h.queue_id)?;
    let t = h.topic.clone();
    let min = on_owner(&shard, &h.topic, qid, move |s| s.queue_bounds(&t, qid).0).await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_ext("offset", min))
}

/// Store timestamp of the record a unit points at.
pub(crate) fn store_timestamp(s: &Shard, phy: u64, size: u32) -> Option<i64> {
    let mut reader = s.reader();
    let bytes = reader.read(phy, size).ok()?;
    message::decode(bytes, false)
        .ok()
        .map(|r| r.store_timestamp)
}

/// On the owner: the queue offset of the first message stored at or after `ts` (`upper`: the
/// last at or before it); 0 for a queue this shard has no ConsumeQueue for.
pub(crate) fn offset_by_time(s: &Shard, topic: &str, qid: u32, ts: i64, upper: bool) -> u64 {
    let queues = s.read_queues();
    match queues.get(&super::shard::QueueKey(topic, qid)) {
        Some(q) => q.cq.search_offset_by_timestamp(ts, upper, &mut |u| {
            store_timestamp(s, u.phy_offset, u.size)
        }),
        None => 0,
    }
}

pub async fn search_offset_by_timestamp(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = SearchOffsetRequestHeader::from_command(cmd)?;
    let qid = queue_id(h.queue_id)?;
    let (t, ts, upper) = (h.topic.clone(), h.timestamp, h.boundary_upper);
    let off = on_owner(&shard, &h.topic, qid, move |s| {
        offset_by_time(s, &t, qid, ts, upper)
    })
    .await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_ext("offset", off))
}

pub async fn get_earliest_msg_storetime(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetEarliestMsgStoretimeRequestHeader::from_command(cmd)?;
    let qid = queue_id(h.queue_id)?;
    let t = h.topic.clone();
    let ts = on_owner(&shard, &h.topic, qid, move |s| {
        let (min, max) = s.queue_bounds(&t, qid);
        if min >= max {
            return None;
        }
        let u = s.unit_at(&t, qid, min)?;
        store_timestamp(s, u.phy_offset, u.size)
    })
    .await?;
    // Java (`DefaultMessageStore.getEarliestMessageTime`): -1 when the queue holds nothing.
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None)
        .with_ext("timestamp", ts.unwrap_or(-1)))
}

/// Shard 0: gathers every shard's offsets and returns the file bytes.
pub async fn gather(s0: &Rc<Shard>) -> Vec<u8> {
    file_bytes(gather_tables(s0).await)
}

/// Every shard's offset table, asked from any shard.
async fn gather_tables(shard: &Rc<Shard>) -> Vec<OffsetTable> {
    let mut tables = Vec::new();
    for i in 0..shard.mesh.len() {
        if i == shard.id {
            tables.push(shard.offsets().clone());
            continue;
        }
        match shard
            .mesh
            .call(i, |s| async move { s.offsets().clone() })
            .await
        {
            Ok(t) => tables.push(t),
            Err(e) => tracing::warn!(error = %e, "cannot gather consumer offsets"),
        }
    }
    tables
}

/// GET_ALL_CONSUMER_OFFSET (43): every shard's offsets in Java's
/// `ConsumerOffsetSerializeWrapper` (`offsetTable`, `dataVersion`), as fastjson writes it. ringmq
/// keeps no data version for offsets (Java's slave copies them without comparing one); the
/// version sent is stamped with the time of the answer so that a slave comparing it applies it.
pub async fn all_consumer_offsets(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let mut w = body::ConsumerOffsetSerializeWrapper::default();
    w.data_version.timestamp = crate::common::now_ms();
    for t in gather_tables(&shard).await {
        for (key, queues) in t {
            let dst = w.offset_table.entry(key).or_default();
            for (qid, off) in queues {
                // Queue ids are u32 here and i32 in Java; ids above i32::MAX were never valid.
                if let Ok(q) = i32::try_from(qid) {
                    dst.insert(q, off);
                }
            }
        }
    }
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None)
        .with_body(body::to_fastjson_legacy(&w)))
}

/// A slave takes its master's offsets (Java's `SlaveSynchronize.syncConsumerOffset`: the
/// master's "topic@group" entries replace the slave's, entries the master lacks stay). Each
/// queue's offset goes to its owner shard through the mesh; the periodic gathering persists them.
pub async fn mirror(shard: &Rc<Shard>, table: BTreeMap<String, BTreeMap<i32, i64>>) {
    let n = shard.mesh.len();
    // Every shard hears of every key, with the queues it owns (maybe none): a key's queues
    // the master no longer lists are dropped wherever they live.
    let mut parts: Vec<OffsetTable> = vec![OffsetTable::new(); n];
    for (key, queues) in table {
        let topic = key.split('@').next().unwrap_or("").to_string();
        for p in parts.iter_mut() {
            p.insert(key.clone(), BTreeMap::new());
        }
        for (qid, off) in queues {
            if let Ok(q) = u32::try_from(qid) {
                let o = super::owner_of(&topic, q, n);
                if let Some(m) = parts[o].get_mut(&key) {
                    m.insert(q, off);
                }
            }
        }
    }
    for (i, part) in parts.into_iter().enumerate() {
        if i == shard.id {
            replace_keys(shard, part);
            continue;
        }
        if let Err(e) = shard
            .mesh
            .call(i, move |s| async move { replace_keys(&s, part) })
            .await
        {
            tracing::warn!(shard = i, error = %e, "cannot hand mirrored offsets to their shard");
        }
    }
}

fn replace_keys(s: &Shard, part: OffsetTable) {
    let mut t = s.offsets_mut();
    for (key, queues) in part {
        if queues.is_empty() {
            t.remove(&key);
        } else {
            t.insert(key, queues);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A new group starts at 0 only while the queue begins at 0 with its first message within
    /// the in-memory budget of the log's end; an empty or trimmed queue, a far first message,
    /// or setZeroIfNotFound=false answer QUERY_NOT_FOUND.
    #[test]
    fn new_group_start_offset_follows_java() {
        let mib = 1 << 20;
        assert_eq!(
            start_offset_without_stored(None, 0, Some(0), mib, mib),
            Ok(0)
        );
        assert_eq!(
            start_offset_without_stored(Some(true), 0, Some(10), 10 + mib, mib),
            Ok(0)
        );
        assert!(start_offset_without_stored(None, 0, Some(0), mib + 1, mib).is_err());
        assert!(start_offset_without_stored(None, 0, None, 0, mib).is_err());
        assert!(start_offset_without_stored(None, 3, Some(0), 10, mib).is_err());
        let e = start_offset_without_stored(Some(false), 0, Some(0), 1, mib).unwrap_err();
        assert!(e.contains("do not set to zero"), "{e}");
    }

    /// The budget is the configured share of physical memory: none at 0 %, more at 40 %.
    #[test]
    fn in_memory_budget_is_a_share_of_memory() {
        assert_eq!(in_memory_budget(0), 0);
        assert!(in_memory_budget(40) > 64 << 20);
        assert!(in_memory_budget(40) < in_memory_budget(100));
    }

    /// The offsets file round-trips through RocketMQ's unquoted-key form and splits by owner.
    #[test]
    fn offsets_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut t: OffsetTable = HashMap::new();
        t.entry("T@g".into()).or_default().insert(0, 12);
        t.entry("T@g".into()).or_default().insert(3, 7);
        let bytes = file_bytes(vec![t]);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains("0:12"), "{text}");
        let path = offsets_path(dir.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let split = load(dir.path(), 2);
        let total: usize = split
            .iter()
            .map(|t| t.get("T@g").map_or(0, |q| q.len()))
            .sum();
        assert_eq!(total, 2);
        let o = crate::owner_of("T", 3, 2);
        assert_eq!(split[o]["T@g"][&3], 7);
    }
}
