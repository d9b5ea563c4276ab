//! The writer thread's event loop, on its own io_uring ring (`writer::ring`): take a batch from
//! the inbox, assign offsets and write it into the mapped segment, then complete it: under
//! ASYNC_FLUSH publish, dispatch and reply at once; under SYNC_FLUSH keep it until the
//! fdatasync round covering it completes on the ring (`commit`). Between batches it reaps the
//! ring, runs the periodic async flush, checkpoint, index checkpoint and retention
//! (`housekeeping`), and, when asked, truncates the commit log back to an earlier record
//! (`truncate`). It sleeps only in the ring: a completion, a timeout or a sender's wake ends it.
//!
//! Back-pressure: while the dispatcher keeps completions a shard has no room for, or too many
//! groups wait for a sync, the writer takes no appends (its inbox fills and senders get busy)
//! and goes on reaping; a shard that drains its queue wakes it. It never sleeps on a shard.
//!
//! Runs only on the "ringmq-writer" thread (see `writer/mod.rs` for the invariants).

mod commit;
mod housekeeping;
mod truncate;

pub use commit::GroupCommitStats;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};

use self::commit::{Durable, Group, Waiter};
use super::batch_stats::BatchStats;
use super::checkpointer::Checkpointer;
use super::failure_log::FailureLog;
use super::index_checkpoint::IndexCheckpoint;
use super::ring::Ring;
use super::{
    replicate, AppendOutcome, AppendRecord, AppendRequest, AppendStatus, DispatchRun, Dispatcher,
    Msg, Published, Replies, ReplyTo, StartReply, WriterParts,
};
use crate::common::now_ms;
use crate::constants::{WRITER_BATCH_MAX_BYTES, WRITER_BATCH_MAX_RECORDS};
use crate::deleter::FileDeleter;
use crate::files::remove_abort;
use crate::protocol::message;
use crate::warm_gate::WarmGate;
use crate::{retention, CommitLog, CqUnit, FlushDiskType, IndexService, StoreConfig, StoreError};

/// How long a clean shutdown waits for the last syncs and for the shards to take the last
/// completions.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

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
    dispatcher: Box<dyn Dispatcher>,
    published: Arc<Published>,
    ring: Ring,
    /// Completions reaped from the ring (kept to reuse its allocation).
    reaped: Vec<(u64, i32)>,
    durable: Durable,
    /// Told when each sync round starts and ends, so the next segment's warming writes only
    /// while the disk is idle.
    warm_gate: Option<Arc<WarmGate>>,
    /// SYNC_FLUSH: written requests with index keys, waiting for their covering fdatasync
    /// (bounded by the groups waiting for a sync).
    index_pending: VecDeque<IndexPending>,
    disk_writable: bool,
    flush_failed: bool,
    last_flush: Instant,
    last_thorough: Instant,
    last_retention: Instant,
    last_index_timestamp: i64,
    /// Unlinks the files retention detaches ("ringmq-clean"), off this thread.
    deleter: FileDeleter,
    /// Periodically has the index synced and its timestamp checkpointed (off this thread).
    index_checkpoint: IndexCheckpoint,
    /// Failed batches, said once and then counted.
    failures: FailureLog,
    /// Written batches, for the metrics endpoint.
    batch_stats: Arc<BatchStats>,
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
        ring: Ring,
    ) -> Result<Self, StoreError> {
        let mut queue_offsets: hashbrown::HashMap<String, hashbrown::HashMap<u32, u64>> =
            hashbrown::HashMap::new();
        for ((topic, qid), next) in parts.queue_offsets {
            queue_offsets.entry(topic).or_default().insert(qid, next);
        }
        let log = &parts.commit_log;
        let durable = Durable::new(
            cfg.flush_disk_type,
            log.flushed_phy_offset(),
            log.flushed_store_timestamp(),
            cfg.fault.clone(),
            log.dir().to_path_buf(),
        );
        let warm_gate = match cfg.flush_disk_type {
            FlushDiskType::SyncFlush => log.warm_gate(),
            FlushDiskType::AsyncFlush => None,
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
            log: parts.commit_log,
            index: parts.index,
            queue_offsets,
            checkpoint_ts: parts.checkpoint.physic_msg_timestamp,
            checkpointer: Some(Checkpointer::spawn(parts.checkpoint, cfg.fault.clone())?),
            cfg,
            dispatcher,
            published,
            ring,
            reaped: Vec::new(),
            durable,
            warm_gate,
            index_pending: VecDeque::new(),
            disk_writable: true,
            flush_failed: false,
            last_flush: now,
            last_thorough: now,
            last_retention: first_retention,
            last_index_timestamp: 0,
            deleter,
            index_checkpoint,
            failures: FailureLog::default(),
            batch_stats: Arc::default(),
        })
    }

    /// The batch figures, shared with whoever reads them.
    pub(super) fn batch_stats(&self) -> Arc<BatchStats> {
        self.batch_stats.clone()
    }

    /// The group-commit figures (SYNC_FLUSH only).
    pub(super) fn group_commit_stats(&self) -> Option<Arc<GroupCommitStats>> {
        (self.cfg.flush_disk_type == FlushDiskType::SyncFlush).then(|| self.durable.stats.clone())
    }

    /// Whether the writer may take appends now: the shards took every completion, and the
    /// groups waiting for a sync are within their bound.
    fn can_take(&mut self) -> bool {
        self.dispatcher.flush() && self.durable.has_room()
    }

    pub(super) fn run(&mut self, rx: Receiver<Msg>) -> Result<(), StoreError> {
        let sync = self.cfg.flush_disk_type == FlushDiskType::SyncFlush;
        if let Some(cores) = self.cfg.threads.ring_worker_cores(sync) {
            // Only placement: the syncs run wherever the kernel puts them if this fails.
            if let Err(e) = self.ring.set_worker_cores(&cores) {
                tracing::warn!(error = %e, ?cores, "cannot place the writer ring's kernel workers");
            }
        }
        let mut tick_at = Instant::now() + self.next_tick_in();
        loop {
            self.reap();
            self.maybe_start_round(false);
            // Every turn ends here or sleeps after it with nothing written or synced between.
            self.published
                .note_progress(self.log.max_phy_offset(), self.durable.flushed_phy);
            if self.can_take() {
                match rx.try_recv() {
                    Ok(m) => {
                        if let Some(stop) = self.handle(m, &rx) {
                            return stop;
                        }
                        if Instant::now() >= tick_at {
                            self.tick();
                            tick_at = Instant::now() + self.next_tick_in();
                        }
                        continue;
                    }
                    Err(TryRecvError::Disconnected) => return Ok(()),
                    Err(TryRecvError::Empty) => {}
                }
            }
            let now = Instant::now();
            if now >= tick_at {
                self.tick();
                tick_at = Instant::now() + self.next_tick_in();
                continue;
            }
            let until = self.durable.hold_until.map_or(tick_at, |h| h.min(tick_at));
            let timeout = until.saturating_duration_since(now);
            let (dispatcher, durable) = (&mut self.dispatcher, &self.durable);
            // Asleep from here: anything a sender or a shard did since the checks above is seen
            // by `ready` or wakes the ring.
            let ready = || dispatcher.flush() && durable.has_room() && !rx.is_empty();
            if let Err(e) = self.ring.wait(timeout, ready) {
                tracing::error!(error = %e, "the writer's ring failed; stopping");
                return Err(StoreError::io(self.log.dir(), e));
            }
        }
    }

    /// One message of the inbox (an append takes the ones behind it into its batch). Some when
    /// the loop ends.
    fn handle(&mut self, first: Msg, rx: &Receiver<Msg>) -> Option<Result<(), StoreError>> {
        let req = match first {
            Msg::Append(r) => r,
            other => return self.handle_other(other, rx),
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
        self.maybe_start_round(false);
        self.eager_async_flush();
        stop.and_then(|m| self.handle_other(m, rx))
    }

    fn handle_other(&mut self, m: Msg, rx: &Receiver<Msg>) -> Option<Result<(), StoreError>> {
        match m {
            Msg::Append(r) => self.process(vec![r]),
            Msg::DropTopic { topic, done } => self.drop_topic(&topic, done),
            Msg::StartAt { offset, done } => self.start_at(offset, done),
            Msg::TruncateTo { offset, done } => self.truncate_to(offset, done),
            Msg::Shutdown => return Some(self.clean_shutdown(rx)),
            Msg::Abandon => return Some(Ok(())),
        }
        None
    }

    /// Topic deletion: the topic's queues start again at offset 0. Appends received before
    /// this message were processed first, so their offsets are the old ones, and `done` is
    /// answered behind their units on every shard (`Dispatcher::barrier`), under SYNC_FLUSH
    /// once their group commit completed, so no unit of the deleted queues reaches a shard
    /// after the shards dropped them.
    fn drop_topic(&mut self, topic: &str, done: ReplyTo) {
        self.queue_offsets.remove(topic);
        if let Some(done) = self.durable.push_barrier(done) {
            self.barrier(done);
        }
    }

    /// Answers `done` once every unit completed so far is applied on every shard.
    pub(super) fn barrier(&mut self, done: ReplyTo) {
        match done {
            ReplyTo::Shard { shard, token } => self.dispatcher.barrier(super::ShardReply {
                shard,
                token,
                result: Ok(commit::empty_outcome()),
            }),
            ReplyTo::Call(f) => f(Ok(commit::empty_outcome())),
        }
    }

    /// An empty commit log begins at `offset` (`CommitLog::start_empty_at`); the published
    /// bounds and the durable positions move with it.
    fn start_at(&mut self, offset: u64, done: StartReply) {
        let res = self.log.start_empty_at(offset);
        match &res {
            Ok(()) => {
                let (min, max) = (self.log.min_phy_offset(), self.log.max_phy_offset());
                if self.durable.idle() {
                    self.durable.reset_to(max);
                } else {
                    // A round in flight completes with the old end; `max` only moves up.
                    self.durable.flushed_phy = self.durable.flushed_phy.max(max);
                    self.durable.submitted_phy = self.durable.submitted_phy.max(max);
                }
                self.published
                    .read_bounds
                    .min_phy
                    .store(min, std::sync::atomic::Ordering::Release);
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
        #[cfg(feature = "testkit")]
        super::testkit::panic_switch(req.records.first().and_then(|r| r.topic.as_deref()));
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
        // Requests refused by the store's state (all the same error) and by their own content.
        let mut refused = Vec::new();
        let mut refused_each = Vec::new();
        let refusal = self.refusal();
        for req in batch {
            match &refusal {
                Some(_) => refused.push(req.reply),
                None => match self.validate(&req) {
                    Ok(()) => ok_reqs.push(req),
                    Err(e) => refused_each.push((req.reply, e)),
                },
            }
        }
        if let Some(e) = refusal {
            return self.refuse(refused, e);
        }
        if ok_reqs.is_empty() {
            return self.refuse_each(refused_each);
        }
        let ts = now_ms();
        let mark = self.log.mark();
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
            match self.log.write_placed(&recs, ts) {
                Ok(()) => {
                    let bytes = recs
                        .iter()
                        .map(|(_, parts)| parts.iter().map(|p| p.len() as u64).sum::<u64>())
                        .sum();
                    self.batch_stats.record(ok_reqs.len(), records, bytes);
                }
                Err(e) => failure = Some(e),
            }
        }
        if let Some(e) = failure {
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
            self.failures.failed(&e);
            refused.extend(ok_reqs.into_iter().map(|r| r.reply));
            return self.refuse(refused, e);
        }
        self.failures.succeeded();
        self.refuse_each(refused_each);
        self.complete(ok_reqs, placed, units, ts);
    }

    /// A written batch: under ASYNC_FLUSH published, dispatched, answered and indexed now;
    /// under SYNC_FLUSH kept as a group until its sync round completes (`commit`), its keys
    /// indexed then.
    fn complete(
        &mut self,
        reqs: Vec<AppendRequest>,
        placed: Vec<(Vec<u64>, Vec<u64>)>,
        units: Vec<DispatchRun>,
        ts: i64,
    ) {
        let sync = self.cfg.flush_disk_type == FlushDiskType::SyncFlush;
        let index_enabled = self.index.is_some();
        let mut waiters = Vec::with_capacity(reqs.len());
        let mut to_index = Vec::new();
        for (req, (phys, qos)) in reqs.into_iter().zip(placed) {
            let AppendRequest {
                mut records,
                wait_flush,
                reply,
            } = req;
            if index_enabled && records.iter().any(|r| !r.keys.is_empty()) {
                if sync {
                    // Only topic and keys are indexed: free what they do not need now, not
                    // after the fdatasync. Keys given as ranges into `bytes` keep `bytes`.
                    for r in &mut records {
                        r.body = bytes::Bytes::new();
                        if !matches!(r.keys, super::IndexKeys::InRecord { .. }) {
                            r.bytes = bytes::BytesMut::new();
                        }
                    }
                }
                to_index.push((records, phys.clone()));
            }
            let outcome = AppendOutcome {
                status: AppendStatus::PutOk,
                phy_offsets: phys,
                queue_offsets: qos,
                store_timestamp: ts,
            };
            waiters.push(Waiter {
                reply,
                outcome,
                timed: wait_flush,
            });
        }
        let upto_phy = self.log.max_phy_offset();
        if !sync {
            self.published.publish(upto_phy);
            let mut replies = Replies::default();
            for w in waiters {
                replies.push(w.reply, Ok(w.outcome));
            }
            replies.deliver(self.dispatcher.as_mut(), units);
            self.index_batch(to_index, ts);
            return;
        }
        let timeout = Duration::from_millis(self.cfg.sync_flush_timeout_ms);
        self.durable.push_group(Group {
            upto_phy,
            store_timestamp: ts,
            units,
            waiters,
            barriers: Vec::new(),
            deadline: Instant::now().checked_add(timeout),
        });
        if !to_index.is_empty() {
            self.index_pending.push_back(IndexPending {
                upto_phy,
                store_timestamp: ts,
                done: to_index,
            });
        }
    }

    /// Every reply gets (a copy of) `e`.
    pub(super) fn refuse(&mut self, to: Vec<ReplyTo>, e: StoreError) {
        let template = replicate(&e);
        let mut first = Some(e);
        let mut replies = Replies::default();
        for r in to {
            replies.push(r, Err(first.take().unwrap_or_else(|| replicate(&template))));
        }
        replies.deliver(self.dispatcher.as_mut(), Vec::new());
    }

    /// Each reply gets its own error.
    fn refuse_each(&mut self, each: Vec<(ReplyTo, StoreError)>) {
        if each.is_empty() {
            return;
        }
        let mut replies = Replies::default();
        for (r, e) in each {
            replies.push(r, Err(e));
        }
        replies.deliver(self.dispatcher.as_mut(), Vec::new());
    }

    /// SYNC_FLUSH: indexes the pending batches a sync round made durable.
    fn index_durable(&mut self) {
        let flushed = self.durable.flushed_phy;
        while self
            .index_pending
            .front()
            .is_some_and(|p| p.upto_phy <= flushed)
        {
            let p = self.index_pending.pop_front().expect("front checked");
            self.index_batch(p.done, p.store_timestamp);
        }
    }

    /// Takes note of a failed flush (either mode): appends are refused from now on and records
    /// not made durable are never indexed.
    fn observe_flush_failure(&mut self) {
        if self.durable.failed && !self.flush_failed {
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
        if done.is_empty() {
            return;
        }
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
        let deadline = Instant::now() + SHUTDOWN_WAIT;
        // Every sync submitted completes (and its groups are answered) before anything else.
        let drained = self.drain_rounds(deadline);
        while !self.dispatcher.flush() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if !self.dispatcher.flush() {
            tracing::warn!("shards did not take the last completions before the writer stopped");
        }
        self.observe_flush_failure();
        self.index_durable();
        // Files detached by retention are unlinked now (no pause: no appends left to protect).
        self.deleter.finish();
        if self.flush_failed || drained.is_err() {
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
