//! ringmq command line: `serve` (name server + broker in one process, the embedded default,
//! with the web console), `namesrv`, `broker -c broker.conf`, `controller -c controller.conf`,
//! `admin` (mqadmin's commands, `ringmq::admin_cli`) and `console --namesrv-addr` (the web
//! console alone).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use ringmq::broker::start_broker;
use ringmq::config::BrokerConfig;
use ringmq::namesrv_server::start_namesrv_with;
use ringmq::tls::TlsContext;

/// mimalloc: records are allocated on a shard and freed on the writer thread (and back); glibc's
/// arena locks showed up as futex contention on the send path, mimalloc's frees do not lock.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "ringmq",
    version,
    about = "A RocketMQ wire-compatible message broker"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Name server (9876) and broker (10911, fast port 10909) in one process, store in ./data.
    Serve(ServeArgs),
    /// The name server alone.
    Namesrv {
        #[arg(long, default_value = "0.0.0.0:9876")]
        listen: SocketAddr,
        /// Where KV config is persisted.
        #[arg(long, default_value = "./namesrv/kvConfig.json")]
        kv_config: PathBuf,
        /// TLS keys, `-o tls.server.mode=enforcing` (repeatable; the `tls.*` keys only).
        #[arg(short = 'o', long = "option")]
        options: Vec<String>,
    },
    /// The broker alone, configured by a RocketMQ broker.conf.
    Broker(BrokerArgs),
    /// A RocketMQ 5 controller (one member of a Raft group), configured by a controller.conf.
    Controller {
        /// controller.conf (key=value, Java's ControllerConfig key names).
        #[arg(short = 'c', long = "config")]
        config: PathBuf,
    },
    /// mqadmin's commands against a running deployment (`ringmq admin help` lists them).
    Admin(ringmq::admin_cli::AdminArgs),
    /// The web console alone, for the cluster behind these name servers.
    Console {
        /// Name server addresses, `host:port;host:port`.
        #[arg(short = 'n', long = "namesrv-addr", default_value = "127.0.0.1:9876")]
        namesrv_addr: String,
        /// Where the console's HTTP server listens.
        #[arg(long, default_value_t = SocketAddr::from(([127, 0, 0, 1], DEFAULT_CONSOLE_PORT)))]
        listen: SocketAddr,
        /// A host name browsers may reach the console by, besides its IP addresses and
        /// `localhost` (a reverse proxy's name; repeatable).
        #[arg(long = "console-host")]
        console_hosts: Vec<String>,
    },
}

/// `--console-listen`: an address, or `off`.
#[derive(Clone, Copy, Debug)]
struct ConsoleListen(Option<SocketAddr>);

impl std::str::FromStr for ConsoleListen {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("off") {
            return Ok(ConsoleListen(None));
        }
        s.parse()
            .map(|a| ConsoleListen(Some(a)))
            .map_err(|e| format!("{s:?} is neither `off` nor an address (ip:port): {e}"))
    }
}

#[derive(Args)]
struct BrokerArgs {
    /// RocketMQ broker.conf (key=value).
    #[arg(short = 'c', long = "config")]
    config: Option<PathBuf>,
    /// Name server addresses, `host:port;host:port` (overrides namesrvAddr).
    #[arg(short = 'n', long = "namesrv-addr")]
    namesrv_addr: Option<String>,
    /// Store root (overrides storePathRootDir).
    #[arg(long)]
    store_dir: Option<PathBuf>,
    /// Broker listen address (overrides listenPort; the fast port follows at port - 2).
    #[arg(long)]
    broker_listen: Option<SocketAddr>,
    /// Extra RocketMQ keys, `-o key=value` (repeatable).
    #[arg(short = 'o', long = "option")]
    options: Vec<String>,
    /// Where the RocketMQ 5 gRPC endpoint listens (`ip:port`), or `off` [default:
    /// grpcServerPort (8081) on the broker's address, skipped with a warning when taken].
    #[arg(long, default_value = "default", value_parser = parse_grpc_listen)]
    grpc_listen: ringmq::grpc::Listen,
}

fn parse_grpc_listen(s: &str) -> Result<ringmq::grpc::Listen, String> {
    if s == "default" {
        return Ok(ringmq::grpc::Listen::Default);
    }
    s.parse()
}

#[derive(Args)]
struct ServeArgs {
    #[arg(long, default_value = "0.0.0.0:9876")]
    namesrv_listen: SocketAddr,
    /// Also run a controller in this process, configured by this controller.conf (Java's
    /// `enableControllerInNamesrv`); the broker then runs in controller mode with it as its
    /// controller (`enableControllerMode=true`, `controllerAddr`), unless `-o` says otherwise.
    #[arg(long)]
    controller_config: Option<PathBuf>,
    /// Where the web console listens (`ip:port`), or `off` for no console [default:
    /// 127.0.0.1:8080, skipped with a warning when that port is taken].
    #[arg(long)]
    console_listen: Option<ConsoleListen>,
    /// A host name browsers may reach the web console by, besides its IP addresses and
    /// `localhost` (a reverse proxy's name; repeatable).
    #[arg(long = "console-host")]
    console_hosts: Vec<String>,
    #[command(flatten)]
    broker: BrokerArgs,
}

fn broker_config(a: &BrokerArgs) -> Result<BrokerConfig, String> {
    let mut cfg = match &a.config {
        Some(p) => BrokerConfig::from_file(p).map_err(|e| e.to_string())?,
        None => BrokerConfig::default(),
    };
    if let Some(n) = &a.namesrv_addr {
        cfg.set("namesrvAddr", n).map_err(|e| e.to_string())?;
    }
    if let Some(d) = &a.store_dir {
        cfg.store.store_path_root_dir = d.clone();
    }
    if let Some(l) = a.broker_listen {
        let fast_default = cfg.fast_listen_port == cfg.listen_addr.port().saturating_sub(2);
        cfg.listen_addr = l;
        if fast_default {
            cfg.fast_listen_port = if l.port() == 0 {
                0
            } else {
                l.port().saturating_sub(2)
            };
        }
    }
    for o in &a.options {
        let (k, v) = o
            .split_once('=')
            .ok_or_else(|| format!("option {o:?} is not key=value"))?;
        cfg.set(k.trim(), v.trim()).map_err(|e| e.to_string())?;
    }
    cfg.validate().map_err(|e| e.to_string())?;
    if let Some(w) = cfg.ignored_keys_warning() {
        tracing::warn!("{w}");
    }
    Ok(cfg)
}

/// `serve`'s console: where `--console-listen` says (failing the start if it cannot listen
/// there), none with `off`, or on the default address if that is free (a second `serve` on one
/// machine runs without one, with a warning).
fn start_serve_console(
    listen: Option<ConsoleListen>,
    plan: &ringmq::runtime::placement::ThreadPlan,
    namesrv: Vec<SocketAddr>,
    hosts: Vec<String>,
) -> Result<Option<ringmq::console::ConsoleServer>, String> {
    let (addr, chosen) = match listen {
        Some(ConsoleListen(None)) => return Ok(None),
        Some(ConsoleListen(Some(addr))) => (addr, true),
        None => (
            SocketAddr::from(([127, 0, 0, 1], DEFAULT_CONSOLE_PORT)),
            false,
        ),
    };
    match ringmq::console::start_console(plan, addr, namesrv, hosts) {
        Ok(c) => Ok(Some(c)),
        Err(e) if !chosen => {
            tracing::warn!(%addr, error = %e, "no web console: its default address is taken (--console-listen moves it)");
            Ok(None)
        }
        Err(e) => Err(format!("web console on {addr}: {e}")),
    }
}

/// The port of the web console `serve` starts unless told otherwise.
const DEFAULT_CONSOLE_PORT: u16 = 8080;

/// Prints one of the lines scripts and tests read to find the listening addresses. A closed
/// stdout (a supervisor that stopped reading) must not stop the process: the failure is
/// logged, not a panic.
macro_rules! announce {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout();
        let written = writeln!(out, $($arg)*).and_then(|()| out.flush());
        if let Err(e) = written {
            tracing::debug!(error = %e, "address line not printed: stdout is closed");
        }
    }};
}

/// Blocks until SIGINT or SIGTERM.
fn wait_for_signal() {
    static STOP: AtomicBool = AtomicBool::new(false);
    extern "C" fn on_signal(_: libc::c_int) {
        STOP.store(true, Ordering::SeqCst);
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Any panic, on any thread, ends the process: the default hook prints it (with a backtrace
/// under RUST_BACKTRACE), one log line says which thread and why the process stops, and the
/// process aborts (SIGABRT, a non-zero exit). A broker with a dead shard or writer would go on
/// heartbeating and stay routed; ended, a supervisor restarts it and recovery runs.
fn exit_on_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        let thread = std::thread::current();
        let at = info.location().map(|l| l.to_string()).unwrap_or_default();
        tracing::error!(
            thread = thread.name().unwrap_or("unnamed"),
            at,
            panic = info.payload_as_str().unwrap_or("(not a string)"),
            "a thread panicked; ringmq stops so that it is restarted and recovers"
        );
        std::process::abort();
    }));
}

fn main() {
    exit_on_panic();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RINGMQ_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ringmq: {e}");
            1
        }
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<(), String> {
    let _keep = Arc::new(());
    match cli.cmd {
        // Its own exit codes and its own one-line errors.
        Cmd::Admin(args) => std::process::exit(ringmq::admin_cli::run(args)),
        Cmd::Controller { config } => {
            let cfg = ringmq::controller::ControllerConfig::from_file(&config)
                .map_err(|e| format!("{}: {e}", config.display()))?;
            tracing::info!(config = ?cfg, "effective controller configuration");
            let c = ringmq::controller::start_controller(cfg)?;
            // Tests and scripts read this line.
            announce!("controller listening on {}", c.addr);
            wait_for_signal();
            c.shutdown();
            Ok(())
        }
        Cmd::Console {
            namesrv_addr,
            listen,
            console_hosts,
        } => {
            let namesrv = ringmq::config::parse_addr_list("--namesrv-addr", &namesrv_addr)
                .map_err(|e| e.to_string())?;
            let plan = ringmq::runtime::placement::ThreadPlan::for_this_process(false);
            let console = ringmq::console::start_console(&plan, listen, namesrv, console_hosts)
                .map_err(|e| format!("web console on {listen}: {e}"))?;
            announce!("console listening on {}", console.addr);
            wait_for_signal();
            console.shutdown();
            Ok(())
        }
        Cmd::Namesrv {
            listen,
            kv_config,
            options,
        } => {
            let mut settings = ringmq::config::TlsSettings::default();
            for o in &options {
                let (k, v) = o
                    .split_once('=')
                    .ok_or_else(|| format!("option {o:?} is not key=value"))?;
                match settings.set(k.trim(), v.trim()) {
                    Some(r) => r.map_err(|e| e.to_string())?,
                    None => {
                        return Err(format!(
                            "option {k:?}: the name server takes tls.* keys only"
                        ))
                    }
                }
            }
            let tls = TlsContext::load(&settings).map_err(|e| format!("tls: {e}"))?;
            let ns = start_namesrv_with(listen, Some(kv_config), tls).map_err(|e| e.to_string())?;
            announce!("namesrv listening on {}", ns.addr);
            wait_for_signal();
            ns.shutdown();
            Ok(())
        }
        Cmd::Broker(a) => {
            let cfg = broker_config(&a)?;
            tracing::info!(config = ?cfg, "effective configuration");
            let b = start_broker(cfg.clone()).map_err(|e| e.to_string())?;
            let grpc = ringmq::grpc::start(&cfg, a.grpc_listen, &b)?;
            if !b.wait_registered(std::time::Duration::from_secs(5)) {
                tracing::warn!(
                    "not yet registered with every name server; clients may not find routes"
                );
            }
            announce!("broker listening on {}", b.listen_addr);
            if let Some(ha) = b.ha_addr {
                announce!("ha listening on {ha}");
            }
            if let Some(m) = b.metrics_addr {
                announce!("metrics listening on http://{m}/metrics");
            }
            if let Some(g) = &grpc {
                announce!("grpc listening on {}", g.addr);
            }
            wait_for_signal();
            drop(grpc);
            b.shutdown().map_err(|e| e.to_string())
        }
        Cmd::Serve(mut a) => {
            let controller = match &a.controller_config {
                Some(path) => {
                    let cc = ringmq::controller::ControllerConfig::from_file(path)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    let c = ringmq::controller::start_controller(cc)?;
                    // Placed first, so the caller's own `-o` options still win.
                    a.broker
                        .options
                        .insert(0, format!("controllerAddr={}", c.addr));
                    a.broker
                        .options
                        .insert(0, "enableControllerMode=true".into());
                    Some(c)
                }
                None => None,
            };
            let mut cfg = broker_config(&a.broker)?;
            let kv = cfg
                .store
                .store_path_root_dir
                .join("namesrv")
                .join("kvConfig.json");
            // The embedded name server serves its port as the broker does.
            let tls = TlsContext::load(&cfg.tls).map_err(|e| format!("tls: {e}"))?;
            let enforcing = tls.mode == ringmq::config::tls::TlsMode::Enforcing;
            if cfg.namesrv_addr.is_empty() && enforcing && tls.client.is_none() {
                return Err("tls.server.mode=enforcing: the broker registers with the \
                     embedded name server over TLS only with tls.enable=true"
                    .into());
            }
            let ns =
                start_namesrv_with(a.namesrv_listen, Some(kv), tls).map_err(|e| e.to_string())?;
            let ns_addr = if ns.addr.ip().is_unspecified() {
                SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), ns.addr.port())
            } else {
                ns.addr
            };
            if cfg.namesrv_addr.is_empty() {
                cfg.namesrv_addr = vec![ns_addr];
            }
            tracing::info!(config = ?cfg, "effective configuration");
            // Before the broker: a console that cannot listen where it was told to stops the
            // start before the store is opened.
            let plan = ringmq::broker::threads::thread_plan(&cfg);
            let console = start_serve_console(
                a.console_listen,
                &plan,
                cfg.namesrv_addr.clone(),
                a.console_hosts.clone(),
            )?;
            let b = start_broker(cfg.clone()).map_err(|e| e.to_string())?;
            let grpc = ringmq::grpc::start(&cfg, a.broker.grpc_listen, &b)?;
            if !b.wait_registered(std::time::Duration::from_secs(5)) {
                tracing::warn!(
                    "not yet registered with the name server; clients may not find routes"
                );
            }
            // Tests and scripts read these lines to find ephemeral ports.
            if let Some(c) = &controller {
                announce!("controller listening on {}", c.addr);
            }
            announce!("namesrv listening on {}", ns.addr);
            announce!("broker listening on {}", b.listen_addr);
            if let Some(ha) = b.ha_addr {
                announce!("ha listening on {ha}");
            }
            if let Some(m) = b.metrics_addr {
                announce!("metrics listening on http://{m}/metrics");
            }
            if let Some(c) = &console {
                announce!("console listening on {}", c.addr);
            }
            if let Some(g) = &grpc {
                announce!("grpc listening on {}", g.addr);
            }
            wait_for_signal();
            drop(grpc);
            if let Some(c) = console {
                c.shutdown();
            }
            let res = b.shutdown().map_err(|e| e.to_string());
            ns.shutdown();
            if let Some(c) = controller {
                c.shutdown();
            }
            res
        }
    }
}
