//! Broker statistics and GET_BROKER_RUNTIME_INFO (28), in the keys and value formats of
//! Java's `DefaultMessageStore.getRuntimeInfo`, `StoreStatsService` and
//! `AdminBrokerProcessor.prepareRuntimeInfo`, which mqadmin and the dashboard parse.
//!
//! Counting costs the message path one relaxed atomic add on a counter only its shard writes
//! (a cache line of its own, no lock): puts are counted where a shard applies the units the
//! writer dispatched (`Shard::on_dispatch`), gets where a pull looks its queue up (found or
//! missed, and the messages returned). Shard 0 samples the sums every second into a bounded
//! window of `SAMPLES_MAX` + 1 samples (Java's 10-minute window) and computes the 10 s, 60 s
//! and 600 s rates from it on request, with the disk usage it measured last; it also keeps the
//! day totals (`msgPutTotalTodayMorning` and the like), turning the day over at UTC midnight
//! where Java uses local midnight.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::broker::{now_ms, BrokerError, Shard};
use crate::protocol::codes::response_code as rc;
use crate::protocol::message;
use crate::protocol::RemotingCommand;
use crate::runtime;

/// Samples kept: one a second for Java's longest rate window (600 s), plus its start.
pub const SAMPLES_MAX: usize = 600;
const SAMPLE_PERIOD: Duration = Duration::from_secs(1);
const DAY_MS: i64 = 86_400_000;

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
    put_today_morning: u64,
    put_yesterday_morning: u64,
    get_today_morning: u64,
    get_yesterday_morning: u64,
    /// Used share of the store's filesystem (0..1, Java's `getDiskPartitionSpaceUsedPercent`);
    /// None until measured or when statvfs fails (then -1 is reported).
    disk_ratio: Option<f64>,
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

thread_local! {
    /// Shard 0's sampler (other shards never touch theirs).
    static SAMPLER: RefCell<Sampler> = RefCell::new(Sampler::default());
}

/// Shard 0: samples the counters and the store's disk usage (statvfs, on a helper thread)
/// every second while the broker runs, so a request reads them without waiting.
pub async fn run_sampler(s0: Rc<Shard>) {
    while !s0.stopping.get() {
        let s = s0.ctx.stats.sum(now_ms());
        SAMPLER.with(|x| x.borrow_mut().record(s));
        let root = s0.ctx.cfg.store.store_path_root_dir.clone();
        let disk =
            runtime::spawn_blocking(move || crate::store::retention::disk_usage(&root)).await;
        let ratio = match disk {
            Ok(d) if d.total_bytes > 0 => Some(d.used_bytes as f64 / d.total_bytes as f64),
            _ => None,
        };
        SAMPLER.with(|x| x.borrow_mut().disk_ratio = ratio);
        runtime::sleep(SAMPLE_PERIOD).await;
    }
}

/// The figures shard 0 computes from its sampler.
fn sampled_figures(s0: &Shard) -> BTreeMap<String, String> {
    let now = s0.ctx.stats.sum(now_ms());
    SAMPLER.with(|x| {
        let x = x.borrow();
        let found_or_miss = |s: &Sample| s.found + s.miss;
        let transferred = x.tps3(|s| s.transferred);
        let mut t = BTreeMap::new();
        t.insert("putTps".into(), x.tps3(|s| s.put));
        t.insert("getFoundTps".into(), x.tps3(|s| s.found));
        t.insert("getMissTps".into(), x.tps3(|s| s.miss));
        t.insert("getTotalTps".into(), x.tps3(found_or_miss));
        t.insert("getTransferredTps".into(), transferred.clone());
        // The misspelling older Java brokers used, which the dashboard still reads.
        t.insert("getTransferedTps".into(), transferred);
        t.insert("putMessageTimesTotal".into(), now.put.to_string());
        t.insert("msgPutTotalTodayNow".into(), now.put.to_string());
        t.insert(
            "msgPutTotalTodayMorning".into(),
            x.put_today_morning.to_string(),
        );
        t.insert(
            "msgPutTotalYesterdayMorning".into(),
            x.put_yesterday_morning.to_string(),
        );
        t.insert("msgGetTotalTodayNow".into(), now.transferred.to_string());
        t.insert(
            "msgGetTotalTodayMorning".into(),
            x.get_today_morning.to_string(),
        );
        t.insert(
            "msgGetTotalYesterdayMorning".into(),
            x.get_yesterday_morning.to_string(),
        );
        let ratio = format!("{:?}", x.disk_ratio.unwrap_or(-1.0));
        let path = s0.ctx.cfg.store.commit_log_dir();
        t.insert(
            format!("commitLogDiskRatio_{}", path.display()),
            ratio.clone(),
        );
        t.insert("commitLogDiskRatio".into(), ratio.clone());
        t.insert("consumeQueueDiskRatio".into(), ratio);
        t
    })
}

/// Store timestamp of the first record of the commit log, -1 when there is none.
fn earliest_message_time(s: &Shard) -> i64 {
    let min = s.ctx.writer.min_phy_offset();
    if min >= s.ctx.writer.max_phy_offset() {
        return -1;
    }
    let mut reader = s.reader.borrow_mut();
    let size = match reader.read(min, 4) {
        Ok(h) => u32::from_be_bytes([h[0], h[1], h[2], h[3]]),
        Err(_) => return -1,
    };
    let max = s.ctx.cfg.store.max_record_len() as u32;
    if size == 0 || size > max {
        return -1;
    }
    reader
        .read(min, size)
        .ok()
        .and_then(|b| message::decode(b, false).ok())
        .map_or(-1, |r| r.store_timestamp)
}

/// GET_BROKER_RUNTIME_INFO: `{"table":{...}}` of string figures.
pub async fn runtime_info(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    // Answered at once on shard 0 (no hop, nothing awaited), like any other small request.
    let mut t = if shard.id == 0 {
        sampled_figures(&shard)
    } else {
        shard
            .mesh
            .call(0, |s0| async move { sampled_figures(&s0) })
            .await?
    };
    let w = &shard.ctx.writer;
    let mut put = |k: &str, v: String| {
        t.insert(k.to_string(), v);
    };
    put("commitLogMaxOffset", w.max_phy_offset().to_string());
    put("commitLogMinOffset", w.min_phy_offset().to_string());
    put(
        "earliestMessageTimeStamp",
        earliest_message_time(&shard).to_string(),
    );
    put("brokerActive", "true".into());
    put("brokerVersion", "479".into());
    put("brokerVersionDesc", "V5_3_3".into());
    put("bootTimestamp", shard.ctx.started_ms.to_string());
    put("startAcceptSendRequestTimeStamp", "0".into());
    put("runtime", format_runtime(now_ms() - shard.ctx.started_ms));
    put("dispatchBehindBytes", "0".into());
    put("pageCacheLockTimeMills", "0".into());
    put("remainTransientStoreBufferNumbs", "2147483647".into());
    put("shardCount", shard.ctx.shard_count.to_string());
    put("sendfileBytes", load(&runtime::net::SENDFILE_BYTES));
    put(
        "sendfileFallbackBytes",
        load(&runtime::net::SENDFILE_FALLBACK_BYTES),
    );
    put("onewayDropped", load(&crate::broker::send::ONEWAY_DROPPED));
    let body = serde_json::json!({ "table": t });
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None)
        .with_body(serde_json::to_vec(&body).unwrap_or_default()))
}

fn load(c: &AtomicU64) -> String {
    c.load(Ordering::Relaxed).to_string()
}

/// Java's `StoreStatsService.getFormatRuntime`: `[ d days, h hours, m minutes, s seconds ]`.
fn format_runtime(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    format!(
        "[ {} days, {} hours, {} minutes, {} seconds ]",
        s / 86_400,
        s % 86_400 / 3600,
        s % 3600 / 60,
        s % 60
    )
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

    /// Java's runtime text.
    #[test]
    fn runtime_format() {
        assert_eq!(
            format_runtime(90_061_000),
            "[ 1 days, 1 hours, 1 minutes, 1 seconds ]"
        );
    }
}
