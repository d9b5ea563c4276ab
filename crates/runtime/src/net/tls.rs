//! A stream's TLS: rustls driven over the shard's own non-blocking socket, owned by the
//! task that owns the stream (no lock). rustls reads ciphertext straight from the socket
//! (`recv`) and writes its records straight to it (`sendmsg`); only when the socket is full do
//! the pending records go through glommio's write path, which waits for room without blocking
//! the core (the one copy of that path, bounded by `TLS_SEND_BUFFER`).
//!
//! This kernel offers no kTLS, so a zero-copy body (commit-log ranges) is encrypted from its
//! mapped bytes, or read from the file (HA), in user space: those bytes are counted in
//! [`super::TLS_COPIED_BYTES`].

use std::cell::RefCell;
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures_lite::io::AsyncWriteExt;
use glommio::net::TcpStream;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

use super::{retired, Stream, TLS_COPIED_BYTES};
use crate::constants::{TLS_COPY_CHUNK, TLS_SEND_BUFFER};

/// The socket as rustls reads and writes it: never waits, `WouldBlock` when it cannot.
struct Sock(RawFd);

fn result(r: isize) -> io::Result<usize> {
    if r >= 0 {
        Ok(r as usize)
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for writes of its length; recv writes at most that many.
        result(unsafe {
            libc::recv(
                self.0,
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        })
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        // SAFETY: an all-zero msghdr is valid; it then points at `bufs`, IoSlice being
        // ABI-compatible with iovec, alive for the duration of the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len() as _;
        // SAFETY: `msg` describes readable buffers only.
        result(unsafe { libc::sendmsg(self.0, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn is(e: &io::Error, kind: io::ErrorKind) -> bool {
    e.kind() == kind
}

/// Waits until the socket has bytes (or the peer closed it), taking none.
async fn wait_readable(inner: &TcpStream) -> io::Result<()> {
    let mut probe = [0u8; 1];
    inner
        .peek(&mut probe)
        .await
        .map(|_| ())
        .map_err(io::Error::from)
}

/// Writes what rustls holds as far as the socket takes it now; the rest stays in
/// rustls for the next write.
fn push_now(fd: RawFd, tls: &mut Connection) -> io::Result<()> {
    while tls.wants_write() {
        match tls.write_tls(&mut Sock(fd)) {
            Ok(_) => {}
            Err(e) if is(&e, io::ErrorKind::Interrupted) => {}
            Err(e) if is(&e, io::ErrorKind::WouldBlock) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes everything rustls holds, waiting for room.
async fn push(inner: &mut TcpStream, tls: &mut Connection) -> io::Result<()> {
    let fd = inner.as_raw_fd();
    while tls.wants_write() {
        match tls.write_tls(&mut Sock(fd)) {
            Ok(_) => {}
            Err(e) if is(&e, io::ErrorKind::Interrupted) => {}
            Err(e) if is(&e, io::ErrorKind::WouldBlock) => {
                // Socket full: glommio's write of the pending records waits for room.
                let mut pending = Vec::new();
                while tls.wants_write() {
                    tls.write_tls(&mut pending)?;
                }
                inner.write_all(&pending).await?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Decrypts what `read_tls` took in. A protocol error is returned after the alert rustls
/// queued for it was offered to the socket (the connection ends either way, so a socket that
/// does not take the alert changes nothing).
fn process(fd: RawFd, tls: &mut Connection) -> io::Result<()> {
    match tls.process_new_packets() {
        Ok(_) => push_now(fd, tls),
        Err(e) => {
            if let Err(w) = push_now(fd, tls) {
                tracing::debug!(error = %w, "TLS alert not written");
            }
            Err(tls_error(e))
        }
    }
}

/// Takes the bytes the socket holds into rustls, waiting for some; `Ok(0)` when the peer
/// closed the socket.
async fn fill(inner: &TcpStream, tls: &mut Connection) -> io::Result<usize> {
    let fd = inner.as_raw_fd();
    loop {
        match tls.read_tls(&mut Sock(fd)) {
            Ok(0) => return Ok(0),
            Ok(n) => {
                process(fd, tls)?;
                return Ok(n);
            }
            Err(e) if is(&e, io::ErrorKind::Interrupted) => {}
            Err(e) if is(&e, io::ErrorKind::WouldBlock) => wait_readable(inner).await?,
            Err(e) => return Err(e),
        }
    }
}

/// Plaintext rustls holds: `Some(Ok(0))` once the peer closed (with or without
/// close_notify), `None` when it holds none now.
fn take_plaintext(tls: &mut Connection, buf: &mut [u8]) -> Option<io::Result<usize>> {
    match tls.reader().read(buf) {
        Ok(n) => Some(Ok(n)),
        Err(e) if is(&e, io::ErrorKind::WouldBlock) => None,
        Err(e) if is(&e, io::ErrorKind::UnexpectedEof) => Some(Ok(0)),
        Err(e) => Some(Err(e)),
    }
}

pub(super) async fn read(
    inner: &TcpStream,
    tls: &mut Connection,
    buf: &mut [u8],
) -> io::Result<usize> {
    loop {
        if let Some(r) = take_plaintext(tls, buf) {
            return r;
        }
        // At the end of the stream the reader answers on the next turn.
        fill(inner, tls).await?;
    }
}

pub(super) fn try_read_buf(
    inner: &TcpStream,
    tls: &mut Connection,
    buf: &mut bytes::BytesMut,
    max: usize,
) -> Option<io::Result<usize>> {
    let fd = inner.as_raw_fd();
    let mut polled = false;
    loop {
        let len = buf.len();
        buf.resize(len + max, 0);
        let got = take_plaintext(tls, &mut buf[len..]);
        let n = match &got {
            Some(Ok(n)) => *n,
            _ => 0,
        };
        buf.truncate(len + n);
        if got.is_some() || polled {
            return got;
        }
        polled = true;
        match tls.read_tls(&mut Sock(fd)) {
            Ok(0) => {}
            Ok(_) => {
                if let Err(e) = process(fd, tls) {
                    return Some(Err(e));
                }
            }
            Err(e) if is(&e, io::ErrorKind::Interrupted) => polled = false,
            Err(e) if is(&e, io::ErrorKind::WouldBlock) => return None,
            Err(e) => return Some(Err(e)),
        }
    }
}

pub(super) async fn readable(inner: &TcpStream, tls: &RefCell<Connection>) -> io::Result<()> {
    let state = match tls.try_borrow_mut() {
        Ok(mut t) => t.process_new_packets().map_err(tls_error)?,
        Err(_) => return Err(busy()),
    };
    if state.plaintext_bytes_to_read() > 0 || state.peer_has_closed() {
        return Ok(());
    }
    wait_readable(inner).await
}

/// Two calls on one stream's TLS state at once: a misuse by the caller, failed rather than
/// panicking.
pub(super) fn busy() -> io::Error {
    io::Error::other("the stream's TLS state is in use by another call")
}

/// Encrypts `buf` into rustls; with `flush`, everything held goes to the socket before
/// this returns, otherwise only what does not fit in `TLS_SEND_BUFFER` (the rest leaves with
/// the next flushed write, as MSG_MORE holds a plain header back for its body).
pub(super) async fn write(
    inner: &mut TcpStream,
    tls: &mut Connection,
    mut buf: &[u8],
    flush: bool,
) -> io::Result<()> {
    while !buf.is_empty() {
        let n = tls.writer().write(buf)?;
        buf = &buf[n..];
        if !buf.is_empty() {
            push(inner, tls).await?;
        }
    }
    if flush {
        push(inner, tls).await?;
    }
    Ok(())
}

pub(super) async fn flush(inner: &mut TcpStream, tls: &mut Connection) -> io::Result<()> {
    push(inner, tls).await
}

/// A zero-copy body through TLS: each range's mapped bytes encrypted in `TLS_COPY_CHUNK` steps,
/// `live` asked before each (rustls has copied a step's bytes when its write returns).
pub(super) async fn write_slices(
    inner: &mut TcpStream,
    tls: &mut Connection,
    ranges: &[&[u8]],
    live: &dyn Fn() -> bool,
) -> io::Result<()> {
    for range in ranges {
        for chunk in range.chunks(TLS_COPY_CHUNK) {
            if !live() {
                return Err(retired());
            }
            write(inner, tls, chunk, false).await?;
            TLS_COPIED_BYTES.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
    }
    push(inner, tls).await
}

/// A file range through TLS (where sendfile would have sent it): read in `TLS_COPY_CHUNK`
/// steps and encrypted.
pub(super) async fn write_file(
    inner: &mut TcpStream,
    tls: &mut Connection,
    file: RawFd,
    offset: u64,
    len: usize,
    live: &dyn Fn() -> bool,
) -> io::Result<()> {
    let mut chunk = vec![0u8; TLS_COPY_CHUNK.min(len)];
    let (mut at, end) = (offset, offset + len as u64);
    while at < end {
        if !live() {
            return Err(retired());
        }
        let want = chunk.len().min((end - at) as usize);
        // SAFETY: `chunk` is valid for writes of `want` <= its length bytes; `file` is open.
        let r = unsafe { libc::pread(file, chunk.as_mut_ptr().cast(), want, at as libc::off_t) };
        let n = match result(r) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "pread: source file shorter than the range",
                ))
            }
            Ok(n) => n,
            Err(e) if is(&e, io::ErrorKind::Interrupted) => continue,
            Err(e) => return Err(e),
        };
        write(inner, tls, &chunk[..n], false).await?;
        TLS_COPIED_BYTES.fetch_add(n as u64, Ordering::Relaxed);
        at += n as u64;
    }
    push(inner, tls).await
}

impl Stream {
    /// True when this connection speaks TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Waits for the connection's first byte and returns it without taking it; `None` when
    /// the peer closed before sending any. A TLS client's first byte is 0x16 (a handshake
    /// record).
    pub async fn first_byte(&self) -> io::Result<Option<u8>> {
        let mut probe = [0u8; 1];
        let n = self.inner.peek(&mut probe).await.map_err(io::Error::from)?;
        Ok((n == 1).then_some(probe[0]))
    }

    /// Runs the server's side of a TLS handshake; from then on every read and write of this
    /// stream goes through rustls. The caller bounds it in time.
    pub async fn accept_tls(&mut self, config: Arc<ServerConfig>) -> io::Result<()> {
        let conn = ServerConnection::new(config).map_err(tls_error)?;
        self.handshake(Connection::Server(conn)).await
    }

    /// Connects and runs the client's side of a TLS handshake, the server's certificate
    /// checked against `name` as `config` says. The caller bounds it in time.
    pub async fn connect_tls(
        addr: std::net::SocketAddr,
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
    ) -> io::Result<Stream> {
        let mut s = Stream::connect(addr).await?;
        let conn = ClientConnection::new(config, name).map_err(tls_error)?;
        s.handshake(Connection::Client(conn)).await?;
        Ok(s)
    }

    async fn handshake(&mut self, mut conn: Connection) -> io::Result<()> {
        conn.set_buffer_limit(Some(TLS_SEND_BUFFER));
        let tls = self.tls.insert(Box::new(RefCell::new(conn))).get_mut();
        loop {
            push(&mut self.inner, tls).await?;
            if !tls.is_handshaking() {
                return Ok(());
            }
            if fill(&self.inner, tls).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed the connection during the TLS handshake",
                ));
            }
        }
    }
}
