//! Shared harness for the `client_*` integration tests: it runs a real `ringmq` process over TCP
//! and drives it with the unmodified crates.io client `rocketmq-client-rust` 1.0.0.
//!
//! Owns: spawning `ringmq serve` / `ringmq broker` in a fresh temp store with ephemeral ports
//! ([`Broker`], [`SecondBroker`]), the tokio runtime every test body runs on ([`run`], which also
//! enforces the per-test time budget), the client runtime with raised blocking-lane limits
//! ([`client_runtime`]), and small factories for producers, push / lite-pull consumers and the
//! admin client. Every test file `mod common;`s this file and uses only part of it, hence the
//! `dead_code` allowance.
//!
//! Invariants: no helper waits without a deadline; a broker process never outlives its handle
//! (Drop kills it and removes its store); when a test panics, the tail of the broker's stderr is
//! printed so the failure can be read without rerunning.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cheetah_string::CheetahString;
use rocketmq_client_rust::{
    ClientConfig, ClientRuntime, ClientRuntimeConfig, ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus, ConsumeOrderlyContext, ConsumeOrderlyStatus,
    DefaultLitePullConsumer, DefaultMQAdminExt, DefaultMQProducer, DefaultMQPushConsumer,
    MQPushConsumer, TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner, ScopeId};
use tokio::sync::mpsc;

/// Whole-test budget: the brief requires every test to finish in under 60 s.
pub const TEST_BUDGET: Duration = Duration::from_secs(55);
/// How long a spawned ringmq may take to print its listening lines.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a SIGTERM'd ringmq may take to exit.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(20);
/// Lines of broker stderr kept for failure reports.
const STDERR_KEEP: usize = 400;
/// Tag of the message helpers send to make a topic exist; tests ignore it.
pub const WARMUP_TAG: &str = "Warmup";

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn next_id() -> usize {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// A RocketMQ-legal name (letters, digits, '_' and '-') unique across tests and processes.
pub fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}_{}",
        std::process::id(),
        nanos() % 1_000_000_000_000,
        next_id()
    )
}

/// A topic name nobody else uses, so every test sees only its own messages.
pub fn unique_topic(prefix: &str) -> String {
    unique_name(&format!("T_{prefix}"))
}

/// A consumer / producer group name nobody else uses.
pub fn unique_group(prefix: &str) -> String {
    unique_name(&format!("G_{prefix}"))
}

// ---------------------------------------------------------------------------------------------
// ringmq processes
// ---------------------------------------------------------------------------------------------

/// One running ringmq child process with its output drained by background threads.
struct Proc {
    label: String,
    child: Child,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

impl Proc {
    /// Spawns ringmq with `args` and waits until it has printed one stdout line starting with each
    /// of `prefixes` ("namesrv listening on", ...). Returns the last word of each such line (the
    /// address), in `prefixes` order.
    fn spawn(label: &str, args: &[String], prefixes: &[&str]) -> (Proc, Vec<String>) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if std::env::var_os("RINGMQ_LOG").is_none() {
            // Enough to explain a failure, not so much that the pipe becomes the bottleneck.
            cmd.env("RINGMQ_LOG", "info");
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| {
            panic!(
                "cannot spawn {} ({args:?}): {e}",
                env!("CARGO_BIN_EXE_ringmq")
            )
        });

        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let stderr = child.stderr.take().expect("stderr piped");
        let tail = Arc::clone(&stderr_tail);
        let echo = std::env::var_os("RINGMQ_TEST_ECHO").is_some();
        let echo_label = label.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if echo {
                    eprintln!("[{echo_label}] {line}");
                }
                let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                if t.len() == STDERR_KEEP {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });

        // stdout is read on its own thread so the child never blocks on a full pipe; lines are
        // forwarded so the startup wait below can use a timeout.
        let stdout = child.stdout.take().expect("stdout piped");
        let (tx, rx) = std_mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });

        let mut proc = Proc {
            label: label.to_string(),
            child,
            stderr_tail,
        };
        let mut found: Vec<Option<String>> = vec![None; prefixes.len()];
        let mut stdout_seen = Vec::new();
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while found.iter().any(Option::is_none) {
            let now = Instant::now();
            if now >= deadline {
                proc.fail_startup(
                    &format!("no listening lines within {STARTUP_TIMEOUT:?}"),
                    &stdout_seen,
                );
            }
            match rx.recv_timeout((deadline - now).min(Duration::from_millis(200))) {
                Ok(line) => {
                    for (i, p) in prefixes.iter().enumerate() {
                        if found[i].is_none() && line.starts_with(p) {
                            let addr = line
                                .split_whitespace()
                                .last()
                                .unwrap_or_default()
                                .to_string();
                            found[i] = Some(addr);
                        }
                    }
                    stdout_seen.push(line);
                }
                Err(std_mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(status)) = proc.child.try_wait() {
                        proc.fail_startup(&format!("exited early with {status}"), &stdout_seen);
                    }
                }
                Err(std_mpsc::RecvTimeoutError::Disconnected) => {
                    // stdout closed: the process is exiting; give it a moment to report why.
                    std::thread::sleep(Duration::from_millis(300));
                    let status = proc.child.try_wait().ok().flatten();
                    proc.fail_startup(
                        &format!("closed stdout (exit status {status:?})"),
                        &stdout_seen,
                    );
                }
            }
        }
        let addrs = found.into_iter().map(Option::unwrap).collect();
        (proc, addrs)
    }

    fn fail_startup(&mut self, why: &str, stdout_seen: &[String]) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Let the stderr thread catch up with what the child wrote before dying.
        std::thread::sleep(Duration::from_millis(100));
        panic!(
            "ringmq ({}) failed to start: {why}\n--- stdout ---\n{}\n--- stderr (tail) ---\n{}",
            self.label,
            stdout_seen.join("\n"),
            self.stderr_text()
        );
    }

    fn stderr_text(&self) -> String {
        let t = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        t.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    fn pid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    /// SIGTERM, then wait up to SHUTDOWN_TIMEOUT. Panics (after SIGKILL) if it does not exit.
    fn terminate(&mut self) -> ExitStatus {
        if let Ok(Some(status)) = self.child.try_wait() {
            return status;
        }
        // SAFETY: kill(2) on the pid of a child we spawned and have not yet reaped.
        unsafe {
            libc::kill(self.pid(), libc::SIGTERM);
        }
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "ringmq ({}) did not exit within {SHUTDOWN_TIMEOUT:?} of SIGTERM\n--- stderr (tail) ---\n{}",
                    self.label,
                    self.stderr_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- ringmq ({}) stderr tail, printed because the test failed ---\n{}",
                self.label,
                self.stderr_text()
            );
        }
        self.kill9();
    }
}

/// The embedded name server + broker (`ringmq serve`) on a fresh temp store.
pub struct Broker {
    // Field order matters: the process dies (Proc::drop) before its store directory is removed.
    proc: Option<Proc>,
    store: tempfile::TempDir,
    options: Vec<(String, String)>,
    namesrv_addr: String,
    broker_addr: String,
    starts: usize,
}

impl Broker {
    /// `ringmq serve` with default settings.
    pub fn start() -> Broker {
        Broker::start_with(&[])
    }

    /// `ringmq serve` with extra RocketMQ broker keys passed as `-o key=value`.
    pub fn start_with(options: &[(&str, &str)]) -> Broker {
        let store = tempfile::Builder::new()
            .prefix("ringmq-test-")
            .tempdir()
            .expect("create temp store dir");
        let mut broker = Broker {
            proc: None,
            store,
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            namesrv_addr: String::new(),
            broker_addr: String::new(),
            starts: 0,
        };
        broker.spawn();
        broker
    }

    fn spawn(&mut self) {
        assert!(self.proc.is_none(), "spawn while a ringmq is still running");
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--namesrv-listen".into(),
            "127.0.0.1:0".into(),
            "--broker-listen".into(),
            "127.0.0.1:0".into(),
            "--store-dir".into(),
            self.store.path().display().to_string(),
            // Small segments: tests run in parallel and each segment is preallocated on disk.
            "-o".into(),
            "mappedFileSizeCommitLog=67108864".into(),
            // Routes must name the loopback listener (the default is the host's address).
            "-o".into(),
            "brokerIP1=127.0.0.1".into(),
        ];
        if let Some(flush) = flush_override() {
            args.push("-o".into());
            args.push(format!("flushDiskType={flush}"));
        }
        for (k, v) in &self.options {
            args.push("-o".into());
            args.push(format!("{k}={v}"));
        }
        self.starts += 1;
        let (proc, addrs) = Proc::spawn(
            &format!("serve#{}", self.starts),
            &args,
            &["namesrv listening on", "broker listening on"],
        );
        self.namesrv_addr = addrs[0].clone();
        self.broker_addr = addrs[1].clone();
        self.proc = Some(proc);
    }

    /// Name server address, `127.0.0.1:PORT` (changes across restarts).
    pub fn namesrv_addr(&self) -> String {
        self.namesrv_addr.clone()
    }

    /// Broker address, `127.0.0.1:PORT` (changes across restarts).
    pub fn broker_addr(&self) -> String {
        self.broker_addr.clone()
    }

    pub fn broker_port(&self) -> u16 {
        port_of(&self.broker_addr)
    }

    pub fn store_dir(&self) -> &Path {
        self.store.path()
    }

    /// Clean restart: SIGTERM, assert exit status 0, start again on the SAME store directory.
    /// Ports may change; callers must re-read the addresses.
    pub fn restart(&mut self) {
        let status = self.stop();
        assert!(
            status.success(),
            "ringmq must exit 0 on SIGTERM, got {status}"
        );
        self.spawn();
    }

    /// SIGTERM and wait; the store is kept for [`Broker::respawn`].
    pub fn stop(&mut self) -> ExitStatus {
        let mut proc = self.proc.take().expect("broker not running");
        let status = proc.terminate();
        if !status.success() {
            eprintln!(
                "--- ringmq stderr tail after non-zero exit {status} ---\n{}",
                proc.stderr_text()
            );
        }
        status
    }

    /// SIGKILL (a crash); the store is kept for [`Broker::respawn`].
    pub fn kill9(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.kill9();
        }
    }

    /// Starts again on the same store after [`Broker::stop`] or [`Broker::kill9`].
    pub fn respawn(&mut self) {
        self.spawn();
    }

    /// Current stderr tail of the running process (for diagnostics in assertions).
    pub fn stderr_tail(&self) -> String {
        self.proc
            .as_ref()
            .map(Proc::stderr_text)
            .unwrap_or_default()
    }

    /// `ringmq broker` alone, registered with this process's name server, `brokerName=name`.
    pub fn start_second_broker(&self, name: &str) -> SecondBroker {
        let store = tempfile::Builder::new()
            .prefix("ringmq-test-b-")
            .tempdir()
            .expect("create temp store dir");
        let args: Vec<String> = vec![
            "broker".into(),
            "--namesrv-addr".into(),
            self.namesrv_addr.clone(),
            "--broker-listen".into(),
            "127.0.0.1:0".into(),
            "--store-dir".into(),
            store.path().display().to_string(),
            "-o".into(),
            format!("brokerName={name}"),
            "-o".into(),
            "mappedFileSizeCommitLog=67108864".into(),
            "-o".into(),
            "brokerIP1=127.0.0.1".into(),
        ];
        let (proc, addrs) = Proc::spawn(&format!("broker {name}"), &args, &["broker listening on"]);
        SecondBroker {
            proc,
            _store: store,
            broker_addr: addrs[0].clone(),
            name: name.to_string(),
        }
    }
}

/// A stand-alone `ringmq broker` process (see [`Broker::start_second_broker`]).
pub struct SecondBroker {
    proc: Proc,
    _store: tempfile::TempDir,
    broker_addr: String,
    name: String,
}

impl SecondBroker {
    pub fn broker_addr(&self) -> String {
        self.broker_addr.clone()
    }
    pub fn broker_port(&self) -> u16 {
        port_of(&self.broker_addr)
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn stderr_tail(&self) -> String {
        self.proc.stderr_text()
    }
}

/// `RINGMQ_TEST_FLUSH_DISK_TYPE=SYNC_FLUSH` runs every broker of the suite under that flush
/// mode; a test that sets `flushDiskType` itself keeps its own (later `-o` keys win).
pub fn flush_override() -> Option<String> {
    std::env::var("RINGMQ_TEST_FLUSH_DISK_TYPE")
        .ok()
        .filter(|s| !s.is_empty())
}

pub fn port_of(addr: &str) -> u16 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("not a host:port address: {addr:?}"))
}

pub fn temp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

// ---------------------------------------------------------------------------------------------
// runtimes
// ---------------------------------------------------------------------------------------------

/// Runs a test body on a fresh 2-worker multi-thread tokio runtime, failing the test if it takes
/// longer than [`TEST_BUDGET`].
pub fn run<F: Future<Output = ()>>(body: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build tokio runtime");
    rt.block_on(async {
        if tokio::time::timeout(TEST_BUDGET, body).await.is_err() {
            panic!("test exceeded its {TEST_BUDGET:?} budget");
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
}

/// Awaits `fut` for at most `secs` seconds; panics naming `what` on timeout.
pub async fn within<T>(secs: u64, what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not complete within {secs} s"),
    }
}

/// The client library's own runtime owner, shared by all clients of one test binary. Its
/// blocking-lane limits are raised: with the defaults a push consumer on 2 cores rejects
/// consume tasks (`runtime.capacity.exhausted`) and stalls.
static CLIENT_OWNER: LazyLock<RuntimeOwner> = LazyLock::new(|| {
    let mut config = RuntimeConfig {
        thread_name: "ringmq-test-client".to_string(),
        ..Default::default()
    };
    config.blocking_lane_policies.metadata_io.max_queue_depth = 65536;
    config.blocking_lane_policies.metadata_io.max_concurrency = 8;
    config.max_blocking_threads = config.max_blocking_threads.max(8);
    RuntimeOwner::plan(config)
        .expect("client runtime config is valid")
        .build()
        .expect("client runtime owner starts")
});

/// A fresh client runtime scope (each client gets its own scope name).
pub fn client_runtime(scope: &str) -> Arc<ClientRuntime> {
    let scope = ScopeId::try_from(format!("{scope}-{}", next_id())).expect("valid scope name");
    ClientRuntime::try_new(
        CLIENT_OWNER.root_context().component(scope),
        ClientRuntimeConfig::default(),
        TelemetryHandle::noop(),
    )
    .expect("client runtime")
}

// ---------------------------------------------------------------------------------------------
// clients
// ---------------------------------------------------------------------------------------------

/// A started producer in a fresh group with a 5 s send timeout.
pub async fn producer(namesrv: &str) -> DefaultMQProducer {
    let builder = DefaultMQProducer::builder(client_runtime("producer"))
        .producer_group(unique_group("producer"))
        .name_server_addr(namesrv.to_string())
        .send_msg_timeout(5_000);
    start_producer(builder.build()).await
}

/// Starts a producer built by the caller (custom options), with a timeout.
pub async fn start_producer(mut producer: DefaultMQProducer) -> DefaultMQProducer {
    within(15, "producer.start()", producer.start())
        .await
        .expect("producer.start()");
    producer
}

pub fn message(topic: &str, tag: &str, key: &str, body: &[u8]) -> Message {
    let mut b = Message::builder().topic(topic).body_slice(body);
    if !tag.is_empty() {
        b = b.tags(tag);
    }
    if !key.is_empty() {
        b = b.key(key);
    }
    b.build_unchecked()
}

/// Makes `topic` exist (auto-created from TBW102 by the first send) and waits until the name
/// server routes it, so consumers started afterwards find it at once. Sends one message tagged
/// [`WARMUP_TAG`] with body "warmup"; tests must ignore it.
pub async fn create_topic_by_send(producer: &mut DefaultMQProducer, topic: &str) {
    // Retried: right after startup the broker's first REGISTER_BROKER (which carries TBW102,
    // the auto-create template) may not have reached the name server yet.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let attempt = tokio::time::timeout(
            Duration::from_secs(6),
            producer.send_with_timeout(message(topic, WARMUP_TAG, "", b"warmup"), 5_000),
        )
        .await;
        match attempt {
            Ok(Ok(Some(_))) => break,
            other => {
                if Instant::now() >= deadline {
                    panic!(
                        "warm-up send (auto-create topic {topic}) kept failing for 15 s: {other:?}"
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    wait_route(producer, topic).await;
}

/// Waits (up to 15 s) until the name server returns at least one publishable queue for `topic`.
pub async fn wait_route(producer: &mut DefaultMQProducer, topic: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            producer.fetch_publish_message_queues(topic),
        )
        .await;
        match r {
            Ok(Ok(queues)) if !queues.is_empty() => return queues.len(),
            other => {
                if Instant::now() >= deadline {
                    panic!(
                        "no route for topic {topic} from the name server within 15 s: {other:?}"
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What a listener saw of one delivered message (owned, so it can cross the channel).
#[derive(Clone, Debug)]
pub struct Received {
    /// The client-side unique id (property UNIQ_KEY), which is what `SendResult::msg_id` holds;
    /// falls back to the offset id when the property is absent.
    pub msg_id: String,
    /// The broker-side offset message id (store host + commit-log offset).
    pub offset_msg_id: String,
    pub topic: String,
    pub tags: Option<String>,
    pub keys: Option<String>,
    pub body: Vec<u8>,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commit_log_offset: i64,
    pub broker_name: String,
    pub reconsume_times: i32,
    pub at: Instant,
    /// Which consumer of the test received it (set by the helper's `consumer_no`).
    pub consumer_no: usize,
}

impl Received {
    pub fn from_ext(m: &MessageExt, consumer_no: usize) -> Received {
        // rocketmq-client-rust's MessageExt::msg_id() is the offset id; Java's MessageClientExt
        // would return UNIQ_KEY instead, so do the same here.
        let uniq = MessageTrait::property(m, &CheetahString::from_static_str("UNIQ_KEY"))
            .map(|k| k.to_string())
            .filter(|k| !k.is_empty());
        Received {
            msg_id: uniq.unwrap_or_else(|| m.msg_id().to_string()),
            offset_msg_id: m.msg_id().to_string(),
            topic: m.topic().to_string(),
            tags: m.get_tags().map(|t| t.to_string()),
            keys: MessageTrait::get_keys(m).map(|k| k.to_string()),
            body: m.body().map(|b| b.to_vec()).unwrap_or_default(),
            queue_id: m.queue_id(),
            queue_offset: m.queue_offset(),
            commit_log_offset: m.commit_log_offset(),
            broker_name: m.broker_name().to_string(),
            reconsume_times: m.reconsume_times(),
            at: Instant::now(),
            consumer_no,
        }
    }

    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn is_warmup(&self) -> bool {
        self.tags.as_deref() == Some(WARMUP_TAG)
    }
}

/// How to build a push consumer.
#[derive(Clone, Debug)]
pub struct PushSpec {
    pub group: String,
    pub topic: String,
    pub expression: String,
    pub orderly: bool,
    pub broadcasting: bool,
    /// Label stamped into [`Received::consumer_no`].
    pub consumer_no: usize,
    pub consume_from_where: ConsumeFromWhere,
}

impl PushSpec {
    pub fn new(group: &str, topic: &str) -> PushSpec {
        PushSpec {
            group: group.to_string(),
            topic: topic.to_string(),
            expression: "*".to_string(),
            orderly: false,
            broadcasting: false,
            consumer_no: 0,
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        }
    }
}

pub type Inbox = mpsc::UnboundedReceiver<Received>;

/// A started concurrent push consumer of `topic` (all tags) in `group`, reading from the first
/// offset, forwarding every delivered message to the returned channel.
pub async fn push_consumer(
    namesrv: &str,
    group: &str,
    topic: &str,
) -> (DefaultMQPushConsumer, Inbox) {
    push_consumer_with(namesrv, PushSpec::new(group, topic)).await
}

pub async fn push_consumer_with(namesrv: &str, spec: PushSpec) -> (DefaultMQPushConsumer, Inbox) {
    let mut builder = DefaultMQPushConsumer::builder(client_runtime("push"));
    if spec.broadcasting {
        // Broadcasting consumers keep the "DEFAULT" instance name (only clustering ones get a
        // pid-derived one), so two in one process would share a client instance: give each its
        // own.
        let mut config = ClientConfig::new();
        config.set_instance_name(unique_name("inst").into());
        builder = builder.client_config(config);
        // MessageModel lives in rocketmq-protocol, not a direct dependency; its serde form is
        // the Java enum name.
        builder = builder.message_model(
            serde_json::from_str("\"BROADCASTING\"").expect("MessageModel deserializes"),
        );
    }
    let mut consumer = builder
        .name_server_addr(namesrv.to_string())
        .consumer_group(spec.group.clone())
        .consume_from_where(spec.consume_from_where)
        .consume_thread_min(1)
        .consume_thread_max(4)
        .pull_batch_size(32)
        .build();
    within(
        10,
        "push consumer subscribe",
        consumer.subscribe(spec.topic.as_str(), spec.expression.as_str()),
    )
    .await
    .expect("subscribe");
    let (tx, rx) = mpsc::unbounded_channel();
    let no = spec.consumer_no;
    if spec.orderly {
        consumer.register_message_listener_orderly(
            move |msgs: &[&MessageExt], _ctx: &mut ConsumeOrderlyContext| {
                for m in msgs {
                    let _ = tx.send(Received::from_ext(m, no));
                }
                Ok(ConsumeOrderlyStatus::Success)
            },
        );
    } else {
        consumer.register_message_listener_concurrently(
            move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
                for m in msgs {
                    let _ = tx.send(Received::from_ext(m, no));
                }
                Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
            },
        );
    }
    within(20, "push consumer start", consumer.start())
        .await
        .expect("push consumer start");
    (consumer, rx)
}

pub async fn shutdown_push(mut consumer: DefaultMQPushConsumer) {
    let _ = tokio::time::timeout(Duration::from_secs(10), consumer.shutdown()).await;
}

pub async fn shutdown_producer(mut producer: DefaultMQProducer) {
    let _ = tokio::time::timeout(Duration::from_secs(10), producer.shutdown()).await;
}

/// Receives (skipping warm-up messages) until `done(&received)` holds or `timeout` passes.
/// Returns everything received, whether or not `done` was reached.
pub async fn collect_until(
    inbox: &mut Inbox,
    timeout: Duration,
    mut done: impl FnMut(&[Received]) -> bool,
) -> Vec<Received> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut got = Vec::new();
    while !done(&got) {
        match tokio::time::timeout_at(deadline, inbox.recv()).await {
            Ok(Some(r)) => {
                if !r.is_warmup() {
                    got.push(r);
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    got
}

/// Receives (skipping warm-up messages) for exactly `dur`.
pub async fn drain_for(inbox: &mut Inbox, dur: Duration) -> Vec<Received> {
    collect_until(inbox, dur, |_| false).await
}

/// Receives until `n` distinct msgIds (non-warm-up) arrived or `timeout` passes.
pub async fn collect_distinct(inbox: &mut Inbox, n: usize, timeout: Duration) -> Vec<Received> {
    let mut seen = std::collections::HashSet::new();
    collect_until(inbox, timeout, |got| {
        if let Some(last) = got.last() {
            seen.insert(last.msg_id.clone());
        }
        seen.len() >= n
    })
    .await
}

/// A started lite pull consumer in `group` subscribed to `topic` with `expression`, auto-commit on.
pub async fn lite_pull_consumer(
    namesrv: &str,
    group: &str,
    topic: &str,
    expression: &str,
) -> DefaultLitePullConsumer {
    let consumer = DefaultLitePullConsumer::builder(client_runtime("lite"))
        .consumer_group(group.to_string())
        .name_server_addr(namesrv.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pull_batch_size(16)
        .poll_timeout_millis(500)
        .auto_commit(true)
        .build()
        .expect("build lite pull consumer");
    within(
        10,
        "lite subscribe",
        consumer.subscribe_with_expression(topic, expression),
    )
    .await
    .expect("lite subscribe");
    within(20, "lite start", consumer.start())
        .await
        .expect("lite start");
    consumer
}

/// A started lite pull consumer in assign mode (no subscription; caller assigns queues).
pub async fn lite_pull_consumer_assign(namesrv: &str, group: &str) -> DefaultLitePullConsumer {
    let consumer = DefaultLitePullConsumer::builder(client_runtime("lite-assign"))
        .consumer_group(group.to_string())
        .name_server_addr(namesrv.to_string())
        .pull_batch_size(16)
        .poll_timeout_millis(500)
        .auto_commit(false)
        .build()
        .expect("build lite pull consumer");
    within(20, "lite start", consumer.start())
        .await
        .expect("lite start");
    consumer
}

/// A started admin client talking to `namesrv`.
pub async fn admin(namesrv: &str) -> DefaultMQAdminExt {
    let mut admin =
        DefaultMQAdminExt::with_admin_ext_group(client_runtime("admin"), unique_group("admin"));
    admin.set_namesrv_addr(namesrv.to_string());
    within(15, "admin.start()", admin.start())
        .await
        .expect("admin.start()");
    admin
}

/// Creates (or updates) `topic` with `queues` read and write queues on the broker at
/// `broker_addr` (UPDATE_AND_CREATE_TOPIC through the admin client), panicking on failure.
pub async fn create_topic(admin: &DefaultMQAdminExt, broker_addr: &str, topic: &str, queues: u32) {
    within(
        15,
        "create topic",
        rocketmq_client_rust::TopicAdmin::create_and_update_topic_config(
            admin,
            CheetahString::from(broker_addr),
            rocketmq_model::common::config::TopicConfig::with_queues(topic, queues, queues),
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("UPDATE_AND_CREATE_TOPIC {topic} on {broker_addr} failed: {e:?}"));
}

/// Decodes a RocketMQ offset message id (hex of store-host IPv4 (4 B), port (4 B), commit-log
/// offset (8 B)) into (port, phy_offset). None if it is not that shape.
pub fn decode_offset_msg_id(id: &str) -> Option<(u16, i64)> {
    if id.len() != 32 {
        return None;
    }
    let bytes: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&id[i * 2..i * 2 + 2], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let port = u32::from_be_bytes(bytes[4..8].try_into().ok()?);
    let phy = i64::from_be_bytes(bytes[8..16].try_into().ok()?);
    Some((u16::try_from(port).ok()?, phy))
}
