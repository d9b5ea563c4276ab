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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use crate::broker::{now_ms, send, BrokerError, Shard};
use crate::protocol::body;
use crate::runtime;

pub use crate::store::tags_code::TIMER_TOPIC;
pub const TIMER_QUEUE: u32 = 0;
/// Longest accepted delay (RocketMQ's timerMaxDelaySec default, 3 days).
pub const TIMER_MAX_DELAY_MS: i64 = 3 * 24 * 3_600_000;
const POLL: Duration = Duration::from_millis(100);
/// Units loaded or messages delivered per tick, so the timer cannot monopolise its shard.
const MAX_WORK_PER_TICK: usize = 1024;

pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";

/// The delivery time a message asks for, if it is a timer message. Errors for malformed values
/// and delays past the maximum.
pub fn requested_delivery(
    props: &[(String, String)],
    now: i64,
) -> Result<Option<i64>, BrokerError> {
    let get = |k: &str| props.iter().find(|(n, _)| n == k).map(|(_, v)| v.trim());
    let parse = |k: &str, v: &str| {
        v.parse::<i64>()
            .map_err(|_| BrokerError::MessageIllegal(format!("property {k}={v:?} is not a number")))
    };
    let at = if let Some(v) = get(TIMER_DELIVER_MS) {
        parse(TIMER_DELIVER_MS, v)?
    } else if let Some(v) = get(TIMER_DELAY_MS) {
        now + parse(TIMER_DELAY_MS, v)?
    } else if let Some(v) = get(TIMER_DELAY_SEC) {
        now + parse(TIMER_DELAY_SEC, v)?.saturating_mul(1000)
    } else {
        return Ok(None);
    };
    if at - now > TIMER_MAX_DELAY_MS {
        return Err(BrokerError::MessageIllegal(format!(
            "timer delivery {} ms ahead exceeds the maximum {TIMER_MAX_DELAY_MS} ms",
            at - now
        )));
    }
    Ok(Some(at))
}

/// Persisted progress of the timer queue.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimerProgress {
    /// Every queue offset below this was delivered.
    pub low_watermark: u64,
    /// Delivered offsets at or above the low watermark.
    pub delivered: BTreeSet<u64>,
}

impl TimerProgress {
    fn mark_delivered(&mut self, offset: u64) {
        self.delivered.insert(offset);
        while self.delivered.remove(&self.low_watermark) {
            self.low_watermark += 1;
        }
    }

    fn is_delivered(&self, offset: u64) -> bool {
        offset < self.low_watermark || self.delivered.contains(&offset)
    }
}

/// The owner shard's timer state.
#[derive(Default)]
pub struct TimerState {
    pub progress: TimerProgress,
    /// Next queue offset to load into the index.
    loaded_to: u64,
    /// (due ms, queue offset) -> (phy offset, size)
    pending: BTreeMap<(i64, u64), (u64, u32)>,
}

pub fn progress_path(root: &Path) -> PathBuf {
    root.join("config").join("timerProgress.json")
}

pub fn load_progress(root: &Path) -> TimerProgress {
    let p = progress_path(root);
    for path in [p.clone(), p.with_extension("json.bak")] {
        if let Ok(b) = std::fs::read(&path) {
            match body::from_json::<TimerProgress>(&b) {
                Ok(t) => return t,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "unparsable timer progress")
                }
            }
        }
    }
    TimerProgress::default()
}

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
    *shard.timer.borrow_mut() = Some(TimerState {
        progress,
        loaded_to,
        pending: BTreeMap::new(),
    });
    runtime::spawn(run(shard.clone()));
}

/// The owner's progress as file bytes (None on other shards).
pub fn progress_bytes(shard: &Shard) -> Option<Vec<u8>> {
    shard
        .timer
        .borrow()
        .as_ref()
        .map(|t| body::to_json(&t.progress))
}

async fn run(shard: Rc<Shard>) {
    while !shard.stopping.get() {
        load_new_units(&shard);
        let mut delivered = 0;
        while delivered < MAX_WORK_PER_TICK && !shard.paused.get() {
            let due = {
                let t = shard.timer.borrow();
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
                    if let Some(t) = shard.timer.borrow_mut().as_mut() {
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
    let mut guard = shard.timer.borrow_mut();
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
        TIMER_DELIVER_MS,
        TIMER_DELAY_SEC,
        TIMER_DELAY_MS,
        TIMER_OUT_MS,
    ];
    send::reappend_to_real_topic(shard, phy, size, &strip).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(k: &str, v: &str) -> Vec<(String, String)> {
        vec![(k.to_string(), v.to_string())]
    }

    /// Absolute and relative forms, the 3-day cap and malformed values.
    #[test]
    fn requested_delivery_forms() {
        let now = 1_000_000;
        assert_eq!(requested_delivery(&[], now).unwrap(), None);
        assert_eq!(
            requested_delivery(&props(TIMER_DELIVER_MS, "1003000"), now).unwrap(),
            Some(1_003_000)
        );
        assert_eq!(
            requested_delivery(&props(TIMER_DELAY_SEC, "3"), now).unwrap(),
            Some(1_003_000)
        );
        assert_eq!(
            requested_delivery(&props(TIMER_DELAY_MS, "250"), now).unwrap(),
            Some(1_000_250)
        );
        assert!(requested_delivery(&props(TIMER_DELAY_SEC, "x"), now).is_err());
        assert!(requested_delivery(&props(TIMER_DELAY_SEC, "999999"), now).is_err());
    }

    /// Out-of-order deliveries advance the low watermark only over a contiguous prefix.
    #[test]
    fn progress_watermark() {
        let mut p = TimerProgress::default();
        p.mark_delivered(2);
        assert_eq!(p.low_watermark, 0);
        assert!(p.is_delivered(2) && !p.is_delivered(0));
        p.mark_delivered(0);
        assert_eq!(p.low_watermark, 1);
        p.mark_delivered(1);
        assert_eq!(p.low_watermark, 3);
        assert!(p.delivered.is_empty());
    }
}
