//! What a SYNC_MASTER's sends wait for (Java's `GroupTransferService` with RocketMQ 5's
//! `inSyncReplicas`, which counts the master): how far each connected slave has acknowledged
//! ([`SlaveAcks`], written by the HA connections on shard 0 and read by every shard, which
//! also says who each slave is and how its transfer goes, for GET_BROKER_HA_STATUS), and each
//! shard's sends waiting for enough copies ([`GroupTransfer`], owned by that shard).
//!
//! The wait is a group commit: one report from a slave answers every waiting send it covers,
//! and a shard's waiting sends are resolved by one task (`ha::group_transfer`), not one timer or
//! thread per send. A send that `slaveTimeout` passes without enough copies is answered
//! FLUSH_SLAVE_TIMEOUT: it is stored on the master all the same, as in Java.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use atomic_waker::AtomicWaker;

/// Slaves a master serves at once; a connection past this is refused.
pub const MAX_SLAVES: usize = 16;
/// A free slot.
const NO_SLAVE: u64 = u64::MAX;

/// The acknowledged offset of each connected slave, and a wake-up per shard for when one
/// moves.
pub struct SlaveAcks {
    acked: [AtomicU64; MAX_SLAVES],
    /// Per slot: the slave's address (`encode_addr`), where its transfer stands (the next
    /// offset to send) and the bytes sent to it in the last whole second.
    peer: [[AtomicU64; 3]; MAX_SLAVES],
    next: [AtomicU64; MAX_SLAVES],
    bytes_per_s: [AtomicU64; MAX_SLAVES],
    /// Per slot, in controller mode: the slave's broker id (-1 until its handshake) and when it
    /// last caught up with the master (ms; RocketMQ 5's `lastCaughtUpTime`).
    broker_id: [AtomicI64; MAX_SLAVES],
    caught_up_ms: [AtomicU64; MAX_SLAVES],
    /// Per shard: its `group_transfer` task, and whether an ack moved since it last looked.
    shards: Vec<(AtomicWaker, AtomicBool)>,
}

impl SlaveAcks {
    pub fn new(shards: usize) -> SlaveAcks {
        SlaveAcks {
            acked: std::array::from_fn(|_| AtomicU64::new(NO_SLAVE)),
            peer: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            next: std::array::from_fn(|_| AtomicU64::new(0)),
            bytes_per_s: std::array::from_fn(|_| AtomicU64::new(0)),
            broker_id: std::array::from_fn(|_| AtomicI64::new(-1)),
            caught_up_ms: std::array::from_fn(|_| AtomicU64::new(0)),
            shards: (0..shards.max(1))
                .map(|_| (AtomicWaker::new(), AtomicBool::new(false)))
                .collect(),
        }
    }

    /// A slot for a new connection from the slave at `peer`, acknowledging nothing yet;
    /// `None` when [`MAX_SLAVES`] are connected.
    pub fn attach(self: &Arc<Self>, peer: SocketAddr) -> Option<SlaveSlot> {
        (0..MAX_SLAVES).find_map(|i| {
            self.acked[i]
                .compare_exchange(NO_SLAVE, 0, Ordering::AcqRel, Ordering::Acquire)
                .ok()
                .map(|_| {
                    for (w, v) in self.peer[i].iter().zip(encode_addr(peer)) {
                        w.store(v, Ordering::Release);
                    }
                    self.next[i].store(0, Ordering::Release);
                    self.bytes_per_s[i].store(0, Ordering::Release);
                    self.broker_id[i].store(-1, Ordering::Release);
                    self.caught_up_ms[i].store(0, Ordering::Release);
                    SlaveSlot {
                        acks: self.clone(),
                        index: i,
                        window: Cell::new((Instant::now(), 0)),
                    }
                })
        })
    }

    /// Each connected slave: its address, acknowledged offset, the next offset to send it,
    /// and the bytes sent to it in the last whole second.
    pub fn slaves(&self) -> Vec<SlaveInfo> {
        (0..MAX_SLAVES)
            .filter_map(|i| {
                let acked = self.acked[i].load(Ordering::Acquire);
                (acked != NO_SLAVE).then(|| SlaveInfo {
                    addr: decode_addr(std::array::from_fn(|w| {
                        self.peer[i][w].load(Ordering::Acquire)
                    })),
                    acked,
                    next: self.next[i].load(Ordering::Acquire),
                    bytes_per_s: self.bytes_per_s[i].load(Ordering::Acquire),
                })
            })
            .collect()
    }

    /// The acknowledged offsets of the connected slaves.
    pub fn acked(&self) -> impl Iterator<Item = u64> + '_ {
        self.acked
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .filter(|a| *a != NO_SLAVE)
    }

    /// The highest offset that at least `slaves` connected slaves have acknowledged (the
    /// `slaves`-th largest acknowledgement); 0 when fewer are connected.
    pub fn covered(&self, slaves: usize) -> u64 {
        if slaves == 0 {
            return u64::MAX;
        }
        let mut top = [0u64; MAX_SLAVES];
        let mut n = 0;
        for a in self.acked() {
            top[n] = a;
            n += 1;
        }
        if n < slaves {
            return 0;
        }
        let top = &mut top[..n];
        top.sort_unstable_by(|a, b| b.cmp(a));
        top[slaves - 1]
    }

    /// The lowest offset every member of `members` (a SyncStateSet as a bit set, see
    /// `broker::role`) other than `own_id` has acknowledged; 0 when one is not connected.
    /// `u64::MAX` when the set holds no other member.
    pub fn covered_by(&self, members: u64, own_id: i64) -> u64 {
        let mut low = u64::MAX;
        for id in crate::role::from_mask(members) {
            if id == own_id {
                continue;
            }
            let acked = (0..MAX_SLAVES)
                .filter(|&i| self.broker_id[i].load(Ordering::Acquire) == id)
                .map(|i| self.acked[i].load(Ordering::Acquire))
                .filter(|a| *a != NO_SLAVE)
                .max();
            low = low.min(acked.unwrap_or(0));
        }
        low
    }

    /// Connected slaves with a broker id: (id, acknowledged offset, last caught up, ms).
    pub fn identified(&self) -> Vec<(i64, u64, u64)> {
        (0..MAX_SLAVES)
            .filter_map(|i| {
                let acked = self.acked[i].load(Ordering::Acquire);
                let id = self.broker_id[i].load(Ordering::Acquire);
                (acked != NO_SLAVE && id >= 0)
                    .then(|| (id, acked, self.caught_up_ms[i].load(Ordering::Acquire)))
            })
            .collect()
    }

    /// Has `shard`'s group-transfer task woken when an acknowledgement moves; true when one
    /// moved since the last call.
    pub fn register(&self, shard: usize, waker: &Waker) -> bool {
        let Some((w, moved)) = self.shards.get(shard) else {
            return false;
        };
        w.register(waker);
        moved.swap(false, Ordering::AcqRel)
    }

    /// Wakes every shard's group-transfer task to look again (an acknowledgement moved, or the
    /// set of copies a send waits for changed).
    pub fn wake_all(&self) {
        for (w, moved) in &self.shards {
            moved.store(true, Ordering::Release);
            w.wake();
        }
    }
}

/// One slave connection's place in [`SlaveAcks`]; freed when dropped.
pub struct SlaveSlot {
    acks: Arc<SlaveAcks>,
    index: usize,
    /// The current second's start and the bytes sent in it (owned by the connection's task).
    window: Cell<(Instant, u64)>,
}

/// One connected slave as [`SlaveAcks::slaves`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlaveInfo {
    pub addr: SocketAddr,
    pub acked: u64,
    pub next: u64,
    pub bytes_per_s: u64,
}

/// An address in three words: family and port, then the IP's bits.
fn encode_addr(a: SocketAddr) -> [u64; 3] {
    match a.ip() {
        IpAddr::V4(ip) => [4 << 16 | a.port() as u64, u32::from(ip) as u64, 0],
        IpAddr::V6(ip) => {
            let bits = u128::from(ip);
            [6 << 16 | a.port() as u64, (bits >> 64) as u64, bits as u64]
        }
    }
}

fn decode_addr(w: [u64; 3]) -> SocketAddr {
    let port = (w[0] & 0xffff) as u16;
    let ip = if w[0] >> 16 == 6 {
        IpAddr::from(((w[1] as u128) << 64 | w[2] as u128).to_be_bytes())
    } else {
        IpAddr::from((w[1] as u32).to_be_bytes())
    };
    SocketAddr::new(ip, port)
}

impl SlaveSlot {
    /// The slave's broker id, from its AutoSwitch handshake.
    pub fn identify(&self, broker_id: i64) {
        self.acks.broker_id[self.index].store(broker_id, Ordering::Release);
    }

    /// The slave caught up with the master at `now_ms`.
    pub fn caught_up(&self, now_ms: u64) {
        self.acks.caught_up_ms[self.index].store(now_ms, Ordering::Release);
    }

    /// Where the transfer to this slave stands: the next commit-log offset to send.
    pub fn sending_from(&self, next: u64) {
        self.acks.next[self.index].store(next, Ordering::Release);
    }

    /// `bytes` more sent to this slave: counted in the current second, which is published as
    /// the slave's bytes per second once it is whole.
    pub fn sent(&self, bytes: u64) {
        let (start, n) = self.window.get();
        self.window.set((start, n + bytes));
        self.tick();
    }

    /// Publishes the last second's count once a second has passed.
    pub fn tick(&self) {
        let (start, n) = self.window.get();
        if start.elapsed() >= std::time::Duration::from_secs(1) {
            self.acks.bytes_per_s[self.index].store(n, Ordering::Release);
            self.window.set((Instant::now(), 0));
        }
    }

    /// A report from the slave that it holds the commit log up to `reported`; refused when that
    /// is past `max`, this master's end (a peer cannot make a send look replicated).
    pub fn report(&self, reported: i64, max: u64) -> Result<u64, String> {
        if reported < 0 || reported as u64 > max {
            return Err(format!(
                "the slave reports offset {reported}, past this master's end {max}"
            ));
        }
        self.ack(reported as u64);
        Ok(reported as u64)
    }

    /// The slave reports it holds the commit log up to `offset`.
    pub fn ack(&self, offset: u64) {
        let prev = self.acks.acked[self.index].fetch_max(offset, Ordering::AcqRel);
        if offset > prev {
            self.acks.wake_all();
        }
    }
}

impl Drop for SlaveSlot {
    fn drop(&mut self) {
        self.acks.acked[self.index].store(NO_SLAVE, Ordering::Release);
        self.acks.wake_all();
    }
}

/// A send waiting for copies: answered once the slaves cover `next_offset` (the end of its
/// last record), or at `deadline`.
pub struct GroupCommitRequest {
    pub next_offset: u64,
    pub deadline: Instant,
    pub done: oneshot::Sender<bool>,
}

/// A shard's sends waiting for slaves, oldest first (deadlines are `slaveTimeout` after the
/// append, so the queue is in deadline order).
#[derive(Default)]
pub struct GroupTransfer {
    requests: RefCell<VecDeque<GroupCommitRequest>>,
    /// The shard's `group_transfer` task, woken by every [`push`](GroupTransfer::push).
    task: Cell<Option<Waker>>,
    /// A request arrived since the task last looked.
    pushed: Cell<bool>,
}

impl GroupTransfer {
    /// Queues a request and wakes the task that answers it (the slaves may already cover it:
    /// an acknowledgement can land between the sender's own look and this push).
    pub fn push(&self, req: GroupCommitRequest) {
        self.requests.borrow_mut().push_back(req);
        self.pushed.set(true);
        if let Some(w) = self.task.take() {
            w.wake();
        }
    }

    /// Answers the requests `covered` reaches (true) and those past their deadline at `now`
    /// (false); returns the earliest deadline still waiting.
    pub fn resolve(&self, covered: u64, now: Instant) -> Option<Instant> {
        let mut q = self.requests.borrow_mut();
        let mut waiting = VecDeque::with_capacity(q.len());
        for req in q.drain(..) {
            if req.next_offset <= covered {
                // The receiver is gone only when its send was dropped (shutdown).
                let _ = req.done.send(true);
            } else if req.deadline <= now {
                let _ = req.done.send(false);
            } else {
                waiting.push_back(req);
            }
        }
        *q = waiting;
        q.front().map(|r| r.deadline)
    }

    /// Has `waker` woken by the next push; true when a request arrived since the last call.
    pub fn register(&self, waker: &Waker) -> bool {
        self.task.set(Some(waker.clone()));
        self.pushed.replace(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The k-th largest acknowledgement covers a send; fewer slaves cover nothing; a slot is
    /// freed when its connection goes.
    #[test]
    fn covered_counts_slaves() {
        let acks = Arc::new(SlaveAcks::new(1));
        assert_eq!(acks.covered(1), 0);
        let peer: SocketAddr = "10.1.2.3:40000".parse().unwrap();
        let a = acks.attach(peer).unwrap();
        let b = acks.attach("[fe80::1]:7".parse().unwrap()).unwrap();
        a.ack(500);
        b.ack(300);
        b.ack(200); // acknowledgements never go back
        assert_eq!(acks.covered(1), 500);
        assert_eq!(acks.covered(2), 300);
        assert_eq!(acks.covered(3), 0);
        a.sending_from(900);
        let listed = acks.slaves();
        assert_eq!(listed.len(), 2);
        assert_eq!(
            (listed[0].addr, listed[0].acked, listed[0].next),
            (peer, 500, 900)
        );
        assert_eq!(listed[1].addr.to_string(), "[fe80::1]:7");
        drop(a);
        assert_eq!(acks.covered(1), 300);
        assert_eq!(acks.covered(0), u64::MAX);
        let slots: Vec<_> = (0..MAX_SLAVES).filter_map(|_| acks.attach(peer)).collect();
        assert_eq!(slots.len(), MAX_SLAVES - 1);
        assert!(acks.attach(peer).is_none());
    }

    /// One pass answers the covered requests true, the expired ones false, and keeps the rest.
    #[test]
    fn resolve_answers_covered_and_expired() {
        let gt = GroupTransfer::default();
        let now = Instant::now();
        let later = now + Duration::from_secs(3);
        let mut rx = Vec::new();
        for (off, deadline) in [(100, later), (200, now), (300, later)] {
            let (tx, r) = oneshot::channel();
            gt.push(GroupCommitRequest {
                next_offset: off,
                deadline,
                done: tx,
            });
            rx.push(r);
        }
        assert_eq!(gt.resolve(150, now), Some(later));
        assert_eq!(rx[0].try_recv(), Ok(true));
        assert_eq!(rx[1].try_recv(), Ok(false));
        assert!(rx[2].try_recv().is_err());
        assert_eq!(gt.resolve(300, now), None);
        assert_eq!(rx[2].try_recv(), Ok(true));
    }
}
