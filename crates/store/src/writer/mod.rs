//! The CommitLog writer: one dedicated std thread ("ringmq-writer", optionally pinned) that is
//! the only mutator of the commit log, an event loop on its own io_uring ring (`ring`). It is
//! the sequencer: it assigns physical and queue offsets, copies records into the mapped
//! segment, then completes the batch: under ASYNC_FLUSH it publishes, hands the new
//! consume-queue units and the replies to its `Dispatcher` and indexes keys at once; under
//! SYNC_FLUSH it keeps the batch until the fdatasync round covering it completes on the ring
//! (`core/commit`), then does the same.
//!
//! Callers: shards hold a `WriterSender` and call `try_append` (never blocks; a full inbox is
//! SYSTEM_BUSY for the caller), `try_drop_topic` when a topic is deleted (its queue
//! offsets start again at 0), on a slave joining its master, `try_start_at` (an empty log
//! begins at a later segment), and, on an AutoSwitch slave whose log went past its new
//! master's, `try_truncate_to` (the log, its consume queues, index and queue offsets go back to
//! an earlier record); the runtime owns the `WriterHandle` and calls `shutdown`.
//! Invariants: replies happen after the write and, under SYNC_FLUSH, after the fdatasync
//! covering the record (wait_flush only decides whether a late round says
//! FLUSH_DISK_TIMEOUT); a batch's units go to the dispatcher with or before its replies;
//! `max_phy_offset` is published before dispatch, in commit-log order, and never covers bytes
//! a failed batch wrote or, under SYNC_FLUSH, bytes no successful fdatasync covered; after a
//! failed flush appends are refused and a shutdown leaves the abort file for recovery.

pub mod batch_stats;
mod checkpointer;
mod core;
mod cq_truncate;
mod failure_log;
mod index_checkpoint;
pub mod ring;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

pub use self::core::GroupCommitStats;
pub use cq_truncate::{CqTruncate, CqTruncated, CQ_TRUNCATE_ANSWERS_MAX};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Sender, TrySendError};

use self::ring::RingWaker;

use crate::reader::ReadBounds;
use crate::{
    Checkpoint, CommitLog, ConsumeQueue, CqUnit, IndexService, OpenedStore, StoreConfig,
    StoreError, TagsCode,
};

/// One encoded record to append.
pub struct AppendRecord {
    /// The record's topic; `None` repeats the previous record's in the same request, and the
    /// first record of a request must name one. A batch names its topic once: a refcount
    /// touched per message by the shard, while the writer dropped the records of the request
    /// before, bounced one cache line between the cores (~3 % of W3's CPU).
    pub topic: Option<Arc<str>>,
    pub queue_id: u32,
    /// The unit's tags code, resolved at the store timestamp this thread stamps into the record
    /// (a delay level's delivery time counts from it, as recovery's recomputation does).
    pub tags_code: TagsCode,
    /// Index keys: KEYS split on ' ' plus UNIQ_KEY.
    pub keys: IndexKeys,
    /// False for prepared/rollback transaction records: no queue offset, no consume-queue unit.
    pub dispatch: bool,
    /// Encoded by `protocol::message::encode`, offsets zero; or, when `body` is not empty, by
    /// `encode_without_body`: the record with its body cut out at `body_at`.
    pub bytes: bytes::BytesMut,
    /// The body when it is not inside `bytes`: a slice of the received frame, which the writer
    /// writes straight from there (one copy of the body less on the send path).
    pub body: bytes::Bytes,
    /// Where `body` goes inside `bytes` (0 while `body` is empty).
    pub body_at: u32,
    /// A slave's copy of a master's record: `bytes` already carry the master's queue offset,
    /// commit-log offset and store time. The writer writes them as they are, takes the queue
    /// offset from them, and fails the append unless the record lands at the master's offset.
    pub replicated: bool,
}

impl AppendRecord {
    /// A record whose body is inside `bytes`.
    pub fn whole(
        topic: Option<Arc<str>>,
        queue_id: u32,
        tags_code: TagsCode,
        keys: IndexKeys,
        dispatch: bool,
        bytes: bytes::BytesMut,
    ) -> Self {
        AppendRecord {
            topic,
            queue_id,
            tags_code,
            keys,
            dispatch,
            bytes,
            body: bytes::Bytes::new(),
            body_at: 0,
            replicated: false,
        }
    }

    /// The stored record's length, body included.
    pub fn stored_len(&self) -> usize {
        self.bytes.len() + self.body.len()
    }

    /// The record as written: up to the body, the body, the rest. A split point outside
    /// `bytes` puts the body last (the writer's validation refuses such a record first).
    pub fn parts(&self) -> [&[u8]; 3] {
        if self.body.is_empty() {
            return [&self.bytes[..], &[], &[]];
        }
        let at = (self.body_at as usize).min(self.bytes.len());
        [&self.bytes[..at], &self.body[..], &self.bytes[at..]]
    }
}

/// A record's keys for the IndexFile: each space-separated KEYS entry, then UNIQ_KEY.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum IndexKeys {
    #[default]
    None,
    /// Byte ranges `[start, end)` of the KEYS and UNIQ_KEY values inside the record's own
    /// `bytes` (plain sends): the shard allocates nothing per message for its keys, and the
    /// writer frees nothing.
    InRecord {
        keys: Option<(u32, u32)>,
        uniq: Option<(u32, u32)>,
    },
    /// Keys built apart (sends whose properties were rewritten: delays, retries, DLQ).
    Owned(Vec<String>),
}

impl IndexKeys {
    pub fn is_empty(&self) -> bool {
        match self {
            IndexKeys::None => true,
            IndexKeys::InRecord { keys, uniq } => keys.is_none() && uniq.is_none(),
            IndexKeys::Owned(v) => v.is_empty(),
        }
    }

    /// Appends the keys to `out`, borrowed from `bytes` (the record's) or from `self`. A range
    /// outside `bytes` or not UTF-8 yields nothing (the shard built it from a `&str`).
    pub fn collect<'a>(&'a self, bytes: &'a [u8], out: &mut Vec<&'a str>) {
        match self {
            IndexKeys::None => {}
            IndexKeys::InRecord { keys, uniq } => {
                let text = |(a, b): (u32, u32)| {
                    bytes
                        .get(a as usize..b as usize)
                        .and_then(|s| std::str::from_utf8(s).ok())
                };
                if let Some(k) = keys.and_then(text) {
                    out.extend(k.split(' ').filter(|s| !s.is_empty()));
                }
                if let Some(u) = uniq.and_then(text) {
                    out.push(u);
                }
            }
            IndexKeys::Owned(v) => out.extend(v.iter().map(String::as_str)),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendStatus {
    PutOk,
    FlushDiskTimeout,
    /// Stored here, but a SYNC_MASTER's slaves did not acknowledge it within `slaveTimeout`
    /// (set by the broker's wait for slaves, never by the writer).
    FlushSlaveTimeout,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    pub status: AppendStatus,
    pub phy_offsets: Vec<u64>,
    /// Queue offset per record (0 for records with dispatch = false).
    pub queue_offsets: Vec<u64>,
    pub store_timestamp: i64,
}

/// A reply called on the writer thread (see `ReplyTo::Call`).
pub type AppendReply = Box<dyn FnOnce(Result<AppendOutcome, StoreError>) + Send>;

/// Where an append's outcome goes.
pub enum ReplyTo {
    /// A shard's waiting append: the outcome travels back through that shard's completion
    /// queue, behind the consume-queue units of the same group (`Dispatcher::complete`), so the
    /// shard answers the send only once its units are readable. No allocation per append.
    Shard { shard: u16, token: u32 },
    /// Called on the writer thread once the units are dispatched (tests, tools and benches that
    /// append without shards, and the writer's own barriers).
    Call(AppendReply),
}

pub struct AppendRequest {
    pub records: Vec<AppendRecord>,
    pub wait_flush: bool,
    pub reply: ReplyTo,
}

/// One shard's append answered: the token it gave (`ReplyTo::Shard`) and the outcome.
pub struct ShardReply {
    pub shard: u16,
    pub token: u32,
    pub result: Result<AppendOutcome, StoreError>,
}

/// A group's replies: those to shards go with the group's units through the dispatcher; those
/// to call are called on the writer thread right after (`Replies::deliver`).
#[derive(Default)]
pub(crate) struct Replies {
    pub shards: Vec<ShardReply>,
    pub calls: Vec<(AppendReply, Result<AppendOutcome, StoreError>)>,
}

impl Replies {
    pub fn push(&mut self, to: ReplyTo, result: Result<AppendOutcome, StoreError>) {
        match to {
            ReplyTo::Shard { shard, token } => self.shards.push(ShardReply {
                shard,
                token,
                result,
            }),
            ReplyTo::Call(f) => self.calls.push((f, result)),
        }
    }

    /// The units, then the replies waiting for them: shard replies through `dispatcher` (behind
    /// the units on every shard), then the calls.
    pub fn deliver(self, dispatcher: &mut dyn Dispatcher, units: Vec<DispatchRun>) {
        if !units.is_empty() || !self.shards.is_empty() {
            dispatcher.complete(units, self.shards);
        }
        for (f, r) in self.calls {
            f(r);
        }
    }
}

/// Each record with its topic (a record without one continues the previous record's; `None`
/// only before the first record that names one, which `WriterCore::validate` refuses).
pub fn with_topics(
    records: &[AppendRecord],
) -> impl Iterator<Item = (Option<&Arc<str>>, &AppendRecord)> {
    let mut current: Option<&Arc<str>> = None;
    records.iter().map(move |r| {
        if let Some(t) = &r.topic {
            current = Some(t);
        }
        (current, r)
    })
}

/// What became visible: units of one queue from one batch (`units[i]` has queue offset
/// `first_queue_offset + i`). Each queue's runs come in queue-offset order; runs of different
/// queues need not follow the commit log (a run continues across other queues' records, so
/// round-robin sends make one run per queue and batch). A send of 32 messages is one run, so
/// the topic's `Arc` is cloned, hashed and dropped once per run rather than once per message:
/// per-message refcount traffic between the writer and the shards cost ~7 % of W3's CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchRun {
    pub topic: Arc<str>,
    pub queue_id: u32,
    pub first_queue_offset: u64,
    pub units: Vec<CqUnit>,
    pub store_timestamp: i64,
}

impl DispatchRun {
    /// Each unit with its queue offset.
    pub fn iter(&self) -> impl Iterator<Item = (u64, CqUnit)> + '_ {
        (self.first_queue_offset..).zip(self.units.iter().copied())
    }

    /// Appends the unit at `queue_offset` if it continues this run (same queue, next offset);
    /// returns false and leaves the run as it was otherwise.
    fn try_extend(
        &mut self,
        topic: &Arc<str>,
        queue_id: u32,
        queue_offset: u64,
        unit: CqUnit,
    ) -> bool {
        let next = self.first_queue_offset + self.units.len() as u64;
        let same_topic = Arc::ptr_eq(&self.topic, topic) || *self.topic == **topic;
        if same_topic && self.queue_id == queue_id && next == queue_offset {
            self.units.push(unit);
            true
        } else {
            false
        }
    }

    /// One unit per record (tests and tools that look at units one by one).
    pub fn into_units(self) -> impl Iterator<Item = DispatchUnit> {
        let DispatchRun {
            topic,
            queue_id,
            first_queue_offset,
            units,
            store_timestamp,
        } = self;
        (first_queue_offset..)
            .zip(units)
            .map(move |(queue_offset, unit)| DispatchUnit {
                topic: topic.clone(),
                queue_id,
                queue_offset,
                unit,
                store_timestamp,
            })
    }
}

/// One dispatched unit on its own (see [`DispatchRun::into_units`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchUnit {
    pub topic: Arc<str>,
    pub queue_id: u32,
    pub queue_offset: u64,
    pub unit: CqUnit,
    pub store_timestamp: i64,
}

/// Where the writer's results go: the consume-queue units of each completed group and the
/// replies to the shards' appends of that group, in commit-log order.
pub trait Dispatcher: Send + 'static {
    /// The units of a completed group, then the shards' replies waiting for them. Every shard
    /// that answers a reply can read the reply's units by then. Never blocks: what does not fit
    /// is kept, in order, until `flush` delivers it.
    fn complete(&mut self, runs: Vec<DispatchRun>, replies: Vec<ShardReply>);
    /// Delivers what `complete` and `truncate` kept back; true once nothing is kept. A caller
    /// with something kept waits for the shards to drain (they wake the writer) before more.
    fn flush(&mut self) -> bool {
        true
    }
    /// Has every consume queue drop its units at or past `cut.phy_offset`, after every run
    /// dispatched before and before any run dispatched after; every owner answers through
    /// `cut` (see `CqTruncate::split`). A dispatcher that keeps no queues answers `Ok(vec![])`.
    fn truncate(&mut self, cut: CqTruncate);
    /// Answers `reply` once every unit completed before it is applied on every shard (a
    /// topic's deletion waits for that before the shards drop its queues).
    fn barrier(&mut self, reply: ShardReply);
}

/// The parts of an opened store the writer thread takes over.
pub struct WriterParts {
    pub commit_log: CommitLog,
    pub index: Option<IndexService>,
    pub queue_offsets: HashMap<(String, u32), u64>,
    pub checkpoint: Checkpoint,
}

impl WriterParts {
    /// Splits an opened store: writer parts, and the consume queues for the shards.
    pub fn from_opened(o: OpenedStore) -> (WriterParts, Vec<ConsumeQueue>) {
        let parts = WriterParts {
            commit_log: o.commit_log,
            index: o.index,
            queue_offsets: o.queue_offsets,
            checkpoint: o.checkpoint,
        };
        (parts, o.consume_queues)
    }
}

/// Where the outcome of a `StartAt` or a `TruncateTo` goes (called on the writer thread).
pub type StartReply = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

enum Msg {
    Append(AppendRequest),
    /// A deleted topic: forget its next queue offsets, so a re-created topic starts at 0, then
    /// call `done` (every append sent before this one has its offsets by then).
    DropTopic {
        topic: String,
        done: ReplyTo,
    },
    /// An empty commit log begins at `offset` (a slave joining its master's log past 0, see
    /// `WriterSender::try_start_at`); `done` gets the outcome.
    StartAt {
        offset: u64,
        done: StartReply,
    },
    /// The commit log goes back to `offset` (see `WriterSender::try_truncate_to`); `done` gets
    /// the outcome.
    TruncateTo {
        offset: u64,
        done: StartReply,
    },
    /// Drain, flush, checkpoint, remove the abort file, exit.
    Shutdown,
    /// Exit at once without flushing or removing the abort file (simulated crash for tests).
    Abandon,
}

/// Frontiers the writer publishes for other threads.
#[derive(Debug, Default)]
struct Published {
    max_phy: AtomicU64,
    /// Woken after every publish of `max_phy` (a master's HA connections wait on it).
    on_publish: atomic_waker::AtomicWaker,
    /// Shared with every shard's `CommitLogReader`, which refuses ranges below its minimum
    /// and drops its mappings when its truncation count moves.
    read_bounds: Arc<ReadBounds>,
    writable: AtomicBool,
    /// Retention passes still to run as if at a `deleteWhen` hour, set by an admin's
    /// DELETE_EXPIRED_COMMITLOG (Java's `MAX_MANUAL_DELETE_FILE_TIMES` of them).
    manual_deletes: AtomicU32,
    /// The end of what the writer has written, and of what is durable (fdatasynced): stored
    /// by the writer alone, before it sleeps, for the metrics' flush-behind figure.
    written_phy: AtomicU64,
    flushed_phy: AtomicU64,
}

/// Java's `MAX_MANUAL_DELETE_FILE_TIMES`: how many retention passes one manual request covers.
pub const MANUAL_DELETE_PASSES: u32 = 20;

impl Published {
    /// Makes the commit log up to `upto` visible to readers, then wakes whoever waits for it.
    /// The end only moves forward: a group completed after a start-at (`try_start_at`) cannot
    /// take it back.
    fn publish(&self, upto: u64) {
        self.max_phy.fetch_max(upto, Ordering::AcqRel);
        self.on_publish.wake();
    }

    /// One manual retention pass used, if any is left (`delete_expired_files_now`).
    fn take_manual_delete(&self) -> bool {
        self.manual_deletes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    /// The writer's written and durable ends (the writer thread only).
    fn note_progress(&self, written: u64, flushed: u64) {
        self.written_phy.store(written, Ordering::Relaxed);
        self.flushed_phy.store(flushed, Ordering::Relaxed);
    }

    /// Moves the published end back to `end`: the one way it goes back, used only by a
    /// truncation of the commit log (`WriterCore::truncate_to`), once nothing else publishes.
    fn set_back(&self, end: u64) {
        self.max_phy.store(end, Ordering::Release);
        self.on_publish.wake();
    }
}

/// Cheap Clone + Send handle for shards.
#[derive(Clone)]
pub struct WriterSender {
    tx: Sender<Msg>,
    published: Arc<Published>,
    /// Wakes the writer from its ring after a send (an eventfd write, only while it sleeps).
    writer: RingWaker,
}

impl Drop for WriterSender {
    fn drop(&mut self) {
        // The last sender gone disconnects the inbox: let the writer see it now, not at its tick.
        self.writer.wake();
    }
}

impl WriterSender {
    /// Never blocks: the request comes back when the inbox is full or the writer stopped.
    pub fn try_append(&self, req: AppendRequest) -> Result<(), AppendRequest> {
        self.try_append_unwoken(req)?;
        self.wake();
        Ok(())
    }

    /// `try_append` without waking the writer: the caller promises a `wake` soon after (a shard
    /// queues a burst of requests and wakes the writer once for all of them).
    pub fn try_append_unwoken(&self, req: AppendRequest) -> Result<(), AppendRequest> {
        match self.tx.try_send(Msg::Append(req)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(m)) | Err(TrySendError::Disconnected(m)) => match m {
                Msg::Append(r) => Err(r),
                _ => unreachable!("only appends are sent here"),
            },
        }
    }

    /// Asks the writer to forget `topic`'s queue offsets (topic deletion); `done` is answered
    /// once it has and every unit written before is applied on every shard. Never blocks: the
    /// reply comes back when the inbox is full or the writer stopped.
    pub fn try_drop_topic(&self, topic: String, done: ReplyTo) -> Result<(), ReplyTo> {
        let r = match self.tx.try_send(Msg::DropTopic { topic, done }) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(m)) | Err(TrySendError::Disconnected(m)) => match m {
                Msg::DropTopic { done, .. } => Err(done),
                _ => unreachable!("only a topic drop is sent here"),
            },
        };
        self.wake();
        r
    }

    /// Asks the writer to make its empty commit log begin at `offset`, a multiple of the
    /// segment size: what a slave does when its master's first transfer starts past its empty
    /// log (the master's last segment). Appends sent before this one are processed first;
    /// `done` runs on the writer thread with the outcome: an error when the log holds a record
    /// or `offset` is not aligned (nothing changed then), or when the files could not be
    /// replaced (appends are refused from then on). Never blocks: false when the inbox is full
    /// or the writer stopped (then `done` never runs).
    pub fn try_start_at(&self, offset: u64, done: StartReply) -> bool {
        let sent = self.tx.try_send(Msg::StartAt { offset, done }).is_ok();
        self.wake();
        sent
    }

    /// Asks the writer to truncate the commit log back to `offset` (Java's `truncateFiles`, run
    /// by an AutoSwitch slave at the point where its log and its new master's agree). Appends
    /// sent before this one are processed first, and appends after it continue at `offset`
    /// with the queue offsets the dropped records had. `offset` must be where a record starts
    /// (or the end), in `[min, max]`; or, below the first byte, a multiple of the segment size:
    /// then everything goes and the empty log begins at `offset`. `done` runs on the writer
    /// thread: `Invalid` for an offset refused (nothing changed); another error when the
    /// truncation failed part way (appends are refused from then on and the next start recovers
    /// from what is on disk); `Ok` once the log, every consume queue and the index end at
    /// `offset`, durably. Never blocks: false when the inbox is full or the writer stopped
    /// (then `done` never runs; nor does it when the writer shuts down before reaching it).
    pub fn try_truncate_to(&self, offset: u64, done: StartReply) -> bool {
        let sent = self.tx.try_send(Msg::TruncateTo { offset, done }).is_ok();
        self.wake();
        sent
    }

    /// Wakes the writer if it sleeps in its ring (an eventfd write then, else an atomic).
    pub fn wake(&self) {
        self.writer.wake();
    }
    /// The published end of the commit log.
    pub fn max_phy_offset(&self) -> u64 {
        self.published.max_phy.load(Ordering::Acquire)
    }
    /// Has `waker` woken at the next publish of the commit log's end (one waker at a time: a
    /// later registration replaces the earlier; register again after every wake).
    pub fn wake_on_publish(&self, waker: &std::task::Waker) {
        self.published.on_publish.register(waker);
    }
    /// The first byte still in the commit log (retention moves it).
    pub fn min_phy_offset(&self) -> u64 {
        self.published.read_bounds.min_phy.load(Ordering::Acquire)
    }
    /// The published minimum and truncation count, for a `CommitLogReader` to check every read
    /// against (a retired segment may be reused, see `store::recycle`; a truncation replaces
    /// segment files).
    pub fn min_phy_watch(&self) -> Arc<ReadBounds> {
        self.published.read_bounds.clone()
    }
    /// False while appends are refused (disk past the hard limit, or an async flush failed).
    pub fn is_writable(&self) -> bool {
        self.published.writable.load(Ordering::Acquire)
    }
    /// Commit-log bytes written but not yet durable (Java's `getFlushBehindBytes`), as of the
    /// writer's last turn: under ASYNC_FLUSH what the next flush covers, under SYNC_FLUSH what
    /// the group commit in flight and the next one cover.
    pub fn flush_behind_bytes(&self) -> u64 {
        let flushed = self.published.flushed_phy.load(Ordering::Relaxed);
        let written = self.published.written_phy.load(Ordering::Relaxed);
        written.saturating_sub(flushed)
    }
    /// DELETE_EXPIRED_COMMITLOG: the next retention passes delete expired segments whatever
    /// the hour (files younger than `fileReservedTime` still stay).
    pub fn delete_expired_files_now(&self) {
        self.published
            .manual_deletes
            .store(MANUAL_DELETE_PASSES, Ordering::Release);
    }
}

pub struct WriterHandle {
    sender: WriterSender,
    published: Arc<Published>,
    group_commit_stats: Option<Arc<GroupCommitStats>>,
    batch_stats: Arc<batch_stats::BatchStats>,
    thread: Option<JoinHandle<Result<(), StoreError>>>,
}

impl WriterHandle {
    pub fn try_append(&self, req: AppendRequest) -> Result<(), AppendRequest> {
        self.sender.try_append(req)
    }
    pub fn max_phy_offset(&self) -> u64 {
        self.published.max_phy.load(Ordering::Acquire)
    }
    pub fn min_phy_offset(&self) -> u64 {
        self.published.read_bounds.min_phy.load(Ordering::Acquire)
    }
    /// False while appends are refused (disk past the hard limit, or an async flush failed).
    pub fn is_writable(&self) -> bool {
        self.published.writable.load(Ordering::Acquire)
    }
    pub fn clone_sender(&self) -> WriterSender {
        self.sender.clone()
    }
    /// Records and bytes per fdatasync so far (SYNC_FLUSH only).
    pub fn group_commit_stats(&self) -> Option<&GroupCommitStats> {
        self.group_commit_stats.as_deref()
    }
    /// The same counters, shared (the metrics endpoint reads them at each scrape).
    pub fn group_commit_stats_shared(&self) -> Option<Arc<GroupCommitStats>> {
        self.group_commit_stats.clone()
    }
    /// Batches written, with their appends, records, bytes and sizes (the metrics endpoint).
    pub fn batch_stats_shared(&self) -> Arc<batch_stats::BatchStats> {
        self.batch_stats.clone()
    }

    /// Drains the inbox, flushes, writes the checkpoint, removes the abort file, joins.
    pub fn shutdown(mut self) -> Result<(), StoreError> {
        self.stop(Msg::Shutdown)
    }

    /// Stops the thread without a clean shutdown (no final flush, abort file stays): what a
    /// crash leaves behind, minus the page cache loss. For tests.
    pub fn abandon(mut self) -> Result<(), StoreError> {
        self.stop(Msg::Abandon)
    }

    fn stop(&mut self, msg: Msg) -> Result<(), StoreError> {
        let Some(t) = self.thread.take() else {
            return Ok(());
        };
        // A send error means the thread is already gone; join reports why.
        let _sent = self.sender.tx.send(msg);
        self.sender.writer.wake();
        match t.join() {
            Ok(r) => r,
            Err(_) => Err(StoreError::NotWritable("writer thread panicked".into())),
        }
    }
}

impl Drop for WriterHandle {
    fn drop(&mut self) {
        if let Err(e) = self.stop(Msg::Abandon) {
            tracing::error!(error = %e, "writer stopped with an error");
        }
    }
}

/// Starts the writer thread over an opened store.
pub fn spawn_writer(
    store: WriterParts,
    cfg: &StoreConfig,
    dispatcher: Box<dyn Dispatcher>,
) -> Result<WriterHandle, StoreError> {
    let (tx, rx) = bounded(cfg.writer_inbox_capacity);
    let published = Arc::new(Published::default());
    published
        .max_phy
        .store(store.commit_log.max_phy_offset(), Ordering::Release);
    published
        .read_bounds
        .min_phy
        .store(store.commit_log.min_phy_offset(), Ordering::Release);
    published.writable.store(true, Ordering::Release);
    published.note_progress(
        store.commit_log.max_phy_offset(),
        store.commit_log.flushed_phy_offset(),
    );
    let ring = ring::Ring::new().map_err(|e| StoreError::io(&cfg.store_path_root_dir, e))?;
    let waker = ring.waker();
    let mut core = core::WriterCore::new(store, cfg.clone(), dispatcher, published.clone(), ring)?;
    let group_commit_stats = core.group_commit_stats();
    let batch_stats = core.batch_stats();
    let thread = cfg
        .threads
        .spawn(crate::runtime::Role::Writer, move || core.run(rx))
        .map_err(|e| StoreError::io(&cfg.store_path_root_dir, e))?;
    Ok(WriterHandle {
        sender: WriterSender {
            tx,
            published: published.clone(),
            writer: waker,
        },
        published,
        group_commit_stats,
        batch_stats,
        thread: Some(thread),
    })
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

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_drop_topic;
#[cfg(test)]
mod tests_faults;
#[cfg(test)]
mod tests_retention;
#[cfg(test)]
mod tests_start_at;
#[cfg(test)]
mod tests_sync_flush;
#[cfg(test)]
mod tests_truncate;
