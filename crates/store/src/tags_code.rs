//! The tags code of a record's ConsumeQueue unit (the unit's last 8 bytes): the Java hash of
//! the record's tag, except for records parked for later delivery, whose slot holds the
//! delivery time. One rule for both ways a unit is made: the live path picks a `TagsCode` when
//! it encodes the record and the writer resolves it at the store timestamp it stamps into the
//! record; recovery recomputes it from the stored record (`of_record`) and resolves it at the
//! record's store timestamp. Both therefore put the same unit, and a store rebuilt from its
//! commit log delivers parked messages at the time the live path scheduled them.
//!
//! The rules, in order:
//! - `SCHEDULE_TOPIC_XXXX` with a `DELAY` level > 0: store timestamp + the level's delay (the
//!   level clamped to the highest), as RocketMQ's recovery and dispatch compute it
//!   (`CommitLog.checkMessageAndReturnSize` with `ScheduleMessageService.computeDeliverTimestamp`),
//!   so a RocketMQ broker reading this store agrees too;
//! - the timer topic with a numeric `TIMER_OUT_MS`: that time (ringmq's own rule; RocketMQ's
//!   timer keeps delivery times in its timer log and wheel files instead);
//! - anything else: the tag's Java hash, 0 without a tag.
//!
//! Callers: `broker::send` (client sends, delay and timer parking, retries, deliveries out of the
//! parking topics), the `writer` (resolve), `store::recovery`.

use crate::protocol::java_hash;
use crate::protocol::properties::{self, keys};

/// Where delay-level messages wait (queue = level - 1) and where timer messages wait (queue 0).
pub use crate::protocol::topics::{SCHEDULE_TOPIC, TIMER_TOPIC};
/// RocketMQ's default `messageDelayLevel`.
pub const DEFAULT_DELAY_LEVELS: &str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

/// Parsed `messageDelayLevel`: delay in ms per level (index 0 = level 1), never empty.
#[derive(Clone, Debug, PartialEq)]
pub struct DelayLevels(pub Vec<i64>);

impl DelayLevels {
    /// Parses RocketMQ's `"1s 5s 10s 30s 1m ... 2h"` (units s, m, h, d).
    pub fn parse(spec: &str) -> Result<DelayLevels, String> {
        let mut out = Vec::new();
        for item in spec.split_whitespace() {
            let (num, unit) = item.split_at(item.len().saturating_sub(1));
            let n: i64 = num
                .parse()
                .map_err(|_| format!("bad delay level {item:?} in {spec:?}"))?;
            let ms = match unit {
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return Err(format!("bad unit in delay level {item:?}")),
            };
            if n <= 0 {
                return Err(format!("delay level {item:?} must be positive"));
            }
            let delay_ms = n
                .checked_mul(ms)
                .ok_or_else(|| format!("delay level {item:?} is too long"))?;
            out.push(delay_ms);
        }
        if out.is_empty() {
            return Err("messageDelayLevel is empty".into());
        }
        Ok(DelayLevels(out))
    }

    pub fn max_level(&self) -> i32 {
        self.0.len() as i32
    }

    /// Delay of `level` (clamped to the highest level), `None` for level <= 0.
    pub fn delay_ms(&self, level: i32) -> Option<i64> {
        if level <= 0 {
            return None;
        }
        let l = level.min(self.max_level());
        Some(self.0[(l - 1) as usize])
    }

    /// The levels in `messageDelayLevel`'s form, each in its largest exact unit (`parse`
    /// reads it back to the same delays).
    pub fn spec(&self) -> String {
        let unit = |ms: i64| {
            for (u, n) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)] {
                if ms % n == 0 {
                    return format!("{}{u}", ms / n);
                }
            }
            format!("{}s", ms / 1_000)
        };
        self.0
            .iter()
            .map(|&ms| unit(ms))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Default for DelayLevels {
    fn default() -> Self {
        DelayLevels::parse(DEFAULT_DELAY_LEVELS).expect("the default levels parse")
    }
}

/// A `DELAY` property value as a level: a positive integer (surrounding blanks allowed), else
/// `None` (the message is not delayed).
pub fn delay_level(value: &str) -> Option<i32> {
    value.trim().parse::<i32>().ok().filter(|l| *l > 0)
}

/// A unit's tags code before or after the record's store timestamp is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagsCode {
    /// Known when the record is encoded: a tag hash or a timer's delivery time.
    Known(i64),
    /// A delay level's delivery time: this many ms after the record's store timestamp.
    AfterStore { delay_ms: i64 },
}

impl TagsCode {
    /// The value in the unit of a record stored at `store_timestamp` (ms).
    pub fn resolve(self, store_timestamp: i64) -> i64 {
        match self {
            TagsCode::Known(code) => code,
            TagsCode::AfterStore { delay_ms } => store_timestamp.saturating_add(delay_ms),
        }
    }
}

/// The tags code of a record in `topic` with properties `props` (the stored string).
pub fn of_record(topic: &str, props: &str, levels: &DelayLevels) -> TagsCode {
    of_record_tagged(topic, props, properties::get(props, keys::TAGS), levels)
}

/// `of_record` for a caller that already found the record's `TAGS` value (the last one, as
/// `properties::get` finds it): records outside the parking topics cost no property scan.
pub fn of_record_tagged(
    topic: &str,
    props: &str,
    tag: Option<&str>,
    levels: &DelayLevels,
) -> TagsCode {
    let parked = match topic {
        SCHEDULE_TOPIC => properties::get(props, keys::DELAY)
            .and_then(delay_level)
            .and_then(|level| levels.delay_ms(level))
            .map(|delay_ms| TagsCode::AfterStore { delay_ms }),
        TIMER_TOPIC => properties::get(props, keys::TIMER_OUT_MS)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .map(TagsCode::Known),
        _ => None,
    };
    parked.unwrap_or_else(|| TagsCode::Known(java_hash::tags_code(tag)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rendered spec reads back to the same delays, RocketMQ's default in its own words.
    #[test]
    fn spec_round_trips() {
        let spec = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";
        let l = DelayLevels::parse(spec).unwrap();
        assert_eq!(l.spec(), spec);
        let odd = DelayLevels::parse("90s 1d 36h").unwrap();
        assert_eq!(odd.spec(), "90s 1d 36h");
        assert_eq!(DelayLevels::parse(&odd.spec()).unwrap(), odd);
    }

    fn levels() -> DelayLevels {
        DelayLevels::parse("1s 4s").unwrap()
    }

    /// RocketMQ's default level string parses to its 18 delays; bad specs are clear errors.
    #[test]
    fn parses_default_levels() {
        let l = DelayLevels::default();
        assert_eq!(l.max_level(), 18);
        assert_eq!(l.delay_ms(2), Some(5_000));
        assert_eq!(l.delay_ms(18), Some(7_200_000));
        assert_eq!(l.delay_ms(99), Some(7_200_000));
        assert_eq!(l.delay_ms(0), None);
        assert!(DelayLevels::parse("1x").is_err());
        assert!(DelayLevels::parse("").is_err());
        assert!(DelayLevels::parse("999999999999999999d").is_err());
    }

    /// A schedule record's code is its store timestamp plus its level's delay (clamped), as
    /// RocketMQ computes it; without a usable level it is the tag hash.
    #[test]
    fn schedule_records_hold_store_time_plus_delay() {
        let l = levels();
        let code = |props: &str| of_record(SCHEDULE_TOPIC, props, &l).resolve(1_000_000);
        assert_eq!(code("TAGS\u{1}TagA\u{2}DELAY\u{1}2\u{2}"), 1_004_000);
        assert_eq!(code("DELAY\u{1} 1 \u{2}"), 1_001_000);
        assert_eq!(
            code("DELAY\u{1}9\u{2}"),
            1_004_000,
            "clamped to the last level"
        );
        assert_eq!(code("TAGS\u{1}TagA\u{2}DELAY\u{1}0\u{2}"), 2_598_919);
        assert_eq!(code("TAGS\u{1}TagA\u{2}DELAY\u{1}x\u{2}"), 2_598_919);
        // The same property in another topic is not a delivery time.
        let other = of_record("T", "TAGS\u{1}TagA\u{2}DELAY\u{1}2\u{2}", &l);
        assert_eq!(other, TagsCode::Known(2_598_919));
    }

    /// A timer record's code is its TIMER_OUT_MS whatever its store time; a bad one is ignored.
    #[test]
    fn timer_records_hold_their_delivery_time() {
        let l = levels();
        let props = "TAGS\u{1}TagA\u{2}TIMER_OUT_MS\u{1}1700000000123\u{2}";
        assert_eq!(
            of_record(TIMER_TOPIC, props, &l),
            TagsCode::Known(1_700_000_000_123)
        );
        let bad = "TAGS\u{1}TagA\u{2}TIMER_OUT_MS\u{1}soon\u{2}";
        assert_eq!(of_record(TIMER_TOPIC, bad, &l), TagsCode::Known(2_598_919));
        assert_eq!(of_record("T", props, &l), TagsCode::Known(2_598_919));
    }

    /// `of_record_tagged` with the tag the caller found agrees with `of_record`.
    #[test]
    fn tagged_variant_agrees() {
        let l = levels();
        for (topic, props) in [
            ("T", "TAGS\u{1}a\u{2}TAGS\u{1}b\u{2}"),
            ("T", "KEYS\u{1}k\u{2}"),
            (SCHEDULE_TOPIC, "TAGS\u{1}a\u{2}DELAY\u{1}1\u{2}"),
            (TIMER_TOPIC, "TIMER_OUT_MS\u{1}5\u{2}"),
        ] {
            let tag = properties::get(props, keys::TAGS);
            assert_eq!(
                of_record_tagged(topic, props, tag, &l),
                of_record(topic, props, &l)
            );
        }
        assert_eq!(
            TagsCode::AfterStore { delay_ms: i64::MAX }.resolve(5),
            i64::MAX
        );
    }
}
