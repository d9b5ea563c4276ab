//! The one way back from the writer to the shards: a bounded completion queue per shard that
//! carries, in commit-log order, the consume-queue units the shard owns, the cuts of a
//! truncation, and the tokens of the shard's appends the writer answered. A shard applies an
//! item's units before it answers the item's replies, so a reply never overtakes its unit.
//!
//! A reply whose units another shard owns carries a fence: that shard's sequence number for the
//! same group. The answering shard holds the reply until the owner has applied that item (the
//! owner's `applied`), and the owner wakes it when it does; so whichever shard a client pulls
//! through next, the unit is readable there. With one shard there are no fences.
//!
//! `ShardDispatcher` is the writer's side (it runs on the writer thread and never blocks: an item
//! a full queue refuses is kept, in order, and the writer takes no appends until the shard,
//! which it asks to wake it, has made room). `run` is each shard's side. `PendingAppends` holds
//! a shard's appends waiting for their reply: a slot per append, no allocation or channel per
//! append.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crossbeam_queue::ArrayQueue;

use crate::store::StoreError;
use crate::writer::{AppendOutcome, CqTruncate, DispatchRun, Dispatcher, ShardReply};

/// Items one shard's completion queue holds (an item is one group's share for the shard).
pub const COMPLETION_QUEUE_CAPACITY: usize = 1024;

type ReplyResult = Result<AppendOutcome, StoreError>;

/// Replies held behind their fences: (fences, (token, result) each).
type Held = (Vec<(u16, u64)>, Vec<(u32, ReplyResult)>);

/// One group's share for one shard.
struct Completed {
    /// This queue's sequence number of the item (from 1).
    seq: u64,
    runs: Vec<DispatchRun>,
    truncate: Option<CqTruncate>,
    replies: Vec<(u32, ReplyResult)>,
    /// (shard, seq): items other shards must have applied before `replies` are answered.
    fences: Vec<(u16, u64)>,
}

impl Completed {
    fn new(seq: u64) -> Self {
        Completed {
            seq,
            runs: Vec::new(),
            truncate: None,
            replies: Vec::new(),
            fences: Vec::new(),
        }
    }
}

/// One shard's queue, shared by the writer (pushes) and the shard (pops).
pub struct CompletionQueue {
    items: ArrayQueue<Completed>,
    /// The shard's draining task.
    waker: atomic_waker::AtomicWaker,
    /// Sequence number of the last item the shard applied.
    applied: AtomicU64,
    /// Shards (bit `i % 64`) holding replies fenced on this queue's `applied`.
    watchers: AtomicU64,
    /// The writer kept items back for lack of room: the shard wakes it once it drained.
    writer_waiting: AtomicBool,
}

/// Every shard's queue.
pub type CompletionQueues = Arc<[CompletionQueue]>;

pub fn completion_queues(shards: usize) -> CompletionQueues {
    (0..shards)
        .map(|_| CompletionQueue {
            items: ArrayQueue::new(COMPLETION_QUEUE_CAPACITY),
            waker: atomic_waker::AtomicWaker::new(),
            applied: AtomicU64::new(0),
            watchers: AtomicU64::new(0),
            writer_waiting: AtomicBool::new(false),
        })
        .collect()
}

impl CompletionQueue {
    /// Items waiting for the shard (a metrics gauge; the writer and the shard move it).
    pub fn depth(&self) -> usize {
        self.items.len()
    }
}

fn fences_met(queues: &[CompletionQueue], fences: &[(u16, u64)]) -> bool {
    fences
        .iter()
        .all(|&(j, seq)| queues[j as usize].applied.load(Ordering::SeqCst) >= seq)
}

/// Which shard owns a queue (`shard::owner_of`): (topic, queue id, shard count) -> shard.
pub type OwnerOf = fn(&str, u32, usize) -> usize;

/// The writer's side: routes each group's units to their owners and the replies to the shards
/// that asked, with the fences between them.
pub struct ShardDispatcher {
    queues: CompletionQueues,
    owner_of: OwnerOf,
    /// Per shard: the last sequence number given out.
    last_seq: Vec<u64>,
    /// Per shard: items its full queue refused, oldest first.
    kept: Vec<VecDeque<Completed>>,
}

impl ShardDispatcher {
    pub fn new(queues: CompletionQueues, owner_of: OwnerOf) -> Self {
        let n = queues.len();
        ShardDispatcher {
            queues,
            owner_of,
            last_seq: vec![0; n],
            kept: (0..n).map(|_| VecDeque::new()).collect(),
        }
    }

    fn item(&mut self, items: &mut [Option<Completed>], shard: usize) -> usize {
        if items[shard].is_none() {
            self.last_seq[shard] += 1;
            items[shard] = Some(Completed::new(self.last_seq[shard]));
        }
        shard
    }

    /// Pushes in order: behind whatever is kept for the shard, else straight into its queue.
    fn push(&mut self, shard: usize, item: Completed) {
        let q = &self.queues[shard];
        if self.kept[shard].is_empty() {
            match q.items.push(item) {
                Ok(()) => {
                    q.waker.wake();
                    return;
                }
                Err(back) => self.kept[shard].push_back(back),
            }
        } else {
            self.kept[shard].push_back(item);
        }
        q.writer_waiting.store(true, Ordering::SeqCst);
        q.waker.wake();
    }

    fn push_all(&mut self, items: Vec<Option<Completed>>) {
        for (i, item) in items.into_iter().enumerate() {
            if let Some(item) = item {
                self.push(i, item);
            }
        }
    }
}

impl Dispatcher for ShardDispatcher {
    fn complete(&mut self, runs: Vec<DispatchRun>, replies: Vec<ShardReply>) {
        let n = self.queues.len();
        let mut items: Vec<Option<Completed>> = (0..n).map(|_| None).collect();
        let mut with_units = Vec::new();
        for r in runs {
            let o = (self.owner_of)(&r.topic, r.queue_id, n);
            let i = self.item(&mut items, o);
            if let Some(it) = items[i].as_mut() {
                if it.runs.is_empty() {
                    with_units.push(o);
                }
                it.runs.push(r);
            }
        }
        for rep in replies {
            let k = rep.shard as usize;
            if k >= n {
                tracing::error!(shard = k, "a reply for a shard that does not exist");
                continue;
            }
            let i = self.item(&mut items, k);
            if let Some(it) = items[i].as_mut() {
                if it.replies.is_empty() {
                    // Every other shard that got units in this group applies them first.
                    for &o in with_units.iter().filter(|&&o| o != k) {
                        it.fences.push((o as u16, self.last_seq[o]));
                    }
                }
                it.replies.push((rep.token, rep.result));
            }
        }
        self.push_all(items);
    }

    fn truncate(&mut self, cut: CqTruncate) {
        let n = self.queues.len();
        for (shard, c) in cut.split(n).into_iter().enumerate() {
            self.last_seq[shard] += 1;
            let mut item = Completed::new(self.last_seq[shard]);
            item.truncate = Some(c);
            self.push(shard, item);
        }
    }

    fn barrier(&mut self, reply: ShardReply) {
        let k = reply.shard as usize;
        if k >= self.queues.len() {
            tracing::error!(shard = k, "a barrier for a shard that does not exist");
            return;
        }
        self.last_seq[k] += 1;
        let mut item = Completed::new(self.last_seq[k]);
        item.fences = (0..self.queues.len())
            .filter(|&j| j != k && self.last_seq[j] > 0)
            .map(|j| (j as u16, self.last_seq[j]))
            .collect();
        item.replies.push((reply.token, reply.result));
        self.push(k, item);
    }

    fn flush(&mut self) -> bool {
        let mut clear = true;
        for (shard, kept) in self.kept.iter_mut().enumerate() {
            let q = &self.queues[shard];
            let mut moved = false;
            while let Some(item) = kept.pop_front() {
                match q.items.push(item) {
                    Ok(()) => moved = true,
                    Err(back) => {
                        kept.push_front(back);
                        q.writer_waiting.store(true, Ordering::SeqCst);
                        clear = false;
                        break;
                    }
                }
            }
            if moved {
                q.waker.wake();
            }
        }
        clear
    }
}

/// A shard's side: its appends waiting for replies, and replies waiting for fences.
#[derive(Default)]
pub struct ShardCompletions {
    slots: RefCell<slab::Slab<Slot>>,
    /// Replies held until other shards applied the units they answer for, oldest first.
    fenced: RefCell<VecDeque<Held>>,
}

enum Slot {
    Waiting(Option<Waker>),
    Done(ReplyResult),
    /// Its waiter went away (its connection closed): freed when the reply comes.
    Abandoned,
}

impl ShardCompletions {
    /// A slot for one append; its token goes to the writer (`ReplyTo::Shard`).
    pub fn open(&self) -> u32 {
        self.slots.borrow_mut().insert(Slot::Waiting(None)) as u32
    }

    /// Frees a slot whose append never reached the writer.
    pub fn cancel(&self, token: u32) {
        self.slots.borrow_mut().try_remove(token as usize);
    }

    /// The reply for `token`, once the writer answered.
    pub fn wait(&self, token: u32) -> AppendWait<'_> {
        AppendWait {
            c: self,
            token,
            finished: false,
        }
    }

    fn answer(&self, token: u32, result: ReplyResult) {
        let mut slots = self.slots.borrow_mut();
        let Some(slot) = slots.get_mut(token as usize) else {
            tracing::error!(token, "a reply for no waiting append");
            return;
        };
        match std::mem::replace(slot, Slot::Abandoned) {
            Slot::Waiting(w) => {
                *slot = Slot::Done(result);
                if let Some(w) = w {
                    w.wake();
                }
            }
            Slot::Abandoned => {
                slots.remove(token as usize);
            }
            Slot::Done(prev) => {
                tracing::error!(token, "a second reply for one append");
                *slot = Slot::Done(prev);
            }
        }
    }

    fn answer_all(&self, replies: Vec<(u32, ReplyResult)>) {
        for (token, r) in replies {
            self.answer(token, r);
        }
    }

    /// Answers the held replies whose fences are met, in order; registers as a watcher of the
    /// first one still fenced.
    fn release_fenced(&self, me: usize, queues: &[CompletionQueue]) {
        loop {
            let front_met = {
                let fenced = self.fenced.borrow();
                let Some((fences, _)) = fenced.front() else {
                    return;
                };
                if !fences_met(queues, fences) {
                    for &(j, seq) in fences {
                        let q = &queues[j as usize];
                        if q.applied.load(Ordering::SeqCst) < seq {
                            q.watchers.fetch_or(1u64 << (me % 64), Ordering::SeqCst);
                        }
                    }
                }
                // Checked again after registering: an owner that applied in between saw no
                // watcher.
                fences_met(queues, fences)
            };
            if !front_met {
                return;
            }
            if let Some((_, replies)) = self.fenced.borrow_mut().pop_front() {
                self.answer_all(replies);
            }
        }
    }

    fn front_released(&self, queues: &[CompletionQueue]) -> bool {
        self.fenced
            .borrow()
            .front()
            .is_some_and(|(f, _)| fences_met(queues, f))
    }
}

/// Waits for one append's reply (see `ShardCompletions::wait`).
pub struct AppendWait<'a> {
    c: &'a ShardCompletions,
    token: u32,
    finished: bool,
}

impl Future for AppendWait<'_> {
    type Output = ReplyResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ReplyResult> {
        let mut slots = self.c.slots.borrow_mut();
        let token = self.token as usize;
        match slots.get_mut(token) {
            Some(Slot::Done(_)) => {
                let Slot::Done(r) = slots.remove(token) else {
                    unreachable!("matched Done above");
                };
                drop(slots);
                self.finished = true;
                Poll::Ready(r)
            }
            Some(Slot::Waiting(w)) => {
                *w = Some(cx.waker().clone());
                Poll::Pending
            }
            Some(Slot::Abandoned) | None => {
                drop(slots);
                self.finished = true;
                Poll::Ready(Err(StoreError::NotWritable(
                    "the append's reply was lost".into(),
                )))
            }
        }
    }
}

impl Drop for AppendWait<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut slots = self.c.slots.borrow_mut();
        let token = self.token as usize;
        match slots.get(token) {
            Some(Slot::Done(_)) => {
                slots.remove(token);
            }
            Some(Slot::Waiting(_)) => slots[token] = Slot::Abandoned,
            _ => {}
        }
    }
}

/// What a shard's draining task works on (the shard itself).
pub trait CompletionTarget {
    /// This shard's number.
    fn shard_id(&self) -> usize;
    fn completion_queues(&self) -> &CompletionQueues;
    fn completions(&self) -> &ShardCompletions;
    /// Appends units to the owned consume queues and wakes their parked pulls.
    fn apply_units(&self, runs: Vec<DispatchRun>);
    /// Cuts the owned consume queues (a truncation of the commit log) and answers the writer.
    fn apply_truncate(&self, cut: CqTruncate);
    /// The writer waits for room in this shard's queue.
    fn wake_writer(&self);
}

/// The shard's task draining its completion queue: units applied, then replies answered (or
/// held behind their fences); the owners it waits for wake it, and it wakes the writer when it
/// made room the writer is waiting for. Runs for the shard's life.
pub async fn run<T: CompletionTarget>(shard: Rc<T>) {
    let me = shard.shard_id();
    let queues = shard.completion_queues().clone();
    let q = &queues[me];
    loop {
        let mut applied_any = false;
        while let Some(item) = q.items.pop() {
            applied_any = true;
            if !item.runs.is_empty() {
                shard.apply_units(item.runs);
            }
            if let Some(cut) = item.truncate {
                shard.apply_truncate(cut);
            }
            q.applied.store(item.seq, Ordering::SeqCst);
            let c = shard.completions();
            if !item.replies.is_empty() {
                if c.fenced.borrow().is_empty() && fences_met(&queues, &item.fences) {
                    c.answer_all(item.replies);
                } else {
                    c.fenced.borrow_mut().push_back((item.fences, item.replies));
                }
            }
        }
        if applied_any {
            let watchers = q.watchers.swap(0, Ordering::SeqCst);
            if watchers != 0 {
                for (j, other) in queues.iter().enumerate() {
                    if j != me && watchers & (1u64 << (j % 64)) != 0 {
                        other.waker.wake();
                    }
                }
            }
            if q.writer_waiting.swap(false, Ordering::SeqCst) {
                shard.wake_writer();
            }
        }
        shard.completions().release_fenced(me, &queues);
        std::future::poll_fn(|cx| {
            q.waker.register(cx.waker());
            if !q.items.is_empty() || shard.completions().front_released(&queues) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}
