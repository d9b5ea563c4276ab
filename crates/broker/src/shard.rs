//! One shard's broker state: the queues it owns (ConsumeQueue + long-poll waiters), their
//! consumer offsets, its commit-log reader, its connections, the read-only snapshots of shard
//! 0's metadata, and the state of the services whose queues it owns (delay levels, timer,
//! transactions). Only this shard's thread touches it (it is `!Send` by construction).
//!
//! Every piece of mutable state is private; other modules reach it through the methods here,
//! which borrow for one expression or block and never across an `.await` (clippy's
//! `await_holding_refcell_ref` holds callers to that).

use std::cell::{Cell, Ref, RefCell, RefMut};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use crate::auth::table::{AuthSettings, AuthTable};
use crate::auth_state::AuthOwner;
use crate::completion::{CompletionQueues, CompletionTarget, ShardCompletions};
use crate::config::BrokerConfig;
use crate::group_transfer::{GroupTransfer, SlaveAcks};
use crate::long_poll::Waiter;
use crate::metadata::topic_validator::{TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC};
use crate::metadata::{Metadata, SubscriptionSnapshot, TopicSnapshot};
use crate::pop::state::PopTables;
use crate::protocol::msg_id::UniqKeyGenerator;
use crate::remoting::ConnHandle;
use crate::runtime::Mesh;
use crate::settings::Settings;
use crate::stats::BrokerStats;
use crate::store::consume_queue::{ConsumeQueue, CqUnit};
use crate::store::reader::CommitLogReader;
use crate::timer::state::TimerState;
use crate::transaction::state::TransactionState;
use crate::writer::{CqTruncate, DispatchRun, WriterSender};

/// The shard that owns (topic, queue_id). FNV-1a over the topic, plus the queue id, so the
/// queues of one topic spread over shards. The transaction op queue lives with the half queue,
/// whose owner alone reads both (see `transaction`).
pub fn owner_of(topic: &str, queue_id: u32, shards: usize) -> usize {
    let topic = if topic == TRANS_OP_HALF_TOPIC {
        TRANS_HALF_TOPIC
    } else {
        topic
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in topic.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    ((h.wrapping_add(queue_id as u64)) % shards.max(1) as u64) as usize
}

/// Immutable facts every shard shares.
pub struct BrokerContext {
    pub cfg: BrokerConfig,
    /// The address written into records and offset message ids (brokerIP1:listenPort).
    pub store_host: SocketAddr,
    pub writer: WriterSender,
    pub shard_count: usize,
    pub started_ms: i64,
    pub delay_levels: crate::store::DelayLevels,
    /// The checkpoint's logicsMsgTimestamp: recovery after a crash starts from here.
    pub logics_msg_timestamp: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// Set once every name server has accepted a registration (or there is none).
    pub registered: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The HA port this master listens on (None on a slave).
    pub ha_addr: Option<SocketAddr>,
    /// Put and get counters, one set per shard (`broker::stats`).
    pub stats: BrokerStats,
    /// How far each connected slave has acknowledged (a master's; SYNC_MASTER sends wait on it).
    pub slave_acks: Arc<SlaveAcks>,
    /// A slave's link to its master (for GET_BROKER_HA_STATUS).
    pub ha_client: Arc<crate::ha_status::HaClientState>,
    /// The role now: broker.conf's, or in controller mode the controller's (`broker::role`).
    pub role: Arc<crate::role::RoleState>,
    /// Which access checks run (`broker::auth_gate`).
    pub auth: AuthSettings,
    /// TLS on the remoting ports and on the broker's connections to name servers and master.
    pub tls: crate::tls::TlsContext,
}

/// A queue owned by this shard.
pub struct QueueState {
    pub cq: ConsumeQueue,
    /// Long-polling pulls parked on this queue, woken when a unit is dispatched.
    pub waiters: Vec<Rc<Waiter>>,
}

/// The owned queues by (topic, queue id); looked up with `QueueKey` so no key is allocated.
pub type QueueMap = hashbrown::HashMap<(String, u32), QueueState>;

/// Borrowed (topic, queue id) for `QueueMap` lookups; hashes exactly as the owned tuple.
#[derive(Hash)]
pub struct QueueKey<'a>(pub &'a str, pub u32);

/// The owned key a vacant `entry_ref` inserts.
impl From<&QueueKey<'_>> for (String, u32) {
    fn from(k: &QueueKey<'_>) -> Self {
        (k.0.to_owned(), k.1)
    }
}

impl hashbrown::Equivalent<(String, u32)> for QueueKey<'_> {
    fn equivalent(&self, key: &(String, u32)) -> bool {
        self.1 == key.1 && self.0 == key.0
    }
}

/// Consumer offsets of the queues this shard owns: "topic@group" -> queue id -> offset.
pub type OffsetTable = HashMap<String, BTreeMap<u32, i64>>;

pub struct Shard {
    pub id: usize,
    pub mesh: Mesh<Shard>,
    pub ctx: Arc<BrokerContext>,
    queues: RefCell<QueueMap>,
    offsets: RefCell<OffsetTable>,
    reader: RefCell<CommitLogReader>,
    topics: RefCell<Arc<TopicSnapshot>>,
    subs: RefCell<Arc<SubscriptionSnapshot>>,
    /// The settings an admin may change at run time, as shard 0 last published them.
    settings: Cell<Settings>,
    /// The users and ACLs requests are checked against, as shard 0 last published them, with
    /// the version of that publication.
    auth_table: RefCell<(u64, Arc<AuthTable>)>,
    /// Shard 0 only: the users and ACLs (`broker::auth_state`).
    auth_owner: Option<RefCell<AuthOwner>>,
    /// This shard's connections by id: their outboxes and their requests awaiting answers.
    conns: RefCell<HashMap<u64, ConnHandle>>,
    /// Every shard's completion queue (this shard drains its own, see `broker::completion`).
    completion_queues: CompletionQueues,
    /// This shard's appends waiting for the writer, and replies held behind other shards.
    completions: ShardCompletions,
    /// Shard 0 only: the metadata owner.
    meta: Option<RefCell<Metadata>>,
    uniq: RefCell<UniqKeyGenerator>,
    /// Delay level -> next schedule-queue offset to deliver (levels whose queue we own).
    delay_progress: RefCell<BTreeMap<i32, i64>>,
    /// The timer service's state, on the shard owning the timer queue only.
    timer: RefCell<Option<TimerState>>,
    /// The transaction service's state, on the shard owning the half queue only.
    transaction: RefCell<Option<TransactionState>>,
    next_conn: Cell<u64>,
    round_robin: Cell<u64>,
    stopping: Cell<bool>,
    /// Set at shutdown before progress is gathered: schedule and timer deliveries stop.
    paused: Cell<bool>,
    /// Store timestamp of the newest unit dispatched here (0 = none yet).
    last_dispatch_ts: Cell<i64>,
    /// A task that wakes the writer is queued (`wake_writer_soon`).
    writer_wake_queued: Cell<bool>,
    /// SYNC_MASTER: this shard's sends waiting for slaves.
    group_transfer: GroupTransfer,
    /// POP's state of the queues this shard owns (`broker::pop`).
    pop: RefCell<PopTables>,
    /// POP's state here is loaded (start-up or promotion replayed); until then pops and acks
    /// of queues owned here wait on `pop_loaded`.
    pop_ready: Cell<bool>,
    pop_loaded: RefCell<Vec<Rc<Waiter>>>,
    /// Pops parked by this shard's connections (bounded by `maxPopPollingSize` / shards).
    pop_parked: Cell<usize>,
    /// POP changes written and not yet applied to `pop` (acks, redeliveries), and whether a
    /// snapshot is being taken (new ones wait): see `pop::persist`.
    pop_pending: Cell<usize>,
    pop_barrier: Cell<bool>,
}

impl Shard {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: usize,
        mesh: Mesh<Shard>,
        ctx: Arc<BrokerContext>,
        cqs: Vec<ConsumeQueue>,
        offsets: OffsetTable,
        topics: Arc<TopicSnapshot>,
        subs: Arc<SubscriptionSnapshot>,
        meta: Option<Metadata>,
        delay_progress: BTreeMap<i32, i64>,
        completion_queues: CompletionQueues,
        auth: (Arc<AuthTable>, Option<AuthOwner>),
    ) -> Shard {
        let queues = cqs
            .into_iter()
            .map(|cq| {
                let key = (cq.topic().to_string(), cq.queue_id());
                (
                    key,
                    QueueState {
                        cq,
                        waiters: Vec::new(),
                    },
                )
            })
            .collect();
        let reader = CommitLogReader::with_min_phy(
            &ctx.cfg.store.store_path_root_dir,
            ctx.cfg.store.mapped_file_size_commit_log,
            ctx.writer.min_phy_watch(),
        );
        Shard {
            id,
            mesh,
            queues: RefCell::new(queues),
            offsets: RefCell::new(offsets),
            reader: RefCell::new(reader),
            topics: RefCell::new(topics),
            subs: RefCell::new(subs),
            settings: Cell::new(Settings::from_config(&ctx.cfg)),
            auth_table: RefCell::new((0, auth.0)),
            auth_owner: auth.1.map(RefCell::new),
            conns: RefCell::new(HashMap::new()),
            completion_queues,
            completions: ShardCompletions::default(),
            meta: meta.map(RefCell::new),
            uniq: RefCell::new(UniqKeyGenerator::new(ctx.store_host.ip())),
            delay_progress: RefCell::new(delay_progress),
            timer: RefCell::new(None),
            transaction: RefCell::new(None),
            next_conn: Cell::new(1),
            round_robin: Cell::new(0),
            stopping: Cell::new(false),
            paused: Cell::new(false),
            last_dispatch_ts: Cell::new(0),
            writer_wake_queued: Cell::new(false),
            group_transfer: GroupTransfer::default(),
            pop: RefCell::new(PopTables::default()),
            pop_ready: Cell::new(false),
            pop_loaded: RefCell::new(Vec::new()),
            pop_parked: Cell::new(0),
            pop_pending: Cell::new(0),
            pop_barrier: Cell::new(false),
            ctx,
        }
    }

    /// This shard's sends waiting for slaves (SYNC_MASTER).
    pub fn group_transfer(&self) -> &GroupTransfer {
        &self.group_transfer
    }

    /// Wakes the writer after the tasks already runnable on this shard have run: a read that
    /// brought 16 sends queues 16 appends and costs the writer one wake-up (a futex syscall
    /// here, a context switch there) instead of 16, and the writer takes them as one batch.
    pub fn wake_writer_soon(self: &Rc<Self>) {
        if self.writer_wake_queued.replace(true) {
            return;
        }
        let shard = self.clone();
        crate::runtime::spawn(async move {
            shard.writer_wake_queued.set(false);
            shard.ctx.writer.wake();
        });
    }

    /// A process-unique connection id: shard number in the top 16 bits.
    pub fn next_conn_id(&self) -> u64 {
        let n = self.next_conn.get();
        self.next_conn.set(n + 1);
        ((self.id as u64) << 48) | n
    }

    /// A per-shard counter for spreading sends that let the broker pick the queue.
    pub fn next_round_robin(&self) -> u64 {
        let n = self.round_robin.get();
        self.round_robin.set(n.wrapping_add(1));
        n
    }

    /// The shard owning (topic, queue_id).
    pub fn owner(&self, topic: &str, queue_id: u32) -> usize {
        owner_of(topic, queue_id, self.ctx.shard_count)
    }

    /// This shard's appends waiting for the writer's reply.
    pub fn completions(&self) -> &ShardCompletions {
        &self.completions
    }

    /// The commit log is being truncated back to `cut.phy_offset`: every owned queue drops its
    /// units at or past it; the writer gets the files to unlink and fsync (off this core).
    pub fn on_truncate(&self, cut: CqTruncate) {
        let mut queues = self.queues.borrow_mut();
        let mut files = crate::store::CqCutFiles::default();
        for q in queues.values_mut() {
            let c = q.cq.truncate_from(cut.phy_offset);
            files.remove.extend(c.remove);
            files.sync.extend(c.sync);
        }
        cut.answer(Ok(files));
    }

    /// Applies units the writer published: append to the ConsumeQueues, wake parked pulls.
    pub fn on_dispatch(&self, runs: Vec<DispatchRun>) {
        let mut queues = self.queues.borrow_mut();
        for r in runs {
            if r.store_timestamp > self.last_dispatch_ts.get() {
                self.last_dispatch_ts.set(r.store_timestamp);
            }
            let q = match self.queue_entry(&mut queues, &r.topic, r.queue_id) {
                Ok(q) => q,
                Err(e) => {
                    // The records are in the commit log; recovery rebuilds the units.
                    tracing::error!(topic = %r.topic, queue = r.queue_id, error = %e, "cannot open consume queue");
                    continue;
                }
            };
            let mut stored = 0;
            for (queue_offset, unit) in r.iter() {
                if let Err(e) = q.cq.put(queue_offset, unit) {
                    tracing::error!(topic = %r.topic, queue = r.queue_id, error = %e, "consume queue append failed");
                    break;
                }
                stored += 1;
            }
            self.ctx.stats.shard(self.id).add_puts(stored);
            for w in q.waiters.drain(..) {
                w.notify();
            }
        }
    }

    /// The state of an owned queue, opening (or creating) its ConsumeQueue on first use.
    fn queue_entry<'a>(
        &self,
        queues: &'a mut QueueMap,
        topic: &str,
        queue_id: u32,
    ) -> Result<&'a mut QueueState, crate::store::StoreError> {
        // One hash per call: the entry keeps it for the insert of a queue opened here.
        let key = QueueKey(topic, queue_id);
        match queues.entry_ref(&key) {
            hashbrown::hash_map::EntryRef::Occupied(o) => Ok(o.into_mut()),
            hashbrown::hash_map::EntryRef::Vacant(v) => {
                let cq = ConsumeQueue::open(
                    &self.ctx.cfg.store.store_path_root_dir,
                    topic,
                    queue_id,
                    self.ctx.cfg.store.mapped_file_size_consume_queue,
                )?;
                Ok(v.insert(QueueState {
                    cq,
                    waiters: Vec::new(),
                }))
            }
        }
    }

    /// The owned queues for reading: every unit of every send this broker answered is here
    /// (the completion queue applies units before the replies that follow them).
    pub fn read_queues(&self) -> std::cell::Ref<'_, QueueMap> {
        self.queues.borrow()
    }

    /// (min, max) logical offsets of a queue; (0, 0) when it has no ConsumeQueue yet.
    pub fn queue_bounds(&self, topic: &str, queue_id: u32) -> (u64, u64) {
        let queues = self.read_queues();
        match queues.get(&QueueKey(topic, queue_id)) {
            Some(q) => (q.cq.min_offset(), q.cq.max_offset()),
            None => (0, 0),
        }
    }

    /// Reads one unit of an owned queue.
    pub fn unit_at(&self, topic: &str, queue_id: u32, offset: u64) -> Option<CqUnit> {
        let queues = self.read_queues();
        queues.get(&QueueKey(topic, queue_id))?.cq.get(offset)
    }

    /// Parks a pull on a queue; `false` when the queue already has too many parked pulls.
    pub fn park(&self, topic: &str, queue_id: u32, waiter: Rc<Waiter>) -> bool {
        let limit = self.ctx.cfg.limits.max_long_polling_waiters_per_queue;
        self.park_with_limit(topic, queue_id, waiter, limit)
    }

    /// Parks a waiter on a queue unless `limit` waiters are parked there already (false).
    pub fn park_with_limit(
        &self,
        topic: &str,
        queue_id: u32,
        waiter: Rc<Waiter>,
        limit: usize,
    ) -> bool {
        let mut queues = self.queues.borrow_mut();
        let Ok(q) = self.queue_entry(&mut queues, topic, queue_id) else {
            return false;
        };
        q.waiters.retain(|w| !w.abandoned());
        if q.waiters.len() >= limit {
            return false;
        }
        q.waiters.push(waiter);
        true
    }

    /// How many requests are parked on a queue.
    pub fn parked_on(&self, topic: &str, queue_id: u32) -> usize {
        let queues = self.read_queues();
        queues
            .get(&QueueKey(topic, queue_id))
            .map_or(0, |q| q.waiters.iter().filter(|w| !w.abandoned()).count())
    }

    /// Wakes every request parked on a queue (an orderly queue's block ended).
    pub fn wake_parked(&self, topic: &str, queue_id: u32) {
        let mut queues = self.queues.borrow_mut();
        if let Some(q) = queues.get_mut(&QueueKey(topic, queue_id)) {
            for w in q.waiters.drain(..) {
                w.notify();
            }
        }
    }

    /// Flushes every owned ConsumeQueue (shutdown and periodic). Returns the store timestamp up
    /// to which this shard's units are now durable: `None` if a flush failed, `Some(i64::MAX)`
    /// when nothing was ever dispatched here.
    pub async fn flush_queues(&self) -> Option<i64> {
        let ts = match self.last_dispatch_ts.get() {
            0 => i64::MAX,
            t => t,
        };
        // Units dispatched before this point are in the taken ranges; the fdatasyncs run on a
        // blocking thread so this core keeps serving (a sync takes 0.25-4 ms per file here).
        let jobs: Vec<((String, u32), crate::store::CqSyncJob)> = self
            .queues
            .borrow_mut()
            .iter_mut()
            .filter_map(|(k, q)| q.cq.take_sync_job().map(|j| (k.clone(), j)))
            .collect();
        if jobs.is_empty() {
            return Some(ts);
        }
        let (jobs, failed) = crate::runtime::spawn_blocking(move || {
            let failed: Vec<bool> = jobs
                .iter()
                .map(|((topic, qid), job)| match job.sync() {
                    Ok(()) => false,
                    Err(e) => {
                        tracing::error!(topic = %topic, queue = *qid, error = %e, "consume queue flush failed");
                        true
                    }
                })
                .collect();
            (jobs, failed)
        })
        .await;
        let mut ok = true;
        let mut queues = self.queues.borrow_mut();
        for ((key, job), failed) in jobs.iter().zip(failed) {
            if failed {
                ok = false;
                if let Some(q) = queues.get_mut(key) {
                    q.cq.restore_dirty(job);
                }
            }
        }
        ok.then_some(ts)
    }

    /// Shard 0's metadata, for reading. Only shard 0 holds it: callers forward there first.
    pub fn meta(&self) -> Ref<'_, Metadata> {
        self.meta_cell().borrow()
    }

    /// Shard 0's metadata, for changing.
    pub fn meta_mut(&self) -> RefMut<'_, Metadata> {
        self.meta_cell().borrow_mut()
    }

    fn meta_cell(&self) -> &RefCell<Metadata> {
        self.meta
            .as_ref()
            .expect("metadata lives on shard 0; callers forward there first")
    }

    /// The topic configs as shard 0 last published them.
    pub fn topics(&self) -> Ref<'_, TopicSnapshot> {
        Ref::map(self.topics.borrow(), |t| &**t)
    }

    /// Replaces this shard's view of the topic configs (shard 0 publishes after a change).
    pub fn set_topics(&self, topics: Arc<TopicSnapshot>) {
        *self.topics.borrow_mut() = topics;
    }

    /// The consumer groups' subscriptions as shard 0 last published them.
    pub fn subscriptions(&self) -> Ref<'_, SubscriptionSnapshot> {
        Ref::map(self.subs.borrow(), |s| &**s)
    }

    /// Replaces this shard's view of the subscriptions.
    pub fn set_subscriptions(&self, subs: Arc<SubscriptionSnapshot>) {
        *self.subs.borrow_mut() = subs;
    }

    /// The run-time settings as shard 0 last published them (UPDATE_BROKER_CONFIG).
    pub fn settings(&self) -> Settings {
        self.settings.get()
    }

    /// Replaces this shard's view of the run-time settings, unless it already has newer ones.
    pub fn set_settings(&self, settings: Settings) {
        if settings.version > self.settings.get().version {
            self.settings.set(settings);
        }
    }

    /// Runs `f` on this shard's copy of the auth table.
    pub fn with_auth_table<R>(&self, f: impl FnOnce(&AuthTable) -> R) -> R {
        f(&self.auth_table.borrow().1)
    }

    /// Replaces this shard's auth table, unless it already has a newer one.
    pub fn set_auth_table(&self, version: u64, table: Arc<AuthTable>) {
        let mut t = self.auth_table.borrow_mut();
        if version > t.0 {
            *t = (version, table);
        }
    }

    /// Runs `f` on shard 0's users and ACLs; `None` on any other shard.
    pub fn with_auth_owner<R>(&self, f: impl FnOnce(&mut AuthOwner) -> R) -> Option<R> {
        self.auth_owner.as_ref().map(|o| f(&mut o.borrow_mut()))
    }

    /// This shard's commit-log reader.
    pub fn reader(&self) -> RefMut<'_, CommitLogReader> {
        self.reader.borrow_mut()
    }

    /// Consumer offsets of the queues this shard owns.
    pub fn offsets(&self) -> Ref<'_, OffsetTable> {
        self.offsets.borrow()
    }

    pub fn offsets_mut(&self) -> RefMut<'_, OffsetTable> {
        self.offsets.borrow_mut()
    }

    /// The owned queues, for changing (trimming, dropping); reads go through `read_queues`.
    pub fn queues_mut(&self) -> RefMut<'_, QueueMap> {
        self.queues.borrow_mut()
    }

    /// A connection accepted on this shard.
    pub fn conn(&self, id: u64) -> Option<ConnHandle> {
        self.conns.borrow().get(&id).cloned()
    }

    pub fn add_conn(&self, id: u64, conn: ConnHandle) {
        self.conns.borrow_mut().insert(id, conn);
    }

    pub fn remove_conn(&self, id: u64) {
        self.conns.borrow_mut().remove(&id);
    }

    /// A new UNIQ_KEY (message id as the client would make it).
    pub fn next_uniq(&self, now_ms: i64) -> String {
        self.uniq.borrow_mut().next(now_ms)
    }

    /// A new UNIQ_KEY written to the end of `buf`.
    pub fn push_next_uniq(&self, buf: &mut String, now_ms: i64) {
        self.uniq.borrow_mut().push_next(buf, now_ms)
    }

    /// Delay level -> next schedule-queue offset to deliver, for the levels this shard owns.
    pub fn delay_progress(&self) -> Ref<'_, BTreeMap<i32, i64>> {
        self.delay_progress.borrow()
    }

    pub fn delay_progress_mut(&self) -> RefMut<'_, BTreeMap<i32, i64>> {
        self.delay_progress.borrow_mut()
    }

    /// The timer service's state: `Some` on the shard owning the timer queue once started.
    pub fn timer(&self) -> Ref<'_, Option<TimerState>> {
        self.timer.borrow()
    }

    pub fn timer_mut(&self) -> RefMut<'_, Option<TimerState>> {
        self.timer.borrow_mut()
    }

    /// The transaction service's state: `Some` on the half queue's owner once started.
    pub fn transaction(&self) -> Ref<'_, Option<TransactionState>> {
        self.transaction.borrow()
    }

    pub fn transaction_mut(&self) -> RefMut<'_, Option<TransactionState>> {
        self.transaction.borrow_mut()
    }

    /// POP's state of the queues this shard owns.
    pub fn pop(&self) -> Ref<'_, PopTables> {
        self.pop.borrow()
    }

    pub fn pop_mut(&self) -> RefMut<'_, PopTables> {
        self.pop.borrow_mut()
    }

    /// Waits until POP's state of this shard's queues is loaded.
    pub async fn pop_loaded(&self) {
        while !self.pop_ready.get() {
            let w = Waiter::new();
            self.pop_loaded.borrow_mut().push(w.clone());
            w.notified().await;
        }
    }

    /// Replaces POP's state (start-up, promotion) and releases the requests waiting for it;
    /// `None` marks it unloaded (a slave's).
    pub fn set_pop_state(&self, tables: Option<PopTables>) {
        match tables {
            Some(t) => {
                *self.pop.borrow_mut() = t;
                self.pop_ready.set(true);
                for w in self.pop_loaded.borrow_mut().drain(..) {
                    w.notify();
                }
            }
            None => {
                self.pop_ready.set(false);
                *self.pop.borrow_mut() = PopTables::default();
            }
        }
    }

    pub fn pop_ready(&self) -> bool {
        self.pop_ready.get()
    }

    /// Starts a POP change that is written before it is applied; waits while a snapshot is
    /// being taken. The change is pending until the returned guard drops.
    pub async fn pop_change(&self) -> PopChange<'_> {
        while self.pop_barrier.get() {
            crate::runtime::sleep(std::time::Duration::from_millis(1)).await;
        }
        self.pop_pending.set(self.pop_pending.get() + 1);
        PopChange(&self.pop_pending)
    }

    /// Runs `f` over the POP tables once no change is between its write and its application:
    /// new changes wait meanwhile. `None` when changes did not drain within `wait`.
    pub async fn pop_quiesced<R>(
        &self,
        wait: std::time::Duration,
        f: impl FnOnce(&PopTables) -> R,
    ) -> Option<R> {
        self.pop_barrier.set(true);
        let deadline = std::time::Instant::now() + wait;
        while self.pop_pending.get() > 0 && std::time::Instant::now() < deadline {
            crate::runtime::sleep(std::time::Duration::from_millis(1)).await;
        }
        let out = (self.pop_pending.get() == 0).then(|| f(&self.pop.borrow()));
        self.pop_barrier.set(false);
        out
    }

    /// Pops parked by this shard's connections.
    pub fn pop_parked(&self) -> &Cell<usize> {
        &self.pop_parked
    }

    /// The broker is shutting down: loops on this shard end.
    pub fn is_stopping(&self) -> bool {
        self.stopping.get()
    }

    pub fn stop(&self) {
        self.stopping.set(true);
    }

    /// Schedule, timer and transaction-check deliveries are paused: shutdown gathers
    /// progress, or the broker is a slave now (controller mode turns a master into one).
    pub fn is_paused(&self) -> bool {
        self.paused.get() || self.ctx.role.is_slave()
    }

    pub fn pause(&self) {
        self.paused.set(true);
    }
}

pub type ShardRc = Rc<Shard>;

/// A POP change between its write and its application (`Shard::pop_change`).
pub struct PopChange<'a>(&'a Cell<usize>);

impl Drop for PopChange<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl CompletionTarget for Shard {
    fn shard_id(&self) -> usize {
        self.id
    }
    fn completion_queues(&self) -> &CompletionQueues {
        &self.completion_queues
    }
    fn completions(&self) -> &ShardCompletions {
        &self.completions
    }
    fn apply_units(&self, runs: Vec<DispatchRun>) {
        self.on_dispatch(runs);
    }
    fn apply_truncate(&self, cut: CqTruncate) {
        self.on_truncate(cut);
    }
    fn wake_writer(&self) {
        self.ctx.writer.wake();
    }
}
