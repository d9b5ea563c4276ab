//! What the timer service keeps and reads, apart from the service itself: the timer properties
//! a message asks for its delivery with, the persisted progress of the timer queue, and the
//! owner shard's pending timers. The send path reads [`requested_delivery`] here; the shard
//! holds a [`TimerState`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::BrokerError;
use crate::protocol::body;
use crate::protocol::properties::keys::{TIMER_DELAY_MS, TIMER_DELAY_SEC, TIMER_DELIVER_MS};

pub const TIMER_QUEUE: u32 = 0;
/// Longest accepted delay (RocketMQ's timerMaxDelaySec default, 3 days).
pub const TIMER_MAX_DELAY_MS: i64 = 3 * 24 * 3_600_000;

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
    pub(super) fn mark_delivered(&mut self, offset: u64) {
        self.delivered.insert(offset);
        while self.delivered.remove(&self.low_watermark) {
            self.low_watermark += 1;
        }
    }

    pub(super) fn is_delivered(&self, offset: u64) -> bool {
        offset < self.low_watermark || self.delivered.contains(&offset)
    }
}

/// The owner shard's timer state.
#[derive(Default)]
pub struct TimerState {
    pub progress: TimerProgress,
    /// Next queue offset to load into the index.
    pub(super) loaded_to: u64,
    /// (due ms, queue offset) -> (phy offset, size)
    pub(super) pending: BTreeMap<(i64, u64), (u64, u32)>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::properties::keys;

    fn props(k: &str, v: &str) -> Vec<(String, String)> {
        vec![(k.to_string(), v.to_string())]
    }

    /// Absolute and relative forms, the 3-day cap and malformed values.
    #[test]
    fn requested_delivery_forms() {
        let now = 1_000_000;
        assert_eq!(requested_delivery(&[], now).unwrap(), None);
        assert_eq!(
            requested_delivery(&props(keys::TIMER_DELIVER_MS, "1003000"), now).unwrap(),
            Some(1_003_000)
        );
        assert_eq!(
            requested_delivery(&props(keys::TIMER_DELAY_SEC, "3"), now).unwrap(),
            Some(1_003_000)
        );
        assert_eq!(
            requested_delivery(&props(keys::TIMER_DELAY_MS, "250"), now).unwrap(),
            Some(1_000_250)
        );
        assert!(requested_delivery(&props(keys::TIMER_DELAY_SEC, "x"), now).is_err());
        assert!(requested_delivery(&props(keys::TIMER_DELAY_SEC, "999999"), now).is_err());
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
