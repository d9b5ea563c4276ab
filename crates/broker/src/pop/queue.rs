//! The owner shard's side of POP: what runs where a queue's ConsumeQueue and POP state live.
//! A pop reads from the group's pop offset and puts what it hands out in flight (non-orderly),
//! or makes the queue's block (orderly); acks and invisible-time changes apply to what is in
//! flight. The tables change first, in one synchronous step (so two pops never hand out the same
//! message), then the change's record is written, and the request is answered once it is stored.

use std::rc::Rc;

use crate::constants::MAX_PULL_BYTES;
use crate::error::BrokerError;
use crate::offsets;
use crate::protocol::topics;
use crate::pull::{record_matches, MsgFilter};
use crate::shard::{QueueKey, Shard};
use crate::store::consume_queue::CqUnit;

use super::state::{Inflight, OrderBlock, PopKey, PopQueue, StateRecord};
use super::write_state;

/// How many ConsumeQueue units one pop may scan past filtered-out entries.
const MAX_SCAN_UNITS: u64 = 800;

/// Java's `ConsumeInitMode.MIN`: a group without an offset starts at the queue's first message.
pub const INIT_MODE_MIN: i32 = 0;

/// How long a request waits for the owner's POP state to be loaded before SYSTEM_BUSY.
const LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits until this shard's POP state is loaded (start-up and promotion replay it).
async fn loaded(s: &Shard) -> Result<(), BrokerError> {
    crate::runtime::timeout(LOAD_WAIT, s.pop_loaded())
        .await
        .ok_or(BrokerError::Busy)
}

/// One pop (or peek) of one queue, as the owner serves it.
pub struct PopRequest {
    pub key: PopKey,
    pub max: usize,
    pub filter: MsgFilter,
    pub pop_time: i64,
    pub invisible_time: i64,
    pub init_mode: i32,
    /// `Some(attemptId)` for an orderly pop (empty when the client sent none).
    pub order: Option<String>,
    /// A peek: read from the pop offset, change nothing.
    pub peek: bool,
}

/// One message handed out.
#[derive(Clone, Copy, Debug)]
pub struct PoppedMsg {
    pub offset: u64,
    pub phy: u64,
    pub size: u32,
    /// Deliveries before this one (orderly pops).
    pub count: u32,
}

/// The owner's answer for one queue.
#[derive(Debug, Default)]
pub struct Popped {
    /// Where the pop started reading (the queue's `startOffsetInfo`).
    pub start: u64,
    pub msgs: Vec<PoppedMsg>,
    /// Messages after the pop's end (`restNum`).
    pub rest: i64,
    /// The pop time the messages were handed out with (an orderly retry's is its first pop's).
    pub pop_time: i64,
}

/// Serves one queue's pop on its owner.
pub async fn pop(s: Rc<Shard>, r: PopRequest) -> Result<Popped, BrokerError> {
    loaded(&s).await?;
    if r.order.is_some() {
        return pop_orderly(&s, r).await;
    }
    let (min, max) = s.queue_bounds(&r.key.topic, r.key.queue_id);
    let committed = offsets::query_local(&s, &r.key.topic, &r.key.group, r.key.queue_id);
    // From reading the start to recording the pop, nothing awaits: pops of one queue are one
    // after the other.
    let (popped, init) = {
        let mut tables = s.pop_mut();
        let full = tables.inflight_of_group(&r.key.group) >= s.ctx.cfg.pop.inflight_threshold;
        let q = tables.queue_mut(&r.key);
        let init = start_offset(&s, &r.key, q, committed, (min, max), r.init_mode);
        let start = q.next;
        if full && !r.peek {
            return Ok(rest_only(start, max, r.pop_time));
        }
        let (msgs, next) = scan(&s, &r.key, start, r.max, &r.filter);
        let popped = Popped {
            start,
            rest: (max as i64 - next as i64).max(0),
            pop_time: r.pop_time,
            msgs,
        };
        if r.peek || next == start {
            drop(tables);
            if let Some(at) = init {
                commit(&s, &r.key, at);
            }
            return Ok(popped);
        }
        let offsets: Vec<u64> = popped.msgs.iter().map(|m| m.offset).collect();
        tables.popped(&r.key, r.pop_time, r.invisible_time, next, &offsets);
        (popped, (next, offsets))
    };
    let (next, offsets) = init;
    let record = StateRecord::Pop {
        key: r.key.clone(),
        pop_time: r.pop_time,
        invisible_time: r.invisible_time,
        next,
        offsets,
    };
    // A failed write leaves the messages in flight here: they come back after their invisible
    // time like any others.
    write_state(&s, &[record]).await?;
    commit(&s, &r.key, next);
    Ok(popped)
}

/// An answer with nothing popped: where the queue stands.
fn rest_only(start: u64, max: u64, pop_time: i64) -> Popped {
    Popped {
        start,
        msgs: Vec::new(),
        rest: (max as i64 - start as i64).max(0),
        pop_time,
    }
}

/// Moves the pop offset to where the group's consumer offset says, when someone else moved that
/// (a reset, a commit by a pull consumer of the group) or this shard has not seen it yet. A
/// group without one starts as Java's `getInitOffset` says: at the queue's first message for
/// `initMode` MIN and for retry topics; otherwise at its last message (`max - 1`), or at 0 while
/// the queue's first message is still in memory (`initPopOffsetByCheckMsgInMem`). Returns the
/// offset to commit when the group had none. Offsets retention removed are skipped.
fn start_offset(
    s: &Shard,
    key: &PopKey,
    q: &mut PopQueue,
    committed: Option<i64>,
    (min, max): (u64, u64),
    init_mode: i32,
) -> Option<u64> {
    let mut init = None;
    match (q.committed, committed) {
        (Some(mine), Some(c)) if mine != c => q.next = u64::try_from(c).unwrap_or(0),
        (None, Some(c)) => q.next = q.next.max(u64::try_from(c).unwrap_or(0)),
        (None, None) if q.next == 0 && q.inflight_len() == 0 && q.order.is_none() => {
            q.next = init_offset(s, key, (min, max), init_mode);
            init = Some(q.next);
        }
        _ => {}
    }
    q.committed = committed.or(init.map(|i| i as i64));
    q.next = q.next.clamp(min, max.max(min));
    init
}

fn init_offset(s: &Shard, key: &PopKey, (min, max): (u64, u64), init_mode: i32) -> u64 {
    if init_mode == INIT_MODE_MIN || key.topic.starts_with(topics::RETRY_GROUP_TOPIC_PREFIX) {
        return min;
    }
    let first_in_memory = min == 0
        && s.unit_at(&key.topic, key.queue_id, 0).is_some_and(|u| {
            let window = offsets::in_memory_budget(s.ctx.cfg.access_message_in_memory_max_ratio);
            s.ctx.writer.max_phy_offset().saturating_sub(u.phy_offset) <= window
        });
    if first_in_memory {
        0
    } else {
        max.saturating_sub(1).max(min)
    }
}

/// The group's consumer offset moves to `next` (never back: concurrent pops finish in any
/// order); the tables remember it so a change by someone else is seen.
fn commit(s: &Shard, key: &PopKey, next: u64) {
    let current = offsets::query_local(s, &key.topic, &key.group, key.queue_id);
    if current.is_none_or(|c| (next as i64) > c) {
        offsets::commit_local(s, &key.topic, &key.group, key.queue_id, next as i64);
    }
    let now = offsets::query_local(s, &key.topic, &key.group, key.queue_id);
    s.pop_mut().queue_mut(key).committed = now;
}

/// Reads up to `max` matching messages from `start`; returns them and the offset after the last
/// unit looked at.
fn scan(
    s: &Shard,
    key: &PopKey,
    start: u64,
    max: usize,
    filter: &MsgFilter,
) -> (Vec<PoppedMsg>, u64) {
    let queues = s.read_queues();
    let Some(state) = queues.get(&QueueKey(&key.topic, key.queue_id)) else {
        return (Vec::new(), start);
    };
    let end = state.cq.max_offset().min(start + MAX_SCAN_UNITS);
    let min_phy = s.ctx.writer.min_phy_offset();
    let mut out = Vec::new();
    let mut bytes = 0usize;
    let mut offset = start;
    while offset < end && out.len() < max {
        let Some(unit) = state.cq.get(offset).filter(|u| u.phy_offset >= min_phy) else {
            offset += 1;
            continue;
        };
        if !out.is_empty() && bytes + unit.size as usize > MAX_PULL_BYTES {
            break;
        }
        offset += 1;
        if !matches(s, filter, unit) {
            continue;
        }
        bytes += unit.size as usize;
        out.push(PoppedMsg {
            offset: offset - 1,
            phy: unit.phy_offset,
            size: unit.size,
            count: 0,
        });
    }
    (out, offset)
}

fn matches(s: &Shard, filter: &MsgFilter, unit: CqUnit) -> bool {
    filter.accepts_unit(unit.tags_code)
        && (!filter.needs_record() || record_matches(s, filter, unit))
}

/// An orderly pop: the queue's block decides. A live block with un-acked messages blocks the
/// queue, unless the pop repeats the block's attempt id (it gets the same messages); an expired
/// one hands its un-acked messages out again, each counted once more; without a block the pop
/// reads from the consumer offset.
async fn pop_orderly(s: &Rc<Shard>, r: PopRequest) -> Result<Popped, BrokerError> {
    let attempt = r.order.clone().unwrap_or_default();
    let (min, max) = s.queue_bounds(&r.key.topic, r.key.queue_id);
    let committed = offsets::query_local(s, &r.key.topic, &r.key.group, r.key.queue_id);
    let block = {
        let mut tables = s.pop_mut();
        let q = tables.queue_mut(&r.key);
        let init = start_offset(s, &r.key, q, committed, (min, max), r.init_mode);
        let start = q.next;
        let live = q.order.clone().filter(|b| !b.all_acked());
        let block = match live {
            Some(b) if r.pop_time < b.deadline() => {
                if !attempt.is_empty() && b.attempt_id == attempt {
                    let msgs = reread(s, &r.key, &b);
                    return Ok(Popped {
                        start: b.offsets[0],
                        rest: (max as i64 - start as i64).max(0),
                        pop_time: b.pop_time,
                        msgs,
                    });
                }
                return Ok(rest_only(start, max, r.pop_time));
            }
            Some(b) => redeliver(b, &r, &attempt),
            None => {
                let (msgs, next) = scan(s, &r.key, start, r.max, &r.filter);
                if msgs.is_empty() {
                    drop(tables);
                    if next != start || init.is_some() {
                        s.pop_mut().queue_mut(&r.key).next = next;
                        commit(s, &r.key, next);
                    }
                    return Ok(rest_only(next, max, r.pop_time));
                }
                OrderBlock {
                    pop_time: r.pop_time,
                    invisible_time: r.invisible_time,
                    attempt_id: attempt,
                    offsets: msgs.iter().map(|m| m.offset).collect(),
                    acked: Default::default(),
                    counts: msgs.iter().map(|m| (m.offset, 0)).collect(),
                }
            }
        };
        tables.set_order(&r.key, Some(block.clone()));
        block
    };
    let msgs = reread(s, &r.key, &block);
    let last = block.offsets.last().copied().unwrap_or(0);
    write_state(
        s,
        &[StateRecord::Order {
            key: r.key.clone(),
            block: Some(block.clone()),
        }],
    )
    .await?;
    Ok(Popped {
        start: block.offsets[0],
        rest: (max as i64 - last as i64 - 1).max(0),
        pop_time: block.pop_time,
        msgs,
    })
}

/// An expired block's un-acked messages handed out again under a new pop.
fn redeliver(b: OrderBlock, r: &PopRequest, attempt: &str) -> OrderBlock {
    let offsets: Vec<u64> = b
        .offsets
        .iter()
        .copied()
        .filter(|o| !b.acked.contains(o))
        .collect();
    let counts = offsets
        .iter()
        .map(|o| (*o, b.counts.get(o).copied().unwrap_or(0) + 1))
        .collect();
    OrderBlock {
        pop_time: r.pop_time,
        invisible_time: r.invisible_time,
        attempt_id: attempt.to_string(),
        offsets,
        acked: Default::default(),
        counts,
    }
}

/// The block's un-acked messages as they are stored (those retention removed are left out).
fn reread(s: &Shard, key: &PopKey, b: &OrderBlock) -> Vec<PoppedMsg> {
    b.offsets
        .iter()
        .filter(|o| !b.acked.contains(o))
        .filter_map(|&o| {
            let u = s.unit_at(&key.topic, key.queue_id, o)?;
            Some(PoppedMsg {
                offset: o,
                phy: u.phy_offset,
                size: u.size,
                count: b.counts.get(&o).copied().unwrap_or(0),
            })
        })
        .collect()
}

/// Acks messages of one queue, each with the pop time of its handle; what matches nothing in
/// flight (acked before, redelivered, another pop's) is left alone. The record is stored before
/// the tables change, so a snapshot never holds an ack the log may not. Returns how many
/// applied.
pub async fn ack(s: Rc<Shard>, key: PopKey, acks: Vec<(u64, i64)>) -> Result<usize, BrokerError> {
    loaded(&s).await?;
    let _change = s.pop_change().await;
    let mut by_pop: std::collections::BTreeMap<i64, Vec<u64>> = Default::default();
    {
        let tables = s.pop();
        for (offset, pop_time) in acks {
            if tables.holds(&key, offset, pop_time) {
                by_pop.entry(pop_time).or_default().push(offset);
            }
        }
    }
    let records: Vec<StateRecord> = by_pop
        .iter()
        .map(|(pop_time, offsets)| StateRecord::Ack {
            key: key.clone(),
            pop_time: *pop_time,
            offsets: offsets.clone(),
        })
        .collect();
    write_state(&s, &records).await?;
    let mut tables = s.pop_mut();
    let mut applied = 0;
    for (pop_time, offsets) in by_pop {
        applied += offsets
            .iter()
            .filter(|o| tables.ack(&key, **o, pop_time))
            .count();
    }
    Ok(applied)
}

/// Acks `offsets` of one queue popped at `pop_time`, orderly or not; offsets outside the
/// queue's `[min, max]` are skipped (BATCH_ACK's rule; an ACK checked them before). Returns how
/// many applied.
pub async fn ack_offsets(
    s: Rc<Shard>,
    key: PopKey,
    offsets: Vec<u64>,
    pop_time: i64,
    orderly: bool,
) -> Result<usize, BrokerError> {
    let (min, max) = s.queue_bounds(&key.topic, key.queue_id);
    let offsets = offsets.into_iter().filter(|o| (min..=max).contains(o));
    if !orderly {
        return ack(s, key, offsets.map(|o| (o, pop_time)).collect()).await;
    }
    let mut applied = 0;
    for o in offsets {
        applied += usize::from(ack_orderly(s.clone(), key.clone(), o, pop_time).await?);
    }
    Ok(applied)
}

/// Acks one message of an orderly block (its record stored first); the consumer offset moves
/// over the acked run, and a block all acked unblocks the queue (parked pops are woken).
pub async fn ack_orderly(
    s: Rc<Shard>,
    key: PopKey,
    offset: u64,
    pop_time: i64,
) -> Result<bool, BrokerError> {
    loaded(&s).await?;
    let matches = s
        .pop()
        .queue(&key)
        .and_then(|q| q.order.as_ref())
        .is_some_and(|b| {
            b.pop_time == pop_time && b.offsets.contains(&offset) && !b.acked.contains(&offset)
        });
    if !matches {
        return Ok(false);
    }
    let change = s.pop_change().await;
    let record = StateRecord::OrderAck {
        key: key.clone(),
        pop_time,
        offset,
    };
    write_state(&s, &[record]).await?;
    let block = s.pop_mut().ack_order(&key, offset, pop_time);
    drop(change);
    let Some(block) = block else {
        return Ok(false);
    };
    if let Some(point) = block.commit_point() {
        commit(&s, &key, point);
        s.pop_mut().queue_mut(&key).next = point;
    }
    if block.all_acked() {
        s.wake_parked(&key.topic, key.queue_id);
    }
    Ok(true)
}

/// Changes the invisible time of a message in flight. Non-orderly: it counts again from now
/// (the new pop time); orderly: the block keeps its pop time and becomes visible `invisible` ms
/// from now. Returns the (pop time, invisible time) of the new handle, `None` when the handle
/// matches nothing in flight.
pub async fn change(
    s: Rc<Shard>,
    key: PopKey,
    offset: u64,
    pop_time: i64,
    invisible: i64,
    order: bool,
    now: i64,
) -> Result<Option<(i64, i64)>, BrokerError> {
    loaded(&s).await?;
    if order {
        return change_orderly(&s, key, pop_time, invisible, now).await;
    }
    // A new pop time unlike the old, so the old handle can never ack again.
    let new = Inflight {
        pop_time: now.max(pop_time + 1),
        invisible_time: invisible,
    };
    if !s.pop_mut().change(&key, offset, pop_time, new) {
        return Ok(None);
    }
    let record = StateRecord::Change {
        key,
        offset,
        pop_time,
        new_pop_time: new.pop_time,
        invisible_time: invisible,
    };
    write_state(&s, &[record]).await?;
    Ok(Some((new.pop_time, invisible)))
}

async fn change_orderly(
    s: &Rc<Shard>,
    key: PopKey,
    pop_time: i64,
    invisible: i64,
    now: i64,
) -> Result<Option<(i64, i64)>, BrokerError> {
    let block = {
        let mut tables = s.pop_mut();
        let Some(mut b) = tables.queue(&key).and_then(|q| q.order.clone()) else {
            return Ok(None);
        };
        if b.pop_time != pop_time {
            return Ok(None);
        }
        b.invisible_time = now.saturating_add(invisible) - b.pop_time;
        tables.set_order(&key, Some(b.clone()));
        b
    };
    let answer = (block.pop_time, block.invisible_time);
    write_state(
        s,
        &[StateRecord::Order {
            key,
            block: Some(block),
        }],
    )
    .await?;
    Ok(Some(answer))
}

/// Parks on a queue until a message arrives there, an orderly block ends, or `wait` passes;
/// false at once when `popPollingSize` requests are parked on it already.
pub async fn park(s: Rc<Shard>, topic: String, queue_id: u32, wait: std::time::Duration) -> bool {
    let waiter = crate::long_poll::Waiter::new();
    let limit = s.ctx.cfg.pop.polling_size;
    if !s.park_with_limit(&topic, queue_id, waiter.clone(), limit) {
        return false;
    }
    let _ = crate::runtime::timeout(wait, waiter.notified()).await;
    true
}

/// Whether a pop of the queue would find something now (NOTIFICATION): messages past the pop
/// offset, or an orderly block that ended.
pub async fn has_message(s: Rc<Shard>, key: PopKey, order: bool) -> Result<bool, BrokerError> {
    loaded(&s).await?;
    Ok(has_message_now(&s, &key, order))
}

fn has_message_now(s: &Shard, key: &PopKey, order: bool) -> bool {
    let (min, max) = s.queue_bounds(&key.topic, key.queue_id);
    let committed = offsets::query_local(s, &key.topic, &key.group, key.queue_id);
    let tables = s.pop();
    let q = tables.queue(key);
    if order {
        if let Some(b) = q.and_then(|q| q.order.as_ref()).filter(|b| !b.all_acked()) {
            return b.deadline() <= crate::common::now_ms();
        }
    }
    let next = match (q, committed) {
        (Some(q), _) if q.committed.is_some() || q.next > 0 => q.next,
        (_, Some(c)) => u64::try_from(c).unwrap_or(0),
        _ => min,
    };
    next < max
}
