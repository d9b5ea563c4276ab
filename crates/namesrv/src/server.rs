//! Runs the name server's pure core ([`crate::NameServer`]) on its own executor thread:
//! a listener, the shared connection loop, broker-expiry scans every 5 s, and KV-config
//! persistence off the thread's hot path (on its file-work thread). Both threads are the thread
//! plan's (`Role::Namesrv`, `Role::NamesrvFiles`), left to the scheduler.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use crate::common::now_ms;
use crate::constants::OUTBOX_CAPACITY;
use crate::protocol::RemotingCommand;
use crate::remoting::connection::{serve, ConnLimits};
use crate::remoting::{
    encode_frame, ConnInfo, Handler, LocalFuture, NoRange, Outbound, ResponseTable,
};
use crate::runtime::net::{bind_reuseport, Listener};
use crate::runtime::{self, mailbox, MailboxSender, Role, ThreadPlan};
use crate::tls::TlsContext;
use crate::NameServer;

struct NamesrvHandler {
    core: RefCell<NameServer>,
    next_conn: std::cell::Cell<u64>,
}

impl Handler for NamesrvHandler {
    fn handle(
        self: Rc<Self>,
        conn: ConnInfo,
        cmd: RemotingCommand,
    ) -> LocalFuture<Option<Outbound>> {
        let resp = self.core.borrow_mut().handle(conn.id, &cmd, now_ms());
        Box::pin(async move { resp.and_then(|r| encode_frame(&r)) })
    }

    fn closed(self: Rc<Self>, conn: &ConnInfo) {
        self.core.borrow_mut().on_connection_closed(conn.id);
    }

    type Range = NoRange;

    fn open_range(&self, _phy: u64, _size: u32) -> std::io::Result<NoRange> {
        Err(std::io::Error::other("the name server has no commit log"))
    }
}

/// A running name server.
pub struct NamesrvHandle {
    pub addr: SocketAddr,
    stop: MailboxSender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NamesrvHandle {
    pub fn shutdown(mut self) {
        let _ = self.stop.send_blocking(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds `addr` and serves the name server on a dedicated thread. `kv_path` persists KV config.
pub fn start_namesrv(addr: SocketAddr, kv_path: Option<PathBuf>) -> std::io::Result<NamesrvHandle> {
    start_namesrv_with(addr, kv_path, TlsContext::plain())
}

/// As [`start_namesrv`], with `tls.server.mode` on its port as `tls` says.
pub fn start_namesrv_with(
    addr: SocketAddr,
    kv_path: Option<PathBuf>,
    tls: TlsContext,
) -> std::io::Result<NamesrvHandle> {
    let listener = bind_reuseport(addr)?;
    let actual = listener.local_addr()?;
    let (stop_tx, stop_rx) = mailbox::<()>(1);
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some((
        listener, stop_rx, kv_path, tls,
    ))));
    // No plan pins the name server's threads: the default one places them as any would.
    let mut threads =
        runtime::start_executors(&ThreadPlan::default(), vec![Role::Namesrv], move |_| {
            let parts = slot.lock().ok().and_then(|mut s| s.take());
            async move {
                if let Some((l, stop, kv, tls)) = parts {
                    run(Listener::from_std(l), stop, kv, tls).await;
                }
            }
        })?;
    tracing::info!(%actual, "name server started");
    Ok(NamesrvHandle {
        addr: actual,
        stop: stop_tx,
        thread: threads.pop(),
    })
}

async fn run(
    listener: Listener,
    stop: runtime::MailboxReceiver<()>,
    kv_path: Option<PathBuf>,
    tls: TlsContext,
) {
    let mut core = NameServer::new(kv_path.clone());
    if let Ok(a) = listener.local_addr() {
        core.set_listen_port(a.port());
    }
    let handler = Rc::new(NamesrvHandler {
        core: RefCell::new(core),
        next_conn: std::cell::Cell::new(1),
    });
    let h2 = handler.clone();
    runtime::spawn(async move {
        loop {
            runtime::sleep(Duration::from_secs(5)).await;
            let removed = h2.core.borrow_mut().scan_not_active_brokers(now_ms());
            for addr in removed {
                tracing::info!(broker = %addr, "broker expired");
            }
            let snapshot = h2.core.borrow_mut().take_kv_snapshot();
            if let (Some(bytes), Some(path)) = (snapshot, kv_path.clone()) {
                let p = path.clone();
                let res =
                    runtime::spawn_blocking(move || crate::common::config_file::write(&p, &bytes))
                        .await;
                if let Err(e) = res {
                    tracing::error!(path = %path.display(), error = %e, "cannot persist kv config");
                }
            }
        }
    });
    // The name server has no broker.conf of its own: the constants apply.
    let limits = ConnLimits::default();
    let accept = async {
        loop {
            let stream = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "name server accept failed");
                    runtime::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let Ok(peer) = stream.peer_addr() else {
                continue;
            };
            let id = handler.next_conn.get();
            handler.next_conn.set(id + 1);
            let (tx, rx) = mailbox(OUTBOX_CAPACITY);
            let info = ConnInfo {
                id,
                peer,
                outbox: tx,
            };
            // The name server never asks its clients anything: a table that takes no request.
            let responses = Rc::new(ResponseTable::new(0));
            runtime::spawn(serve(
                stream,
                handler.clone(),
                info,
                rx,
                responses,
                limits,
                tls.clone(),
            ));
        }
    };
    use futures_lite::FutureExt;
    let stopped = async {
        let _ = stop.recv().await;
    };
    accept.or(stopped).await;
}
