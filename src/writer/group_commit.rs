//! Group commit for SYNC_FLUSH: the "ringmq-sync-flush" thread, RocketMQ's GroupCommitService.
//! The writer never waits for the disk: it writes a batch into the mapped segment and hands
//! `(upto phy, the batch's units, the replies waiting for it)` over a bounded channel; this
//! thread takes everything pending, does one fdatasync per touched segment file covering all of
//! it, then publishes `max_phy_offset`, dispatches the units and replies, while the writer is
//! already appending the next group.
//!
//! Owned by the writer core in SYNC_FLUSH mode, which also gives it the `Dispatcher`: in this
//! mode this thread is the only publisher of `max_phy_offset` and the only caller of `dispatch`.
//! Invariants: requests complete in commit-log order; nothing is published, dispatched or
//! acknowledged before the fdatasync covering it returned Ok; after a failed fdatasync `failed`
//! is set, every request of that group and of every later group gets an error, and
//! `flushed_phy` / `max_phy_offset` never move again (recovery on restart judges the tail).

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TryRecvError, TrySendError};

use super::{
    replicate, AppendOutcome, AppendReply, AppendStatus, CqTruncate, DispatchRun, Dispatcher,
    Published,
};
use crate::constants::{GROUP_COMMIT_MAX_WAIT, GROUP_COMMIT_QUEUE_CAPACITY};
use crate::store::fault::{FaultHook, FaultPoint};
use crate::store::warm_gate::WarmGate;
use crate::store::{StoreConfig, StoreError};

/// One written writer batch waiting for its fdatasync.
pub struct GroupCommitRequest {
    /// The segments the batch touched, as (segment start, file handle), in order.
    pub files: Vec<(u64, Arc<File>)>,
    /// End of the batch's last record.
    pub upto_phy: u64,
    pub store_timestamp: i64,
    /// Consume-queue units of the batch, each queue's in queue-offset order.
    pub units: Vec<DispatchRun>,
    /// Replies of the batch's wait_flush requests with their outcome.
    pub waiters: Vec<(AppendReply, AppendOutcome)>,
    /// Written at + syncFlushTimeout (None: too far to represent): a reply after it says
    /// FLUSH_DISK_TIMEOUT, as RocketMQ's GroupCommitRequest deadline.
    pub deadline: Option<Instant>,
    /// A consume-queue truncation, dispatched after this request's units and before the units
    /// of every later request (`WriterCore::truncate_to` sends it alone, with no files).
    pub truncate: Option<Box<CqTruncate>>,
}

/// What the group-commit thread reports to the writer (checkpoint, index, refusal).
#[derive(Debug, Default)]
pub struct GroupCommitState {
    pub flushed_phy: AtomicU64,
    pub flushed_timestamp: AtomicI64,
    pub failed: AtomicBool,
}

/// Figures for tuning and the bench: how many records and bytes one fdatasync covers.
#[derive(Debug, Default)]
pub struct GroupCommitStats {
    /// fdatasync rounds (one per group, however many segments it touched).
    pub group_commits: AtomicU64,
    /// Records of wait_flush requests acknowledged.
    pub records: AtomicU64,
    /// Commit-log bytes made durable.
    pub bytes: AtomicU64,
    /// Time spent in the fault check + fdatasyncs.
    pub sync_us_total: AtomicU64,
}

pub struct GroupCommitService {
    tx: Option<Sender<GroupCommitRequest>>,
    /// The group-commit thread, unparked after every submit: it parks instead of blocking in
    /// the channel's receive, whose spin and `sched_yield`s took 27 % of its samples and CPU the
    /// writer and the shards need on two cores.
    waker: std::thread::Thread,
    pub state: Arc<GroupCommitState>,
    pub stats: Arc<GroupCommitStats>,
    thread: Option<JoinHandle<()>>,
}

/// The thread's own state; lives only on "ringmq-sync-flush".
struct Committer {
    rx: Receiver<GroupCommitRequest>,
    dispatcher: Box<dyn Dispatcher>,
    published: Arc<Published>,
    state: Arc<GroupCommitState>,
    stats: Arc<GroupCommitStats>,
    fault: Option<FaultHook>,
    path: std::path::PathBuf,
    /// Told when each round's fdatasync starts and after the round, so the next segment's
    /// warming writes only while the disk is idle.
    warm_gate: Option<Arc<WarmGate>>,
}

impl GroupCommitService {
    /// Starts the thread; `start_phy` is the recovered, durable end of the commit log. From
    /// `cfg`: the fault seam, and the writer core, where this thread is pinned too when the
    /// writer is.
    pub fn spawn(
        start_phy: u64,
        start_timestamp: i64,
        dispatcher: Box<dyn Dispatcher>,
        published: Arc<Published>,
        cfg: &StoreConfig,
        path: std::path::PathBuf,
        warm_gate: Option<Arc<WarmGate>>,
    ) -> std::io::Result<Self> {
        let (tx, rx) = bounded(GROUP_COMMIT_QUEUE_CAPACITY);
        let state = Arc::new(GroupCommitState::default());
        state.flushed_phy.store(start_phy, Ordering::Release);
        state
            .flushed_timestamp
            .store(start_timestamp, Ordering::Release);
        let stats = Arc::new(GroupCommitStats::default());
        let pin = cfg.writer_core;
        let mut c = Committer {
            rx,
            dispatcher,
            published,
            state: state.clone(),
            stats: stats.clone(),
            fault: cfg.fault.clone(),
            path,
            warm_gate,
        };
        let thread = std::thread::Builder::new()
            .name("ringmq-sync-flush".into())
            .spawn(move || {
                // Same core as the writer: the hand-over after each write then wakes a thread on
                // this core instead of interrupting another, and the shards keep theirs.
                crate::runtime::pin_current_thread_to(pin);
                c.run()
            })?;
        Ok(GroupCommitService {
            tx: Some(tx),
            waker: thread.thread().clone(),
            state,
            stats,
            thread: Some(thread),
        })
    }

    /// Hands a written batch over; blocks while GROUP_COMMIT_QUEUE_CAPACITY batches are
    /// already waiting (back-pressure: the writer's inbox then fills and senders get busy).
    /// Gives the request back if the thread is gone.
    pub fn submit(&self, req: GroupCommitRequest) -> Result<(), GroupCommitRequest> {
        let Some(tx) = self.tx.as_ref() else {
            return Err(req);
        };
        let mut req = req;
        loop {
            match tx.try_send(req) {
                Ok(()) => {
                    self.waker.unpark();
                    return Ok(());
                }
                Err(TrySendError::Disconnected(r)) => return Err(r),
                Err(TrySendError::Full(r)) => {
                    // The thread is behind by a whole queue: wait for it (back-pressure).
                    req = r;
                    self.waker.unpark();
                    std::thread::park_timeout(Duration::from_micros(50));
                }
            }
        }
    }

    /// Lets the thread complete everything submitted, then joins it.
    pub fn stop(&mut self) {
        self.tx = None;
        self.waker.unpark();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("group-commit thread panicked");
            }
        }
    }
}

impl Drop for GroupCommitService {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Committer {
    fn run(&mut self) {
        // Requests the previous group released: the appenders likely to come straight back.
        let mut expect = 0usize;
        let mut last_round = Duration::ZERO;
        while let Some(first) = self.next(None) {
            // Everything pending goes into this fdatasync; the bound keeps one group finite
            // while the writer keeps submitting.
            let mut waiting = first.waiters.len();
            let mut group = vec![first];
            while group.len() < 2 * GROUP_COMMIT_QUEUE_CAPACITY {
                match self.rx.try_recv() {
                    Ok(r) => {
                        waiting += r.waiters.len();
                        group.push(r);
                    }
                    Err(_) => break,
                }
            }
            // Cohort merge: without it, N synchronous appenders settle into two cohorts that
            // take turns (one waits for its fdatasync while the other is written), so each sync
            // covers N/2. Waiting briefly for the cohort just released lets one sync cover all
            // N. The wait is bounded by half the last round and GROUP_COMMIT_MAX_WAIT, and a
            // round that times out lowers `expect`, so a falling load stops waiting.
            if waiting < expect {
                let deadline = Instant::now() + (last_round / 2).min(GROUP_COMMIT_MAX_WAIT);
                while waiting < expect && group.len() < 2 * GROUP_COMMIT_QUEUE_CAPACITY {
                    match self.next(Some(deadline)) {
                        Some(r) => {
                            waiting += r.waiters.len();
                            group.push(r);
                        }
                        None => break,
                    }
                }
            }
            expect = waiting;
            let t0 = Instant::now();
            self.commit(group);
            last_round = t0.elapsed();
        }
    }

    /// The next request, parking (the writer unparks this thread after each submit) until one
    /// comes, the deadline passes or the writer is gone (then None).
    fn next(&self, deadline: Option<Instant>) -> Option<GroupCommitRequest> {
        loop {
            match self.rx.try_recv() {
                Ok(r) => return Some(r),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => {}
            }
            match deadline {
                None => std::thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    std::thread::park_timeout(d - now);
                }
            }
        }
    }

    fn commit(&mut self, group: Vec<GroupCommitRequest>) {
        if self.state.failed.load(Ordering::Acquire) {
            let e = StoreError::NotWritable("an earlier commit-log flush failed".into());
            return fail_all(group, e);
        }
        let t0 = Instant::now();
        if let Some(g) = &self.warm_gate {
            g.sync_started();
        }
        if let Err(e) = self.sync(&group) {
            tracing::error!(error = %e, "group commit failed; refusing further appends");
            self.state.failed.store(true, Ordering::Release);
            if let Some(g) = &self.warm_gate {
                g.sync_abandoned();
            }
            return fail_all(group, e);
        }
        let last = group.last().expect("a group has at least one request");
        let (upto, ts) = (last.upto_phy, last.store_timestamp);
        let synced = t0.elapsed();
        let bytes = upto.saturating_sub(self.state.flushed_phy.load(Ordering::Acquire));
        self.record_stats(&group, bytes, synced);
        // fetch_max: a barrier submitted before an empty log began at a later offset
        // (`WriterCore::start_at`) carries the old end.
        self.state.flushed_phy.fetch_max(upto, Ordering::AcqRel);
        self.state.flushed_timestamp.store(ts, Ordering::Release);
        self.published.publish(upto);
        let now = Instant::now();
        let mut units = Vec::new();
        let mut waiters = Vec::with_capacity(group.iter().map(|r| r.waiters.len()).sum());
        for req in group {
            if units.is_empty() {
                units = req.units;
            } else {
                units.extend(req.units);
            }
            if let Some(cut) = req.truncate {
                // The units before it first, then the cut; later units after it.
                if !units.is_empty() {
                    self.dispatcher.dispatch(std::mem::take(&mut units));
                }
                self.dispatcher.truncate(*cut);
            }
            let late = req.deadline.is_some_and(|d| now > d);
            waiters.extend(req.waiters.into_iter().map(|w| (w, late)));
        }
        if !units.is_empty() {
            self.dispatcher.dispatch(units);
        }
        for ((reply, mut outcome), late) in waiters {
            if late {
                outcome.status = AppendStatus::FlushDiskTimeout;
            }
            reply(Ok(outcome));
        }
        // After the replies: they are the round's latency, the wake-up is not.
        if let Some(g) = &self.warm_gate {
            g.round_done(bytes, synced);
        }
    }

    /// One fdatasync per distinct segment file of the group (a file syncs every page written
    /// through the mapping, so it covers every request of the group in that segment).
    fn sync(&self, group: &[GroupCommitRequest]) -> Result<(), StoreError> {
        FaultHook::check(self.fault.as_ref(), FaultPoint::Flush)
            .map_err(|e| StoreError::io(&self.path, e))?;
        let mut last_synced = None;
        for (start, file) in group.iter().flat_map(|r| r.files.iter()) {
            // Requests are in commit-log order, so their segments never go backwards.
            if last_synced.is_some_and(|s| s >= *start) {
                continue;
            }
            file.sync_data()
                .map_err(|e| StoreError::io(self.path.join(segment_name(*start)), e))?;
            last_synced = Some(*start);
        }
        Ok(())
    }

    /// `bytes`: how far the group moved the durable end of the commit log.
    fn record_stats(&self, group: &[GroupCommitRequest], bytes: u64, synced: Duration) {
        let s = &self.stats;
        let records: usize = group
            .iter()
            .flat_map(|r| r.waiters.iter())
            .map(|(_, o)| o.phy_offsets.len())
            .sum();
        s.group_commits.fetch_add(1, Ordering::Relaxed);
        s.records.fetch_add(records as u64, Ordering::Relaxed);
        s.bytes.fetch_add(bytes, Ordering::Relaxed);
        s.sync_us_total
            .fetch_add(synced.as_micros() as u64, Ordering::Relaxed);
    }
}

fn segment_name(start: u64) -> String {
    crate::store::mapped_file::segment_file_name(start)
}

/// Every waiting request of `group` gets (a copy of) `e`; nothing is published.
fn fail_all(group: Vec<GroupCommitRequest>, e: StoreError) {
    let template = replicate(&e);
    let mut first = Some(e);
    for req in group {
        if let Some(cut) = &req.truncate {
            cut.answer(Err(replicate(&template)));
        }
        for (reply, _) in req.waiters {
            reply(Err(first.take().unwrap_or_else(|| replicate(&template))));
        }
    }
}
