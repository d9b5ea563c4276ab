//! Run-wide counters, latency histograms, the per-second progress line, process CPU from
//! /proc, and the final summary (text and JSON).
//!
//! Called by every mode. Invariants: hot-path recording is an atomic add or an uncontended
//! per-thread mutex (each worker thread owns one histogram; the progress line merges them);
//! nothing is recorded before `start_recording` (warm-up); the first fatal error wins and sets
//! `stop`, so every thread winds down.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latencies are recorded in ns; anything above a minute is clamped.
const HIST_MAX_NS: u64 = 60_000_000_000;

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid histogram bounds")
}

/// Histograms of one kind of latency, one per recording thread.
#[derive(Default)]
pub struct LatencySet {
    parts: Mutex<Vec<Arc<Mutex<Histogram<u64>>>>>,
}

impl LatencySet {
    /// A histogram for one thread (registered for merging).
    pub fn part(&self) -> Arc<Mutex<Histogram<u64>>> {
        let h = Arc::new(Mutex::new(new_hist()));
        lock(&self.parts).push(h.clone());
        h
    }

    pub fn merged(&self) -> Histogram<u64> {
        let mut all = new_hist();
        for p in lock(&self.parts).iter() {
            all.add(&*lock(p)).expect("same bounds");
        }
        all
    }
}

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicked worker already ended the run; its partial data is still worth reporting.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn record_ns(h: &Mutex<Histogram<u64>>, ns: u64) {
    lock(h).saturating_record(ns.clamp(1, HIST_MAX_NS));
}

/// State shared by the threads of one phase (a producer or a consumer).
pub struct Shared {
    pub base: Instant,
    pub stop: AtomicBool,
    recording: AtomicBool,
    pub record_start_ns: AtomicU64,
    pub last_done_ns: AtomicU64,
    pub ok_msgs: AtomicU64,
    pub ok_bytes: AtomicU64,
    pub ok_reqs: AtomicU64,
    /// Count mode: messages issued while recording (the budget).
    pub issued_msgs: AtomicU64,
    pub count_target: Option<u64>,
    pub errors: Mutex<BTreeMap<i32, u64>>,
    /// The broker's remark on the first failure of each code.
    pub error_remarks: Mutex<BTreeMap<i32, String>>,
    pub fatal: Mutex<Option<String>>,
    failed: AtomicBool,
    /// Main latency (request RTT, or end-to-end in e2e).
    pub latency: LatencySet,
    /// Fixed-rate sends: from the actual send (uncorrected) and the sender's lag behind schedule.
    pub service: LatencySet,
    pub lag: LatencySet,
    pub foreign_msgs: AtomicU64,
}

impl Shared {
    pub fn new(base: Instant, count_target: Option<u64>) -> Arc<Shared> {
        Arc::new(Shared {
            base,
            stop: AtomicBool::new(false),
            recording: AtomicBool::new(false),
            record_start_ns: AtomicU64::new(0),
            last_done_ns: AtomicU64::new(0),
            ok_msgs: AtomicU64::new(0),
            ok_bytes: AtomicU64::new(0),
            ok_reqs: AtomicU64::new(0),
            issued_msgs: AtomicU64::new(0),
            count_target,
            errors: Mutex::new(BTreeMap::new()),
            error_remarks: Mutex::new(BTreeMap::new()),
            fatal: Mutex::new(None),
            failed: AtomicBool::new(false),
            latency: LatencySet::default(),
            service: LatencySet::default(),
            lag: LatencySet::default(),
            foreign_msgs: AtomicU64::new(0),
        })
    }

    pub fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    pub fn start_recording(&self) {
        self.start_recording_at(self.now_ns());
    }

    /// Starts recording as of `now` (ns since `base`).
    pub fn start_recording_at(&self, now: u64) {
        self.record_start_ns.store(now, Relaxed);
        self.last_done_ns.store(now, Relaxed);
        self.recording.store(true, Relaxed);
    }

    pub fn recording(&self) -> bool {
        self.recording.load(Relaxed)
    }

    /// True when something that started (was sent or intended) at `origin_ns` is measured.
    pub fn measures(&self, origin_ns: u64) -> bool {
        self.recording() && origin_ns >= self.record_start_ns.load(Relaxed)
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Relaxed)
    }

    /// Ends the run with `msg` (the first failure is the one reported).
    pub fn fail(&self, msg: String) {
        let mut f = lock(&self.fatal);
        if f.is_none() {
            *f = Some(msg);
        }
        self.failed.store(true, Relaxed);
        self.stop.store(true, Relaxed);
    }

    /// Cheap check (no lock) for hot loops.
    pub fn failure_flag(&self) -> bool {
        self.failed.load(Relaxed)
    }

    pub fn failure(&self) -> Option<String> {
        lock(&self.fatal).clone()
    }

    /// Takes budget for a request of `msgs` messages; false once the count target is spent.
    pub fn take_budget(&self, msgs: u64) -> bool {
        match self.count_target {
            Some(t) if self.recording() => self.issued_msgs.fetch_add(msgs, Relaxed) < t,
            _ => true,
        }
    }

    pub fn record_ok(&self, msgs: u64, bytes: u64, done_ns: u64) {
        self.ok_msgs.fetch_add(msgs, Relaxed);
        self.ok_bytes.fetch_add(bytes, Relaxed);
        self.ok_reqs.fetch_add(1, Relaxed);
        self.last_done_ns.fetch_max(done_ns, Relaxed);
    }

    /// Counts a failed request; `remark` is asked for only on the first failure of a code.
    pub fn record_err(&self, code: i32, done_ns: u64, remark: impl FnOnce() -> Option<String>) {
        let first = {
            let mut e = lock(&self.errors);
            let n = e.entry(code).or_insert(0);
            *n += 1;
            *n == 1
        };
        if first {
            if let Some(r) = remark() {
                lock(&self.error_remarks).insert(code, r.chars().take(200).collect());
            }
        }
        self.last_done_ns.fetch_max(done_ns, Relaxed);
    }

    pub fn error_total(&self) -> u64 {
        lock(&self.errors).values().sum()
    }

    /// Seconds from the start of recording to the last recorded completion.
    pub fn elapsed_s(&self) -> f64 {
        let start = self.record_start_ns.load(Relaxed);
        let end = self.last_done_ns.load(Relaxed).max(start);
        (end - start) as f64 / 1e9
    }
}

/// Prints one progress line per call with the rate since the previous call.
pub struct Progress {
    label: &'static str,
    last_ns: u64,
    last_msgs: u64,
    last_bytes: u64,
}

impl Progress {
    pub fn new(label: &'static str, sh: &Shared) -> Progress {
        Progress {
            label,
            last_ns: sh.now_ns(),
            last_msgs: sh.ok_msgs.load(Relaxed),
            last_bytes: sh.ok_bytes.load(Relaxed),
        }
    }

    pub fn tick(&mut self, sh: &Shared) {
        let now = sh.now_ns();
        let msgs = sh.ok_msgs.load(Relaxed);
        let bytes = sh.ok_bytes.load(Relaxed);
        let dt = (now - self.last_ns).max(1) as f64 / 1e9;
        let h = sh.latency.merged();
        let phase = if sh.recording() {
            (now.saturating_sub(sh.record_start_ns.load(Relaxed))) as f64 / 1e9
        } else {
            -1.0
        };
        let phase = if phase < 0.0 {
            "warmup".to_owned()
        } else {
            format!("{phase:6.1}s")
        };
        eprintln!(
            "[{} {phase}] {:>9.0} msg/s {:>8.1} MB/s  p50 {:>8.1} us  p99 {:>8.1} us  errors {}",
            self.label,
            (msgs - self.last_msgs) as f64 / dt,
            (bytes - self.last_bytes) as f64 / dt / 1e6,
            h.value_at_quantile(0.5) as f64 / 1e3,
            h.value_at_quantile(0.99) as f64 / 1e3,
            sh.error_total(),
        );
        self.last_ns = now;
        self.last_msgs = msgs;
        self.last_bytes = bytes;
    }
}

/// utime + stime of a process in seconds, from /proc/PID/stat.
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses; fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime and stime are fields 14 and 15.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// CPU% (100 = one core) of a process between two samples.
pub struct CpuMeter {
    pid: String,
    start: Option<f64>,
    at: Instant,
}

impl CpuMeter {
    pub fn start(pid: &str) -> CpuMeter {
        CpuMeter {
            pid: pid.to_owned(),
            start: cpu_seconds(pid),
            at: Instant::now(),
        }
    }

    pub fn percent(&self) -> Option<f64> {
        let end = cpu_seconds(&self.pid)?;
        let wall = self.at.elapsed().as_secs_f64();
        Some(100.0 * (end - self.start?) / wall.max(1e-9))
    }
}

/// The whole machine's (steal, total) jiffies from /proc/stat's first line.
fn host_jiffies() -> Option<(u64, u64)> {
    parse_host_jiffies(&std::fs::read_to_string("/proc/stat").ok()?)
}

fn parse_host_jiffies(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let f: Vec<u64> = line
        .split_whitespace()
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    (f.len() == 8).then(|| (f[7], f.iter().sum()))
}

/// CPU time the hypervisor gave to other guests while a run measured (steal), as a percentage
/// of all vCPU time: a loaded host shows here, so a slow run can be told from a slow broker.
pub struct StealMeter {
    start: Option<(u64, u64)>,
}

impl StealMeter {
    pub fn start() -> StealMeter {
        StealMeter {
            start: host_jiffies(),
        }
    }

    pub fn percent(&self) -> Option<f64> {
        let (s0, t0) = self.start?;
        let (s1, t1) = host_jiffies()?;
        (t1 > t0).then(|| 100.0 * s1.saturating_sub(s0) as f64 / (t1 - t0) as f64)
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
    pub samples: u64,
}

impl Percentiles {
    /// In microseconds.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        let us = |v: u64| (v as f64 / 100.0).round() / 10.0;
        Percentiles {
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            mean: (h.mean() / 100.0).round() / 10.0,
            samples: h.len(),
        }
    }
}

/// Everything a run reports; `--json` prints it as one line.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub mode: String,
    pub label: Option<String>,
    pub flush_mode: String,
    pub broker: String,
    pub topic: String,
    pub queues: u32,
    pub size: usize,
    pub connections: usize,
    pub inflight: usize,
    pub batch: Option<usize>,
    pub rate: Option<f64>,
    /// Measured seconds (warm-up excluded).
    pub duration_s: f64,
    /// Messages acknowledged (send/batch), consumed (pull/e2e) or written (oneway).
    pub count: u64,
    pub requests: u64,
    /// Failed requests by response code (a failed batch counts once).
    pub errors: BTreeMap<i32, u64>,
    /// The broker's remark on the first failure of each code.
    pub error_remarks: BTreeMap<i32, String>,
    pub system_busy: u64,
    pub error_total: u64,
    pub throughput_msgs: f64,
    /// Message-body megabytes (10^6 bytes) per second.
    pub throughput_mb_s: f64,
    /// Request latency (send/batch/pull) or end-to-end latency (e2e), in µs.
    pub latency_us: Percentiles,
    /// Fixed-rate sends only: latency from the actual send (not corrected).
    pub service_latency_us: Option<Percentiles>,
    /// Fixed-rate sends only: how late the generator sent behind its schedule.
    pub send_lag_us: Option<Percentiles>,
    /// `--lag-probe`: how long until a slave acknowledged the master's end of a moment.
    pub replication_lag_us: Option<Percentiles>,
    /// `--lag-probe`: how late a thread of the load generator wakes from a 1 ms sleep.
    pub wake_delay_us: Option<Percentiles>,
    /// e2e: send acknowledgements and their latency.
    pub produced: Option<u64>,
    pub produce_latency_us: Option<Percentiles>,
    /// Oneway: messages the broker stored (GET_MAX_OFFSET delta) of those written.
    pub stored: Option<u64>,
    pub broker_cpu_pct: Option<f64>,
    pub client_cpu_pct: Option<f64>,
    /// Host CPU steal over the measured run, % of all vCPU time (`StealMeter`).
    pub host_steal_pct: Option<f64>,
    pub failure: Option<String>,
}

impl Summary {
    pub fn fill_from(&mut self, sh: &Shared) {
        self.duration_s = (sh.elapsed_s() * 1000.0).round() / 1000.0;
        self.count = sh.ok_msgs.load(Relaxed);
        self.requests = sh.ok_reqs.load(Relaxed);
        self.errors = lock(&sh.errors).clone();
        self.error_remarks = lock(&sh.error_remarks).clone();
        self.system_busy = self.errors.get(&2).copied().unwrap_or(0);
        self.error_total = self.errors.values().sum();
        let secs = self.duration_s.max(1e-9);
        self.throughput_msgs = (self.count as f64 / secs).round();
        self.throughput_mb_s =
            (sh.ok_bytes.load(Relaxed) as f64 / secs / 1e6 * 100.0).round() / 100.0;
        self.latency_us = Percentiles::of(&sh.latency.merged());
        let service = sh.service.merged();
        if !service.is_empty() {
            self.service_latency_us = Some(Percentiles::of(&service));
            self.send_lag_us = Some(Percentiles::of(&sh.lag.merged()));
        }
        self.failure = sh.failure();
    }

    pub fn print_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let l = &self.latency_us;
        writeln!(
            out,
            "{} {} against {} ({}): topic {} x{} queues, {} B bodies, {} conn x {} in flight{}{}",
            self.label.as_deref().unwrap_or("-"),
            self.mode,
            self.broker,
            self.flush_mode,
            self.topic,
            self.queues,
            self.size,
            self.connections,
            self.inflight,
            self.batch
                .map(|b| format!(", batch {b}"))
                .unwrap_or_default(),
            self.rate
                .map(|r| format!(", rate {r} msg/s"))
                .unwrap_or_default(),
        )?;
        writeln!(
            out,
            "  count {} in {:.3} s: {:.0} msg/s, {:.2} MB/s; errors {} (SYSTEM_BUSY {}) {:?}",
            self.count,
            self.duration_s,
            self.throughput_msgs,
            self.throughput_mb_s,
            self.error_total,
            self.system_busy,
            self.errors
        )?;
        if l.samples > 0 {
            writeln!(
                out,
                "  latency us: p50 {} p90 {} p99 {} p99.9 {} max {} (n={})",
                l.p50, l.p90, l.p99, l.p999, l.max, l.samples
            )?;
        }
        if let (Some(s), Some(g)) = (&self.service_latency_us, &self.send_lag_us) {
            writeln!(
                out,
                "  uncorrected us: p50 {} p99 {} p99.9 {}; sender lag us: p50 {} p99 {}",
                s.p50, s.p99, s.p999, g.p50, g.p99
            )?;
        }
        if let Some(r) = &self.replication_lag_us {
            writeln!(
                out,
                "  replication lag us: p50 {} p99 {} p99.9 {} max {} (n={})",
                r.p50, r.p99, r.p999, r.max, r.samples
            )?;
        }
        if let Some(w) = &self.wake_delay_us {
            writeln!(
                out,
                "  thread wake-up delay us: p50 {} p99 {} p99.9 {} max {}",
                w.p50, w.p99, w.p999, w.max
            )?;
        }
        if let (Some(n), Some(p)) = (self.produced, &self.produce_latency_us) {
            writeln!(
                out,
                "  produced {n}; send latency us: p50 {} p99 {}",
                p.p50, p.p99
            )?;
        }
        for (code, r) in &self.error_remarks {
            writeln!(out, "  first remark for code {code}: {r}")?;
        }
        if let Some(s) = self.stored {
            writeln!(out, "  stored by the broker: {s} of {} written", self.count)?;
        }
        let pct = |v: Option<f64>| v.map(|v| format!("{v:.0}%")).unwrap_or("n/a".into());
        let steal = self
            .host_steal_pct
            .map(|v| format!("{v:.1}%"))
            .unwrap_or("n/a".into());
        writeln!(
            out,
            "  CPU: broker {}, load generator {}, host steal {steal}",
            pct(self.broker_cpu_pct),
            pct(self.client_cpu_pct)
        )?;
        if let Some(f) = &self.failure {
            writeln!(out, "  RUN FAILED: {f}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_and_errors() {
        let sh = Shared::new(Instant::now(), Some(10));
        // Not recording yet: warm-up never spends the budget.
        assert!(sh.take_budget(100));
        sh.start_recording();
        assert!(sh.take_budget(4));
        assert!(sh.take_budget(4));
        assert!(sh.take_budget(4)); // 8 < 10: the last request may overshoot the target
        assert!(!sh.take_budget(4));
        sh.record_err(2, 5, || Some("busy".into()));
        sh.record_err(2, 6, || {
            panic!("remark is only read for the first error of a code")
        });
        sh.record_err(17, 7, || None);
        let mut s = Summary::default();
        s.fill_from(&sh);
        assert_eq!((s.system_busy, s.error_total), (2, 3));
        assert_eq!(s.error_remarks.get(&2).map(String::as_str), Some("busy"));
        sh.fail("first".into());
        sh.fail("second".into());
        assert_eq!(sh.failure().as_deref(), Some("first"));
        assert!(sh.stopped());
    }

    #[test]
    fn host_jiffies_take_steal_and_the_first_eight_fields() {
        let stat = "cpu  100 2 30 800 40 0 8 20 50 0\ncpu0 50 1 15 400 20 0 4 10 25 0\n";
        assert_eq!(parse_host_jiffies(stat), Some((20, 1000)));
        assert_eq!(parse_host_jiffies("cpu0 1 2 3 4 5 6 7 8\n"), None);
        assert_eq!(parse_host_jiffies("cpu  1 2 3\n"), None);
    }

    #[test]
    fn host_steal_is_a_percentage() {
        let m = StealMeter::start();
        let spin = Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(spin.elapsed());
        }
        let p = m
            .percent()
            .expect("/proc/stat readable and the clock advanced");
        assert!((0.0..=100.0).contains(&p), "{p}");
    }

    #[test]
    fn cpu_of_self_is_readable() {
        let c = cpu_seconds("self").expect("/proc/self/stat");
        assert!(c >= 0.0);
        assert!(cpu_seconds("999999999").is_none());
    }

    #[test]
    fn percentiles_in_us() {
        let mut h = new_hist();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let p = Percentiles::of(&h);
        assert!((p.p50 - 500.0).abs() < 1.0, "{}", p.p50);
        assert!((p.p99 - 990.0).abs() < 1.0, "{}", p.p99);
        assert!((p.max - 1000.0).abs() < 1.0);
        assert_eq!(p.samples, 1000);
    }
}
