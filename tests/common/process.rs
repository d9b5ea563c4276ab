//! The ringmq processes of a test: [`Broker`] (`ringmq serve`, embedded name server and broker,
//! with its web console only when asked: [`Broker::start_with_console`]),
//! [`SecondBroker`] (a stand-alone `ringmq broker` registering with it), [`NameServer`] (a
//! stand-alone `ringmq namesrv`) and [`GroupBroker`] (a master or slave `ringmq broker` that can
//! be stopped, killed and started again on its store), and [`ConsoleProcess`] (`ringmq console`
//! alone), each on a fresh
//! temp store with ephemeral ports, output drained by background threads, killed and cleaned
//! up on drop, with the tail of stderr kept for failure reports.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::{flush_override, port_of};

/// How long a spawned ringmq may take to print its listening lines.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a SIGTERM'd ringmq may take to exit.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(20);
/// Lines of broker stderr kept for failure reports.
const STDERR_KEEP: usize = 400;

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

/// A broker's command line: `head` (the subcommand and its name-server flag), then what every
/// test broker shares, then the test's own `-o` options.
fn broker_args(head: &[&str], store: &Path, options: &[(String, String)]) -> Vec<String> {
    let mut args: Vec<String> = head.iter().map(|a| a.to_string()).collect();
    args.extend([
        // Tests run in parallel: no broker takes the gRPC endpoint's default port.
        "--grpc-listen".into(),
        "off".into(),
        "--broker-listen".into(),
        "127.0.0.1:0".into(),
        "--store-dir".into(),
        store.display().to_string(),
        // Small segments: tests run in parallel and each segment is preallocated on disk.
        "-o".into(),
        "mappedFileSizeCommitLog=67108864".into(),
        // No brokerIP1: a broker bound to loopback announces loopback by itself.
    ]);
    if let Some(flush) = flush_override() {
        args.push("-o".into());
        args.push(format!("flushDiskType={flush}"));
    }
    for (k, v) in options {
        args.push("-o".into());
        args.push(format!("{k}={v}"));
    }
    args
}

/// The embedded name server + broker (`ringmq serve`) on a fresh temp store.
pub struct Broker {
    // Field order matters: the process dies (Proc::drop) before its store directory is removed.
    proc: Option<Proc>,
    store: tempfile::TempDir,
    options: Vec<(String, String)>,
    namesrv_addr: String,
    broker_addr: String,
    /// `Some` (the console's address once started) for a broker started with its console.
    console_addr: Option<String>,
    starts: usize,
}

impl Broker {
    /// `ringmq serve` with default settings.
    pub fn start() -> Broker {
        Broker::start_with(&[])
    }

    /// `ringmq serve` with extra RocketMQ broker keys passed as `-o key=value`.
    pub fn start_with(options: &[(&str, &str)]) -> Broker {
        Broker::start_inner(options, false)
    }

    /// `ringmq serve` with its web console on an ephemeral loopback port
    /// ([`Broker::console_addr`]).
    pub fn start_with_console(options: &[(&str, &str)]) -> Broker {
        Broker::start_inner(options, true)
    }

    fn start_inner(options: &[(&str, &str)], console: bool) -> Broker {
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
            console_addr: console.then(String::new),
            starts: 0,
        };
        broker.spawn();
        broker
    }

    fn spawn(&mut self) {
        assert!(self.proc.is_none(), "spawn while a ringmq is still running");
        // Tests run in parallel: no broker takes the console's default port.
        let console = if self.console_addr.is_some() {
            "127.0.0.1:0"
        } else {
            "off"
        };
        let args = broker_args(
            &[
                "serve",
                "--namesrv-listen",
                "127.0.0.1:0",
                "--console-listen",
                console,
            ],
            self.store.path(),
            &self.options,
        );
        self.starts += 1;
        let mut prefixes = vec!["namesrv listening on", "broker listening on"];
        if self.console_addr.is_some() {
            prefixes.push("console listening on");
        }
        let (proc, addrs) = Proc::spawn(&format!("serve#{}", self.starts), &args, &prefixes);
        self.namesrv_addr = addrs[0].clone();
        self.broker_addr = addrs[1].clone();
        if let Some(c) = addrs.get(2) {
            self.console_addr = Some(c.clone());
        }
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

    /// The web console's address, `127.0.0.1:PORT`; panics for a broker started without it.
    pub fn console_addr(&self) -> String {
        self.console_addr
            .clone()
            .expect("started without its console: use Broker::start_with_console")
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
            "--grpc-listen".into(),
            "off".into(),
            "--broker-listen".into(),
            "127.0.0.1:0".into(),
            "--store-dir".into(),
            store.path().display().to_string(),
            "-o".into(),
            format!("brokerName={name}"),
            "-o".into(),
            "mappedFileSizeCommitLog=67108864".into(),
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

/// A stand-alone web console (`ringmq console`) on an ephemeral loopback port.
pub struct ConsoleProcess {
    proc: Proc,
    addr: String,
}

impl ConsoleProcess {
    /// `ringmq console` for the name servers `namesrv` (`host:port;host:port`).
    pub fn start(namesrv: &str) -> ConsoleProcess {
        let args: Vec<String> = vec![
            "console".into(),
            "--namesrv-addr".into(),
            namesrv.into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
        ];
        let (proc, addrs) = Proc::spawn("console", &args, &["console listening on"]);
        ConsoleProcess {
            proc,
            addr: addrs[0].clone(),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        self.addr.clone()
    }

    /// SIGTERM and wait; the exit status.
    pub fn stop(mut self) -> ExitStatus {
        self.proc.terminate()
    }
}

/// A stand-alone name server (`ringmq namesrv`), so brokers can die while routes survive.
pub struct NameServer {
    proc: Proc,
    _dir: tempfile::TempDir,
    addr: String,
}

impl NameServer {
    pub fn start() -> NameServer {
        let dir = tempfile::Builder::new()
            .prefix("ringmq-test-ns-")
            .tempdir()
            .expect("create temp dir");
        let args: Vec<String> = vec![
            "namesrv".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--kv-config".into(),
            dir.path().join("kvConfig.json").display().to_string(),
        ];
        let (proc, addrs) = Proc::spawn("namesrv", &args, &["namesrv listening on"]);
        NameServer {
            proc,
            _dir: dir,
            addr: addrs[0].clone(),
        }
    }

    pub fn addr(&self) -> String {
        self.addr.clone()
    }

    pub fn stderr_tail(&self) -> String {
        self.proc.stderr_text()
    }
}

/// A `ringmq broker` process of a replicated group (a master or a `brokerRole=SLAVE`),
/// registered with the name servers at `namesrv`, on its own temp store that survives
/// [`GroupBroker::stop`] / [`GroupBroker::kill9`] for [`GroupBroker::respawn`].
pub struct GroupBroker {
    proc: Option<Proc>,
    store: tempfile::TempDir,
    namesrv: String,
    options: Vec<(String, String)>,
    broker_addr: String,
    starts: usize,
}

impl GroupBroker {
    /// Starts with `options` (RocketMQ keys) on a fresh store; waits for the HA listener of a
    /// master as well as the broker listener.
    pub fn start(namesrv: &str, options: &[(&str, &str)]) -> GroupBroker {
        let store = tempfile::Builder::new()
            .prefix("ringmq-test-g-")
            .tempdir()
            .expect("create temp store dir");
        let mut b = GroupBroker {
            proc: None,
            store,
            namesrv: namesrv.to_string(),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            broker_addr: String::new(),
            starts: 0,
        };
        b.spawn();
        b
    }

    fn is_slave(&self) -> bool {
        self.options
            .iter()
            .any(|(k, v)| k == "brokerRole" && v == "SLAVE")
    }

    fn spawn(&mut self) {
        assert!(self.proc.is_none(), "spawn while a ringmq is still running");
        let args = broker_args(
            &["broker", "--namesrv-addr", &self.namesrv],
            self.store.path(),
            &self.options,
        );
        self.starts += 1;
        let role = if self.is_slave() { "slave" } else { "master" };
        let prefixes: &[&str] = if self.is_slave() {
            &["broker listening on"]
        } else {
            &["broker listening on", "ha listening on"]
        };
        let (proc, addrs) = Proc::spawn(&format!("{role}#{}", self.starts), &args, prefixes);
        self.broker_addr = addrs[0].clone();
        self.proc = Some(proc);
    }

    /// Broker address, `127.0.0.1:PORT` (changes across restarts).
    pub fn broker_addr(&self) -> String {
        self.broker_addr.clone()
    }

    pub fn store_dir(&self) -> &Path {
        self.store.path()
    }

    /// SIGTERM and wait; asserts a clean exit. The store is kept.
    pub fn stop(&mut self) {
        let mut proc = self.proc.take().expect("broker not running");
        let status = proc.terminate();
        assert!(
            status.success(),
            "ringmq must exit 0 on SIGTERM, got {status}"
        );
    }

    /// SIGKILL (a crash); the store is kept.
    pub fn kill9(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.kill9();
        }
    }

    /// Starts again on the same store.
    pub fn respawn(&mut self) {
        self.spawn();
    }

    pub fn stderr_tail(&self) -> String {
        self.proc
            .as_ref()
            .map(Proc::stderr_text)
            .unwrap_or_default()
    }
}
