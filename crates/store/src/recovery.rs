//! Startup: lock, abort-file check, commit-log load and recovery (Java's
//! `CommitLog.recoverNormally`/`recoverAbnormally`), consume
//! queue and index rebuild, checkpoint. `open` runs single-threaded before the writer and the
//! shards start and hands everything over in an `OpenedStore`.
//!
//! Invariants established here: the commit log ends at the first record that fails validation
//! (magic, total size, physical offset, CRC when `check_crc_on_recover`); bytes past that end
//! are zero and later segments are gone; every consume queue ends at or before it; every
//! dispatched record scanned is present in its consume queue. A corrupt record is never served.

use std::collections::HashMap;
use std::path::Path;

use crate::commit_log::CommitLog;
use crate::config::StoreConfig;
use crate::files::{abort_path, create_abort, Checkpoint, StoreLock};
use crate::protocol::message::{self, sys_flag, RecordError};
use crate::tags_code::{self, DelayLevels};
use crate::{list_queues, ConsumeQueue, CqUnit, IndexService, StoreError};

pub type QueueKey = (String, u32);

/// Everything `open` recovered, ready to be split between the writer and the shards.
pub struct OpenedStore {
    pub commit_log: CommitLog,
    pub consume_queues: Vec<ConsumeQueue>,
    pub queue_offsets: HashMap<QueueKey, u64>,
    pub index: Option<IndexService>,
    pub checkpoint: Checkpoint,
    pub recovered_from_crash: bool,
    /// Where the commit-log scan started: after a crash, the newer of what the checkpoint's
    /// timestamps and the surviving index allow (see `scan_start`).
    pub scan_from_phy: u64,
}

/// Lock, check abort, load and recover the commit log, consume queues and index, then create
/// the abort file.
pub fn open(cfg: &StoreConfig) -> Result<OpenedStore, StoreError> {
    cfg.validate()?;
    let root = cfg.store_path_root_dir.as_path();
    std::fs::create_dir_all(root).map_err(|e| StoreError::io(root, e))?;
    let lock = StoreLock::acquire(root)?;
    let crashed = abort_path(root).exists();
    let checkpoint = Checkpoint::open(root)?;
    let mut commit_log = CommitLog::load(cfg, Some(lock))?;
    let mut cqs: HashMap<QueueKey, ConsumeQueue> = HashMap::new();
    for (topic, qid) in list_queues(root)? {
        let cq = ConsumeQueue::open(root, &topic, qid, cfg.mapped_file_size_consume_queue)?;
        cqs.insert((topic, qid), cq);
    }
    let mut index = if cfg.message_index_enable {
        let mut ix = IndexService::open(root, cfg.max_hash_slot_num, cfg.max_index_num)?;
        if crashed {
            let stored_at = |phy| record_timestamp(&commit_log, phy);
            ix.truncate_after(checkpoint.index_msg_timestamp, &stored_at)?;
        }
        Some(ix)
    } else {
        None
    };
    // Where index re-dispatch resumes (after the truncation above): the scan must reach it.
    let index_resume = index.as_ref().map(IndexService::max_phy_offset);
    let start = scan_start(&commit_log, &cqs, &checkpoint, crashed, index_resume);
    let scan_from_phy = commit_log.segments().get(start).map_or(0, |s| s.start());
    // After a clean exit every unit up to each queue's end was flushed: records before the
    // newest unit are not dispatched again (Java's reputFromOffset), so a queue deleted with
    // its topic is not rebuilt from the records it left in the log.
    let dispatch_from = if crashed {
        0
    } else {
        cqs.values()
            .filter_map(ConsumeQueue::max_phy_offset)
            .max()
            .unwrap_or(0)
    };
    let mut sink = RecoverySink {
        root,
        cq_file_size: cfg.mapped_file_size_consume_queue,
        delay_levels: &cfg.delay_levels,
        cqs: &mut cqs,
        index: index.as_mut(),
        dispatch_from,
    };
    let (end, last_ts) = scan(&commit_log, start, cfg.check_crc_on_recover, &mut sink)?;
    for cq in cqs.values_mut() {
        cq.truncate_dirty(end)?;
    }
    if crashed {
        tracing::warn!(end, "recovered commit log after an abnormal exit");
    }
    commit_log.recover_to(end, last_ts)?;
    // RocketMQ's correctMinOffset: retention may have deleted segments that queues and index
    // files still point into (the shards and the writer trim them only while running).
    let min_phy = commit_log.min_phy_offset();
    for cq in cqs.values_mut() {
        cq.delete_expired(min_phy)?;
    }
    if let Some(ix) = index.as_mut() {
        ix.delete_expired(min_phy)?;
    }
    let queue_offsets = cqs
        .iter()
        .map(|(k, cq)| (k.clone(), cq.max_offset()))
        .collect();
    create_abort(root)?;
    Ok(OpenedStore {
        commit_log,
        consume_queues: cqs.into_values().collect(),
        queue_offsets,
        index,
        checkpoint,
        recovered_from_crash: crashed,
        scan_from_phy,
    })
}

/// Store timestamp of the record starting at `phy`, if a record starts there (no CRC check:
/// only its placement and header are needed).
fn record_timestamp(log: &CommitLog, phy: u64) -> Option<i64> {
    let segs = log.segments();
    let first = segs.first()?.start();
    let seg = segs.get(usize::try_from(phy.checked_sub(first)? / log.segment_size()).ok()?)?;
    let rec = message::decode(seg.bytes().get((phy - seg.start()) as usize..)?, false).ok()?;
    (rec.phy_offset == phy as i64).then_some(rec.store_timestamp)
}

/// Index of the segment recovery scans from.
///
/// After a crash: walk the segments backwards to the newest one whose first record was stored
/// at or before the checkpoint's `min(physic, logics) - 3 s` (everything before it is durable in
/// the commit log and dispatched to the consume queues), and no later than the segment holding
/// `index_resume`, the newest record the surviving index files cover. The index needs a bound
/// by position, not by its checkpoint time: `truncate_after` cuts at the newest entry it can
/// prove durable (whole seconds, minus the last message) and deletes a file left empty, so the
/// index may resume before the checkpoint's index time. The periodic index checkpoint keeps
/// that point recent (`writer::index_checkpoint`).
fn scan_start(
    log: &CommitLog,
    cqs: &HashMap<QueueKey, ConsumeQueue>,
    cp: &Checkpoint,
    crashed: bool,
    index_resume: Option<u64>,
) -> usize {
    let segs = log.segments();
    if segs.is_empty() {
        return 0;
    }
    let segment_of = |phy: u64| {
        let idx = phy.saturating_sub(segs[0].start()) / log.segment_size();
        (idx as usize).min(segs.len() - 1)
    };
    if !crashed {
        // Clean exit: every queue was flushed; resume at the segment holding the newest unit.
        let from = cqs
            .values()
            .filter_map(ConsumeQueue::max_phy_offset)
            .max()
            .unwrap_or(0);
        return segment_of(from);
    }
    let min_ts = cp.min_timestamp();
    let by_time = if min_ts <= 0 {
        0
    } else {
        (0..segs.len())
            .rev()
            .find(|&i| {
                matches!(message::decode(segs[i].bytes(), true),
                    Ok(r) if r.store_timestamp <= min_ts)
            })
            .unwrap_or(0)
    };
    let start = index_resume.map_or(by_time, |phy| by_time.min(segment_of(phy)));
    tracing::info!(
        start_segment = segs[start].start(),
        min_ts,
        ?index_resume,
        "abnormal recovery walks back to this segment"
    );
    start
}

/// Where recovered records go: consume queues (opened on demand) and the index.
struct RecoverySink<'a> {
    root: &'a Path,
    cq_file_size: u64,
    delay_levels: &'a DelayLevels,
    cqs: &'a mut HashMap<QueueKey, ConsumeQueue>,
    index: Option<&'a mut IndexService>,
    /// Records before this offset already have their units (clean exit).
    dispatch_from: u64,
}

impl RecoverySink<'_> {
    fn record(&mut self, phy: u64, rec: &message::DecodedRecord<'_>) -> Result<(), StoreError> {
        let tx = sys_flag::transaction_type(rec.sys_flag);
        if sys_flag::is_dispatched(rec.sys_flag)
            && rec.queue_id >= 0
            && rec.queue_offset >= 0
            && phy >= self.dispatch_from
        {
            let key = (rec.topic.to_string(), rec.queue_id as u32);
            if !self.cqs.contains_key(&key) {
                let cq = ConsumeQueue::open(self.root, &key.0, key.1, self.cq_file_size)?;
                self.cqs.insert(key.clone(), cq);
            }
            let cq = self.cqs.get_mut(&key).expect("inserted above");
            // The send path's rule, resolved at the store timestamp the writer stamped, so a
            // parked record's delivery time comes back as the live path put it.
            let tags_code = tags_code::of_record(rec.topic, rec.properties, self.delay_levels)
                .resolve(rec.store_timestamp);
            let unit = CqUnit {
                phy_offset: phy,
                size: rec.total_size,
                tags_code,
            };
            cq.put(rec.queue_offset as u64, unit)?;
        }
        if let Some(ix) = self.index.as_deref_mut() {
            if tx != sys_flag::TRANSACTION_ROLLBACK && phy >= ix.max_phy_offset() {
                let keys = index_keys(rec.properties);
                if !keys.is_empty() {
                    ix.put(rec.topic, &keys, phy, rec.store_timestamp)?;
                }
            }
        }
        Ok(())
    }
}

/// Scans records from segment `start_idx`; returns (valid end, store timestamp of the last
/// valid record). Stops at the first record that fails validation.
fn scan(
    log: &CommitLog,
    start_idx: usize,
    check_crc: bool,
    sink: &mut RecoverySink<'_>,
) -> Result<(u64, i64), StoreError> {
    let segs = log.segments();
    let Some(first) = segs.get(start_idx) else {
        return Ok((0, 0));
    };
    let mut pos = first.start();
    let mut last_ts = 0;
    'segments: for seg in &segs[start_idx..] {
        if pos != seg.start() {
            break;
        }
        let bytes = seg.bytes();
        loop {
            let off = (pos - seg.start()) as usize;
            match message::decode(&bytes[off..], check_crc) {
                Ok(rec) => {
                    let len = rec.total_size as usize;
                    // A valid record sits at its own offset and leaves room for a blank marker.
                    // (A reused segment's old records fail here: their offsets are the old
                    // segment's, see `store::recycle`.)
                    if rec.phy_offset != pos as i64 || off + len + 8 > bytes.len() {
                        tracing::info!(pos, "record fails placement check (an old record of a reused segment, or a torn write); end of log");
                        break 'segments;
                    }
                    sink.record(pos, &rec)?;
                    pos += len as u64;
                    last_ts = rec.store_timestamp;
                }
                Err(RecordError::Blank { remaining })
                    if remaining as usize == bytes.len() - off =>
                {
                    pos = seg.end();
                    continue 'segments;
                }
                Err(e) => {
                    if !matches!(e, RecordError::BadMagic(0)) {
                        tracing::warn!(pos, error = %e, "invalid record; truncating the commit log here");
                    }
                    break 'segments;
                }
            }
        }
    }
    Ok((pos, last_ts))
}

// Property lookups follow Java's parsed map (the last accepted occurrence wins), exactly as
// the send path computed them when the record was first stored.
use crate::protocol::properties::get as property;

/// Index keys: each space-separated KEYS entry plus UNIQ_KEY.
pub fn index_keys(props: &str) -> Vec<&str> {
    let mut keys: Vec<&str> = property(props, "KEYS")
        .map(|k| k.split(' ').filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    if let Some(u) = property(props, "UNIQ_KEY").filter(|u| !u.is_empty()) {
        keys.push(u);
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves index keys are the KEYS entries split on blanks, then UNIQ_KEY.
    #[test]
    fn index_keys_split_keys_then_uniq() {
        let keys = index_keys("KEYS\u{1}k1 k2\u{2}UNIQ_KEY\u{1}U\u{2}");
        assert_eq!(keys, vec!["k1", "k2", "U"]);
    }
}
