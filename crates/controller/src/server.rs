//! The controller process's thread: a tokio `current_thread` runtime named `ringmq-control`
//! (never a glommio shard) that runs openraft, the request scheduler, the listener on the
//! controller's peer address (brokers and peer controllers share it), the heartbeat scan and
//! the watch for leadership.
//!
//! A connection reads frames in order and answers each request in its own task, at most
//! `MAX_IN_FLIGHT_PER_CONN` at once, through a bounded outbox to the connection's writer. When
//! a connection closes, the brokers that sent heartbeats on it go inactive (Java's
//! `onBrokerChannelClose`).

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};

use super::config::ControllerConfig;
use super::processor;
use super::raft::{self, state_machine::Shared};
use super::service::{self, on_inactive, scan_reelect, Ctx};
use super::wire::{read_command, write_command};
use crate::common::time::now_ms;
use crate::runtime::placement::{spawn_unpinned, Role};

/// Requests of one connection answered concurrently; more wait for the reader.
pub const MAX_IN_FLIGHT_PER_CONN: usize = 64;
/// Answers queued for one connection's writer.
pub const CONN_OUTBOX: usize = 256;
/// Connections open at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 4096;

/// A running controller: its address, and how to stop it.
pub struct ControllerHandle {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControllerHandle {
    pub fn shutdown(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts the controller thread and returns once it listens (or failed to start).
pub fn start_controller(cfg: ControllerConfig) -> Result<ControllerHandle, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let thread = spawn_unpinned(Role::Controller, move || {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready_tx.send(Err(format!("tokio runtime: {e}")));
                return;
            }
        };
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, run(cfg, ready_tx, stop_rx));
    })
    .map_err(|e| format!("controller thread: {e}"))?;
    match ready_rx.recv() {
        Ok(Ok(addr)) => Ok(ControllerHandle {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            Err("controller thread ended before starting".into())
        }
    }
}

async fn run(
    cfg: ControllerConfig,
    ready: std::sync::mpsc::Sender<Result<SocketAddr, String>>,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let me = cfg.self_peer().addr;
    let bind = SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), me.port());
    let listener = match TcpListener::bind(bind).await {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(format!("controller listen on {bind}: {e}")));
            return;
        }
    };
    let shared = Shared::default();
    let raft = match raft::start(&cfg, shared.clone()).await {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let scan_every = Duration::from_millis(cfg.scan_not_active_broker_interval_ms);
    let reelect_every = Duration::from_millis(cfg.scan_inactive_master_interval_ms);
    let (ctx, jobs) = Ctx::new(cfg, raft, shared);
    tokio::task::spawn_local(service::run_scheduler(ctx.clone(), jobs));
    tokio::task::spawn_local(accept_loop(ctx.clone(), listener));
    tokio::task::spawn_local(scan_loop(ctx.clone(), scan_every));
    tokio::task::spawn_local(reelect_loop(ctx.clone(), reelect_every));
    tokio::task::spawn_local(watch_leader(ctx.clone()));
    let _ = ready.send(Ok(me));
    let _ = stop.await;
    tracing::info!("controller shutting down");
    if let Err(e) = ctx.raft.shutdown().await {
        tracing::warn!("raft shutdown: {e}");
    }
}

async fn accept_loop(ctx: Rc<Ctx>, listener: TcpListener) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("controller accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "too many controller connections; closed");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        tokio::task::spawn_local(async move {
            let conn = ctx.new_conn_id();
            serve_connection(&ctx, stream, conn).await;
            let gone = {
                let mut live = ctx.live.borrow_mut();
                live.set_now(now_ms());
                live.on_connection_closed(conn)
            };
            on_inactive(&ctx, gone);
            drop(permit);
        });
    }
}

async fn serve_connection(ctx: &Rc<Ctx>, stream: TcpStream, conn: u64) {
    let (mut rd, mut wr) = stream.into_split();
    let (out_tx, mut out_rx) = mpsc::channel(CONN_OUTBOX);
    let writer = tokio::task::spawn_local(async move {
        while let Some(cmd) = out_rx.recv().await {
            if let Err(e) = write_command(&mut wr, &cmd).await {
                tracing::debug!("controller connection write: {e}");
                break;
            }
        }
    });
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONN));
    let mut buf = BytesMut::new();
    loop {
        let cmd = match read_command(&mut rd, &mut buf).await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => {
                tracing::info!(conn, "controller connection closed: {e}");
                break;
            }
        };
        if cmd.is_response() {
            continue;
        }
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            break;
        };
        let ctx = ctx.clone();
        let out = out_tx.clone();
        tokio::task::spawn_local(async move {
            if let Some(answer) = processor::handle(&ctx, cmd, conn).await {
                let _ = out.send(answer).await;
            }
            drop(permit);
        });
    }
    drop(out_tx);
    writer.abort();
}

/// Every `scanNotActiveBrokerInterval`: expire silent brokers (any controller); the leader
/// re-elects where an expired broker was master.
async fn scan_loop(ctx: Rc<Ctx>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let expired = {
            let mut live = ctx.live.borrow_mut();
            live.set_now(now_ms());
            live.scan()
        };
        on_inactive(&ctx, expired);
    }
}

/// Every `scanInactiveMasterInterval`, on the leader: re-elect where a master is dead.
async fn reelect_loop(ctx: Rc<Ctx>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        scan_reelect(&ctx);
    }
}

/// When this controller becomes leader, scan at once for masters that died meanwhile.
async fn watch_leader(ctx: Rc<Ctx>) {
    let mut metrics = ctx.raft.metrics();
    let mut was_leader = false;
    loop {
        if metrics.changed().await.is_err() {
            return;
        }
        let leader = ctx.is_leader();
        if leader && !was_leader {
            tracing::info!("this controller is now the leader");
            scan_reelect(&ctx);
        }
        was_leader = leader;
    }
}
