//! The gRPC endpoint's thread: a tokio current-thread runtime of its own (tonic needs tokio,
//! and tokio never runs on a shard), accepting connections on the gRPC port and serving each
//! as TLS or plaintext HTTP/2 by its first byte (a TLS record starts with 0x16), as Java's
//! proxy does, since the Java SDK connects with TLS by default and the others without.
//!
//! Every connection and stream is bounded: at most `MAX_CONNECTIONS` connections, a handshake
//! must finish in `HANDSHAKE_TIMEOUT`, `MAX_STREAMS` concurrent streams per connection, and a
//! message at most `MAX_MESSAGE` bytes (larger ones are refused with RESOURCE_EXHAUSTED
//! before they are buffered).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::endpoint::Endpoint;
use crate::pb::messaging_service_server::MessagingServiceServer;
use crate::service::Service;

/// Connections served at once; more are closed at accept.
pub const MAX_CONNECTIONS: usize = 10_000;
/// Concurrent streams (calls) on one connection.
pub const MAX_STREAMS: u32 = 256;
/// The largest message a call may carry (a 4 MiB body with its properties fits).
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often clients without a stream are looked at.
const EXPIRE_EVERY: Duration = Duration::from_secs(5);

/// Which of TLS and plaintext the port serves.
#[derive(Clone)]
pub enum TlsPolicy {
    /// Both, by the first byte of each connection.
    Permissive(Arc<ServerConfig>),
    /// TLS only: a plaintext connection is closed.
    Enforcing(Arc<ServerConfig>),
    /// Plaintext only: a TLS hello is closed.
    Disabled,
}

/// A connection as tonic serves it.
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            Conn::Plain(s) => s.connect_info(),
            Conn::Tls(s) => s.get_ref().0.connect_info(),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Holds a connection's place in the count while it is open.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection with its slot: the slot is given back when tonic drops the connection.
pub struct Counted {
    conn: Conn,
    _slot: Slot,
}

impl Connected for Counted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.conn.connect_info()
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_shutdown(cx)
    }
}

/// Decides by the first byte whether `stream` speaks TLS, and hands the served connection on.
async fn classify(stream: TcpStream, tls: TlsPolicy) -> io::Result<Option<Conn>> {
    let mut first = [0u8; 1];
    let n = stream.peek(&mut first).await?;
    let is_tls = n == 1 && first[0] == 0x16;
    Ok(match (tls, is_tls) {
        (TlsPolicy::Permissive(cfg) | TlsPolicy::Enforcing(cfg), true) => {
            let s = TlsAcceptor::from(cfg).accept(stream).await?;
            Some(Conn::Tls(Box::new(s)))
        }
        (TlsPolicy::Permissive(_) | TlsPolicy::Disabled, false) => Some(Conn::Plain(stream)),
        (TlsPolicy::Enforcing(_), false) => {
            tracing::debug!("plaintext gRPC connection refused: TLS is enforced");
            None
        }
        (TlsPolicy::Disabled, true) => {
            tracing::debug!("TLS gRPC connection refused: TLS is disabled");
            None
        }
    })
}

/// Accepts connections and feeds the served ones to tonic.
async fn accept_loop(listener: TcpListener, tls: TlsPolicy, tx: mpsc::Sender<io::Result<Counted>>) {
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "gRPC accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if open.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::Relaxed);
            tracing::warn!(%peer, limit = MAX_CONNECTIONS, "gRPC connection limit reached, refusing");
            continue;
        }
        let slot = Slot(open.clone());
        let _ = stream.set_nodelay(true);
        let (tls, tx) = (tls.clone(), tx.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, classify(stream, tls)).await {
                Ok(Ok(Some(conn))) => {
                    let _ = tx.send(Ok(Counted { conn, _slot: slot })).await;
                }
                Ok(Ok(None)) => {}
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "gRPC handshake failed"),
                Err(_) => tracing::debug!(%peer, "gRPC handshake timed out"),
            }
        });
    }
}

/// The running endpoint: its address, and how to stop it.
pub struct GrpcServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GrpcServer {
    /// Stops serving and waits for the thread.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Serves `ep` on `listener` from a thread of its own.
pub fn serve(
    listener: std::net::TcpListener,
    ep: Arc<Endpoint>,
    tls: TlsPolicy,
) -> io::Result<GrpcServer> {
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let thread =
        ringmq_runtime::placement::spawn_unpinned(ringmq_runtime::Role::Grpc, move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "gRPC runtime did not start");
                    return;
                }
            };
            rt.block_on(run(listener, ep, tls, stop_rx));
        })?;
    Ok(GrpcServer {
        addr,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

async fn run(
    listener: std::net::TcpListener,
    ep: Arc<Endpoint>,
    tls: TlsPolicy,
    stop: oneshot::Receiver<()>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "gRPC listener unusable");
            return;
        }
    };
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(accept_loop(listener, tls, tx));
    let clients = ep.clone();
    let idle = ep.cfg.client_idle;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EXPIRE_EVERY);
        loop {
            tick.tick().await;
            let n = clients.clients.expire(idle);
            if n > 0 {
                tracing::debug!(clients = n, "idle gRPC clients closed");
            }
        }
    });
    tokio::spawn(crate::renew::run(ep.clone()));
    let service = MessagingServiceServer::new(Service { ep })
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    let served = tonic::transport::Server::builder()
        .max_concurrent_streams(MAX_STREAMS)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .add_service(service)
        .serve_with_incoming_shutdown(tokio_stream::wrappers::ReceiverStream::new(rx), async {
            let _ = stop.await;
        })
        .await;
    if let Err(e) = served {
        tracing::error!(error = %e, "gRPC endpoint stopped");
    }
}
