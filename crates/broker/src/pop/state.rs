//! POP's state on the shard that owns a queue: per (group, popped topic, queue) the pop offset
//! (where the next pop starts) and the messages in flight, indexed by the time each becomes
//! visible again; for orderly pops the queue's block (the offsets of the last pop, their acks and
//! delivery counts). Pure data: no shard, no I/O. Every change is also a [`StateRecord`] the
//! shard appends to the commit log, and [`PopTables::apply`] replays those records at start-up
//! (idempotently, so a snapshot taken while records were being written may be replayed over).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

/// The queue a group pops: the topic popped (a retry topic for retried messages) and its queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PopKey {
    #[serde(rename = "g")]
    pub group: String,
    #[serde(rename = "t")]
    pub topic: String,
    #[serde(rename = "q")]
    pub queue_id: u32,
}

/// One message in flight: which pop handed it out, and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inflight {
    pub pop_time: i64,
    pub invisible_time: i64,
}

impl Inflight {
    /// When the message becomes visible again (its redelivery is due).
    pub fn deadline(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_time)
    }
}

/// An orderly queue's last pop: while any of its offsets is un-acked and the pop is invisible,
/// the queue is blocked for the group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderBlock {
    #[serde(rename = "pt")]
    pub pop_time: i64,
    #[serde(rename = "it")]
    pub invisible_time: i64,
    #[serde(rename = "a", default)]
    pub attempt_id: String,
    /// The offsets handed out, ascending.
    #[serde(rename = "o")]
    pub offsets: Vec<u64>,
    #[serde(rename = "k", default)]
    pub acked: BTreeSet<u64>,
    /// Times each offset was delivered (1 on its first pop).
    #[serde(rename = "c", default)]
    pub counts: BTreeMap<u64, u32>,
}

impl OrderBlock {
    pub fn deadline(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_time)
    }

    pub fn all_acked(&self) -> bool {
        self.offsets.iter().all(|o| self.acked.contains(o))
    }

    /// Where the consumer offset stands: the first un-acked offset, or past the last.
    pub fn commit_point(&self) -> Option<u64> {
        let first = self.offsets.iter().find(|o| !self.acked.contains(o));
        first.copied().or(self.offsets.last().map(|o| o + 1))
    }
}

/// A message in flight as the tables hold it: its pop, and the batch of the deadline index
/// it is due in.
#[derive(Clone, Copy, Debug)]
struct Held {
    at: Inflight,
    batch: BatchSlot,
}

/// Where a batch sits in the deadline index: its deadline and its number.
type BatchSlot = (i64, u64);

/// The batch of a message taken for redelivery and not yet stored again: it stays in flight
/// (and in snapshots) until its retry is stored.
const REVIVING: BatchSlot = (i64::MIN, 0);

/// One queue's POP state for one group.
#[derive(Clone, Debug, Default)]
pub struct PopQueue {
    /// The next offset a pop reads (non-orderly pops move it at once).
    pub next: u64,
    /// The consumer offset this state last committed; another value in the offset table means
    /// someone reset it, and pops follow.
    pub committed: Option<i64>,
    inflight: BTreeMap<u64, Held>,
    pub order: Option<OrderBlock>,
}

impl PopQueue {
    /// Messages of this queue in flight.
    pub fn inflight_len(&self) -> usize {
        self.inflight.len()
    }
}

/// What the commit log keeps of POP: each record is one change, applied on replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k")]
pub enum StateRecord {
    /// A pop: the offsets handed out and where the next pop starts.
    #[serde(rename = "ck")]
    Pop {
        #[serde(flatten)]
        key: PopKey,
        #[serde(rename = "pt")]
        pop_time: i64,
        #[serde(rename = "it")]
        invisible_time: i64,
        #[serde(rename = "n")]
        next: u64,
        #[serde(rename = "o")]
        offsets: Vec<u64>,
    },
    /// Acks (or revivals) of offsets popped at `pop_time`.
    #[serde(rename = "ack")]
    Ack {
        #[serde(flatten)]
        key: PopKey,
        #[serde(rename = "pt")]
        pop_time: i64,
        #[serde(rename = "o")]
        offsets: Vec<u64>,
    },
    /// A changed invisible time: the message popped at `pop_time` now counts from `new_pop_time`.
    #[serde(rename = "chg")]
    Change {
        #[serde(flatten)]
        key: PopKey,
        #[serde(rename = "o")]
        offset: u64,
        #[serde(rename = "pt")]
        pop_time: i64,
        #[serde(rename = "npt")]
        new_pop_time: i64,
        #[serde(rename = "it")]
        invisible_time: i64,
    },
    /// An ack of one message of an orderly block popped at `pop_time`.
    #[serde(rename = "oack")]
    OrderAck {
        #[serde(flatten)]
        key: PopKey,
        #[serde(rename = "pt")]
        pop_time: i64,
        #[serde(rename = "o")]
        offset: u64,
    },
    /// An orderly queue's block as it now stands (after a pop or a change).
    #[serde(rename = "ord")]
    Order {
        #[serde(flatten)]
        key: PopKey,
        #[serde(rename = "b")]
        block: Option<OrderBlock>,
    },
}

impl StateRecord {
    pub fn key(&self) -> &PopKey {
        match self {
            StateRecord::Pop { key, .. }
            | StateRecord::Ack { key, .. }
            | StateRecord::Change { key, .. }
            | StateRecord::OrderAck { key, .. }
            | StateRecord::Order { key, .. } => key,
        }
    }
}

/// A message whose invisible time passed, taken out of the tables for redelivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    pub key: Rc<PopKey>,
    pub offset: u64,
    pub inflight: Inflight,
}

/// The messages one pop (or one change of invisible time) put in flight with one deadline; an
/// offset acked or changed since is skipped when the batch comes due (its `Held` names another
/// batch or is gone), and a batch whose every message left is removed at once.
#[derive(Debug)]
struct Batch {
    key: Rc<PopKey>,
    offsets: Vec<u64>,
    live: usize,
}

/// Every queue's POP state on one shard, with the deadline index the redelivery loop reads: one
/// entry per pop rather than per message, keyed by numbers (no key strings compared).
#[derive(Default)]
pub struct PopTables {
    queues: hashbrown::HashMap<Rc<PopKey>, PopQueue>,
    batches: BTreeMap<BatchSlot, Batch>,
    next_batch: u64,
    /// Orderly queues' blocks by deadline.
    blocks: BTreeSet<(i64, Rc<PopKey>)>,
    /// Messages in flight per group, bounded by `popInflightMessageThreshold`.
    per_group: hashbrown::HashMap<String, usize>,
}

impl PopTables {
    /// The state of `key`, if any pop touched it.
    pub fn queue(&self, key: &PopKey) -> Option<&PopQueue> {
        self.queues.get(key)
    }

    /// The state of `key`, created empty (`next` 0, nothing committed) on first use.
    pub fn queue_mut(&mut self, key: &PopKey) -> &mut PopQueue {
        if !self.queues.contains_key(key) {
            self.queues
                .insert(Rc::new(key.clone()), PopQueue::default());
        }
        self.queues.get_mut(key).expect("inserted above")
    }

    fn shared_key(&self, key: &PopKey) -> Option<Rc<PopKey>> {
        self.queues.get_key_value(key).map(|(k, _)| k.clone())
    }

    /// Messages of `group` in flight on this shard.
    pub fn inflight_of_group(&self, group: &str) -> usize {
        self.per_group.get(group).copied().unwrap_or(0)
    }

    /// Every queue's state, for snapshots and the admin views.
    pub fn iter(&self) -> impl Iterator<Item = (&PopKey, &PopQueue)> {
        self.queues.iter().map(|(k, q)| (&**k, q))
    }

    /// A new batch of the deadline index (empty; `popped` and `change` fill it).
    fn open_batch(&mut self, key: Rc<PopKey>, deadline: i64) -> BatchSlot {
        self.next_batch += 1;
        let slot = (deadline, self.next_batch);
        let batch = Batch {
            key,
            offsets: Vec::new(),
            live: 0,
        };
        self.batches.insert(slot, batch);
        slot
    }

    /// One message of `slot` left the flight (acked, changed, replaced).
    fn leave(&mut self, slot: BatchSlot) {
        if let Some(b) = self.batches.get_mut(&slot) {
            b.live -= 1;
            if b.live == 0 {
                self.batches.remove(&slot);
            }
        }
    }

    /// Records a pop of `offsets` at `pop_time`: each in flight until `pop_time + invisible`;
    /// the pop offset moves to `next` (never back).
    pub fn popped(
        &mut self,
        key: &PopKey,
        pop_time: i64,
        invisible: i64,
        next: u64,
        offsets: &[u64],
    ) {
        let q = self.queue_mut(key);
        q.next = q.next.max(next);
        let k = self.shared_key(key).expect("created by queue_mut");
        let at = Inflight {
            pop_time,
            invisible_time: invisible,
        };
        let slot = self.open_batch(k.clone(), at.deadline());
        let mut taken = Vec::with_capacity(offsets.len());
        let mut replaced = Vec::new();
        let mut added = 0;
        let q = self.queues.get_mut(&k).expect("present");
        for &o in offsets {
            let held = Held { at, batch: slot };
            match q.inflight.get(&o).copied() {
                // A replayed pop older than what the tables already hold changes nothing.
                Some(old) if old.at.pop_time >= pop_time => continue,
                Some(old) => replaced.push(old.batch),
                None => added += 1,
            }
            q.inflight.insert(o, held);
            taken.push(o);
        }
        for old in replaced {
            self.leave(old);
        }
        if taken.is_empty() {
            self.batches.remove(&slot);
        } else if let Some(b) = self.batches.get_mut(&slot) {
            b.live = taken.len();
            b.offsets = taken;
        }
        if added > 0 {
            *self.per_group.entry(key.group.clone()).or_default() += added;
        }
    }

    /// Acks the message at `offset` popped at `pop_time`; false when no such pop is in flight
    /// (acked before, redelivered already, or the handle is of another pop).
    pub fn ack(&mut self, key: &PopKey, offset: u64, pop_time: i64) -> bool {
        let Some(q) = self.queues.get_mut(key) else {
            return false;
        };
        match q.inflight.get(&offset) {
            Some(h) if h.at.pop_time == pop_time => {
                let slot = h.batch;
                q.inflight.remove(&offset);
                self.leave(slot);
                self.release(&key.group, 1);
                true
            }
            _ => false,
        }
    }

    /// Whether the message at `offset` popped at `pop_time` is in flight (an ack of it would
    /// apply); acks are written before they are applied, so removals reach a snapshot only once
    /// their record is stored.
    pub fn holds(&self, key: &PopKey, offset: u64, pop_time: i64) -> bool {
        self.queue(key)
            .and_then(|q| q.inflight.get(&offset))
            .is_some_and(|h| h.at.pop_time == pop_time)
    }

    /// A message taken for redelivery is stored again: it leaves the flight.
    pub fn revived(&mut self, key: &PopKey, offset: u64, pop_time: i64) {
        let Some(q) = self.queues.get_mut(key) else {
            return;
        };
        if q.inflight
            .get(&offset)
            .is_some_and(|h| h.batch == REVIVING && h.at.pop_time == pop_time)
        {
            q.inflight.remove(&offset);
            self.release(&key.group, 1);
        }
    }

    /// A redelivery failed: the message comes due again at `deadline`, with its pop time kept
    /// (its handle still acks it).
    pub fn retry_later(&mut self, key: &PopKey, offset: u64, pop_time: i64, deadline: i64) {
        let Some(k) = self.shared_key(key) else {
            return;
        };
        let reviving = self
            .queues
            .get(&k)
            .and_then(|q| q.inflight.get(&offset))
            .is_some_and(|h| h.batch == REVIVING && h.at.pop_time == pop_time);
        if !reviving {
            return;
        }
        let slot = self.open_batch(k.clone(), deadline);
        if let Some(b) = self.batches.get_mut(&slot) {
            b.offsets.push(offset);
            b.live = 1;
        }
        let at = Inflight {
            pop_time,
            invisible_time: deadline - pop_time,
        };
        let q = self.queues.get_mut(&k).expect("present");
        q.inflight.insert(offset, Held { at, batch: slot });
    }

    fn release(&mut self, group: &str, n: usize) {
        if let Some(c) = self.per_group.get_mut(group) {
            *c = c.saturating_sub(n);
            if *c == 0 {
                self.per_group.remove(group);
            }
        }
    }

    /// Moves the message popped at `pop_time` to a new pop time and invisible time; false when
    /// no such pop is in flight.
    pub fn change(&mut self, key: &PopKey, offset: u64, pop_time: i64, new: Inflight) -> bool {
        let Some(k) = self.shared_key(key) else {
            return false;
        };
        let old = match self.queues.get(&k).and_then(|q| q.inflight.get(&offset)) {
            Some(h) if h.at.pop_time == pop_time => h.batch,
            _ => return false,
        };
        self.leave(old);
        let slot = self.open_batch(k.clone(), new.deadline());
        if let Some(b) = self.batches.get_mut(&slot) {
            b.offsets.push(offset);
            b.live = 1;
        }
        let q = self.queues.get_mut(&k).expect("present");
        q.inflight.insert(
            offset,
            Held {
                at: new,
                batch: slot,
            },
        );
        true
    }

    /// Sets (or clears) an orderly queue's block, keeping the deadline index in step.
    pub fn set_order(&mut self, key: &PopKey, block: Option<OrderBlock>) {
        let q = self.queue_mut(key);
        let old = std::mem::replace(&mut q.order, block.clone());
        let k = self.shared_key(key).expect("created by queue_mut");
        if let Some(old) = old {
            self.blocks.remove(&(old.deadline(), k.clone()));
        }
        if let Some(b) = block {
            if !b.all_acked() {
                self.blocks.insert((b.deadline(), k));
            }
        }
    }

    /// Acks one message of an orderly block; returns the block as it now stands, `None` when
    /// the ack matches nothing (another pop's handle, an offset not in the block).
    pub fn ack_order(&mut self, key: &PopKey, offset: u64, pop_time: i64) -> Option<OrderBlock> {
        let mut b = self.queue(key)?.order.clone()?;
        if b.pop_time != pop_time || !b.offsets.contains(&offset) {
            return None;
        }
        b.acked.insert(offset);
        self.set_order(key, Some(b.clone()));
        Some(b)
    }

    /// The earliest deadline in the index, if any.
    pub fn next_deadline(&self) -> Option<i64> {
        let batch = self.batches.first_key_value().map(|(s, _)| s.0);
        let block = self.blocks.first().map(|b| b.0);
        match (batch, block) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes the messages whose deadline is at or before `now`, to be redelivered (whole pops,
    /// at least `max` messages when that many are due); they stay in flight, marked, until
    /// `revived` or `retry_later`. Also the orderly queues whose block ended (their parked pops
    /// are to be woken).
    pub fn take_due(&mut self, now: i64, max: usize) -> (Vec<Due>, Vec<Rc<PopKey>>) {
        let mut due = Vec::new();
        while due.len() < max {
            let Some(entry) = self.batches.first_entry() else {
                break;
            };
            if entry.key().0 > now {
                break;
            }
            let (slot, batch) = entry.remove_entry();
            let Some(q) = self.queues.get_mut(&batch.key) else {
                continue;
            };
            for o in batch.offsets {
                if let Some(h) = q.inflight.get_mut(&o).filter(|h| h.batch == slot) {
                    h.batch = REVIVING;
                    due.push(Due {
                        key: batch.key.clone(),
                        offset: o,
                        inflight: h.at,
                    });
                }
            }
        }
        let mut unblocked = Vec::new();
        while let Some(first) = self.blocks.first().cloned() {
            if first.0 > now {
                break;
            }
            self.blocks.remove(&first);
            unblocked.push(first.1);
        }
        (due, unblocked)
    }

    /// Replays one record (start-up, promotion). Idempotent: a record whose effect the tables
    /// already hold changes nothing.
    pub fn apply(&mut self, r: &StateRecord) {
        match r {
            StateRecord::Pop {
                key,
                pop_time,
                invisible_time,
                next,
                offsets,
            } => self.popped(key, *pop_time, *invisible_time, *next, offsets),
            StateRecord::Ack {
                key,
                pop_time,
                offsets,
            } => {
                for o in offsets {
                    self.ack(key, *o, *pop_time);
                }
            }
            StateRecord::Change {
                key,
                offset,
                pop_time,
                new_pop_time,
                invisible_time,
            } => {
                let new = Inflight {
                    pop_time: *new_pop_time,
                    invisible_time: *invisible_time,
                };
                self.change(key, *offset, *pop_time, new);
            }
            StateRecord::OrderAck {
                key,
                pop_time,
                offset,
            } => {
                self.ack_order(key, *offset, *pop_time);
            }
            StateRecord::Order { key, block } => {
                let newer = match (self.queue(key).and_then(|q| q.order.as_ref()), block) {
                    (Some(old), Some(b)) => b.pop_time >= old.pop_time,
                    _ => true,
                };
                if newer {
                    self.set_order(key, block.clone());
                }
            }
        }
    }

    /// The tables as a snapshot (`popState.json`).
    pub fn snapshot(&self) -> Vec<QueueSnapshot> {
        let mut out: Vec<QueueSnapshot> = self
            .queues
            .iter()
            .map(|(k, q)| QueueSnapshot {
                key: (**k).clone(),
                next: q.next,
                inflight: q
                    .inflight
                    .iter()
                    .map(|(o, h)| (*o, h.at.pop_time, h.at.invisible_time))
                    .collect(),
                order: q.order.clone(),
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// Loads one queue of a snapshot.
    pub fn restore(&mut self, s: &QueueSnapshot) {
        let mut by_pop: BTreeMap<(i64, i64), Vec<u64>> = BTreeMap::new();
        for &(o, pt, it) in &s.inflight {
            by_pop.entry((pt, it)).or_default().push(o);
        }
        for ((pt, it), offsets) in by_pop {
            self.popped(&s.key, pt, it, s.next, &offsets);
        }
        let q = self.queue_mut(&s.key);
        q.next = q.next.max(s.next);
        if s.order.is_some() {
            self.set_order(&s.key, s.order.clone());
        }
    }
}

/// One queue in `popState.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueSnapshot {
    #[serde(flatten)]
    pub key: PopKey,
    #[serde(rename = "n")]
    pub next: u64,
    /// (offset, pop time, invisible time) of each message in flight.
    #[serde(rename = "i", default)]
    pub inflight: Vec<(u64, i64, i64)>,
    #[serde(rename = "b", default, skip_serializing_if = "Option::is_none")]
    pub order: Option<OrderBlock>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PopKey {
        PopKey {
            group: "G".into(),
            topic: "T".into(),
            queue_id: 1,
        }
    }

    /// A pop puts its offsets in flight; an ack with the pop's time removes one, with another
    /// time nothing; what is left comes due at its deadline, not before.
    #[test]
    fn pop_ack_and_due() {
        let mut t = PopTables::default();
        t.popped(&key(), 1000, 500, 3, &[0, 1, 2]);
        assert_eq!(t.queue(&key()).unwrap().next, 3);
        assert_eq!(t.inflight_of_group("G"), 3);
        assert!(!t.ack(&key(), 1, 999));
        assert!(t.ack(&key(), 1, 1000));
        assert!(!t.ack(&key(), 1, 1000));
        assert_eq!(t.inflight_of_group("G"), 2);
        assert_eq!(t.take_due(1499, 10).0.len(), 0);
        let (due, _) = t.take_due(1500, 10);
        assert_eq!(due.iter().map(|d| d.offset).collect::<Vec<_>>(), vec![0, 2]);
        // Taken, still in flight until stored again; a failed one comes due later.
        assert_eq!(t.inflight_of_group("G"), 2);
        assert!(t.take_due(1600, 10).0.is_empty());
        t.revived(&key(), 0, 1000);
        t.retry_later(&key(), 2, 1000, 3000);
        assert_eq!(t.inflight_of_group("G"), 1);
        assert_eq!(t.next_deadline(), Some(3000));
        assert!(t.ack(&key(), 2, 1000));
        assert!(t.next_deadline().is_none());
    }

    /// A change moves the deadline and makes the old pop time useless for acks.
    #[test]
    fn change_then_ack_with_new_time() {
        let mut t = PopTables::default();
        t.popped(&key(), 1000, 500, 1, &[0]);
        let new = Inflight {
            pop_time: 1200,
            invisible_time: 10_000,
        };
        assert!(t.change(&key(), 0, 1000, new));
        assert!(!t.change(&key(), 0, 1000, new));
        assert_eq!(t.take_due(5000, 10).0.len(), 0);
        assert!(!t.ack(&key(), 0, 1000));
        assert!(t.ack(&key(), 0, 1200));
    }

    /// Replaying records over a snapshot that already holds their effect changes nothing;
    /// replaying them on empty tables rebuilds the same state.
    #[test]
    fn replay_is_idempotent() {
        let records = [
            StateRecord::Pop {
                key: key(),
                pop_time: 10,
                invisible_time: 100,
                next: 4,
                offsets: vec![0, 1, 2, 3],
            },
            StateRecord::Ack {
                key: key(),
                pop_time: 10,
                offsets: vec![1, 3],
            },
            StateRecord::Change {
                key: key(),
                offset: 2,
                pop_time: 10,
                new_pop_time: 50,
                invisible_time: 100,
            },
        ];
        let mut a = PopTables::default();
        records.iter().for_each(|r| a.apply(r));
        let snap = a.snapshot();
        let mut b = PopTables::default();
        snap.iter().for_each(|s| b.restore(s));
        records.iter().for_each(|r| b.apply(r));
        assert_eq!(b.snapshot(), snap);
        assert_eq!(snap[0].inflight, vec![(0, 10, 100), (2, 50, 100)]);
        assert_eq!(b.inflight_of_group("G"), 2);
    }

    /// Records keep Java-like short names and round-trip through JSON.
    #[test]
    fn record_json() {
        let r = StateRecord::Ack {
            key: key(),
            pop_time: 7,
            offsets: vec![5],
        };
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(s, r#"{"k":"ack","g":"G","t":"T","q":1,"pt":7,"o":[5]}"#);
        assert_eq!(serde_json::from_str::<StateRecord>(&s).unwrap(), r);
    }

    /// An orderly block is indexed by its deadline until all of it is acked.
    #[test]
    fn order_block_deadline() {
        let mut t = PopTables::default();
        let b = OrderBlock {
            pop_time: 100,
            invisible_time: 50,
            offsets: vec![4, 5],
            ..Default::default()
        };
        assert_eq!(b.commit_point(), Some(4));
        t.set_order(&key(), Some(b.clone()));
        assert_eq!(t.next_deadline(), Some(150));
        let mut acked = b;
        acked.acked.extend([4, 5]);
        assert_eq!(acked.commit_point(), Some(6));
        t.set_order(&key(), Some(acked));
        assert_eq!(t.next_deadline(), None);
    }
}
