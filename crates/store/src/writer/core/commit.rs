//! What makes written records durable, on the writer's own ring (`writer::ring`): under
//! SYNC_FLUSH the group commit (RocketMQ's GroupCommitService), under ASYNC_FLUSH the background
//! flush (FlushRealTimeService). Both are rounds of fdatasyncs, one per segment file touched,
//! submitted to the ring while the writer goes on writing, and completed when the writer reaps
//! them: a group commit is the completion of a sync, not a hand-off to another thread.
//!
//! SYNC_FLUSH: each written batch becomes a `Group` waiting in `unsynced`; a round covers every
//! group written before it starts, and when it completes the writer publishes the new end,
//! dispatches the groups' units and replies, in commit-log order, then starts the next round at
//! once for what was written meanwhile (one round in flight at a time). Nothing is published,
//! dispatched or acknowledged before the fdatasync covering it returned Ok; after a failed one
//! `failed` is set, that round's groups and every later one get an error, and the durable end
//! never moves again (recovery on restart judges the tail).

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::WriterCore;
use crate::constants::{GROUP_COMMIT_MAX_WAIT, GROUP_COMMIT_QUEUE_CAPACITY};
use crate::fault::{FaultHook, FaultPoint};
use crate::writer::{AppendOutcome, AppendStatus, DispatchRun, Replies, ReplyTo};
use crate::{FlushDiskType, StoreError};

/// Figures for tuning and the bench: how many records and bytes one fdatasync round covers.
#[derive(Debug, Default)]
pub struct GroupCommitStats {
    /// fdatasync rounds (one per group commit, however many segments it touched).
    pub group_commits: AtomicU64,
    /// Records acknowledged by group commits.
    pub records: AtomicU64,
    /// Commit-log bytes made durable.
    pub bytes: AtomicU64,
    /// Time from a round's submission to its completion being reaped (the fdatasync, the
    /// kernel worker's hand-off, the writer's wake-up).
    pub sync_us_total: AtomicU64,
    /// Where the rest of a round goes, summed over rounds (SYNC_FLUSH):
    /// from the reap to the replies handed over (publish, dispatch, replies);
    pub deliver_us_total: AtomicU64,
    /// from the replies handed over to the first batch of the next round written (the
    /// appenders' turnaround: their wake-up, their next appends, the writer's wake-up, the
    /// first write);
    pub turnaround_us_total: AtomicU64,
    /// from that first write to the next round's submission (the cohort wait for the other
    /// appenders and their writes).
    pub gather_us_total: AtomicU64,
}

/// An append's reply, held until its group is durable.
pub(super) struct Waiter {
    pub reply: ReplyTo,
    pub outcome: AppendOutcome,
    /// Answered FLUSH_DISK_TIMEOUT when its round completes past the group's deadline (a send
    /// that waits for the flush; the others are answered with the group all the same, since
    /// nothing is readable before it is durable).
    pub timed: bool,
}

/// One written batch waiting for its fdatasync (SYNC_FLUSH).
pub(super) struct Group {
    pub upto_phy: u64,
    pub store_timestamp: i64,
    pub units: Vec<DispatchRun>,
    pub waiters: Vec<Waiter>,
    /// Barriers (a topic's deletion) answered once this group's units are applied on every
    /// shard (`Dispatcher::barrier`, after the group's completions).
    pub barriers: Vec<ReplyTo>,
    /// Written at + syncFlushTimeout (None: too far to represent).
    pub deadline: Option<Instant>,
}

/// A round of fdatasyncs in flight.
struct Round {
    /// The `user_data` of its syncs.
    id: u64,
    /// Kept open until every sync is reaped.
    files: Vec<Arc<File>>,
    pending: usize,
    upto_phy: u64,
    store_timestamp: i64,
    /// How many groups of `unsynced` it covers (SYNC_FLUSH).
    groups: usize,
    started: Instant,
    error: Option<StoreError>,
}

pub(super) struct Durable {
    mode: FlushDiskType,
    unsynced: VecDeque<Group>,
    round: Option<Round>,
    next_id: u64,
    /// The durable end of the commit log and the store time of its last record.
    pub flushed_phy: u64,
    pub flushed_timestamp: i64,
    /// ASYNC_FLUSH: the end the last round submitted covers.
    pub submitted_phy: u64,
    /// An fdatasync failed: nothing becomes durable any more.
    pub failed: bool,
    /// Cohort merge: without it N synchronous appenders settle into two cohorts taking turns
    /// (one waits for its fdatasync while the other is written), each sync covering N/2. A new
    /// round waits briefly for as many waiters as the last one released, at most half the last
    /// round and GROUP_COMMIT_MAX_WAIT; a wait that times out lowers `expect`.
    expect: usize,
    last_round: Duration,
    pub hold_until: Option<Instant>,
    pub stats: Arc<GroupCommitStats>,
    fault: Option<FaultHook>,
    dir: std::path::PathBuf,
    /// For the round breakdown in `GroupCommitStats`: when the last round's replies were
    /// handed over, and when the first group after them was written.
    delivered_at: Option<Instant>,
    first_group_at: Option<Instant>,
}

impl Durable {
    pub fn new(
        mode: FlushDiskType,
        flushed_phy: u64,
        flushed_timestamp: i64,
        fault: Option<FaultHook>,
        dir: std::path::PathBuf,
    ) -> Self {
        Durable {
            mode,
            unsynced: VecDeque::new(),
            round: None,
            next_id: 0,
            flushed_phy,
            flushed_timestamp,
            submitted_phy: flushed_phy,
            failed: false,
            expect: 0,
            last_round: Duration::ZERO,
            hold_until: None,
            stats: Arc::new(GroupCommitStats::default()),
            fault,
            dir,
            delivered_at: None,
            first_group_at: None,
        }
    }

    /// Whether another written group may wait for a sync (the bound on groups in flight; the
    /// writer takes no appends beyond it, so its inbox fills and senders get busy).
    pub fn has_room(&self) -> bool {
        self.unsynced.len() < 2 * GROUP_COMMIT_QUEUE_CAPACITY
    }

    /// Nothing written waits for a sync and no sync runs.
    pub fn idle(&self) -> bool {
        self.round.is_none() && self.unsynced.is_empty()
    }

    pub fn push_group(&mut self, g: Group) {
        if self.delivered_at.is_some() && self.first_group_at.is_none() {
            self.first_group_at = Some(Instant::now());
        }
        self.unsynced.push_back(g);
    }

    /// A barrier reply answered once every group written so far is completed (right away when
    /// none waits).
    pub fn push_barrier(&mut self, reply: ReplyTo) -> Option<ReplyTo> {
        let Some(last) = self.unsynced.back_mut() else {
            return Some(reply);
        };
        last.barriers.push(reply);
        None
    }

    /// Moves every durable position up to `end` (a log that began again at a later segment, or
    /// was truncated back: `end` then replaces them).
    pub fn reset_to(&mut self, end: u64) {
        self.flushed_phy = end;
        self.submitted_phy = end;
    }
}

pub(super) fn empty_outcome() -> AppendOutcome {
    AppendOutcome {
        status: AppendStatus::PutOk,
        phy_offsets: Vec::new(),
        queue_offsets: Vec::new(),
        store_timestamp: 0,
    }
}

impl WriterCore {
    /// SYNC_FLUSH: starts a round for the groups waiting, unless one runs or the cohort wait
    /// holds it (`force`: never hold, for shutdown and truncation).
    pub(super) fn maybe_start_round(&mut self, force: bool) {
        let d = &mut self.durable;
        if d.mode != FlushDiskType::SyncFlush || d.round.is_some() || d.unsynced.is_empty() {
            return;
        }
        if d.failed {
            let e = StoreError::NotWritable("an earlier commit-log flush failed".into());
            return self.fail_groups(usize::MAX, e);
        }
        let waiting: usize = d.unsynced.iter().map(|g| g.waiters.len()).sum();
        let now = Instant::now();
        if !force && waiting < d.expect && d.unsynced.len() < 2 * GROUP_COMMIT_QUEUE_CAPACITY {
            let until = *d
                .hold_until
                .get_or_insert_with(|| now + (d.last_round / 2).min(GROUP_COMMIT_MAX_WAIT));
            if now < until {
                return;
            }
        }
        d.hold_until = None;
        d.expect = waiting;
        if let (Some(delivered), Some(first)) = (d.delivered_at.take(), d.first_group_at.take()) {
            let us = |t: Duration| t.as_micros() as u64;
            let s = &d.stats;
            s.turnaround_us_total.fetch_add(
                us(first.saturating_duration_since(delivered)),
                Ordering::Relaxed,
            );
            s.gather_us_total
                .fetch_add(us(now.saturating_duration_since(first)), Ordering::Relaxed);
        }
        let last = d.unsynced.back().expect("checked non-empty");
        let (upto, ts) = (last.upto_phy, last.store_timestamp);
        let groups = d.unsynced.len();
        self.start_round(upto, ts, groups);
    }

    /// ASYNC_FLUSH: a round covering everything written, if none runs and at least `least`
    /// bytes are dirty (any amount when `thorough`).
    pub(super) fn start_async_flush(&mut self, least: u64, thorough: bool) {
        let d = &self.durable;
        if d.mode != FlushDiskType::AsyncFlush || d.round.is_some() || d.failed {
            return;
        }
        let dirty = self.log.max_phy_offset().saturating_sub(d.submitted_phy);
        if dirty == 0 || (dirty < least && !thorough) {
            return;
        }
        let (upto, ts) = (self.log.max_phy_offset(), self.log.last_store_timestamp());
        self.start_round(upto, ts, 0);
    }

    /// Submits one fdatasync per segment holding bytes past the durable end.
    fn start_round(&mut self, upto_phy: u64, store_timestamp: i64, groups: usize) {
        let from = self.durable.flushed_phy.max(self.log.min_phy_offset());
        let files = self.log.files_from(from);
        let id = self.durable.next_id;
        self.durable.next_id += 1;
        let mut round = Round {
            id,
            files,
            pending: 0,
            upto_phy,
            store_timestamp,
            groups,
            started: Instant::now(),
            error: None,
        };
        if let Err(e) = FaultHook::check(self.durable.fault.as_ref(), FaultPoint::Flush) {
            round.error = Some(StoreError::io(&self.durable.dir, e));
        } else {
            if let Some(g) = &self.warm_gate {
                g.sync_started();
            }
            for f in &round.files {
                // SAFETY: `round.files` keeps the descriptor open until the completion is reaped.
                match unsafe { self.ring.push_fdatasync(f.as_raw_fd(), id) } {
                    Ok(()) => round.pending += 1,
                    Err(e) => {
                        round.error = Some(StoreError::io(&self.durable.dir, e));
                        break;
                    }
                }
            }
            if let Err(e) = self.ring.submit() {
                round
                    .error
                    .get_or_insert(StoreError::io(&self.durable.dir, e));
            }
        }
        self.durable.submitted_phy = upto_phy;
        self.durable.round = Some(round);
        if self.durable.round.as_ref().is_some_and(|r| r.pending == 0) {
            self.round_done();
        }
    }

    /// One reaped fdatasync.
    pub(super) fn on_sync(&mut self, id: u64, result: i32) {
        let Some(r) = self.durable.round.as_mut().filter(|r| r.id == id) else {
            tracing::error!(id, "a completion for no round in flight");
            return;
        };
        r.pending = r.pending.saturating_sub(1);
        if result < 0 && r.error.is_none() {
            let e = std::io::Error::from_raw_os_error(-result);
            r.error = Some(StoreError::io(&self.durable.dir, e));
        }
        if r.pending == 0 {
            self.round_done();
        }
    }

    fn round_done(&mut self) {
        let Some(r) = self.durable.round.take() else {
            return;
        };
        let took = r.started.elapsed();
        if let Some(e) = r.error {
            tracing::error!(error = %e, "commit-log flush failed; refusing further appends");
            self.durable.failed = true;
            if let Some(g) = &self.warm_gate {
                g.sync_abandoned();
            }
            self.observe_flush_failure();
            return self.fail_groups(usize::MAX, e);
        }
        let bytes = r.upto_phy.saturating_sub(self.durable.flushed_phy);
        // max: a round submitted before an empty log began at a later offset carries the old end.
        self.durable.flushed_phy = self.durable.flushed_phy.max(r.upto_phy);
        self.durable.flushed_timestamp = self.durable.flushed_timestamp.max(r.store_timestamp);
        if self.durable.mode == FlushDiskType::AsyncFlush {
            return;
        }
        self.durable.last_round = took;
        let reaped = Instant::now();
        self.published.publish(r.upto_phy);
        let now = Instant::now();
        let mut units: Vec<DispatchRun> = Vec::new();
        let mut replies = Replies::default();
        let mut records = 0u64;
        let mut barriers = Vec::new();
        for g in self
            .durable
            .unsynced
            .drain(..r.groups.min(self.durable.unsynced.len()))
        {
            barriers.extend(g.barriers);
            if units.is_empty() {
                units = g.units;
            } else {
                units.extend(g.units);
            }
            let late = g.deadline.is_some_and(|d| now > d);
            for mut w in g.waiters {
                records += w.outcome.phy_offsets.len() as u64;
                if late && w.timed {
                    w.outcome.status = AppendStatus::FlushDiskTimeout;
                }
                replies.push(w.reply, Ok(w.outcome));
            }
        }
        replies.deliver(self.dispatcher.as_mut(), units);
        for b in barriers {
            self.barrier(b);
        }
        let delivered = Instant::now();
        self.durable.delivered_at = Some(delivered);
        self.durable.first_group_at = None;
        let s = &self.durable.stats;
        s.deliver_us_total.fetch_add(
            delivered.saturating_duration_since(reaped).as_micros() as u64,
            Ordering::Relaxed,
        );
        s.group_commits.fetch_add(1, Ordering::Relaxed);
        s.records.fetch_add(records, Ordering::Relaxed);
        s.bytes.fetch_add(bytes, Ordering::Relaxed);
        s.sync_us_total
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        // After the replies: they are the round's latency, the wake-up is not.
        if let Some(g) = &self.warm_gate {
            g.round_done(bytes, took);
        }
        self.index_durable();
    }

    /// The first `n` waiting groups (all: usize::MAX) get (a copy of) `e`; nothing published.
    fn fail_groups(&mut self, n: usize, e: StoreError) {
        let n = n.min(self.durable.unsynced.len());
        let to: Vec<ReplyTo> = self
            .durable
            .unsynced
            .drain(..n)
            .flat_map(|g| g.waiters.into_iter().map(|w| w.reply).chain(g.barriers))
            .collect();
        self.refuse(to, e);
    }

    /// Reaps the ring and completes what it finished.
    pub(super) fn reap(&mut self) {
        let mut done = std::mem::take(&mut self.reaped);
        self.ring.reap(&mut done);
        for &(id, res) in &done {
            self.on_sync(id, res);
        }
        done.clear();
        self.reaped = done;
    }

    /// Waits (on the ring) until nothing is written but not durable, and every group completed,
    /// or `deadline`; Err when the store failed or the wait ran out.
    pub(super) fn drain_rounds(&mut self, deadline: Instant) -> Result<(), StoreError> {
        loop {
            self.reap();
            self.maybe_start_round(true);
            if self.durable.idle() {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(StoreError::NotWritable(
                    "the commit-log flush did not finish in time".into(),
                ));
            }
            self.ring
                .wait(deadline - now, || false)
                .map_err(|e| StoreError::io(&self.durable.dir, e))?;
        }
        if self.durable.failed {
            return Err(StoreError::NotWritable(
                "an earlier commit-log flush failed".into(),
            ));
        }
        Ok(())
    }
}
