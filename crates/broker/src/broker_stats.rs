//! VIEW_BROKER_STATS_DATA (315; mqadmin `statsAll`, the dashboard, rocketmq-exporter): Java's
//! `BrokerStatsManager` figures by stats name and key, over its minute, hour and day windows,
//! as a `BrokerStatsData` body (`statsMinute`, `statsHour`, `statsDay`, each `{sum, tps,
//! avgpt}`).
//!
//! The counts are the shards' metrics records (`metrics::record`) and the broker's put and get
//! counters (`stats`); shard 0 samples them every `SAMPLE_PERIOD` as Java's `StatsItem` does:
//! every sample goes to the minute window (7 kept), every 60th to the hour window (7 kept),
//! every 360th to the day window (25 kept), and a window's figures are last − first. A key gets a
//! zero point one period back when it is first seen, as Java seeds a new item, so what arrived
//! before its first sample counts. Names served: `TOPIC_PUT_NUMS`, `TOPIC_PUT_SIZE` (key
//! topic), `GROUP_GET_NUMS`, `GROUP_GET_SIZE`, `SNDBCK_PUT_NUMS` (key `topic@group`),
//! `BROKER_PUT_NUMS`, `BROKER_GET_NUMS` (key the cluster name). Java's `times` (calls) is the
//! message count here: ringmq counts messages, not requests, so a `*_NUMS` average is 1.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use crate::common::now_ms;
use crate::error::BrokerError;
use crate::metrics::snapshot::{self, Snapshot};
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::ViewBrokerStatsDataRequestHeader;
use crate::protocol::RemotingCommand;
use crate::runtime;
use crate::shard::Shard;

/// Java's `StatsItem` minute sampling period.
const SAMPLE_PERIOD: Duration = Duration::from_secs(10);
const MINUTE_KEEP: usize = 7;
const HOUR_KEEP: usize = 7;
const DAY_KEEP: usize = 25;
/// Samples per hour-window sample (10 min) and per day-window sample (1 h).
const HOUR_EVERY: u64 = 60;
const DAY_EVERY: u64 = 360;

/// One sample of a key: its running total and the number of events behind it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Point {
    at_ms: i64,
    value: u64,
    times: u64,
}

/// Java's `BrokerStatsItem`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct BrokerStatsItem {
    pub sum: u64,
    pub tps: f64,
    pub avgpt: f64,
}

/// Java's `BrokerStatsData`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerStatsData {
    pub stats_minute: BrokerStatsItem,
    pub stats_hour: BrokerStatsItem,
    pub stats_day: BrokerStatsItem,
}

/// One key's three windows.
#[derive(Default)]
struct Series {
    minute: VecDeque<Point>,
    hour: VecDeque<Point>,
    day: VecDeque<Point>,
}

fn push(list: &mut VecDeque<Point>, p: Point, keep: usize) {
    list.push_back(p);
    while list.len() > keep {
        list.pop_front();
    }
}

/// Java's `StatsItem.computeStatsData`: last − first over the window.
fn window(list: &VecDeque<Point>) -> BrokerStatsItem {
    let (Some(first), Some(last)) = (list.front(), list.back()) else {
        return BrokerStatsItem::default();
    };
    let sum = last.value.saturating_sub(first.value);
    let ms = last.at_ms - first.at_ms;
    let times = last.times.saturating_sub(first.times);
    BrokerStatsItem {
        sum,
        tps: if ms > 0 {
            sum as f64 * 1000.0 / ms as f64
        } else {
            0.0
        },
        avgpt: if times > 0 {
            sum as f64 / times as f64
        } else {
            0.0
        },
    }
}

impl Series {
    /// A new key: a zero point one period back in every window (Java's seed).
    fn new(at_ms: i64) -> Series {
        let zero = Point {
            at_ms: at_ms - SAMPLE_PERIOD.as_millis() as i64,
            value: 0,
            times: 0,
        };
        Series {
            minute: VecDeque::from([zero]),
            hour: VecDeque::from([zero]),
            day: VecDeque::from([zero]),
        }
    }

    fn record(&mut self, p: Point, tick: u64) {
        push(&mut self.minute, p, MINUTE_KEEP);
        if tick.is_multiple_of(HOUR_EVERY) {
            push(&mut self.hour, p, HOUR_KEEP);
        }
        if tick.is_multiple_of(DAY_EVERY) {
            push(&mut self.day, p, DAY_KEEP);
        }
    }

    fn data(&self) -> BrokerStatsData {
        BrokerStatsData {
            stats_minute: window(&self.minute),
            stats_hour: window(&self.hour),
            stats_day: window(&self.day),
        }
    }
}

/// Shard 0's series, by (stats name, key).
#[derive(Default)]
struct Book {
    series: HashMap<(&'static str, String), Series>,
    tick: u64,
}

impl Book {
    fn record(&mut self, at_ms: i64, figures: Vec<(&'static str, String, u64, u64)>) {
        let tick = self.tick;
        self.tick += 1;
        for (name, key, value, times) in figures {
            self.series
                .entry((name, key))
                .or_insert_with(|| Series::new(at_ms))
                .record(
                    Point {
                        at_ms,
                        value,
                        times,
                    },
                    tick,
                );
        }
    }
}

thread_local! {
    /// Shard 0's book (other shards never touch theirs).
    static BOOK: RefCell<Book> = RefCell::new(Book::default());
}

/// Every (stats name, key, value, times) one sample records.
fn figures(
    snap: &Snapshot,
    cluster: &str,
    put: u64,
    got: u64,
) -> Vec<(&'static str, String, u64, u64)> {
    let mut out = Vec::new();
    for (topic, t) in &snap.topics_in {
        let msgs = t.flow.iter().map(|f| f.msgs).sum();
        let bytes = t.flow.iter().map(|f| f.bytes).sum();
        out.push(("TOPIC_PUT_NUMS", topic.clone(), msgs, msgs));
        out.push(("TOPIC_PUT_SIZE", topic.clone(), bytes, msgs));
    }
    for ((topic, group), f) in &snap.out {
        let key = format!("{topic}@{group}");
        out.push(("GROUP_GET_NUMS", key.clone(), f.msgs, f.msgs));
        out.push(("GROUP_GET_SIZE", key, f.bytes, f.msgs));
    }
    for (key, n) in &snap.send_back {
        out.push(("SNDBCK_PUT_NUMS", key.clone(), *n, *n));
    }
    out.push(("BROKER_PUT_NUMS", cluster.to_string(), put, put));
    out.push(("BROKER_GET_NUMS", cluster.to_string(), got, got));
    out
}

/// Shard 0: samples every shard's counts every `SAMPLE_PERIOD` while the broker runs.
pub async fn run_sampler(s0: Rc<Shard>) {
    while !s0.is_stopping() {
        match snapshot::gather_counts(&s0).await {
            Ok(snap) => {
                let now = now_ms();
                let totals = s0.ctx.stats.sum(now);
                let f = figures(
                    &snap,
                    &s0.ctx.cfg.broker_cluster_name,
                    totals.put,
                    totals.transferred,
                );
                BOOK.with(|b| b.borrow_mut().record(now, f));
            }
            Err(e) => tracing::debug!(error = %e, "broker stats sample skipped"),
        }
        runtime::sleep(SAMPLE_PERIOD).await;
    }
}

/// The stats names served.
const NAMES: [&str; 7] = [
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "SNDBCK_PUT_NUMS",
    "BROKER_PUT_NUMS",
    "BROKER_GET_NUMS",
];

fn lookup(name: &str, key: &str) -> Option<BrokerStatsData> {
    let name: &'static str = NAMES.iter().copied().find(|n| *n == name)?;
    BOOK.with(|b| {
        b.borrow()
            .series
            .get(&(name, key.to_string()))
            .map(Series::data)
    })
}

/// Java's `tpsGroupGetNums` summed over `topics`: the messages a group pulled per second over
/// the minute window (GET_CONSUME_STATS' `consumeTps`).
pub async fn group_get_tps(
    shard: &Rc<Shard>,
    group: &str,
    topics: Vec<String>,
) -> Result<f64, BrokerError> {
    let keys: Vec<String> = topics.iter().map(|t| format!("{t}@{group}")).collect();
    let sum = move || {
        keys.iter()
            .filter_map(|k| lookup("GROUP_GET_NUMS", k))
            .map(|d| d.stats_minute.tps)
            .sum::<f64>()
    };
    if shard.id == 0 {
        return Ok(sum());
    }
    Ok(shard.mesh.call(0, move |_| async move { sum() }).await?)
}

/// Java's `tpsTopicPutNums`: the messages stored in `topic` per second over the minute window
/// (GET_TOPIC_STATS_INFO's `topicPutTps`).
pub async fn topic_put_tps(shard: &Rc<Shard>, topic: &str) -> Result<f64, BrokerError> {
    let key = topic.to_string();
    let tps = move || lookup("TOPIC_PUT_NUMS", &key).map_or(0.0, |d| d.stats_minute.tps);
    if shard.id == 0 {
        return Ok(tps());
    }
    Ok(shard.mesh.call(0, move |_| async move { tps() }).await?)
}

/// VIEW_BROKER_STATS_DATA: the stats item's three windows, or SYSTEM_ERROR when there is none.
pub async fn view_broker_stats_data(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = ViewBrokerStatsDataRequestHeader::from_command(cmd)?;
    let (name, key) = (h.stats_name.clone(), h.stats_key.clone());
    let found = if shard.id == 0 {
        lookup(&name, &key)
    } else {
        shard
            .mesh
            .call(0, move |_| async move { lookup(&name, &key) })
            .await?
    };
    let Some(data) = found else {
        return Err(BrokerError::System(format!(
            "The stats <{}> <{}> not exist",
            h.stats_name, h.stats_key
        )));
    };
    let body = serde_json::to_vec(&data).map_err(|e| BrokerError::System(e.to_string()))?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new key counts from zero one period back; the minute window keeps 7 samples, so after
    /// more its sum is the last minute's growth; tps is per second, avgpt sum per event.
    #[test]
    fn windows_as_java_computes_them() {
        let mut book = Book::default();
        let t0 = 1_000_000;
        for i in 0..10u64 {
            let v = 100 * (i + 1);
            book.record(
                t0 + i as i64 * 10_000,
                vec![("TOPIC_PUT_SIZE", "T".into(), v, v / 10)],
            );
        }
        let d = book.series[&("TOPIC_PUT_SIZE", "T".to_string())].data();
        // Samples 3..=9 remain: 1000 - 400 over 60 s.
        assert_eq!(d.stats_minute.sum, 600);
        assert_eq!(d.stats_minute.tps, 10.0);
        assert_eq!(d.stats_minute.avgpt, 10.0);
        // The hour and day windows have the seed and tick 0's sample only.
        assert_eq!(d.stats_hour.sum, 100);
        assert_eq!(d.stats_day.sum, 100);
    }

    /// The body has Java's `BrokerStatsData` field names.
    #[test]
    fn body_field_names() {
        let v = serde_json::to_value(BrokerStatsData::default()).unwrap();
        for w in ["statsMinute", "statsHour", "statsDay"] {
            let item = &v[w];
            assert!(
                item["sum"].is_u64() && item["tps"].is_f64() && item["avgpt"].is_f64(),
                "{v}"
            );
        }
    }
}
