//! Broker statistics: per-shard put and get counters and shard 0's sampling window, from which
//! GET_BROKER_RUNTIME_INFO (`runtime_info`) reports Java's rates and day totals.
//!
//! Counting costs the message path one relaxed atomic add on a counter only its shard writes
//! (a cache line of its own, no lock): puts are counted where a shard applies the units the
//! writer dispatched (`Shard::on_dispatch`), gets where a pull looks its queue up (found or
//! missed, and the messages returned). Shard 0 samples the sums every second into a bounded
//! window of `SAMPLES_MAX` + 1 samples (Java's 10-minute window) and computes the 10 s, 60 s
//! and 600 s rates from it on request; it also keeps the day totals (`msgPutTotalTodayMorning`
//! and the like), turning the day over at UTC midnight where Java uses local midnight.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// Oneway sends the broker could not store (busy, bad input); exported as a metric.
pub static ONEWAY_DROPPED: AtomicU64 = AtomicU64::new(0);
/// Samples kept: one a second for Java's longest rate window (600 s), plus its start.
pub const SAMPLES_MAX: usize = 600;
pub const DAY_MS: i64 = 86_400_000;

/// One shard's counters; only that shard adds to them.
#[derive(Default)]
#[repr(align(64))]
pub struct ShardCounters {
    /// Messages stored with a consume-queue unit.
    pub put_msgs: AtomicU64,
    /// Pull lookups that found messages / found none.
    pub get_found: AtomicU64,
    pub get_miss: AtomicU64,
    /// Messages returned by pulls.
    pub get_transferred: AtomicU64,
}

/// Every shard's counters, shared through the broker context.
pub struct BrokerStats {
    shards: Box<[ShardCounters]>,
}

/// Counter sums at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    pub at_ms: i64,
    pub put: u64,
    pub found: u64,
    pub miss: u64,
    pub transferred: u64,
}

impl BrokerStats {
    pub fn new(shards: usize) -> BrokerStats {
        BrokerStats {
            shards: (0..shards.max(1))
                .map(|_| ShardCounters::default())
                .collect(),
        }
    }

    /// The counters shard `id` adds to.
    pub fn shard(&self, id: usize) -> &ShardCounters {
        &self.shards[id % self.shards.len()]
    }

    pub fn sum(&self, at_ms: i64) -> Sample {
        let mut s = Sample {
            at_ms,
            ..Sample::default()
        };
        for c in self.shards.iter() {
            s.put += c.put_msgs.load(Ordering::Relaxed);
            s.found += c.get_found.load(Ordering::Relaxed);
            s.miss += c.get_miss.load(Ordering::Relaxed);
            s.transferred += c.get_transferred.load(Ordering::Relaxed);
        }
        s
    }
}

impl ShardCounters {
    pub fn add_puts(&self, n: u64) {
        self.put_msgs.fetch_add(n, Ordering::Relaxed);
    }

    pub fn add_get(&self, messages: u64) {
        if messages == 0 {
            self.get_miss.fetch_add(1, Ordering::Relaxed);
        } else {
            self.get_found.fetch_add(1, Ordering::Relaxed);
            self.get_transferred.fetch_add(messages, Ordering::Relaxed);
        }
    }
}

/// Shard 0's sampling window and day totals.
#[derive(Default)]
pub struct Sampler {
    samples: VecDeque<Sample>,
    day: i64,
    pub put_today_morning: u64,
    pub put_yesterday_morning: u64,
    pub get_today_morning: u64,
    pub get_yesterday_morning: u64,
    /// Used share of the store's filesystem (0..1, Java's `getDiskPartitionSpaceUsedPercent`);
    /// None until measured or when statvfs fails (then -1 is reported).
    pub disk_ratio: Option<f64>,
}

impl Sampler {
    pub fn record(&mut self, s: Sample) {
        let day = s.at_ms.div_euclid(DAY_MS);
        if self.samples.is_empty() {
            self.day = day;
        } else if day != self.day {
            self.day = day;
            self.put_yesterday_morning = self.put_today_morning;
            self.get_yesterday_morning = self.get_today_morning;
            self.put_today_morning = s.put;
            self.get_today_morning = s.transferred;
        }
        self.samples.push_back(s);
        while self.samples.len() > SAMPLES_MAX + 1 {
            self.samples.pop_front();
        }
    }

    /// The rate over the last `secs` samples (all there are when fewer), as Java's double.
    fn tps(&self, secs: usize, f: impl Fn(&Sample) -> u64) -> f64 {
        let (Some(last), n) = (self.samples.back(), self.samples.len()) else {
            return 0.0;
        };
        let first = &self.samples[n - 1 - secs.min(n - 1)];
        let ms = last.at_ms - first.at_ms;
        if ms <= 0 {
            return 0.0;
        }
        f(last).saturating_sub(f(first)) as f64 * 1000.0 / ms as f64
    }

    /// Java's three-window form: "<10 s> <60 s> <600 s>".
    pub fn tps3(&self, f: impl Fn(&Sample) -> u64 + Copy) -> String {
        format!(
            "{:?} {:?} {:?}",
            self.tps(10, f),
            self.tps(60, f),
            self.tps(600, f)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: i64, put: u64) -> Sample {
        Sample {
            at_ms,
            put,
            ..Sample::default()
        }
    }

    /// Rates come from the counters over Java's 10/60/600 s windows, as "a b c" doubles, and
    /// the window stays bounded.
    #[test]
    fn tps_over_three_windows() {
        let mut x = Sampler::default();
        assert_eq!(x.tps3(|s| s.put), "0.0 0.0 0.0");
        for i in 0..=700i64 {
            // 5 puts a second for the first 640 s, 50 a second for the last 60.
            let put = if i <= 640 {
                5 * i
            } else {
                3200 + 50 * (i - 640)
            };
            x.record(sample(1_000_000 + i * 1000, put as u64));
        }
        assert_eq!(x.samples.len(), SAMPLES_MAX + 1);
        let parts: Vec<f64> = x
            .tps3(|s| s.put)
            .split(' ')
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(parts[0], 50.0);
        assert_eq!(parts[1], 50.0);
        assert_eq!(parts[2], (3000 + 540 * 5) as f64 / 600.0);
    }

    /// The day totals turn over at midnight: this morning's total becomes yesterday's.
    #[test]
    fn day_totals_turn_over() {
        let mut x = Sampler::default();
        x.record(sample(DAY_MS - 2000, 10));
        x.record(sample(DAY_MS + 1000, 25));
        assert_eq!((x.put_today_morning, x.put_yesterday_morning), (25, 0));
        x.record(sample(2 * DAY_MS + 1000, 40));
        assert_eq!((x.put_today_morning, x.put_yesterday_morning), (40, 25));
    }

    /// Counters add per shard and sum across shards; a pull with nothing is a miss.
    #[test]
    fn counters_sum_across_shards() {
        let st = BrokerStats::new(2);
        st.shard(0).add_puts(3);
        st.shard(1).add_puts(4);
        st.shard(1).add_get(7);
        st.shard(0).add_get(0);
        let s = st.sum(1);
        assert_eq!((s.put, s.found, s.miss, s.transferred), (7, 1, 1, 7));
    }
}
