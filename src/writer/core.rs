//! The writer thread's loop: block for one request, drain up to the batch bound, write the
//! batch, flush per policy, publish, dispatch, reply, index; periodic async flush, checkpoint
//! and retention between batches.
//!
//! Runs only on the "ringmq-writer" thread (see `writer/mod.rs` for the invariants).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::flusher::{FlushJob, Flusher};
use super::{
    AppendOutcome, AppendRequest, AppendStatus, DispatchUnit, Dispatcher, Msg, Published,
    WriterParts,
};
use crate::constants::{OS_PAGE_SIZE, WRITER_BATCH_MAX_BYTES, WRITER_BATCH_MAX_RECORDS};
use crate::protocol::message;
use crate::store::files::remove_abort;
use crate::store::{
    retention, Checkpoint, CommitLog, CqUnit, FlushDiskType, IndexService, StoreConfig, StoreError,
};

pub(super) struct WriterCore {
    log: CommitLog,
    index: Option<IndexService>,
    /// topic -> queue id -> next queue offset (nested so lookups by &str need no allocation).
    queue_offsets: HashMap<String, HashMap<u32, u64>>,
    checkpoint: Checkpoint,
    cfg: StoreConfig,
    dispatcher: Box<dyn Dispatcher>,
    published: Arc<Published>,
    flusher: Option<Flusher>,
    async_submitted: u64,
    disk_writable: bool,
    flush_failed: bool,
    last_flush: Instant,
    last_thorough: Instant,
    last_retention: Instant,
    last_index_timestamp: i64,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A copy of `e` for every other request of a failed batch (`StoreError` is not Clone).
fn replicate(e: &StoreError) -> StoreError {
    match e {
        StoreError::DiskFull(s) => StoreError::DiskFull(s.clone()),
        StoreError::Io { path, source } => StoreError::Io {
            path: path.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        other => StoreError::NotWritable(other.to_string()),
    }
}

impl WriterCore {
    pub(super) fn new(
        parts: WriterParts,
        cfg: StoreConfig,
        dispatcher: Box<dyn Dispatcher>,
        published: Arc<Published>,
    ) -> Result<Self, StoreError> {
        let mut queue_offsets: HashMap<String, HashMap<u32, u64>> = HashMap::new();
        for ((topic, qid), next) in parts.queue_offsets {
            queue_offsets.entry(topic).or_default().insert(qid, next);
        }
        let flusher = match cfg.flush_disk_type {
            FlushDiskType::AsyncFlush => Some(
                Flusher::spawn(parts.commit_log.flushed_phy_offset())
                    .map_err(|e| StoreError::io(&cfg.store_path_root_dir, e))?,
            ),
            FlushDiskType::SyncFlush => None,
        };
        let now = Instant::now();
        Ok(WriterCore {
            async_submitted: parts.commit_log.flushed_phy_offset(),
            log: parts.commit_log,
            index: parts.index,
            queue_offsets,
            checkpoint: parts.checkpoint,
            cfg,
            dispatcher,
            published,
            flusher,
            disk_writable: true,
            flush_failed: false,
            last_flush: now,
            last_thorough: now,
            last_retention: now,
            last_index_timestamp: 0,
        })
    }

    pub(super) fn run(&mut self, rx: Receiver<Msg>) -> Result<(), StoreError> {
        loop {
            let first = match rx.recv_timeout(self.next_tick_in()) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    self.tick();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            };
            let req = match first {
                Msg::Append(r) => r,
                Msg::Shutdown => return self.clean_shutdown(&rx),
                Msg::Abandon => return Ok(()),
            };
            let mut records = req.records.len();
            let mut bytes: usize = req.records.iter().map(|r| r.bytes.len()).sum();
            let mut batch = vec![req];
            let mut stop = None;
            while records < WRITER_BATCH_MAX_RECORDS && bytes < WRITER_BATCH_MAX_BYTES {
                match rx.try_recv() {
                    Ok(Msg::Append(r)) => {
                        records += r.records.len();
                        bytes += r.records.iter().map(|r| r.bytes.len()).sum::<usize>();
                        batch.push(r);
                    }
                    Ok(other) => {
                        stop = Some(other);
                        break;
                    }
                    Err(_) => break,
                }
            }
            self.process(batch);
            match stop {
                Some(Msg::Shutdown) => return self.clean_shutdown(&rx),
                Some(Msg::Abandon) => return Ok(()),
                _ => {}
            }
            self.tick();
        }
    }

    fn validate(&self, req: &AppendRequest) -> Result<(), StoreError> {
        let max = self.cfg.max_record_len();
        for rec in &req.records {
            if rec.bytes.len() > max {
                return Err(StoreError::MessageTooLarge {
                    size: rec.bytes.len(),
                    max,
                });
            }
            match message::peek_total_size(&rec.bytes) {
                Ok(t) if t as usize == rec.bytes.len() => {}
                _ => return Err(StoreError::Invalid("malformed record".into())),
            }
        }
        Ok(())
    }

    fn refusal(&self) -> Option<StoreError> {
        if self.flush_failed {
            Some(StoreError::NotWritable(
                "an earlier commit-log flush failed".into(),
            ))
        } else if !self.disk_writable {
            Some(StoreError::DiskFull(format!(
                "disk usage past {}%",
                retention::hard_limit_percent(&self.cfg)
            )))
        } else {
            None
        }
    }

    fn process(&mut self, batch: Vec<AppendRequest>) {
        let mut ok_reqs = Vec::with_capacity(batch.len());
        for req in batch {
            let verdict = self.refusal().map_or_else(|| self.validate(&req), Err);
            match verdict {
                Ok(()) => ok_reqs.push(req),
                Err(e) => (req.reply)(Err(e)),
            }
        }
        if ok_reqs.is_empty() {
            return;
        }
        let ts = now_ms();
        let mark = self.log.mark();
        let mut undo: Vec<(usize, usize, u64)> = Vec::new(); // (req, rec, previous next offset)
        let mut placed: Vec<(Vec<u64>, Vec<u64>)> = Vec::with_capacity(ok_reqs.len());
        let mut units = Vec::new();
        let mut failure = None;
        'write: for (ri, req) in ok_reqs.iter().enumerate() {
            let mut phys = Vec::with_capacity(req.records.len());
            let mut qos = Vec::with_capacity(req.records.len());
            for (ci, rec) in req.records.iter().enumerate() {
                let qo = if rec.dispatch {
                    let next = self
                        .queue_offsets
                        .entry_ref(&rec.topic)
                        .entry(rec.queue_id)
                        .or_insert(0);
                    let v = *next;
                    *next += 1;
                    undo.push((ri, ci, v));
                    v
                } else {
                    0
                };
                match self.log.append(&rec.bytes, qo, ts) {
                    Ok(phy) => {
                        phys.push(phy);
                        qos.push(qo);
                        if rec.dispatch {
                            units.push(DispatchUnit {
                                topic: rec.topic.clone(),
                                queue_id: rec.queue_id,
                                queue_offset: qo,
                                unit: CqUnit {
                                    phy_offset: phy,
                                    size: rec.bytes.len() as u32,
                                    tags_code: rec.tags_code,
                                },
                                store_timestamp: ts,
                            });
                        }
                    }
                    Err(e) => {
                        failure = Some(e);
                        break 'write;
                    }
                }
            }
            placed.push((phys, qos));
        }
        let mut status = AppendStatus::PutOk;
        if failure.is_none()
            && self.cfg.flush_disk_type == FlushDiskType::SyncFlush
            && ok_reqs.iter().any(|r| r.wait_flush)
        {
            let t0 = Instant::now();
            match self.log.flush() {
                Ok(_) => {
                    self.last_flush = Instant::now();
                    if t0.elapsed() > Duration::from_millis(self.cfg.sync_flush_timeout_ms) {
                        status = AppendStatus::FlushDiskTimeout;
                    }
                }
                Err(e) => failure = Some(e),
            }
        }
        if let Some(e) = failure {
            tracing::error!(error = %e, "append batch failed; rolled back");
            self.log.rollback(mark);
            for &(ri, ci, prev) in undo.iter().rev() {
                let rec = &ok_reqs[ri].records[ci];
                if let Some(q) = self.queue_offsets.get_mut(&rec.topic) {
                    q.insert(rec.queue_id, prev);
                }
            }
            let template = replicate(&e);
            let mut first = Some(e);
            for req in ok_reqs {
                let err = first.take().unwrap_or_else(|| replicate(&template));
                (req.reply)(Err(err));
            }
            return;
        }
        self.published
            .max_phy
            .store(self.log.max_phy_offset(), Ordering::Release);
        if !units.is_empty() {
            self.dispatcher.dispatch(units);
        }
        let mut records_for_index = Vec::with_capacity(ok_reqs.len());
        for (req, (phys, qos)) in ok_reqs.into_iter().zip(placed) {
            let outcome = AppendOutcome {
                status,
                phy_offsets: phys.clone(),
                queue_offsets: qos,
                store_timestamp: ts,
            };
            (req.reply)(Ok(outcome));
            records_for_index.push((req.records, phys));
        }
        self.index_batch(records_for_index, ts);
    }

    /// Index keys after the replies: off the reply path.
    fn index_batch(&mut self, done: Vec<(Vec<super::AppendRecord>, Vec<u64>)>, ts: i64) {
        let Some(ix) = self.index.as_mut() else {
            return;
        };
        for (records, phys) in done {
            for (rec, phy) in records.iter().zip(phys) {
                if rec.keys.is_empty() {
                    continue;
                }
                let keys: Vec<&str> = rec.keys.iter().map(String::as_str).collect();
                if let Err(e) = ix.put(&rec.topic, &keys, phy, ts) {
                    tracing::error!(error = %e, topic = %rec.topic, "index put failed");
                }
            }
        }
        self.last_index_timestamp = ts;
    }

    fn next_tick_in(&self) -> Duration {
        let flush = Duration::from_millis(self.cfg.flush_interval_commit_log_ms.max(1));
        let ret = Duration::from_millis(self.cfg.retention_check_interval_ms.max(1));
        let a = flush.saturating_sub(self.last_flush.elapsed());
        let b = ret.saturating_sub(self.last_retention.elapsed());
        a.min(b).max(Duration::from_millis(1))
    }

    /// Periodic work: flush policy, checkpoint, retention. Runs between batches.
    fn tick(&mut self) {
        let interval = Duration::from_millis(self.cfg.flush_interval_commit_log_ms);
        if self.last_flush.elapsed() >= interval {
            self.periodic_flush();
        }
        let ret = Duration::from_millis(self.cfg.retention_check_interval_ms);
        if self.last_retention.elapsed() >= ret {
            self.last_retention = Instant::now();
            match retention::run(&mut self.log, &self.cfg, retention::PassClock::system()) {
                Ok(out) => {
                    self.disk_writable = out.writable;
                    self.publish_writable();
                    let min_phy = self.log.min_phy_offset();
                    // Shards trim their consume queues against this (broker::clean).
                    self.published.min_phy.store(min_phy, Ordering::Release);
                    if let Some(ix) = self.index.as_mut().filter(|_| !out.deleted.is_empty()) {
                        if let Err(e) = ix.delete_expired(min_phy) {
                            tracing::error!(error = %e, "deleting expired index files failed");
                        }
                    }
                }
                Err(e) => tracing::error!(error = %e, "retention pass failed"),
            }
        }
    }

    fn publish_writable(&self) {
        self.published
            .writable
            .store(self.disk_writable && !self.flush_failed, Ordering::Release);
    }

    fn periodic_flush(&mut self) {
        let thorough = self.last_thorough.elapsed()
            >= Duration::from_millis(self.cfg.flush_commit_log_thorough_interval_ms);
        let least = u64::from(self.cfg.flush_commit_log_least_pages) * OS_PAGE_SIZE;
        self.last_flush = Instant::now();
        match self.flusher.as_ref() {
            Some(f) => {
                if f.state.failed.load(Ordering::Acquire) && !self.flush_failed {
                    self.flush_failed = true;
                    self.publish_writable();
                }
                let dirty = self.log.max_phy_offset() - self.async_submitted;
                if dirty == 0 || (dirty < least && !thorough) {
                    return;
                }
                let files = match self.log.files_from(self.async_submitted) {
                    Ok(f) => f,
                    Err(e) => return tracing::error!(error = %e, "preparing async flush"),
                };
                let job = FlushJob {
                    files,
                    upto_phy: self.log.max_phy_offset(),
                    store_timestamp: self.log.last_store_timestamp(),
                };
                if f.submit(job) {
                    self.async_submitted = self.log.max_phy_offset();
                }
            }
            None => {
                if self.log.dirty_bytes() > 0 {
                    if let Err(e) = self.log.flush() {
                        tracing::error!(error = %e, "periodic commit-log flush failed");
                        self.flush_failed = true;
                        self.publish_writable();
                    }
                }
            }
        }
        if thorough {
            self.last_thorough = Instant::now();
        }
        self.write_checkpoint();
    }

    fn flushed_timestamp(&self) -> i64 {
        let async_ts = self
            .flusher
            .as_ref()
            .map_or(0, |f| f.state.flushed_timestamp.load(Ordering::Acquire));
        self.log.flushed_store_timestamp().max(async_ts)
    }

    fn write_checkpoint(&mut self) {
        let ts = self.flushed_timestamp();
        if ts <= self.checkpoint.physic_msg_timestamp {
            return;
        }
        self.checkpoint.physic_msg_timestamp = ts;
        if let Err(e) = self.checkpoint.flush() {
            tracing::error!(error = %e, "checkpoint flush failed");
        }
    }

    fn clean_shutdown(&mut self, rx: &Receiver<Msg>) -> Result<(), StoreError> {
        let mut rest = Vec::new();
        while let Ok(m) = rx.try_recv() {
            if let Msg::Append(r) = m {
                rest.push(r);
            }
        }
        if !rest.is_empty() {
            self.process(rest);
        }
        if let Some(mut f) = self.flusher.take() {
            f.stop();
        }
        self.log.flush()?;
        if let Some(ix) = self.index.as_mut() {
            ix.flush()?;
            self.checkpoint.index_msg_timestamp = self.last_index_timestamp;
        }
        self.checkpoint.physic_msg_timestamp = self.log.flushed_store_timestamp();
        self.checkpoint.flush()?;
        remove_abort(&self.cfg.store_path_root_dir)?;
        drop(self.log.release_lock());
        Ok(())
    }
}

/// `HashMap<String, V>::entry` without allocating when the key exists.
trait EntryRef<V> {
    fn entry_ref(&mut self, key: &str) -> &mut V;
}

impl<V: Default> EntryRef<V> for HashMap<String, V> {
    fn entry_ref(&mut self, key: &str) -> &mut V {
        if !self.contains_key(key) {
            self.insert(key.to_string(), V::default());
        }
        self.get_mut(key).expect("inserted above")
    }
}
