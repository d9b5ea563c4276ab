//! Client workloads C1/C2/C4: what a real RocketMQ client sees. The same shapes as ringmq-bench's
//! W1 (sync send, 1 in flight), W2 (sync send, 16 in flight) and W4 (drain a pre-filled backlog),
//! but driven by the unmodified crates.io client rocketmq-client-rust 1.0.0 (DefaultMQProducer,
//! DefaultMQPushConsumer), so the figures include the client library's own cost and behaviour.
//!
//! Run against a running broker + name server (scripts/bench-peer.sh starts ringmq or the peer):
//!     cargo bench -p ringmq-bench --bench client_workloads -- c1 --namesrv 127.0.0.1:9876 --duration 10 --json
//! Output: the text summary on stderr and, with --json, one line on stdout in ringmq-bench's
//! summary shape (bench/loadgen/stats.rs, shared source) plus `client` and, for C4,
//! `first_message_s`; latency percentiles come from hdrhistogram in µs.
//!
//! Invariants: the topic is created with --queues queues on --broker before any send, so both
//! brokers serve the same queue count; nothing is recorded during warm-up (a send counts only if
//! it started after recording began); every wait has a deadline (send timeout, join deadline,
//! drain stall), so a run ends. C4 counts distinct (queue, offset) pairs, so a redelivery is not
//! throughput; it has no per-request latency (the push consumer hides its pulls), so its latency
//! has zero samples. Exit code: 0 clean, 1 the run failed part-way (summary still printed),
//! 2 it could not start.
#![recursion_limit = "256"]

// The load generator's summary, histograms and CPU meter, so both tools print one JSON shape.
// Not every item is used here, and `cargo bench` compiles its unit-test module without running it.
#[path = "loadgen/stats.rs"]
#[allow(dead_code, unused_imports)]
mod stats;
#[path = "client_tx.rs"]
mod tx;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use clap::{Parser, ValueEnum};
use rocketmq_client_rust::{
    ClientRuntime, ClientRuntimeConfig, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus,
    DefaultMQAdminExt, DefaultMQProducer, DefaultMQPushConsumer, MQPushConsumer, SendStatus,
    TelemetryHandle, TopicAdmin,
};
use rocketmq_model::common::config::TopicConfig;
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner, ScopeId};

use crate::stats::{lock, record_ns, CpuMeter, Shared, Summary};

/// Recorded in every JSON line: which client produced the figures.
const CLIENT: &str = "rocketmq-client-rust 1.0.0";
/// Error code for a client-side failure with no broker response code (timeout, no route, ...).
const CODE_CLIENT: i32 = -1;
/// Error code for a send answered with a status other than SEND_OK.
const CODE_NOT_OK: i32 = -2;
/// Messages per batch send while pre-filling C4's backlog, and batch sends in flight.
const PREFILL_BATCH: usize = 32;
const PREFILL_TASKS: usize = 16;
/// C4 fails when no new message arrives for this long once the drain started.
const DRAIN_STALL: Duration = Duration::from_secs(20);
/// The push consumer's first delivery comes after a rebalance (~1.5 s); fail if none by then.
const FIRST_MESSAGE_DEADLINE: Duration = Duration::from_secs(60);
/// Deadline for set-up steps (start, topic creation, route).
const SETUP_DEADLINE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Workload {
    /// Sync sends, one at a time (W1's shape).
    C1,
    /// Sync sends from --inflight tasks sharing one producer (W2's shape; default 16).
    C2,
    /// Pre-fill --backlog messages with batch sends, then drain them with a push consumer.
    C4,
    /// Transactional sends (prepare, then commit) from --inflight tasks (default 16): the
    /// committed-transaction rate, to set against C2 in the same run.
    C5,
    /// Prepared sends never decided (--backlog of them, answered UNKNOW on every check), then
    /// C2's plain sends while they wait and the broker's check-back scans them.
    C6,
}

#[derive(Parser, Debug)]
#[command(
    name = "client_workloads",
    about = "C1/C2/C4 through rocketmq-client-rust 1.0.0"
)]
pub struct Args {
    #[arg(value_enum)]
    workload: Workload,
    #[arg(long)]
    namesrv: String,
    /// Broker the topic is created on (UPDATE_AND_CREATE_TOPIC through the admin client).
    #[arg(long, default_value = "127.0.0.1:10911")]
    broker: String,
    #[arg(long, default_value = "BenchTopic")]
    topic: String,
    #[arg(long, default_value_t = 8)]
    queues: u32,
    /// Message body bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// Sync senders (C1: 1, C2: 16 unless given).
    #[arg(long)]
    inflight: Option<usize>,
    /// Measured seconds (C1/C2).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Unmeasured seconds first (C1/C2).
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// C4: messages pre-filled and drained.
    #[arg(long, default_value_t = 300_000)]
    backlog: u64,
    /// Send timeout, ms (the client's default is 3000).
    #[arg(long, default_value_t = 3000)]
    timeout_ms: u64,
    #[arg(long)]
    json: bool,
    /// Broker process id: its CPU% (100% = one core) over the measured run.
    #[arg(long)]
    broker_pid: Option<u32>,
    /// Recorded only.
    #[arg(long, default_value = "ASYNC_FLUSH")]
    flush_mode: String,
    #[arg(long)]
    label: Option<String>,
    #[arg(long, default_value = "client_bench")]
    group: String,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let args = Args::parse();
    if args.size == 0 || args.queues == 0 || args.inflight == Some(0) || args.backlog == 0 {
        eprintln!("client_workloads: --size, --queues, --inflight and --backlog must be >= 1");
        std::process::exit(2);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("client_workloads: tokio runtime: {e}");
            std::process::exit(2);
        }
    };
    let result = rt.block_on(run(&args));
    rt.shutdown_timeout(Duration::from_secs(2));
    let code = match result {
        Ok(out) => {
            let mut text = Vec::new();
            if let Err(e) = out.summary.print_text(&mut text) {
                eprintln!("client_workloads: formatting the summary: {e}");
            }
            eprint!("{}", String::from_utf8_lossy(&text));
            if args.json {
                println!("{}", out.json());
            }
            i32::from(out.summary.failure.is_some())
        }
        Err(e) => {
            eprintln!("client_workloads: {e}");
            2
        }
    };
    std::process::exit(code);
}

/// A finished run: the common summary plus what only the client run knows.
struct Outcome {
    summary: Summary,
    first_message_s: Option<f64>,
}

impl Outcome {
    fn json(&self) -> String {
        let mut v = serde_json::to_value(&self.summary).expect("summary serializes");
        v["client"] = CLIENT.into();
        if let Some(s) = self.first_message_s {
            v["first_message_s"] = s.into();
        }
        v.to_string()
    }
}

async fn run(a: &Args) -> Result<Outcome, String> {
    let owner = client_owner()?;
    let mut producer = start_producer(&owner, a).await?;
    create_topic(&owner, a).await?;
    wait_route(&mut producer, &a.topic).await?;
    let mut s = Summary {
        mode: format!("client-{:?}", a.workload).to_lowercase(),
        label: a.label.clone(),
        flush_mode: a.flush_mode.clone(),
        broker: a.broker.clone(),
        topic: a.topic.clone(),
        queues: a.queues,
        size: a.size,
        // The client multiplexes everything to one broker over one connection.
        connections: 1,
        ..Summary::default()
    };
    let out = match a.workload {
        Workload::C1 | Workload::C2 => {
            let default = if a.workload == Workload::C1 { 1 } else { 16 };
            s.inflight = a.inflight.unwrap_or(default);
            run_sends(a, &Sender::Plain(producer.clone()), s.inflight, &mut s).await;
            Outcome {
                summary: s,
                first_message_s: None,
            }
        }
        Workload::C4 => run_drain(a, &owner, &producer, s).await,
        Workload::C5 | Workload::C6 => {
            s.inflight = a.inflight.unwrap_or(16);
            let commit = a.workload == Workload::C5;
            let tx = Arc::new(tx::start(&owner, a, commit).await?);
            if commit {
                run_sends(a, &Sender::Tx(tx.clone()), s.inflight, &mut s).await;
            } else {
                s.label = Some(format!(
                    "{} waiting half messages; {}",
                    tx::prefill(a, &tx).await?,
                    a.label.clone().unwrap_or_default()
                ));
                run_sends(a, &Sender::Plain(producer.clone()), s.inflight, &mut s).await;
            }
            Outcome {
                summary: s,
                first_message_s: None,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), producer.shutdown()).await;
    Ok(out)
}

/// The client library's runtime with raised blocking-lane limits: with the defaults a push
/// consumer on 2 cores rejects consume tasks and stalls.
fn client_owner() -> Result<RuntimeOwner, String> {
    let mut config = RuntimeConfig {
        thread_name: "bench-client".to_string(),
        ..Default::default()
    };
    config.blocking_lane_policies.metadata_io.max_queue_depth = 65536;
    config.blocking_lane_policies.metadata_io.max_concurrency = 8;
    config.max_blocking_threads = config.max_blocking_threads.max(8);
    RuntimeOwner::plan(config)
        .map_err(|e| format!("client runtime config: {e}"))?
        .build()
        .map_err(|e| format!("client runtime: {e}"))
}

pub fn client_runtime(owner: &RuntimeOwner, scope: &str) -> Result<Arc<ClientRuntime>, String> {
    let scope = ScopeId::try_from(scope.to_string()).map_err(|e| format!("scope {scope}: {e}"))?;
    ClientRuntime::try_new(
        owner.root_context().component(scope),
        ClientRuntimeConfig::default(),
        TelemetryHandle::noop(),
    )
    .map_err(|e| format!("client runtime scope: {e}"))
}

pub async fn within<T, E: std::fmt::Display>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(SETUP_DEADLINE, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: no answer within {SETUP_DEADLINE:?}")),
    }
}

async fn start_producer(owner: &RuntimeOwner, a: &Args) -> Result<DefaultMQProducer, String> {
    let mut producer = DefaultMQProducer::builder(client_runtime(owner, "producer")?)
        .producer_group(format!("{}_producer", a.group))
        .name_server_addr(a.namesrv.clone())
        .send_msg_timeout(a.timeout_ms as u32)
        .build();
    within("producer start", producer.start()).await?;
    Ok(producer)
}

/// Creates the topic with --queues read/write queues on --broker, as ringmq-bench does, so the
/// queue count does not depend on each broker's auto-create default.
async fn create_topic(owner: &RuntimeOwner, a: &Args) -> Result<(), String> {
    let mut admin = DefaultMQAdminExt::with_admin_ext_group(
        client_runtime(owner, "admin")?,
        format!("{}_admin", a.group),
    );
    admin.set_namesrv_addr(a.namesrv.clone());
    within("admin start", admin.start()).await?;
    let created = within(
        "create topic",
        TopicAdmin::create_and_update_topic_config(
            &admin,
            CheetahString::from(a.broker.as_str()),
            TopicConfig::with_queues(a.topic.as_str(), a.queues, a.queues),
        ),
    )
    .await;
    let _ = tokio::time::timeout(Duration::from_secs(10), admin.shutdown()).await;
    created
}

/// Waits until the name server routes the topic (the broker registers it asynchronously).
async fn wait_route(producer: &mut DefaultMQProducer, topic: &str) -> Result<usize, String> {
    let deadline = Instant::now() + SETUP_DEADLINE;
    loop {
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            producer.fetch_publish_message_queues(topic),
        )
        .await;
        match r {
            Ok(Ok(q)) if !q.is_empty() => return Ok(q.len()),
            other if Instant::now() >= deadline => {
                return Err(format!(
                    "no route for {topic} within {SETUP_DEADLINE:?}: {other:?}"
                ))
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

pub fn message(topic: &str, body: &[u8]) -> Message {
    Message::builder()
        .topic(topic)
        .body_slice(body)
        .build_unchecked()
}

/// Counts one send outcome that started at `origin_ns` (ns since `sh.base`).
fn record_send(
    sh: &Shared,
    hist: &Mutex<hdrhistogram::Histogram<u64>>,
    origin_ns: u64,
    msgs: u64,
    bytes: u64,
    r: Result<SendStatus, rocketmq_client_rust::ClientError>,
) {
    let done = sh.now_ns();
    if !sh.measures(origin_ns) {
        return;
    }
    match r {
        Ok(SendStatus::SendOk) => {
            record_ns(hist, done - origin_ns);
            sh.record_ok(msgs, bytes, done);
        }
        Ok(other) => sh.record_err(CODE_NOT_OK, done, || Some(format!("{other:?}"))),
        Err(e) => {
            let code = e.broker_response_code().unwrap_or(CODE_CLIENT);
            sh.record_err(code, done, || Some(e.to_string()));
        }
    }
}

/// What C1/C2/C5/C6 send with.
#[derive(Clone)]
enum Sender {
    Plain(DefaultMQProducer),
    Tx(Arc<rocketmq_client_rust::TransactionMQProducer>),
}

impl Sender {
    async fn send(
        &self,
        msg: Message,
        timeout: u64,
    ) -> Result<SendStatus, rocketmq_client_rust::ClientError> {
        let no_result =
            || rocketmq_client_rust::ClientError::response_process_failed("send", "no send result");
        match self {
            Sender::Plain(p) => p
                .send_with_timeout(msg, timeout)
                .await
                .and_then(|r| r.map(|r| r.send_status).ok_or_else(no_result)),
            Sender::Tx(p) => p
                .send_message_in_transaction::<(), _>(msg, None)
                .await
                .and_then(|r| r.send_result.map(|r| r.send_status).ok_or_else(no_result)),
        }
    }
}

/// C1/C2/C5/C6: `senders` tasks, each a loop of sync sends on one shared producer.
async fn run_sends(a: &Args, producer: &Sender, senders: usize, s: &mut Summary) {
    let sh = Shared::new(Instant::now(), None);
    let body: Arc<[u8]> = (0..a.size).map(|i| b'a' + (i % 26) as u8).collect();
    let mut tasks = Vec::with_capacity(senders);
    for _ in 0..senders {
        let (sh, body, producer) = (sh.clone(), body.clone(), producer.clone());
        let (topic, timeout) = (a.topic.clone(), a.timeout_ms);
        tasks.push(tokio::spawn(async move {
            let hist = sh.latency.part();
            while !sh.stopped() {
                let origin = sh.now_ns();
                let r = producer.send(message(&topic, &body), timeout).await;
                record_send(&sh, &hist, origin, 1, body.len() as u64, r);
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(a.warmup.max(0.0))).await;
    sh.start_recording();
    let broker = a.broker_pid.map(|p| CpuMeter::start(&p.to_string()));
    let me = CpuMeter::start("self");
    tokio::time::sleep(Duration::from_secs_f64(a.duration.max(0.0))).await;
    sh.stop.store(true, Relaxed);
    (s.broker_cpu_pct, s.client_cpu_pct) = (broker.and_then(|b| b.percent()), me.percent());
    join_all(tasks, a.timeout_ms, &sh).await;
    s.fill_from(&sh);
    if s.failure.is_none() && s.count == 0 {
        s.failure = Some(format!("no send succeeded ({} errors)", s.error_total));
    }
}

/// Joins worker tasks; one still running past a send timeout (plus slack) fails the run.
async fn join_all(tasks: Vec<tokio::task::JoinHandle<()>>, timeout_ms: u64, sh: &Shared) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms + 5_000);
    for t in tasks {
        match tokio::time::timeout_at(deadline, t).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => sh.fail(format!("a sender task failed: {e}")),
            Err(_) => sh.fail("a sender did not stop within its send timeout".to_owned()),
        }
    }
}

/// C4: pre-fill the backlog with batch sends, then drain it with a push consumer.
async fn run_drain(
    a: &Args,
    owner: &RuntimeOwner,
    producer: &DefaultMQProducer,
    mut s: Summary,
) -> Outcome {
    s.inflight = PREFILL_TASKS;
    let stored = match prefill(a, producer).await {
        Ok(n) => n,
        Err(e) => {
            s.failure = Some(format!("prefill: {e}"));
            return Outcome {
                summary: s,
                first_message_s: None,
            };
        }
    };
    let (first_message_s, failure) = match drain(a, owner, stored, &mut s).await {
        Ok(first) => (Some(first), None),
        Err((first, e)) => (first, Some(e)),
    };
    s.failure = s.failure.take().or(failure);
    Outcome {
        summary: s,
        first_message_s,
    }
}

/// Stores `a.backlog` messages with PREFILL_TASKS batch senders; returns how many were acked.
async fn prefill(a: &Args, producer: &DefaultMQProducer) -> Result<u64, String> {
    let started = Instant::now();
    let issued = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(AtomicU64::new(0));
    let body: Arc<[u8]> = (0..a.size).map(|i| b'A' + (i % 26) as u8).collect();
    let mut tasks = Vec::new();
    for _ in 0..PREFILL_TASKS {
        let (issued, acked, body, producer) = (
            issued.clone(),
            acked.clone(),
            body.clone(),
            producer.clone(),
        );
        let (topic, timeout, target) = (a.topic.clone(), a.timeout_ms, a.backlog);
        tasks.push(tokio::spawn(async move {
            loop {
                let from = issued.fetch_add(PREFILL_BATCH as u64, Relaxed);
                if from >= target {
                    return Ok(());
                }
                let n = (target - from).min(PREFILL_BATCH as u64) as usize;
                let batch: Vec<Message> = (0..n).map(|_| message(&topic, &body)).collect();
                match producer.send_batch_with_timeout(batch, timeout).await {
                    Ok(r) if r.send_status == SendStatus::SendOk => {
                        acked.fetch_add(n as u64, Relaxed);
                    }
                    Ok(r) => return Err(format!("batch answered {:?}", r.send_status)),
                    Err(e) => return Err(e.to_string()),
                }
            }
        }));
    }
    for t in tasks {
        let joined = tokio::time::timeout(Duration::from_secs(600), t)
            .await
            .map_err(|_| "prefill did not finish within 600 s".to_owned())?;
        joined.map_err(|e| format!("prefill task: {e}"))??;
    }
    let n = acked.load(Relaxed);
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "prefill: {n} messages in {secs:.2} s ({:.0} msg/s) with batch sends of {PREFILL_BATCH}",
        n as f64 / secs.max(1e-9)
    );
    Ok(n)
}

/// What the consumer's listener threads share with the driver.
struct DrainState {
    base: Instant,
    seen: Mutex<HashSet<(i32, i64)>>,
    distinct: AtomicU64,
    duplicates: AtomicU64,
    bytes: AtomicU64,
    first_ns: AtomicU64,
    last_ns: AtomicU64,
}

impl DrainState {
    fn on_message(&self, m: &MessageExt) {
        let now = self.base.elapsed().as_nanos() as u64;
        let fresh = lock(&self.seen).insert((m.queue_id(), m.queue_offset()));
        if fresh {
            let len = m.body().map_or(0, |b| b.len()) as u64;
            self.bytes.fetch_add(len, Relaxed);
            self.distinct.fetch_add(1, Relaxed);
        } else {
            self.duplicates.fetch_add(1, Relaxed);
        }
        let _ = self.first_ns.compare_exchange(0, now, Relaxed, Relaxed);
        self.last_ns.fetch_max(now, Relaxed);
    }
}

/// Drains `target` messages; returns seconds from consumer start to the first message, or
/// (that, the failure). Fills `s` with count, duration and rates from first to last message.
async fn drain(
    a: &Args,
    owner: &RuntimeOwner,
    target: u64,
    s: &mut Summary,
) -> Result<f64, (Option<f64>, String)> {
    let st = Arc::new(DrainState {
        base: Instant::now(),
        seen: Mutex::new(HashSet::with_capacity(target as usize)),
        distinct: AtomicU64::new(0),
        duplicates: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        first_ns: AtomicU64::new(0),
        last_ns: AtomicU64::new(0),
    });
    let mut consumer = build_consumer(a, owner, st.clone())
        .await
        .map_err(|e| (None, e))?;
    let started = Instant::now();
    let mut meters: Option<(Option<CpuMeter>, CpuMeter)> = None;
    let (mut last_count, mut last_change) = (0u64, Instant::now());
    let failure = loop {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let n = st.distinct.load(Relaxed);
        let now = Instant::now();
        if n > 0 && meters.is_none() {
            let broker = a.broker_pid.map(|p| CpuMeter::start(&p.to_string()));
            meters = Some((broker, CpuMeter::start("self")));
        }
        if n >= target {
            break None;
        }
        if n != last_count {
            (last_count, last_change) = (n, now);
        }
        if n == 0 && now.duration_since(started) > FIRST_MESSAGE_DEADLINE {
            break Some(format!("no message within {FIRST_MESSAGE_DEADLINE:?}"));
        }
        if n > 0 && now.duration_since(last_change) > DRAIN_STALL {
            break Some(format!(
                "drain stalled at {n} of {target} for {DRAIN_STALL:?}"
            ));
        }
    };
    if let Some((broker, me)) = meters {
        (s.broker_cpu_pct, s.client_cpu_pct) = (broker.and_then(|b| b.percent()), me.percent());
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), consumer.shutdown()).await;
    let (first, last) = (st.first_ns.load(Relaxed), st.last_ns.load(Relaxed));
    let first_s = (first > 0)
        .then(|| (first as f64 / 1e9 - started.duration_since(st.base).as_secs_f64()).max(0.0));
    s.count = st.distinct.load(Relaxed);
    s.requests = s.count;
    s.duration_s = ((last.saturating_sub(first)) as f64 / 1e6).round() / 1e3;
    let secs = s.duration_s.max(1e-9);
    s.throughput_msgs = (s.count as f64 / secs).round();
    s.throughput_mb_s = (st.bytes.load(Relaxed) as f64 / secs / 1e6 * 100.0).round() / 100.0;
    eprintln!(
        "drain: {} distinct messages ({} redelivered) of {target}; first after {:.2} s",
        s.count,
        st.duplicates.load(Relaxed),
        first_s.unwrap_or(f64::NAN)
    );
    match failure {
        None => Ok(first_s.unwrap_or(0.0)),
        Some(f) => Err((first_s, f)),
    }
}

async fn build_consumer(
    a: &Args,
    owner: &RuntimeOwner,
    st: Arc<DrainState>,
) -> Result<DefaultMQPushConsumer, String> {
    let mut consumer = DefaultMQPushConsumer::builder(client_runtime(owner, "push")?)
        .name_server_addr(a.namesrv.clone())
        .consumer_group(format!("{}_c4", a.group))
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_thread_min(1)
        .consume_thread_max(4)
        .pull_batch_size(32)
        .build();
    within("subscribe", consumer.subscribe(a.topic.as_str(), "*")).await?;
    consumer.register_message_listener_concurrently(
        move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
            for m in msgs {
                st.on_message(m);
            }
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        },
    );
    within("push consumer start", consumer.start()).await?;
    Ok(consumer)
}
