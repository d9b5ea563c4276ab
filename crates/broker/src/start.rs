//! Broker start-up and shutdown order.
//!
//! Start: open and recover the store (single-threaded, before anything serves), bind the
//! listeners (one SO_REUSEPORT socket per shard on the same port), start the writer thread, then
//! the shards, each adopting its listeners, queues and offsets. Shard 0 also runs the metadata
//! tasks (offset persistence, channel expiry, name-server registration).
//!
//! Shutdown: stop accepting, persist offsets and metadata, unregister from name servers, flush
//! consume queues, stop the shards, then the writer drains its inbox, flushes, writes the
//! checkpoint and removes the abort file.

use std::cell::Cell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::now_ms;
use crate::completion::{self, CompletionQueues, ShardDispatcher};
use crate::config::BrokerConfig;
use crate::constants::SHARD_MAILBOX_CAPACITY;
use crate::handler::BrokerHandler;
use crate::metadata::topic_validator::{SCHEDULE_TOPIC, TIMER_TOPIC};
use crate::metadata::Metadata;
use crate::remoting::connection::{serve, ConnLimits};
use crate::remoting::{ConnHandle, ConnInfo, ResponseTable};
use crate::runtime::net::{bind_reuseport, Listener};
use crate::runtime::{self, mailbox, Job, MailboxSender, Mesh, Role};
use crate::shard::{owner_of, BrokerContext, OffsetTable, Shard};
use crate::store::consume_queue::ConsumeQueue;
use crate::writer::{self, WriterHandle};
use crate::{clients, offsets, register, schedule, timer, topic_manager};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("config: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start shard threads: {0}")]
    Threads(std::io::Error),
    #[error("access control: {0}")]
    Auth(#[from] crate::auth_state::AuthStartError),
    #[error("tls: {0}")]
    Tls(#[from] crate::tls::TlsError),
}

/// A running broker.
pub struct BrokerHandle {
    pub listen_addr: SocketAddr,
    pub fast_addr: Option<SocketAddr>,
    /// Where slaves connect (masters only).
    pub ha_addr: Option<SocketAddr>,
    /// The Prometheus endpoint (`metricsExporterType=PROM`).
    pub metrics_addr: Option<SocketAddr>,
    /// The address every message id names and name servers hand to clients.
    pub store_host: SocketAddr,
    registered: Arc<std::sync::atomic::AtomicBool>,
    /// Reaches every shard from outside them (the gRPC endpoint's thread).
    mesh: Mesh<Shard>,
    senders: Vec<MailboxSender<Job<Shard>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    writer: Option<WriterHandle>,
}

/// Everything one shard needs to build its state, handed over once at start.
struct ShardParts {
    mesh: Mesh<Shard>,
    rx: runtime::MailboxReceiver<Job<Shard>>,
    completion_queues: CompletionQueues,
    listeners: Vec<(std::net::TcpListener, bool)>,
    /// Shard 0 of a master: the HA listener.
    ha_listener: Option<std::net::TcpListener>,
    /// Shard 0 with metricsExporterType=PROM: the metrics endpoint's listener and sources.
    metrics: Option<crate::metrics::MetricsParts>,
    cqs: Vec<ConsumeQueue>,
    offsets: OffsetTable,
    meta: Option<Metadata>,
    delay_progress: std::collections::BTreeMap<i32, i64>,
    timer_progress: timer::state::TimerProgress,
    /// Shard 0 in controller mode: the commit log's epochs.
    epochs: Option<crate::store::EpochFileCache>,
    /// Connections open across the broker's shards (`maxConnections`).
    open_connections: Arc<AtomicUsize>,
    /// The auth table every shard starts with, and shard 0's users and ACLs.
    auth_table: Arc<crate::auth::table::AuthTable>,
    auth_owner: Option<crate::auth_state::AuthOwner>,
}

fn bind_all(
    addr: SocketAddr,
    n: usize,
) -> Result<(SocketAddr, Vec<std::net::TcpListener>), StartError> {
    let err = |source| StartError::Listen { addr, source };
    let first = bind_reuseport(addr).map_err(err)?;
    let actual = first.local_addr().map_err(err)?;
    let mut all = vec![first];
    for _ in 1..n {
        all.push(bind_reuseport(actual).map_err(|source| StartError::Listen {
            addr: actual,
            source,
        })?);
    }
    Ok((actual, all))
}

/// Opens the store and starts the writer and the shards.
pub fn start_broker(cfg: BrokerConfig) -> Result<BrokerHandle, StartError> {
    cfg.validate()?;
    let tls = crate::tls::TlsContext::load(&cfg.tls)?;
    check_ha_tls(&cfg, &tls)?;
    tracing::info!(mode = tls.mode.name(), client = tls.client.is_some(), "tls");
    let n = crate::threads::shard_count(&cfg);
    let (listen_addr, mut main_listeners) = bind_all(cfg.listen_addr, n)?;
    let mut fast_listeners = Vec::new();
    let mut fast_addr = None;
    if cfg.fast_listen_port != 0 && cfg.fast_listen_port != listen_addr.port() {
        let want = SocketAddr::new(cfg.listen_addr.ip(), cfg.fast_listen_port);
        match bind_all(want, n) {
            Ok((a, l)) => {
                fast_addr = Some(a);
                fast_listeners = l;
            }
            // The VIP port is a convenience for old clients; a taken port must not stop us.
            Err(e) => tracing::warn!(error = %e, "fast (VIP) port not available"),
        }
    }
    // A master's HA port: haListenPort, or the broker's port + 1 (when the OS chose the
    // broker's port, it chooses this one too). A taken port stops start-up, as in Java.
    let mut ha_listener = None;
    let mut ha_addr = None;
    if !cfg.ha.broker_role.is_slave() || cfg.controller_mode.enabled {
        let port = match (cfg.ha.ha_listen_port, cfg.listen_addr.port()) {
            (None, 0) => 0,
            _ => cfg.ha.ha_port(listen_addr.port()),
        };
        let want = SocketAddr::new(cfg.listen_addr.ip(), port);
        let err = |source| StartError::Listen { addr: want, source };
        let l = std::net::TcpListener::bind(want).map_err(err)?;
        ha_addr = Some(l.local_addr().map_err(err)?);
        ha_listener = Some(l);
    }
    // The Prometheus endpoint: metricsPromExporterHost (brokerIP1 by default, as in Java); a
    // taken port stops start-up.
    let mut metrics_listener = None;
    let mut metrics_addr = None;
    if cfg.metrics.exporter_type == crate::config::metrics::ExporterType::Prom {
        let ip = cfg.metrics.prom_host.unwrap_or(cfg.broker_ip1());
        let want = SocketAddr::new(ip, cfg.metrics.prom_port);
        let err = |source| StartError::Listen { addr: want, source };
        let l = std::net::TcpListener::bind(want).map_err(err)?;
        metrics_addr = Some(l.local_addr().map_err(err)?);
        metrics_listener = Some(l);
    }
    let mut store_cfg = cfg.store.clone();
    // The writer's helper threads start at open, so the store learns the plan here.
    let plan = crate::threads::thread_plan(&cfg);
    store_cfg.threads = plan;
    let opened = crate::store::open(&store_cfg)?;
    if opened.recovered_from_crash {
        tracing::warn!("previous run did not shut down cleanly; recovered from the commit log");
    }
    let store_host = cfg.store_host(listen_addr.port());
    let (meshes, receivers) = Mesh::<Shard>::new(n, SHARD_MAILBOX_CAPACITY);
    let senders: Vec<_> = (0..n).map(|i| meshes[0].sender(i)).collect();
    let outside = meshes[0].clone();
    let completion_queues = completion::completion_queues(n);
    let logics_msg_timestamp = opened.checkpoint.logics_msg_timestamp.clone();
    let (writer_parts, cqs) = writer::WriterParts::from_opened(opened);
    let writer = writer::spawn_writer(
        writer_parts,
        &store_cfg,
        Box::new(ShardDispatcher::new(completion_queues.clone(), owner_of)),
    )?;
    let mut metrics_parts = metrics_listener.map(|listener| crate::metrics::MetricsParts {
        listener,
        group_commit: writer.group_commit_stats_shared(),
        batches: writer.batch_stats_shared(),
        completion_queues: completion_queues.clone(),
    });
    let delay_levels = cfg.store.delay_levels.clone();
    let mut delay_split: Vec<std::collections::BTreeMap<i32, i64>> = vec![Default::default(); n];
    for (level, off) in schedule::load_progress(&cfg.store.store_path_root_dir) {
        if level >= 1 {
            delay_split[owner_of(SCHEDULE_TOPIC, (level - 1) as u32, n)].insert(level, off);
        }
    }
    let ctx = Arc::new(BrokerContext {
        delay_levels,
        logics_msg_timestamp,
        registered: Arc::new(std::sync::atomic::AtomicBool::new(
            cfg.namesrv_addr.is_empty(),
        )),
        store_host,
        writer: writer.clone_sender(),
        shard_count: n,
        started_ms: now_ms(),
        stats: crate::stats::BrokerStats::new(n),
        slave_acks: Arc::new(crate::group_transfer::SlaveAcks::new(n)),
        ha_client: Arc::default(),
        role: Arc::new(crate::role::RoleState::from_config(&cfg)),
        auth: crate::auth_state::settings_of(&cfg),
        ha_addr,
        tls,
        cfg: cfg.clone(),
    });
    let mut cq_split: Vec<Vec<ConsumeQueue>> = (0..n).map(|_| Vec::new()).collect();
    for cq in cqs {
        let o = owner_of(cq.topic(), cq.queue_id(), n);
        cq_split[o].push(cq);
    }
    let offsets_split = offsets::load(&cfg.store.store_path_root_dir, n);
    let mut meta = Some(Metadata::load(&cfg));
    let auth_owner = crate::auth_state::AuthOwner::load(&cfg)?;
    let auth_table = Arc::new(auth_owner.table());
    let mut auth_owner = Some(auth_owner);
    let timer_owner = owner_of(TIMER_TOPIC, timer::state::TIMER_QUEUE, n);
    let mut timer_progress = Some(timer::state::load_progress(&cfg.store.store_path_root_dir));
    let open_connections = Arc::new(AtomicUsize::new(0));
    let mut epochs = if cfg.controller_mode.enabled {
        Some(crate::store::EpochFileCache::load(
            &cfg.store.store_path_root_dir,
        )?)
    } else {
        None
    };
    let mut parts = Vec::new();
    for (i, (((mesh, rx), (cqs, offsets)), delay_progress)) in meshes
        .into_iter()
        .zip(receivers)
        .zip(cq_split.into_iter().zip(offsets_split))
        .zip(delay_split)
        .enumerate()
    {
        let mut listeners = vec![(main_listeners.remove(0), false)];
        if !fast_listeners.is_empty() {
            listeners.push((fast_listeners.remove(0), true));
        }
        parts.push(Some(ShardParts {
            mesh,
            rx,
            completion_queues: completion_queues.clone(),
            listeners,
            ha_listener: if i == 0 { ha_listener.take() } else { None },
            metrics: if i == 0 { metrics_parts.take() } else { None },
            cqs,
            offsets,
            meta: if i == 0 { meta.take() } else { None },
            delay_progress,
            timer_progress: if i == timer_owner {
                timer_progress.take().unwrap_or_default()
            } else {
                timer::state::TimerProgress::default()
            },
            epochs: if i == 0 { epochs.take() } else { None },
            open_connections: open_connections.clone(),
            auth_table: auth_table.clone(),
            auth_owner: if i == 0 { auth_owner.take() } else { None },
        }));
    }
    let parts = Arc::new(Mutex::new(parts));
    let ctx2 = ctx.clone();
    let shards = (0..n).map(Role::Shard).collect();
    let threads = runtime::start_executors(&plan, shards, move |i| {
        // Start-up only: each shard takes its parts once.
        let p = parts.lock().ok().and_then(|mut v| v[i].take());
        let ctx = ctx2.clone();
        async move {
            match p {
                Some(p) => run_shard(i, ctx, p).await,
                None => tracing::error!(shard = i, "no start-up parts for shard"),
            }
        }
    })
    .map_err(StartError::Threads)?;
    tracing::info!(%listen_addr, ?fast_addr, ?ha_addr, shards = n, store = %cfg.store.store_path_root_dir.display(), "broker started");
    // What the name server will hand to clients (and what every message id names).
    tracing::info!(advertised = %ctx.store_host, explicit = cfg.broker_ip1.is_some(), "clients are sent to the broker at {}", ctx.store_host);
    if let Some(w) = cfg.advertised_address_warning() {
        tracing::warn!("{w}");
    }
    Ok(BrokerHandle {
        store_host: ctx.store_host,
        registered: ctx.registered.clone(),
        mesh: outside,
        listen_addr,
        fast_addr,
        ha_addr,
        metrics_addr,
        senders,
        threads,
        writer: Some(writer),
    })
}

async fn run_shard(i: usize, ctx: Arc<BrokerContext>, p: ShardParts) {
    let is_meta = p.meta.is_some();
    let topics = Arc::new(
        p.meta
            .as_ref()
            .map(|m| m.topic_snapshot())
            .unwrap_or_default(),
    );
    let shard = Rc::new(Shard::new(
        i,
        p.mesh,
        ctx.clone(),
        p.cqs,
        p.offsets,
        topics,
        Arc::default(),
        p.meta,
        p.delay_progress,
        p.completion_queues,
        (p.auth_table, p.auth_owner),
    ));
    runtime::spawn(completion::run(shard.clone()));
    // The services that store messages run on masters only, as Java starts them; in
    // controller mode they start paused and run while the broker is master.
    if !shard.ctx.role.is_slave() || shard.ctx.cfg.controller_mode.enabled {
        schedule::start(&shard);
        timer::start(&shard, p.timer_progress);
        crate::transaction::start(&shard);
    }
    if shard.ctx.cfg.ha.needs_slave_acks() || shard.ctx.cfg.controller_mode.enabled {
        runtime::spawn(crate::ha::group_transfer(shard.clone()));
    }
    crate::clean::start(&shard);
    crate::pop::persist::start(&shard);
    if is_meta {
        topic_manager::topics_changed(&shard);
        runtime::spawn(crate::auth_gate::watch_plain_acl(shard.clone()));
        let learned: register::LearnedMaster = Rc::default();
        let master: register::MasterAddr = Rc::default();
        if shard.ctx.cfg.controller_mode.enabled {
            // Controller mode: the controller decides the role; the slave's side follows
            // whichever master it names, and mirrors its metadata while this broker is a slave.
            let r = crate::replicas::Replicas::open(p.epochs.unwrap_or_default());
            runtime::spawn(crate::replicas::run(shard.clone(), r.clone()));
            runtime::spawn(crate::ha_autoswitch_client::follow(
                shard.clone(),
                r,
                learned.clone(),
                master.clone(),
            ));
            runtime::spawn(crate::slave_sync::run(shard.clone(), master.clone()));
        } else if shard.ctx.cfg.ha.broker_role.is_slave() {
            runtime::spawn(crate::ha_client::follow(shard.clone(), learned.clone()));
            runtime::spawn(crate::slave_sync::run(shard.clone(), master.clone()));
        }
        runtime::spawn(register::run(shard.clone(), learned, master));
        runtime::spawn(crate::runtime_info::run_sampler(shard.clone()));
        runtime::spawn(crate::broker_stats::run_sampler(shard.clone()));
        runtime::spawn(periodic_meta(shard.clone()));
    }
    // The main and fast listeners of a shard share its connection count.
    let shard_connections = Rc::new(Cell::new(0usize));
    if let Some(m) = p.metrics {
        runtime::spawn(crate::metrics::serve(shard.clone(), m));
    }
    if let Some(l) = p.ha_listener {
        runtime::spawn(crate::ha::serve(shard.clone(), Listener::from_std(l)));
    }
    for (l, fast) in p.listeners {
        let counts = ConnectionCounts {
            broker: p.open_connections.clone(),
            shard: shard_connections.clone(),
        };
        runtime::spawn(accept_loop(
            shard.clone(),
            Listener::from_std(l),
            fast,
            counts,
        ));
    }
    while let Some(job) = p.rx.recv().await {
        job(&shard);
        if shard.is_stopping() {
            break;
        }
    }
    let _ = shard.flush_queues().await;
}

async fn accept_loop(
    shard: Rc<Shard>,
    listener: Listener,
    fast_port: bool,
    counts: ConnectionCounts,
) {
    let handler = Rc::new(BrokerHandler {
        shard: shard.clone(),
        fast_port,
    });
    let cfg = &shard.ctx.cfg.limits;
    let limits = ConnLimits {
        max_frame_len: cfg.frame_max_length,
        max_inflight: cfg.max_inflight_per_connection,
        idle_timeout: cfg.idle_timeout(),
        write_stall_timeout: cfg.write_stall_timeout(),
    };
    let outbox_capacity = cfg.connection_outbox_capacity;
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                runtime::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shard.is_stopping() {
            return;
        }
        let Ok(peer) = stream.peer_addr() else {
            continue;
        };
        let guard = match counts.take(cfg.max_connections, cfg.max_connections_per_shard) {
            Ok(g) => g,
            Err(which) => {
                // Dropping the stream closes it: the client sees the connection end at once
                // rather than hang in the listen backlog.
                tracing::warn!(%peer, shard = shard.id, limit = which, "connection limit reached, refusing");
                continue;
            }
        };
        let (tx, rx) = mailbox(outbox_capacity);
        let info = ConnInfo {
            id: shard.next_conn_id(),
            peer,
            outbox: tx.clone(),
        };
        let responses = Rc::new(ResponseTable::new(cfg.max_pending_calls_per_connection));
        let conn = ConnHandle {
            outbox: tx,
            responses: responses.clone(),
        };
        shard.add_conn(info.id, conn);
        let handler = handler.clone();
        let tls = shard.ctx.tls.clone();
        runtime::spawn(async move {
            serve(stream, handler, info, rx, responses, limits, tls).await;
            drop(guard);
        });
    }
}

/// `tls.ha.enable` needs what each side of the HA link uses: a master (or a controller-mode
/// broker) its server certificate, a slave (or a controller-mode broker) `tls.enable`.
fn check_ha_tls(cfg: &BrokerConfig, tls: &crate::tls::TlsContext) -> Result<(), StartError> {
    if !tls.ha {
        return Ok(());
    }
    let either = cfg.controller_mode.enabled;
    let slave = cfg.ha.broker_role.is_slave();
    let missing = if (either || !slave) && tls.server.is_none() {
        "a master's HA port needs the server certificate (tls.server.certPath and keyPath, \
         tls.server.mode not disabled)"
    } else if (either || slave) && tls.client.is_none() {
        "a slave's HA connection needs tls.enable=true"
    } else {
        return Ok(());
    };
    Err(StartError::Tls(crate::tls::TlsError::Invalid {
        key: "tls.ha.enable",
        reason: missing.into(),
    }))
}

/// The open-connection counters a new connection is admitted against.
#[derive(Clone)]
struct ConnectionCounts {
    /// Across all shards: shared between threads.
    broker: Arc<AtomicUsize>,
    /// This shard's listeners only: local, no atomics.
    shard: Rc<Cell<usize>>,
}

impl ConnectionCounts {
    /// Admits one connection, or names the limit that refused it.
    fn take(&self, max_broker: usize, max_shard: usize) -> Result<ConnectionSlot, &'static str> {
        if self.shard.get() >= max_shard {
            return Err("maxConnectionsPerShard");
        }
        if self.broker.fetch_add(1, Ordering::AcqRel) >= max_broker {
            self.broker.fetch_sub(1, Ordering::AcqRel);
            return Err("maxConnections");
        }
        self.shard.set(self.shard.get() + 1);
        Ok(ConnectionSlot(self.clone()))
    }
}

/// One admitted connection; dropping it frees its slot in both counts.
struct ConnectionSlot(ConnectionCounts);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.shard.set(self.0.shard.get() - 1);
        self.0.broker.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Shard 0 housekeeping: persist offsets every 5 s, expire silent channels every 10 s.
async fn periodic_meta(s0: Rc<Shard>) {
    let mut last: HashMap<PathBuf, Vec<u8>> = HashMap::new();
    let mut tick = 0u64;
    while !s0.is_stopping() {
        runtime::sleep(Duration::from_secs(5)).await;
        tick += 1;
        for (path, bytes) in gather_progress(&s0).await {
            if last.get(&path) != Some(&bytes) {
                topic_manager::persist_in_background(path.clone(), bytes.clone());
                last.insert(path, bytes);
            }
        }
        if tick.is_multiple_of(2) {
            clients::expire_channels(&s0);
            flush_all_queues(&s0).await;
        }
    }
}

/// The progress files shard 0 keeps, gathered from every shard, each with its path: consumer
/// offsets, delay-level offsets and (when the timer runs) the timer's progress.
async fn gather_progress(s0: &Rc<Shard>) -> Vec<(PathBuf, Vec<u8>)> {
    let root = &s0.ctx.cfg.store.store_path_root_dir;
    let mut files = vec![
        (offsets::offsets_path(root), offsets::gather(s0).await),
        (
            schedule::delay_offsets_path(root),
            schedule::gather(s0).await,
        ),
    ];
    if let Some(t) = gather_timer(s0).await {
        files.push((timer::state::progress_path(root), t));
    }
    if let Some(p) = crate::pop::persist::gather(s0).await {
        files.push((crate::pop::persist::path(root), p));
    }
    files
}

/// Shard 0: every shard flushes its ConsumeQueues; the oldest timestamp they all reached goes
/// into the checkpoint, so crash recovery re-dispatches only from there.
async fn flush_all_queues(s0: &Rc<Shard>) {
    let mut min = i64::MAX;
    for i in 0..s0.mesh.len() {
        let r = if i == s0.id {
            s0.flush_queues().await
        } else {
            s0.mesh
                .call(i, |s| async move { s.flush_queues().await })
                .await
                .ok()
                .flatten()
        };
        match r {
            Some(ts) => min = min.min(ts),
            None => return,
        }
    }
    if min != i64::MAX {
        s0.ctx
            .logics_msg_timestamp
            .fetch_max(min, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The timer owner's progress bytes.
async fn gather_timer(s0: &Rc<Shard>) -> Option<Vec<u8>> {
    let owner = timer::owner(s0);
    if owner == s0.id {
        return timer::progress_bytes(s0);
    }
    s0.mesh
        .call(owner, |s| async move { timer::progress_bytes(&s) })
        .await
        .ok()
        .flatten()
}

impl BrokerHandle {
    /// A handle on every shard's mailbox for threads beside the shards (`Send`; its `call`
    /// awaits on any executor).
    pub fn mesh(&self) -> Mesh<Shard> {
        self.mesh.clone()
    }

    /// Waits until every name server has the broker's routes (true), or `timeout` passed.
    pub fn wait_registered(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while !self.registered.load(std::sync::atomic::Ordering::Acquire) {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Stops serving and shuts the store down cleanly (removes the abort file).
    pub fn shutdown(mut self) -> Result<(), crate::store::StoreError> {
        // Shard 0 first persists what it owns, then every shard stops its loop.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let job: Job<Shard> = Box::new(move |s0: &Rc<Shard>| {
            let s0 = s0.clone();
            runtime::spawn(async move {
                // Stop delayed and timed deliveries everywhere, let one in flight finish, then
                // record progress: nothing recorded as pending was already delivered.
                for i in 0..s0.mesh.len() {
                    let _ = s0.mesh.post(i, Box::new(|s: &Rc<Shard>| s.pause()));
                }
                runtime::sleep(Duration::from_millis(300)).await;
                let mut files = gather_progress(&s0).await;
                {
                    let m = s0.meta();
                    files.push((m.topics_path(), m.topics_file_bytes()));
                    files.push((m.groups_path(), m.groups_file_bytes()));
                }
                let res = runtime::spawn_blocking(move || {
                    files.iter().try_for_each(|(path, bytes)| {
                        crate::common::config_file::write(path, bytes)
                    })
                })
                .await;
                if let Err(e) = res {
                    tracing::error!(error = %e, "cannot persist metadata at shutdown");
                }
                register::unregister_all(&s0).await;
                let _ = tx.send(());
            });
        });
        if self.senders[0].send_blocking(job).is_ok() {
            let _ = rx.recv_timeout(Duration::from_secs(10));
        }
        for s in &self.senders {
            let _ = s.send_blocking(Box::new(|s: &Rc<Shard>| s.stop()));
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        match self.writer.take() {
            Some(w) => w.shutdown(),
            None => Ok(()),
        }
    }
}
