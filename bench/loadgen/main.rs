//! ringmq-bench: a lean RocketMQ remoting load generator (send, batch, oneway, pull, e2e) that
//! speaks the wire protocol directly through ringmq's own codec, so it measures any
//! wire-compatible broker (ringmq, rocketmq-rust, Apache RocketMQ) rather than a client library.
//! `ringmq-bench plot` draws PNG charts of the JSON lines `scripts/bench-peer.sh` collects.
//!
//! This file owns the command line and the run orchestration (route, phases, warm-up,
//! duration/count, progress, summary). Per-message work lives in `send` and `pull`, which use
//! pre-built requests (`template`), plain threads and blocking sockets with timeouts (`wire`).
//! Invariants: nothing is measured during warm-up; every phase ends by duration, count, a
//! stall timeout or a fatal error, so a run never hangs; exit code 0 = clean run, 1 = the run
//! failed part-way (summary still printed), 2 = it could not start.

mod grpc;
mod lag;
mod link;
mod pacer;
mod plot;
mod pop;
mod pop_latency;
mod pull;
mod record;
mod route;
mod send;
mod sink;
mod stats;
mod template;
mod wire;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};

use crate::pull::PullPlan;
use crate::route::Target;
use crate::send::SendPlan;
use crate::stats::{lock, CpuMeter, Percentiles, Progress, Shared, StealMeter, Summary};
use crate::template::{SendKind, TemplateSpec};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// SEND_MESSAGE_V2, K in flight per connection (or --rate).
    Send,
    /// SEND_BATCH_MESSAGE with --batch messages per request.
    Batch,
    /// SEND_MESSAGE_V2 oneway; afterwards GET_MAX_OFFSET shows how many were stored.
    Oneway,
    /// Drain a backlog (optionally --prefill it first) with long-polling PULL_MESSAGE.
    Pull,
    /// Drain a backlog (optionally --prefill it first) with POP_MESSAGE over every queue
    /// (--pull-batch per pop, --inflight per connection), one BATCH_ACK per answer.
    Pop,
    /// --count rounds of a parked pop answered by a send: the time from the send to the pop's
    /// answer.
    PopWake,
    /// --count messages popped with --invisible-ms and not acked: how late each comes back
    /// past its invisible time.
    PopRevive,
    /// Producer at --rate plus a long-polling consumer; latency = receipt - send time.
    E2e,
    /// RocketMQ 5's SendMessage on the gRPC endpoint (--grpc), one message per call.
    GrpcSend,
    /// Drain a backlog (--prefill over Remoting) with gRPC ReceiveMessage + AckMessage.
    GrpcReceive,
    /// A null broker on --listen that acknowledges every send (measures this generator).
    Sink,
    /// PNG charts (throughput, latency percentiles) of bench-peer.sh JSON lines (--input).
    Plot,
}

#[derive(Parser, Debug, Clone)]
#[command(
    name = "ringmq-bench",
    about = "Load generator for RocketMQ remoting brokers (ringmq, rocketmq-rust, Apache RocketMQ)"
)]
struct Args {
    #[arg(value_enum)]
    mode: Mode,
    /// Name server: the topic route comes from GET_ROUTEINFO_BY_TOPIC (created if missing).
    #[arg(long)]
    namesrv: Option<String>,
    /// Broker address, bypassing the name server (the topic is created/updated on it).
    #[arg(long)]
    broker: Option<String>,
    /// send/batch: also measure the replication lag to the master's slaves (GET_BROKER_HA_STATUS
    /// polled during the measured run; see `lag`).
    #[arg(long)]
    lag_probe: bool,
    /// e2e: the consumer pulls from this broker instead (a slave with slaveReadEnable, say);
    /// the latency then includes replication.
    #[arg(long)]
    pull_broker: Option<String>,
    #[arg(long, default_value = "BenchTopic")]
    topic: String,
    /// Queues when the topic is created (an existing topic keeps its own).
    #[arg(long, default_value_t = 8)]
    queues: u32,
    /// Message body bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// TCP connections (producer connections in e2e).
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 1)]
    inflight: usize,
    /// Measured seconds (default 10 unless --count is given).
    #[arg(long)]
    duration: Option<f64>,
    /// Measured messages (sends acknowledged / messages consumed).
    #[arg(long)]
    count: Option<u64>,
    /// Unmeasured seconds before measuring.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Messages per SEND_BATCH_MESSAGE (batch mode and the pull prefill).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Fixed total rate in msg/s (send, oneway, e2e); latency is measured from the intended
    /// send time, correcting for coordinated omission.
    #[arg(long)]
    rate: Option<f64>,
    /// Pull mode: first store this many messages with batch sends, then drain them.
    #[arg(long, default_value_t = 0)]
    prefill: u64,
    /// Messages per send request in the pull prefill (default: --batch). With 1, single sends
    /// go queue after queue, so each queue's records lie apart in the commit log, as producers
    /// that spread messages over queues leave them; with a batch they lie together.
    #[arg(long)]
    prefill_batch: Option<usize>,
    /// Print the summary as one JSON line on stdout (the text goes to stderr).
    #[arg(long)]
    json: bool,
    /// Broker process id: report its CPU% (100% = one core) over the measured run.
    #[arg(long)]
    broker_pid: Option<u32>,
    /// Only recorded in the output (the broker decides its flush mode).
    #[arg(long, default_value = "ASYNC_FLUSH")]
    flush_mode: String,
    /// Free-form name of the system under test, recorded in the output.
    #[arg(long)]
    label: Option<String>,
    #[arg(long, default_value = "ringmq_bench")]
    group: String,
    /// Seconds without a response (beyond the long-poll time) before the run fails.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Long-polling suspend time of pulls, ms.
    #[arg(long, default_value_t = 5000)]
    poll_ms: i64,
    /// maxMsgNums of each pull.
    #[arg(long, default_value_t = 32)]
    pull_batch: i32,
    /// POP modes: the invisible time of each pop, ms.
    #[arg(long, default_value_t = 60_000)]
    invisible_ms: i64,
    /// Consumer connections (pull mode uses --connections).
    #[arg(long, default_value_t = 1)]
    consumers: usize,
    /// Do not put a UNIQ_KEY property on messages (the broker then generates one).
    #[arg(long)]
    no_uniq_key: bool,
    /// Sign every request to brokers as this user (RocketMQ's AccessKey/Signature, as Java's
    /// AclClientRPCHook does). Send and batch modes with --no-uniq-key only: each request is
    /// signed once, when its template is built.
    #[arg(long, requires = "secret_key")]
    access_key: Option<String>,
    /// The secret key --access-key signs with.
    #[arg(long, requires = "access_key")]
    secret_key: Option<String>,
    /// gRPC modes: the endpoint (default: the broker's host, port 8081).
    #[arg(long)]
    grpc: Option<String>,
    /// Sink mode: address to listen on.
    #[arg(long, default_value = "127.0.0.1:19876")]
    listen: String,
    /// No per-second progress lines.
    #[arg(long)]
    quiet: bool,
    /// Plot mode: the JSON lines file (raw.jsonl of bench-peer.sh).
    #[arg(long)]
    input: Option<std::path::PathBuf>,
    /// Plot mode: where the PNGs go.
    #[arg(long, default_value = "bench/plots")]
    out_dir: std::path::PathBuf,
    /// Plot mode: file name prefix (default: the input's file stem).
    #[arg(long)]
    prefix: Option<String>,
    /// Speak TLS to the name server and the broker (their `tls.server.mode` permissive or
    /// enforcing); the broker's certificate is not verified.
    #[arg(long)]
    tls: bool,
    /// Plot mode: TrueType font for the text.
    #[arg(long, default_value = plot::DEFAULT_FONT)]
    font: std::path::PathBuf,
}

fn main() {
    let args = Args::parse();
    if args.tls {
        link::enable_tls();
    }
    if args.mode == Mode::Plot {
        std::process::exit(run_plot(&args));
    }
    if matches!(args.mode, Mode::PopWake | Mode::PopRevive) {
        std::process::exit(run_pop_latency(&args));
    }
    if args.mode == Mode::Sink {
        if let Err(e) = sink::serve(&args.listen) {
            eprintln!("ringmq-bench: {e}");
            std::process::exit(2);
        }
        return;
    }
    let code = match run(&args) {
        Ok(summary) => {
            let mut text = Vec::new();
            let _ = summary.print_text(&mut text);
            if args.json {
                eprint!("{}", String::from_utf8_lossy(&text));
                println!(
                    "{}",
                    serde_json::to_string(&summary).expect("summary serializes")
                );
            } else {
                print!("{}", String::from_utf8_lossy(&text));
            }
            i32::from(summary.failure.is_some())
        }
        Err(e) => {
            eprintln!("ringmq-bench: {e}");
            2
        }
    };
    std::process::exit(code);
}

fn run_plot(a: &Args) -> i32 {
    let Some(input) = &a.input else {
        eprintln!("ringmq-bench: plot needs --input FILE.jsonl");
        return 2;
    };
    match plot::plot_file(input, &a.out_dir, a.prefix.as_deref(), &a.font) {
        Ok(paths) => {
            for p in paths {
                println!("{}", p.display());
            }
            0
        }
        Err(e) => {
            eprintln!("ringmq-bench plot: {e}");
            1
        }
    }
}

fn validate(a: &Args) -> Result<(), String> {
    if a.connections == 0 || a.consumers == 0 || a.inflight == 0 || a.batch == 0 {
        return Err("--connections, --consumers, --inflight and --batch must be >= 1".into());
    }
    if a.prefill_batch == Some(0) {
        return Err("--prefill-batch must be >= 1".into());
    }
    if a.inflight > 65_536 {
        return Err("--inflight above 65536 is not supported".into());
    }
    if a.queues == 0 {
        return Err("--queues must be >= 1".into());
    }
    if a.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err("--rate must be a positive number".into());
    }
    if a.mode == Mode::E2e && (a.rate.is_none() || a.size < 16) {
        return Err("e2e needs --rate and --size >= 16 (the body carries the send time)".into());
    }
    if a.mode == Mode::Batch && a.rate.is_some() {
        return Err("--rate is for send, oneway and e2e".into());
    }
    if a.access_key.is_some() && (!matches!(a.mode, Mode::Send | Mode::Batch) || !a.no_uniq_key) {
        return Err(
            "--access-key signs each request once: it needs send or batch mode and --no-uniq-key"
                .into(),
        );
    }
    Ok(())
}

/// The broker and queues the run works on (the name server's route, or --broker).
fn target_of(a: &Args, timeout: Duration) -> Result<Target, String> {
    route::resolve(
        a.namesrv.as_deref(),
        a.broker.as_deref(),
        &a.topic,
        a.queues,
        timeout,
    )
}

fn run(a: &Args) -> Result<Summary, String> {
    wire::sign_calls_with(credentials(a));
    validate(a)?;
    let timeout = Duration::from_secs_f64(a.timeout);
    let target = target_of(a, timeout)?;
    let mut s = Summary {
        mode: format!("{:?}", a.mode).to_lowercase(),
        label: a.label.clone(),
        flush_mode: a.flush_mode.clone(),
        broker: target.broker.clone(),
        topic: a.topic.clone(),
        queues: target.queues,
        size: a.size,
        connections: a.connections,
        inflight: a.inflight,
        batch: (a.mode == Mode::Batch).then_some(a.batch),
        rate: a.rate,
        ..Summary::default()
    };
    match a.mode {
        Mode::Send | Mode::Batch | Mode::Oneway => run_send(a, &target, &mut s)?,
        Mode::Pull => run_pull(a, &target, &mut s)?,
        Mode::Pop => run_pop(a, &target, &mut s)?,
        Mode::E2e => run_e2e(a, &target, &mut s)?,
        Mode::GrpcSend | Mode::GrpcReceive => {
            grpc::run_mode(a, &target, &mut s, a.mode == Mode::GrpcReceive)?
        }
        Mode::Sink | Mode::Plot | Mode::PopWake | Mode::PopRevive => {
            unreachable!("sink, plot and the pop probes are handled before run")
        }
    }
    Ok(s)
}

/// The access key and secret key requests are signed with, if any.
fn credentials(a: &Args) -> Option<(String, String)> {
    a.access_key.clone().zip(a.secret_key.clone())
}

fn send_plan(a: &Args, t: &Target, kind: SendKind) -> SendPlan {
    SendPlan {
        broker: t.broker.clone(),
        spec: TemplateSpec {
            kind,
            topic: a.topic.clone(),
            group: format!("{}_producer", a.group),
            body_size: a.size,
            uniq_key: !a.no_uniq_key,
            uniq_prefix: String::new(),
            credentials: credentials(a),
        },
        queues: t.queues,
        connections: a.connections,
        inflight: a.inflight,
        rate: a.rate,
        stamp_nonce: None,
        timeout: Duration::from_secs_f64(a.timeout),
    }
}

fn run_send(a: &Args, t: &Target, s: &mut Summary) -> Result<(), String> {
    let kind = match a.mode {
        Mode::Batch => SendKind::Batch(a.batch),
        Mode::Oneway => SendKind::Oneway,
        _ => SendKind::Single,
    };
    let plan = send_plan(a, t, kind);
    let before = if kind == SendKind::Oneway {
        Some(route::queue_offsets(
            &t.broker,
            &a.topic,
            t.queues,
            false,
            plan.timeout,
        )?)
    } else {
        None
    };
    let sh = Shared::new(Instant::now(), a.count);
    // Oneway sends during a warm-up would be stored but not counted: no warm-up there.
    let warmup = if kind == SendKind::Oneway {
        0.0
    } else {
        a.warmup
    };
    let d = Drive {
        warmup,
        duration: duration_of(a),
        stop_at: None,
        stall: None,
        progress: (!a.quiet).then_some(a_label(a.mode)),
        follower: None,
    };
    let stop_probe = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probe = a.lag_probe.then(|| {
        lag::start(
            &t.broker,
            Duration::from_secs_f64(warmup),
            plan.timeout,
            stop_probe.clone(),
        )
    });
    let wake = a
        .lag_probe
        .then(|| lag::start_wake_probe(Duration::from_secs_f64(warmup), stop_probe.clone()));
    let cpu = d.run(&sh, || send::start(&plan, &sh), a.broker_pid);
    stop_probe.store(true, Relaxed);
    if let Some(w) = wake {
        let hist = w
            .join()
            .map_err(|_| "the wake probe panicked".to_string())?;
        s.wake_delay_us = Some(Percentiles::of(&hist));
    }
    if let Some(p) = probe {
        let hist = p
            .join()
            .map_err(|_| "the lag probe panicked".to_string())??;
        s.replication_lag_us = Some(Percentiles::of(&hist));
    }
    let cpu = cpu?;
    s.fill_from(&sh);
    (s.broker_cpu_pct, s.client_cpu_pct, s.host_steal_pct) = cpu;
    if let Some(before) = before {
        let after = settled_offsets(&t.broker, &a.topic, t.queues, plan.timeout)?;
        s.stored = Some(
            after
                .iter()
                .zip(&before)
                .map(|(a, b)| (a - b).max(0) as u64)
                .sum(),
        );
    }
    Ok(())
}

/// Stores --prefill messages with batch sends first (when asked); returns where each queue's
/// backlog starts.
fn prefill(a: &Args, t: &Target) -> Result<Vec<i64>, String> {
    let timeout = Duration::from_secs_f64(a.timeout);
    if a.prefill == 0 {
        return route::queue_offsets(&t.broker, &a.topic, t.queues, true, timeout);
    }
    let offs = route::queue_offsets(&t.broker, &a.topic, t.queues, false, timeout)?;
    let kind = match a.prefill_batch.unwrap_or(a.batch) {
        1 => SendKind::Single,
        b => SendKind::Batch(b),
    };
    let mut plan = send_plan(a, t, kind);
    plan.inflight = a.inflight.max(16);
    plan.rate = None;
    let sh = Shared::new(Instant::now(), Some(a.prefill));
    let d = Drive {
        warmup: 0.0,
        duration: None,
        stop_at: None,
        stall: None,
        progress: (!a.quiet).then_some("prefill"),
        follower: None,
    };
    d.run(&sh, || send::start(&plan, &sh), None)?;
    if let Some(f) = sh.failure() {
        return Err(format!("prefill failed: {f}"));
    }
    eprintln!(
        "prefill: {} messages in {:.2} s ({:.0} msg/s), errors {}",
        sh.ok_msgs.load(Relaxed),
        sh.elapsed_s(),
        sh.ok_msgs.load(Relaxed) as f64 / sh.elapsed_s().max(1e-9),
        sh.error_total()
    );
    Ok(offs)
}

fn run_pull(a: &Args, t: &Target, s: &mut Summary) -> Result<(), String> {
    let timeout = Duration::from_secs_f64(a.timeout);
    let start_offsets = prefill(a, t)?;
    let target = a.count.or((a.prefill > 0).then_some(a.prefill));
    let sh = Shared::new(Instant::now(), None);
    let plan = PullPlan {
        broker: t.broker.clone(),
        topic: a.topic.clone(),
        group: a.group.clone(),
        connections: a.connections,
        max_msgs: a.pull_batch,
        suspend_ms: a.poll_ms,
        timeout,
        e2e_nonce: None,
    };
    let d = drain(a, target, "pull");
    let cpu = d.run(
        &sh,
        || pull::start(&plan, &start_offsets, &sh),
        a.broker_pid,
    )?;
    s.fill_from(&sh);
    s.connections = plan.connections.min(start_offsets.len());
    // One pull in flight per queue.
    s.inflight = start_offsets.len().div_ceil(s.connections.max(1));
    (s.broker_cpu_pct, s.client_cpu_pct, s.host_steal_pct) = cpu;
    Ok(())
}

/// How a drain (pull or pop) runs: until `target` messages (or the duration), failing when
/// none arrives for a poll time twice over and the timeout.
fn drain(a: &Args, target: Option<u64>, label: &'static str) -> Drive {
    let stall =
        Duration::from_secs_f64(a.timeout) + Duration::from_millis(2 * a.poll_ms.max(0) as u64);
    Drive {
        warmup: 0.0,
        duration: if target.is_some() {
            a.duration
        } else {
            duration_of(a)
        },
        stop_at: target,
        stall: target.map(|_| stall),
        progress: (!a.quiet).then_some(label),
        follower: None,
    }
}

/// Drains the backlog with pops of --pull-batch over every queue, each answer batch-acked.
fn run_pop(a: &Args, t: &Target, s: &mut Summary) -> Result<(), String> {
    let timeout = Duration::from_secs_f64(a.timeout);
    prefill(a, t)?;
    let target = a.count.or((a.prefill > 0).then_some(a.prefill));
    let sh = Shared::new(Instant::now(), None);
    let plan = pop::PopPlan {
        broker: t.broker.clone(),
        topic: a.topic.clone(),
        group: a.group.clone(),
        connections: a.connections,
        inflight: a.inflight,
        max_msgs: a.pull_batch,
        poll_ms: a.poll_ms,
        invisible_ms: a.invisible_ms,
        timeout,
    };
    let d = drain(a, target, "pop");
    let cpu = d.run(&sh, || pop::start(&plan, &sh), a.broker_pid)?;
    s.fill_from(&sh);
    (s.broker_cpu_pct, s.client_cpu_pct, s.host_steal_pct) = cpu;
    Ok(())
}

/// pop-wake and pop-revive: one JSON line of percentiles (ms).
fn run_pop_latency(a: &Args) -> i32 {
    let timeout = Duration::from_secs_f64(a.timeout);
    let count = a.count.unwrap_or(200);
    let run = || -> Result<hdrhistogram::Histogram<u64>, String> {
        let t = target_of(a, timeout)?;
        match a.mode {
            Mode::PopWake => pop_latency::wake(&t.broker, &a.topic, &a.group, count, timeout),
            _ => pop_latency::revive(
                &t.broker,
                &a.topic,
                &a.group,
                count,
                a.invisible_ms,
                timeout,
            ),
        }
    };
    match run() {
        Ok(h) => {
            let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
            let line = serde_json::json!({
                "mode": a_label(a.mode), "count": h.len(), "p50_ms": ms(0.5), "p90_ms": ms(0.9),
                "p99_ms": ms(0.99), "max_ms": h.max() as f64 / 1000.0,
            });
            println!("{line}");
            0
        }
        Err(e) => {
            eprintln!("ringmq-bench: {e}");
            1
        }
    }
}

fn run_e2e(a: &Args, t: &Target, s: &mut Summary) -> Result<(), String> {
    let timeout = Duration::from_secs_f64(a.timeout);
    let base = Instant::now();
    let nonce = (base.elapsed().as_nanos() as u64) ^ (u64::from(std::process::id()) << 32) ^ 0x5EED;
    let pull_from = a.pull_broker.clone().unwrap_or_else(|| t.broker.clone());
    let offsets = route::queue_offsets(&pull_from, &a.topic, t.queues, false, timeout)?;
    let cons = Shared::new(base, None);
    let pplan = PullPlan {
        broker: pull_from,
        topic: a.topic.clone(),
        group: a.group.clone(),
        connections: a.consumers,
        max_msgs: a.pull_batch,
        suspend_ms: a.poll_ms,
        timeout,
        e2e_nonce: Some(nonce),
    };
    let mut handles = pull::start(&pplan, &offsets, &cons)?;
    let prod = Shared::new(base, a.count);
    let mut splan = send_plan(a, t, SendKind::Single);
    splan.stamp_nonce = Some(nonce);
    // Enough window that the fixed rate, not the window, paces the producer.
    splan.inflight = a.inflight.max(1024);
    // The producer phase decides the measured time; the consumer records from the same
    // instant and counts only messages stamped after it, then drains what was acknowledged.
    let d = Drive {
        warmup: a.warmup,
        duration: duration_of(a),
        stop_at: None,
        stall: None,
        progress: (!a.quiet).then_some("e2e-produce"),
        follower: Some(cons.clone()),
    };
    let cpu = d.run(&prod, || send::start(&splan, &prod), a.broker_pid);
    let cpu = match cpu {
        Ok(c) => c,
        Err(e) => {
            cons.stop.store(true, Relaxed);
            return Err(e);
        }
    };
    let produced = prod.ok_msgs.load(Relaxed);
    let drain_deadline = Instant::now() + timeout;
    while cons.ok_msgs.load(Relaxed) < produced
        && Instant::now() < drain_deadline
        && !cons.failure_flag()
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    cons.stop.store(true, Relaxed);
    for h in handles.drain(..) {
        let _ = h.join();
    }
    s.fill_from(&cons);
    s.connections = a.connections;
    s.produced = Some(produced);
    s.produce_latency_us = Some(Percentiles::of(&prod.latency.merged()));
    s.send_lag_us = Some(Percentiles::of(&prod.lag.merged()));
    for (code, n) in lock(&prod.errors).iter() {
        *s.errors.entry(*code).or_insert(0) += n;
    }
    s.error_total = s.errors.values().sum();
    s.system_busy = s.errors.get(&2).copied().unwrap_or(0);
    if s.failure.is_none() {
        s.failure = prod.failure();
    }
    if s.failure.is_none() && s.count < produced {
        s.failure = Some(format!(
            "consumer received {} of {produced} acknowledged messages within {timeout:?}",
            s.count
        ));
    }
    // CPU over the measured producer phase.
    (s.broker_cpu_pct, s.client_cpu_pct, s.host_steal_pct) = cpu;
    Ok(())
}

fn a_label(m: Mode) -> &'static str {
    match m {
        Mode::Send => "send",
        Mode::Batch => "batch",
        Mode::Oneway => "oneway",
        Mode::Pull => "pull",
        Mode::Pop => "pop",
        Mode::PopWake => "pop-wake",
        Mode::PopRevive => "pop-revive",
        Mode::E2e => "e2e",
        Mode::GrpcSend => "grpc-send",
        Mode::GrpcReceive => "grpc-receive",
        Mode::Sink => "sink",
        Mode::Plot => "plot",
    }
}

fn duration_of(a: &Args) -> Option<f64> {
    match (a.duration, a.count) {
        (Some(d), _) => Some(d),
        (None, Some(_)) => None,
        (None, None) => Some(10.0),
    }
}

/// Reads max offsets until two reads 500 ms apart agree (oneway: the broker may still be
/// storing what it buffered), at most 10 s.
fn settled_offsets(
    broker: &str,
    topic: &str,
    queues: u32,
    timeout: Duration,
) -> Result<Vec<i64>, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = route::queue_offsets(broker, topic, queues, false, timeout)?;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = route::queue_offsets(broker, topic, queues, false, timeout)?;
        if now == last || Instant::now() > deadline {
            return Ok(now);
        }
        last = now;
    }
}

/// How one phase is run from the main thread.
struct Drive {
    warmup: f64,
    duration: Option<f64>,
    /// Stop once this many messages were recorded (pull).
    stop_at: Option<u64>,
    /// Fail when no message was recorded for this long (pull drains).
    stall: Option<Duration>,
    progress: Option<&'static str>,
    /// Starts recording at the same instant as the driven phase (the e2e consumer).
    follower: Option<Arc<Shared>>,
}

/// (broker CPU%, generator CPU%, host steal%) over the measured part of a run.
type RunCpu = (Option<f64>, Option<f64>, Option<f64>);

impl Drive {
    /// Runs until the threads finish (budget spent), the duration passes, the count is
    /// reached, a stall, or a failure; returns (broker CPU%, generator CPU%, host steal%) while
    /// measuring.
    /// `start` connects and spawns the phase's threads; with no warm-up, recording starts
    /// before it so not a single request escapes the count.
    fn run(
        &self,
        sh: &Arc<Shared>,
        start: impl FnOnce() -> Result<Vec<JoinHandle<()>>, String>,
        broker_pid: Option<u32>,
    ) -> Result<RunCpu, String> {
        let started = Instant::now();
        let warm_end = started + Duration::from_secs_f64(self.warmup.max(0.0));
        let mut measuring: Option<(Instant, Option<CpuMeter>, CpuMeter, StealMeter)> = None;
        let begin = |now: Instant| {
            sh.start_recording();
            if let Some(f) = &self.follower {
                f.start_recording_at(sh.record_start_ns.load(Relaxed));
            }
            let broker = broker_pid.map(|p| CpuMeter::start(&p.to_string()));
            (now, broker, CpuMeter::start("self"), StealMeter::start())
        };
        if self.warmup <= 0.0 {
            measuring = Some(begin(started));
        }
        let handles = start()?;
        let mut progress = self.progress.map(|l| Progress::new(l, sh));
        let mut next_tick = started + Duration::from_secs(1);
        let (mut last_count, mut last_change) = (0u64, Instant::now());
        loop {
            let now = Instant::now();
            if measuring.is_none() && now >= warm_end {
                measuring = Some(begin(now));
            }
            if let Some((from, _, _, _)) = &measuring {
                if self
                    .duration
                    .is_some_and(|d| now.duration_since(*from).as_secs_f64() >= d)
                {
                    sh.stop.store(true, Relaxed);
                }
                let n = sh.ok_msgs.load(Relaxed);
                if self.stop_at.is_some_and(|t| n >= t) {
                    sh.stop.store(true, Relaxed);
                }
                if n != last_count {
                    (last_count, last_change) = (n, now);
                }
                if let Some(stall) = self.stall {
                    if !sh.stopped() && now.duration_since(last_change) > stall {
                        sh.fail(format!("no message arrived for {stall:?} ({n} so far)"));
                    }
                }
            }
            if handles.iter().all(|h| h.is_finished()) {
                break;
            }
            if now >= next_tick {
                if let Some(p) = progress.as_mut() {
                    p.tick(sh);
                }
                next_tick += Duration::from_secs(1);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for h in handles {
            if h.join().is_err() {
                sh.fail("a worker thread panicked".to_owned());
            }
        }
        Ok(match measuring {
            Some((_, broker, me, steal)) => (
                broker.and_then(|b| b.percent()),
                me.percent(),
                steal.percent(),
            ),
            None => (None, None, None),
        })
    }
}
