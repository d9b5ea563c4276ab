//! The writer thread's loop: block for one request, drain up to the batch bound, write the
//! batch, then complete it: under ASYNC_FLUSH publish, dispatch, reply and index right here;
//! under SYNC_FLUSH hand it to the group-commit thread (`group_commit`) and index it once that
//! thread reports it durable. Between batches it runs the periodic async flush, checkpoint,
//! index checkpoint and retention (`housekeeping`), and, when asked, truncates the commit log
//! back to an earlier record (`truncate`).
//!
//! Runs only on the "ringmq-writer" thread (see `writer/mod.rs` for the invariants).

mod housekeeping;
mod truncate;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};

use super::checkpointer::Checkpointer;
use super::flusher::Flusher;
use super::group_commit::{GroupCommitRequest, GroupCommitService, GroupCommitStats};
use super::index_checkpoint::IndexCheckpoint;
use super::{
    replicate, AppendOutcome, AppendRecord, AppendReply, AppendRequest, AppendStatus, DispatchRun,
    Dispatcher, Msg, Published, StartReply, WriterParts,
};
use crate::common::now_ms;
use crate::constants::{WRITER_BATCH_MAX_BYTES, WRITER_BATCH_MAX_RECORDS};
use crate::protocol::message;
use crate::store::deleter::FileDeleter;
use crate::store::files::remove_abort;
use crate::store::{
    retention, CommitLog, CqUnit, FlushDiskType, IndexService, StoreConfig, StoreError,
};

pub(super) struct WriterCore {
    log: CommitLog,
    index: Option<IndexService>,
    /// topic -> queue id -> next queue offset (nested so lookups by &str need no allocation).
    queue_offsets: hashbrown::HashMap<String, hashbrown::HashMap<u32, u64>>,
    /// The checkpoint file lives on its own thread while the writer runs (see checkpointer.rs).
    checkpointer: Option<Checkpointer>,
    /// Newest physic_msg_timestamp handed to the checkpointer.
    checkpoint_ts: i64,
    cfg: StoreConfig,
    completion: Completion,
    published: Arc<Published>,
    flusher: Option<Flusher>,
    /// SYNC_FLUSH: written requests with index keys, waiting for their covering fdatasync
    /// (bounded by the group-commit queue: at most two queues' worth of batches in flight).
    index_pending: VecDeque<IndexPending>,
    async_submitted: u64,
    disk_writable: bool,
    flush_failed: bool,
    last_flush: Instant,
    last_thorough: Instant,
    last_retention: Instant,
    last_index_timestamp: i64,
    /// Unlinks the files retention detaches ("ringmq-clean-files"), off this thread.
    deleter: FileDeleter,
    /// Periodically has the index synced and its timestamp checkpointed (off this thread).
    index_checkpoint: IndexCheckpoint,
}

/// Who publishes `max_phy_offset`, dispatches and replies after a batch is written: one
/// owner per flush mode.
enum Completion {
    /// ASYNC_FLUSH: the writer itself, right after the write.
    Inline(Box<dyn Dispatcher>),
    /// SYNC_FLUSH: the group-commit thread, after the fdatasync covering the batch.
    GroupCommit(GroupCommitService),
}

/// A batch after its write: the requests, their (phy, queue) offsets, the units to dispatch.
struct Written {
    reqs: Vec<AppendRequest>,
    placed: Vec<(Vec<u64>, Vec<u64>)>,
    units: Vec<DispatchRun>,
    store_timestamp: i64,
}

/// Every request gets (a copy of) `e`.
fn fail_requests(reqs: Vec<AppendRequest>, e: StoreError) {
    let template = replicate(&e);
    let mut first = Some(e);
    for req in reqs {
        (req.reply)(Err(first.take().unwrap_or_else(|| replicate(&template))));
    }
}

/// Records of one written SYNC_FLUSH batch to index once `upto_phy` is durable (bodies dropped).
struct IndexPending {
    upto_phy: u64,
    store_timestamp: i64,
    done: Vec<(Vec<AppendRecord>, Vec<u64>)>,
}

/// A record with its body apart is cut right after its body-length field, which holds the
/// body's length, and past every field the writer patches.
fn split_ok(rec: &AppendRecord) -> bool {
    if rec.body.is_empty() {
        return true;
    }
    let at = rec.body_at as usize;
    let Some(len_field) = at.checked_sub(4).and_then(|f| rec.bytes.get(f..at)) else {
        return false;
    };
    let body_len = i32::from_be_bytes([len_field[0], len_field[1], len_field[2], len_field[3]]);
    let Some(flag) = rec
        .bytes
        .get(message::OFF_SYS_FLAG..message::OFF_SYS_FLAG + 4)
    else {
        return false;
    };
    let flag = i32::from_be_bytes([flag[0], flag[1], flag[2], flag[3]]);
    usize::try_from(body_len).ok() == Some(rec.body.len())
        && message::store_timestamp_offset(flag) + 8 <= at
}

/// How many of a batch's latest dispatch runs a unit may continue (one per queue of a topic
/// spread over this many queues or fewer).
const DISPATCH_RUN_LOOKBACK: usize = 16;

impl WriterCore {
    pub(super) fn new(
        parts: WriterParts,
        cfg: StoreConfig,
        dispatcher: Box<dyn Dispatcher>,
        published: Arc<Published>,
    ) -> Result<Self, StoreError> {
        let mut queue_offsets: hashbrown::HashMap<String, hashbrown::HashMap<u32, u64>> =
            hashbrown::HashMap::new();
        for ((topic, qid), next) in parts.queue_offsets {
            queue_offsets.entry(topic).or_default().insert(qid, next);
        }
        let log = &parts.commit_log;
        let spawn_err = |e| StoreError::io(&cfg.store_path_root_dir, e);
        let (flusher, completion) = match cfg.flush_disk_type {
            FlushDiskType::AsyncFlush => (
                Some(Flusher::spawn(log.flushed_phy_offset(), cfg.flush_core).map_err(spawn_err)?),
                Completion::Inline(dispatcher),
            ),
            FlushDiskType::SyncFlush => {
                let gc = GroupCommitService::spawn(
                    log.flushed_phy_offset(),
                    log.flushed_store_timestamp(),
                    dispatcher,
                    published.clone(),
                    &cfg,
                    log.dir().to_path_buf(),
                    log.warm_gate(),
                )
                .map_err(spawn_err)?;
                (None, Completion::GroupCommit(gc))
            }
        };
        let deleter = FileDeleter::spawn(
            Duration::from_millis(cfg.delete_commit_log_files_interval_ms),
            Some(log.recycle_pool()),
        )?;
        let index_checkpoint = IndexCheckpoint::new(
            cfg.index_flush_interval_ms,
            parts.checkpoint.index_msg_timestamp,
        );
        // The first retention pass runs at start: a broker restarted on a full disk frees space
        // (and says whether it takes appends) at once, not an interval later.
        let first_retention = Instant::now()
            .checked_sub(Duration::from_millis(cfg.retention_check_interval_ms))
            .unwrap_or_else(Instant::now);
        let now = Instant::now();
        Ok(WriterCore {
            async_submitted: parts.commit_log.flushed_phy_offset(),
            log: parts.commit_log,
            index: parts.index,
            queue_offsets,
            checkpoint_ts: parts.checkpoint.physic_msg_timestamp,
            checkpointer: Some(Checkpointer::spawn(parts.checkpoint, cfg.fault.clone())?),
            cfg,
            completion,
            published,
            flusher,
            index_pending: VecDeque::new(),
            disk_writable: true,
            flush_failed: false,
            last_flush: now,
            last_thorough: now,
            last_retention: first_retention,
            last_index_timestamp: 0,
            deleter,
            index_checkpoint,
        })
    }

    /// The group-commit figures (SYNC_FLUSH only).
    pub(super) fn group_commit_stats(&self) -> Option<Arc<GroupCommitStats>> {
        match &self.completion {
            Completion::GroupCommit(gc) => Some(gc.stats.clone()),
            Completion::Inline(_) => None,
        }
    }

    pub(super) fn run(&mut self, rx: Receiver<Msg>) -> Result<(), StoreError> {
        let mut tick_at = Instant::now() + self.next_tick_in();
        loop {
            // Park rather than block in the channel (whose receive spins first): senders unpark
            // this thread after every send, and a send between the check and the park leaves
            // the token that makes the park return at once.
            let first = match rx.try_recv() {
                Ok(m) => m,
                Err(TryRecvError::Empty) => {
                    let now = Instant::now();
                    if now >= tick_at {
                        self.tick();
                        tick_at = Instant::now() + self.next_tick_in();
                    } else {
                        std::thread::park_timeout(tick_at - now);
                    }
                    continue;
                }
                Err(TryRecvError::Disconnected) => return Ok(()),
            };
            let req = match first {
                Msg::Append(r) => r,
                Msg::DropTopic { topic, done } => {
                    self.drop_topic(&topic, done);
                    continue;
                }
                Msg::StartAt { offset, done } => {
                    self.start_at(offset, done);
                    continue;
                }
                Msg::TruncateTo { offset, done } => {
                    self.truncate_to(offset, done);
                    continue;
                }
                Msg::Shutdown => return self.clean_shutdown(&rx),
                Msg::Abandon => return Ok(()),
            };
            let mut records = req.records.len();
            let mut bytes: usize = req.records.iter().map(|r| r.stored_len()).sum();
            let mut batch = vec![req];
            let mut stop = None;
            while records < WRITER_BATCH_MAX_RECORDS && bytes < WRITER_BATCH_MAX_BYTES {
                match rx.try_recv() {
                    Ok(Msg::Append(r)) => {
                        records += r.records.len();
                        bytes += r.records.iter().map(|r| r.stored_len()).sum::<usize>();
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
            self.index_durable();
            match stop {
                Some(Msg::Shutdown) => return self.clean_shutdown(&rx),
                Some(Msg::Abandon) => return Ok(()),
                Some(Msg::DropTopic { topic, done }) => self.drop_topic(&topic, done),
                Some(Msg::StartAt { offset, done }) => self.start_at(offset, done),
                Some(Msg::TruncateTo { offset, done }) => self.truncate_to(offset, done),
                _ => {}
            }
            self.tick();
            tick_at = Instant::now() + self.next_tick_in();
        }
    }

    /// Topic deletion: the topic's queues start again at offset 0. Appends received before
    /// this message were processed first, so their offsets are the old ones, and `done` runs
    /// once their units are dispatched: here under ASYNC_FLUSH; under SYNC_FLUSH behind them
    /// on the group-commit thread (an empty request whose only waiter is `done`), so no unit
    /// of the deleted queues reaches a shard after the shards dropped them.
    fn drop_topic(&mut self, topic: &str, done: Box<dyn FnOnce() + Send>) {
        self.queue_offsets.remove(topic);
        let Completion::GroupCommit(gc) = &self.completion else {
            return done();
        };
        let barrier = GroupCommitRequest {
            files: Vec::new(),
            upto_phy: self.log.max_phy_offset(),
            store_timestamp: self.log.last_store_timestamp(),
            units: Vec::new(),
            waiters: vec![(
                Box::new(move |_| done()),
                AppendOutcome {
                    status: AppendStatus::PutOk,
                    phy_offsets: Vec::new(),
                    queue_offsets: Vec::new(),
                    store_timestamp: 0,
                },
            )],
            deadline: None,
            truncate: None,
        };
        if let Err(back) = gc.submit(barrier) {
            // The thread is gone: nothing more will be dispatched.
            for (reply, _) in back.waiters {
                reply(Err(StoreError::NotWritable(
                    "the group-commit thread stopped".into(),
                )));
            }
        }
    }

    /// An empty commit log begins at `offset` (`CommitLog::start_empty_at`); the published
    /// bounds and the flush threads' positions move with it.
    fn start_at(&mut self, offset: u64, done: StartReply) {
        let res = self.log.start_empty_at(offset);
        match &res {
            Ok(()) => {
                let (min, max) = (self.log.min_phy_offset(), self.log.max_phy_offset());
                self.async_submitted = max;
                if let Some(f) = &self.flusher {
                    f.state.flushed_phy.fetch_max(max, Ordering::AcqRel);
                }
                if let Completion::GroupCommit(gc) = &self.completion {
                    gc.state.flushed_phy.fetch_max(max, Ordering::AcqRel);
                }
                self.published
                    .read_bounds
                    .min_phy
                    .store(min, Ordering::Release);
                self.published.publish(max);
            }
            // Refused before anything changed.
            Err(StoreError::Invalid(_)) => {}
            Err(e) => {
                tracing::error!(error = %e, "the commit log could not begin again; refusing appends");
                self.flush_failed = true;
                self.publish_writable();
            }
        }
        done(res);
    }

    fn validate(&self, req: &AppendRequest) -> Result<(), StoreError> {
        if req.records.first().is_some_and(|r| r.topic.is_none()) {
            return Err(StoreError::Invalid(
                "the first record of an append names no topic".into(),
            ));
        }
        let max = self.cfg.max_record_len();
        for rec in &req.records {
            if rec.stored_len() > max {
                return Err(StoreError::MessageTooLarge {
                    size: rec.stored_len(),
                    max,
                });
            }
            match message::peek_total_size(&rec.bytes) {
                Ok(t) if t as usize == rec.stored_len() && split_ok(rec) => {}
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
        self.observe_flush_failure();
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
        let start_phy = self.log.max_phy_offset();
        let records: usize = ok_reqs.iter().map(|r| r.records.len()).sum();
        // (req, rec, previous next offset)
        let mut undo: Vec<(usize, usize, u64)> = Vec::with_capacity(records);
        let mut placed: Vec<(Vec<u64>, Vec<u64>)> = Vec::with_capacity(ok_reqs.len());
        let mut units = Vec::new();
        let mut failure = None;
        'write: for (ri, req) in ok_reqs.iter_mut().enumerate() {
            let mut phys = Vec::with_capacity(req.records.len());
            let mut qos = Vec::with_capacity(req.records.len());
            // One clone per record that names its topic (once per batch on the send path).
            let mut current: Option<Arc<str>> = None;
            for (ci, rec) in req.records.iter_mut().enumerate() {
                if let Some(t) = &rec.topic {
                    current = Some(t.clone());
                }
                let Some(topic) = current.as_ref() else {
                    // Refused by `validate`; kept as an error rather than a panic.
                    failure = Some(StoreError::Invalid("a record names no topic".into()));
                    break 'write;
                };
                // A replicated record keeps the master's queue offset, offset and store time.
                let replica = if rec.replicated {
                    match message::replica_fields(&rec.bytes) {
                        Some(f) => Some(f),
                        None => {
                            failure = Some(StoreError::Invalid(
                                "a replicated record too short for its fixed fields".into(),
                            ));
                            break 'write;
                        }
                    }
                } else {
                    None
                };
                let rts = replica.map_or(ts, |(_, _, t)| t);
                let qo = if rec.dispatch {
                    let next = self
                        .queue_offsets
                        .entry_ref(&**topic)
                        .or_default()
                        .entry(rec.queue_id)
                        .or_insert(0);
                    let v = *next;
                    let qo = replica.map_or(v, |(q, _, _)| q);
                    *next = qo + 1;
                    undo.push((ri, ci, v));
                    qo
                } else {
                    replica.map_or(0, |(q, _, _)| q)
                };
                match self.log.place(&rec.bytes, rec.stored_len()) {
                    Ok(phy) => {
                        match replica {
                            Some((_, at, _)) if at != phy => {
                                failure = Some(StoreError::Invalid(format!(
                                    "a replicated record of offset {at} would land at {phy}: \
                                     this commit log does not follow its master's"
                                )));
                                break 'write;
                            }
                            Some(_) => {}
                            None => message::patch(&mut rec.bytes, qo as i64, phy as i64, ts),
                        }
                        phys.push(phy);
                        qos.push(qo);
                        if rec.dispatch {
                            let unit = CqUnit {
                                phy_offset: phy,
                                size: rec.stored_len() as u32,
                                tags_code: rec.tags_code.resolve(rts),
                            };
                            // Producers spread sends over the queues round robin, so the
                            // run this unit continues is often a few runs back: one run (and
                            // one allocation) per queue and batch, not per record.
                            let extended = units.iter_mut().rev().take(DISPATCH_RUN_LOOKBACK).any(
                                |r: &mut DispatchRun| r.try_extend(topic, rec.queue_id, qo, unit),
                            );
                            if !extended {
                                units.push(DispatchRun {
                                    topic: topic.clone(),
                                    queue_id: rec.queue_id,
                                    first_queue_offset: qo,
                                    units: vec![unit],
                                    store_timestamp: rts,
                                });
                            }
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
        if failure.is_none() {
            let recs: Vec<(u64, [&[u8]; 3])> = ok_reqs
                .iter()
                .zip(&placed)
                .flat_map(|(req, (phys, _))| {
                    phys.iter()
                        .copied()
                        .zip(req.records.iter().map(AppendRecord::parts))
                })
                .collect();
            if let Err(e) = self.log.write_placed(&recs, ts) {
                failure = Some(e);
            }
        }
        if let Some(e) = failure {
            tracing::error!(error = %e, "append batch failed; rolled back");
            self.log.rollback(mark);
            for &(ri, ci, prev) in undo.iter().rev() {
                let records = &ok_reqs[ri].records;
                let Some((Some(topic), rec)) = super::with_topics(records).nth(ci) else {
                    continue; // validated: every record has a topic
                };
                if let Some(q) = self.queue_offsets.get_mut(&**topic) {
                    q.insert(rec.queue_id, prev);
                }
            }
            fail_requests(ok_reqs, e);
            return;
        }
        let written = Written {
            reqs: ok_reqs,
            placed,
            units,
            store_timestamp: ts,
        };
        if matches!(self.completion, Completion::Inline(_)) {
            self.complete_inline(written);
        } else {
            // The segments the batch touched, for the group-commit thread's fdatasync.
            let files = self.segment_files_since(start_phy);
            self.hand_to_group_commit(written, files);
        }
    }

    /// ASYNC_FLUSH: publish, dispatch, reply, index, all on this thread.
    fn complete_inline(&mut self, w: Written) {
        let Completion::Inline(dispatcher) = &mut self.completion else {
            unreachable!("called in ASYNC_FLUSH mode only");
        };
        self.published.publish(self.log.max_phy_offset());
        if !w.units.is_empty() {
            dispatcher.dispatch(w.units);
        }
        let mut records_for_index = Vec::with_capacity(w.reqs.len());
        for (req, (phys, qos)) in w.reqs.into_iter().zip(w.placed) {
            let outcome = AppendOutcome {
                status: AppendStatus::PutOk,
                phy_offsets: phys.clone(),
                queue_offsets: qos,
                store_timestamp: w.store_timestamp,
            };
            (req.reply)(Ok(outcome));
            records_for_index.push((req.records, phys));
        }
        self.index_batch(records_for_index, w.store_timestamp);
    }

    /// SYNC_FLUSH: wait_flush = false requests are answered now; the rest, the units and the
    /// publish go to the group-commit thread; keys are indexed once the batch is durable.
    fn hand_to_group_commit(&mut self, w: Written, files: Vec<(u64, Arc<std::fs::File>)>) {
        let index_enabled = self.index.is_some();
        let mut waiters: Vec<(AppendReply, AppendOutcome)> = Vec::with_capacity(w.reqs.len());
        let mut to_index = Vec::new();
        for (req, (phys, qos)) in w.reqs.into_iter().zip(w.placed) {
            let AppendRequest {
                mut records,
                wait_flush,
                reply,
            } = req;
            if index_enabled && records.iter().any(|r| !r.keys.is_empty()) {
                // Only topic and keys are indexed: free what they do not need now, not after the
                // fdatasync. Keys given as ranges into `bytes` keep `bytes`.
                for r in &mut records {
                    r.body = bytes::Bytes::new();
                    if !matches!(r.keys, super::IndexKeys::InRecord { .. }) {
                        r.bytes = bytes::BytesMut::new();
                    }
                }
                to_index.push((records, phys.clone()));
            }
            let outcome = AppendOutcome {
                status: AppendStatus::PutOk,
                phy_offsets: phys,
                queue_offsets: qos,
                store_timestamp: w.store_timestamp,
            };
            if wait_flush {
                waiters.push((reply, outcome));
            } else {
                reply(Ok(outcome));
            }
        }
        let upto_phy = self.log.max_phy_offset();
        let timeout = Duration::from_millis(self.cfg.sync_flush_timeout_ms);
        let req = GroupCommitRequest {
            files,
            upto_phy,
            store_timestamp: w.store_timestamp,
            units: w.units,
            waiters,
            deadline: Instant::now().checked_add(timeout),
            truncate: None,
        };
        let Completion::GroupCommit(gc) = &self.completion else {
            unreachable!("called in SYNC_FLUSH mode only");
        };
        if let Err(back) = gc.submit(req) {
            // The thread is gone: nothing written from here on can become durable.
            tracing::error!("group-commit thread stopped; refusing further appends");
            self.flush_failed = true;
            self.publish_writable();
            let e = StoreError::NotWritable("the group-commit thread stopped".into());
            let template = replicate(&e);
            let mut first = Some(e);
            for (reply, _) in back.waiters {
                reply(Err(first.take().unwrap_or_else(|| replicate(&template))));
            }
            return;
        }
        if !to_index.is_empty() {
            self.index_pending.push_back(IndexPending {
                upto_phy,
                store_timestamp: w.store_timestamp,
                done: to_index,
            });
        }
    }

    /// (segment start, file handle) of every segment holding bytes in `[from, max_phy)`.
    fn segment_files_since(&self, from: u64) -> Vec<(u64, Arc<std::fs::File>)> {
        let end = self.log.max_phy_offset();
        self.log
            .segments()
            .iter()
            .filter(|s| s.end() > from && s.start() < end)
            .map(|s| (s.start(), s.shared_file()))
            .collect()
    }

    /// SYNC_FLUSH: indexes the pending batches the group-commit thread made durable.
    fn index_durable(&mut self) {
        let Completion::GroupCommit(gc) = &self.completion else {
            return;
        };
        let flushed = gc.state.flushed_phy.load(Ordering::Acquire);
        while self
            .index_pending
            .front()
            .is_some_and(|p| p.upto_phy <= flushed)
        {
            let p = self.index_pending.pop_front().expect("front checked");
            self.index_batch(p.done, p.store_timestamp);
        }
    }

    /// Takes note of a failed background flush (either mode): appends are refused from now on
    /// and records not made durable are never indexed.
    fn observe_flush_failure(&mut self) {
        let failed = match (&self.flusher, &self.completion) {
            (Some(f), _) => f.state.failed.load(Ordering::Acquire),
            (None, Completion::GroupCommit(gc)) => gc.state.failed.load(Ordering::Acquire),
            (None, Completion::Inline(_)) => false,
        };
        if failed && !self.flush_failed {
            self.flush_failed = true;
            self.publish_writable();
            self.index_durable();
            self.index_pending.clear();
        }
    }

    /// Index keys after the replies: off the reply path.
    fn index_batch(&mut self, done: Vec<(Vec<super::AppendRecord>, Vec<u64>)>, ts: i64) {
        let Some(ix) = self.index.as_mut() else {
            return;
        };
        for (records, phys) in done {
            let mut keys: Vec<&str> = Vec::new();
            for ((topic, rec), phy) in super::with_topics(&records).zip(phys) {
                keys.clear();
                rec.keys.collect(&rec.bytes, &mut keys);
                let Some(topic) = topic.filter(|_| !keys.is_empty()) else {
                    continue;
                };
                if let Err(e) = ix.put(topic, &keys, phy, ts) {
                    tracing::error!(error = %e, topic = %topic, "index put failed");
                }
            }
        }
        self.last_index_timestamp = ts;
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
        // Both threads finish what they were given (the group-commit thread replies to it).
        if let Some(f) = self.flusher.as_mut() {
            f.stop();
        }
        if let Completion::GroupCommit(gc) = &mut self.completion {
            gc.stop();
        }
        self.observe_flush_failure();
        self.index_durable();
        // Files detached by retention are unlinked now (no pause: no appends left to protect).
        self.deleter.finish();
        if self.flush_failed {
            // After a failed fdatasync the page cache may not match the disk: leave the abort
            // file so the next start verifies the tail record by record.
            return Err(StoreError::NotWritable(
                "a commit-log flush failed; the next start recovers from the commit log".into(),
            ));
        }
        self.log.flush()?;
        let stopped = self
            .checkpointer
            .take()
            .and_then(Checkpointer::stop)
            .ok_or_else(|| StoreError::NotWritable("the checkpoint thread is gone".into()))?;
        let mut checkpoint = stopped.checkpoint;
        if let Some(ix) = self.index.as_mut() {
            ix.flush()?;
            if !stopped.index_sync_failed {
                // max: a run that indexed nothing keeps the periodic (or previous) value.
                checkpoint.index_msg_timestamp = checkpoint
                    .index_msg_timestamp
                    .max(self.last_index_timestamp);
            }
        }
        checkpoint.physic_msg_timestamp = self.log.flushed_store_timestamp();
        checkpoint.flush()?;
        remove_abort(&self.cfg.store_path_root_dir)?;
        drop(self.log.release_lock());
        Ok(())
    }
}
