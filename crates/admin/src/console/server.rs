//! The console's listener and its fixed set of workers. Every worker (`Role::Console(i)`,
//! started through the thread plan) takes the next connection from the shared listener, reads
//! one request, answers it and closes: `CONSOLE_WORKERS` requests at most are served at once,
//! the connections beyond wait in the kernel's backlog (`CONSOLE_BACKLOG`), and a slow browser
//! holds one worker for at most the request's deadline (`console::http`). Nothing here runs on
//! a broker shard: a console request costs the broker only the admin requests it sends, over
//! the network like any admin tool's.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::constants::{CONSOLE_BACKLOG, CONSOLE_WORKERS};
use crate::runtime::placement::{Role, ThreadPlan};

use super::http::{self, HttpError};
use super::pages::error_response;
use super::{routes, Console};

/// A running console: its address, and the way to stop it.
pub struct ConsoleServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
}

/// Binds `listen` and starts the workers, which answer with `console`'s view of the cluster.
pub fn start(plan: &ThreadPlan, listen: SocketAddr, console: Console) -> io::Result<ConsoleServer> {
    let listener = bind(listen)?;
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let console = Arc::new(console);
    let mut workers = Vec::with_capacity(CONSOLE_WORKERS);
    for i in 0..CONSOLE_WORKERS {
        let listener = listener.try_clone()?;
        let flag = Arc::clone(&stop);
        let console = Arc::clone(&console);
        let spawned = plan.spawn(Role::Console(i), move || serve(&listener, &flag, &console));
        match spawned {
            Ok(h) => workers.push(h),
            Err(e) => {
                ConsoleServer {
                    addr,
                    stop,
                    workers,
                }
                .shutdown();
                return Err(e);
            }
        }
    }
    Ok(ConsoleServer {
        addr,
        stop,
        workers,
    })
}

fn bind(listen: SocketAddr) -> io::Result<TcpListener> {
    let domain = socket2::Domain::for_address(listen);
    let socket = socket2::Socket::new(domain, socket2::Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&listen.into())?;
    socket.listen(CONSOLE_BACKLOG)?;
    Ok(socket.into())
}

/// One worker: connection after connection until told to stop.
fn serve(listener: &TcpListener, stop: &AtomicBool, console: &Console) {
    loop {
        let accepted = listener.accept();
        if stop.load(Ordering::Acquire) {
            return;
        }
        match accepted {
            Ok((stream, peer)) => exchange(stream, peer, console),
            Err(e) => {
                // Out of descriptors, say: back off rather than spin.
                tracing::warn!(error = %e, "console: accept failed");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Reads one request from `stream`, answers it, closes.
fn exchange(mut stream: TcpStream, peer: SocketAddr, console: &Console) {
    if let Err(e) = http::prepare(&stream) {
        tracing::debug!(%peer, error = %e, "console: socket options");
        return;
    }
    let (resp, unread) = match http::read_request(&mut stream) {
        Ok(req) => (routes::route(console, &req), false),
        Err(HttpError::Malformed(why)) => (error_response(400, &why, false), true),
        Err(e @ HttpError::TooLarge(_)) => (error_response(413, &e.to_string(), false), true),
        Err(e) => {
            tracing::debug!(%peer, error = %e, "console: no request read");
            return;
        }
    };
    if let Err(e) = http::write_response(&mut stream, &resp) {
        tracing::debug!(%peer, error = %e, "console: answer not written");
    }
    if unread {
        discard_input(&mut stream);
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// After answering a request the console did not read whole: stops writing and reads what the
/// client still sends (at most `LINGER_BYTES`, for at most `LINGER_MS`), so that closing does not
/// reset the connection before the client has read the answer.
fn discard_input(stream: &mut TcpStream) {
    const LINGER_BYTES: usize = 256 * 1024;
    const LINGER_MS: u64 = 1_000;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(LINGER_MS)));
    let deadline = std::time::Instant::now() + Duration::from_millis(LINGER_MS);
    let mut buf = [0u8; 4096];
    let mut read = 0;
    while read < LINGER_BYTES && std::time::Instant::now() < deadline {
        match std::io::Read::read(stream, &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => read += n,
        }
    }
}

impl ConsoleServer {
    /// Stops the workers: each is woken from its accept by a connection of its own and sees the
    /// stop flag; joins them.
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::Release);
        let wake = if self.addr.ip().is_unspecified() {
            let loopback: std::net::IpAddr = if self.addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            };
            SocketAddr::new(loopback, self.addr.port())
        } else {
            self.addr
        };
        for _ in 0..self.workers.len() {
            // A worker busy with a browser finds the flag after that exchange instead.
            let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        }
        for w in self.workers.drain(..) {
            if w.join().is_err() {
                tracing::error!("console: a worker panicked");
            }
        }
    }
}
