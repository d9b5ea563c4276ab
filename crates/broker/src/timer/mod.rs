//! Timed delivery beyond delay levels (RocketMQ 5's timer messages): `TIMER_DELIVER_MS`
//! (absolute), `TIMER_DELAY_SEC` / `TIMER_DELAY_MS` (relative), up to `TIMER_MAX_DELAY_MS`.
//!
//! The persisted log is the timer topic itself: a timed message is stored in
//! `rmq_sys_wheel_timer` queue 0 with its real topic and queue in properties and its delivery time
//! in the ConsumeQueue tag slot. The owner shard of that queue keeps the pending timers in a
//! timing index ordered by delivery time (a `BTreeMap` keyed by (due ms, queue offset), which is
//! the wheel's slots flattened), loads new units as they are dispatched, and every 100 ms
//! re-appends what is due to its real topic through the writer. Progress (`config/timerProgress.json`:
//! the lowest undelivered queue offset and the delivered offsets above it) is persisted by shard 0
//! every few seconds and at shutdown, so after a restart nothing is lost and a delivery recorded
//! before the stop is not repeated.

pub mod state;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use crate::append;
use crate::common::now_ms;
use crate::error::BrokerError;
use crate::metadata::topic_validator::TIMER_TOPIC;
use crate::protocol::body;
use crate::runtime;
use crate::shard::Shard;

use crate::protocol::properties::keys;
use state::{TimerProgress, TimerState, TIMER_QUEUE};

const POLL: Duration = Duration::from_millis(100);
/// Units loaded or messages delivered per tick, so the timer cannot monopolise its shard.
const MAX_WORK_PER_TICK: usize = 1024;

/// The shard owning the timer queue.
pub fn owner(shard: &Shard) -> usize {
    shard.owner(TIMER_TOPIC, TIMER_QUEUE)
}

/// Starts the timer service if this shard owns the timer queue.
pub fn start(shard: &Rc<Shard>, progress: TimerProgress) {
    if owner(shard) != shard.id {
        return;
    }
    let loaded_to = progress.low_watermark;
    *shard.timer_mut() = Some(TimerState {
        progress,
        loaded_to,
        pending: BTreeMap::new(),
    });
    runtime::spawn(run(shard.clone()));
}

/// The owner's progress as file bytes (None on other shards).
pub fn progress_bytes(shard: &Shard) -> Option<Vec<u8>> {
    shard.timer().as_ref().map(|t| body::to_json(&t.progress))
}

async fn run(shard: Rc<Shard>) {
    while !shard.is_stopping() {
        load_new_units(&shard);
        let mut delivered = 0;
        while delivered < MAX_WORK_PER_TICK && !shard.is_paused() {
            let due = {
                let t = shard.timer();
                let Some(t) = t.as_ref() else { return };
                match t.pending.first_key_value() {
                    Some((&(at, off), &(phy, size))) if at <= now_ms() => {
                        Some((at, off, phy, size))
                    }
                    _ => None,
                }
            };
            let Some((at, off, phy, size)) = due else {
                break;
            };
            match deliver(&shard, phy, size).await {
                Ok(()) => {
                    if let Some(t) = shard.timer_mut().as_mut() {
                        t.pending.remove(&(at, off));
                        t.progress.mark_delivered(off);
                    }
                    delivered += 1;
                }
                Err(e) => {
                    tracing::warn!(offset = off, error = %e, "timer delivery failed; will retry");
                    break;
                }
            }
        }
        runtime::sleep(POLL).await;
    }
}

/// Moves newly dispatched timer units into the pending index.
fn load_new_units(shard: &Shard) {
    let (min, max) = shard.queue_bounds(TIMER_TOPIC, TIMER_QUEUE);
    let mut guard = shard.timer_mut();
    let Some(t) = guard.as_mut() else { return };
    t.loaded_to = t.loaded_to.max(min);
    let mut n = 0;
    while t.loaded_to < max && n < MAX_WORK_PER_TICK {
        let off = t.loaded_to;
        t.loaded_to += 1;
        n += 1;
        if t.progress.is_delivered(off) {
            continue;
        }
        match shard.unit_at(TIMER_TOPIC, TIMER_QUEUE, off) {
            Some(u) => {
                t.pending.insert((u.tags_code, off), (u.phy_offset, u.size));
            }
            None => t.progress.mark_delivered(off),
        }
    }
}

/// Re-appends one timer record to its real topic and queue, without the timer properties.
async fn deliver(shard: &Rc<Shard>, phy: u64, size: u32) -> Result<(), BrokerError> {
    let strip = [
        keys::TIMER_DELIVER_MS,
        keys::TIMER_DELAY_SEC,
        keys::TIMER_DELAY_MS,
        keys::TIMER_OUT_MS,
    ];
    append::reappend_to_real_topic(shard, phy, size, &strip).await
}
