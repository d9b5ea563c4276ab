//! Sockets for shards: SO_REUSEPORT listeners (one per shard, all on the same port), streams,
//! and a sendfile that never blocks the core.
//!
//! glommio has no public sendfile, so [`Stream::sendfile_all`] calls the syscall on a
//! non-blocking socket. When the socket buffer is full it falls back to writing ONE byte of the
//! range through glommio's normal write path, which parks the task until the socket is writable
//! (an io_uring poll), then resumes sendfile. A slow consumer therefore costs its own task a wait,
//! never the shard's core, and all but one byte per stall still go zero-copy.
//!
//! A stream may carry TLS (`tls`): one branch per call picks the TLS path,
//! and the plain path is unchanged by it. Over TLS the zero-copy calls encrypt the bytes in
//! user space instead (no kTLS here).

mod tls;

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BytesMut;

use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use socket2::{Domain, Protocol, Socket, Type};

/// A byte range of a file that a zero-copy body is written from, as a connection's handler opened
/// it (the store's commit-log ranges). The connection sends it with sendfile (one range) or splices its bytes through a pipe (several).
pub trait FileRange {
    /// The file sendfile reads from.
    fn fd(&self) -> std::os::fd::RawFd;
    /// Where the range starts in that file.
    fn file_offset(&self) -> u64;
    /// The range's length in bytes.
    fn size(&self) -> u32;
    /// The range's bytes in memory, for splicing.
    fn bytes(&self) -> &[u8];
    /// False once bytes not yet handed to the kernel must no longer be read (the file was
    /// taken out of use while the range was being written).
    fn is_live(&self) -> bool;
}

/// Bytes the process has handed to `sendfile` or `splice` (zero-copy) and bytes of message data
/// that went through a user-space buffer instead (the one-byte fallbacks). Exposed for metrics
/// and for the test that proves pulls are zero-copy.
pub static SENDFILE_BYTES: AtomicU64 = AtomicU64::new(0);
pub static SENDFILE_FALLBACK_BYTES: AtomicU64 = AtomicU64::new(0);
/// Bytes of message data that would have gone zero-copy but were encrypted for a TLS
/// connection instead (read from the mapping or the file, copied into TLS records).
pub static TLS_COPIED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Creates a bound, listening TCP socket with SO_REUSEPORT so every shard can open its own
/// listener on the same port. Call from any thread; hand the result to a shard.
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let domain = if addr.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let sock = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.bind(&addr.into())?;
    sock.listen(1024)?;
    Ok(sock.into())
}

/// A shard-local listener.
pub struct Listener {
    inner: glommio::net::TcpListener,
}

impl Listener {
    /// Adopts a listening socket; must be called on the shard that will accept from it.
    pub fn from_std(l: std::net::TcpListener) -> Listener {
        let fd = l.into_raw_fd();
        // SAFETY: `fd` is a listening TCP socket we own (taken with into_raw_fd above).
        let inner = unsafe { glommio::net::TcpListener::from_raw_fd(fd) };
        Listener { inner }
    }

    pub async fn accept(&self) -> io::Result<Stream> {
        let s = self.inner.accept().await.map_err(io::Error::from)?;
        Stream::new(s)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr().map_err(io::Error::from)
    }
}

/// A connected TCP stream owned by exactly one task.
pub struct Stream {
    inner: glommio::net::TcpStream,
    /// The TLS state once a handshake ran on this stream (boxed: plain streams stay small).
    /// The `&mut self` calls reach it without a check (`get_mut`); the two `&self` ones
    /// (`try_read_buf`, `readable`) borrow it only between awaits.
    tls: Option<Box<RefCell<rustls::Connection>>>,
}

impl Stream {
    fn new(inner: glommio::net::TcpStream) -> io::Result<Stream> {
        inner.set_nodelay(true).map_err(io::Error::from)?;
        // sendfile has no MSG_DONTWAIT; the socket itself must not block. glommio's own reads
        // and writes are readiness based, so they work unchanged on a non-blocking socket.
        set_nonblocking(inner.as_raw_fd())?;
        Ok(Stream { inner, tls: None })
    }

    /// Connects (used by the broker's name-server client and by tests).
    pub async fn connect(addr: SocketAddr) -> io::Result<Stream> {
        let s = glommio::net::TcpStream::connect(addr)
            .await
            .map_err(io::Error::from)?;
        Stream::new(s)
    }

    /// The socket's fd, for shutdown(2) from a task that does not own the stream.
    pub fn raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr().map_err(io::Error::from)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr().map_err(io::Error::from)
    }

    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(t) = self.tls.as_deref_mut().map(RefCell::get_mut) {
            return tls::read(&self.inner, t, buf).await;
        }
        self.inner.read(buf).await
    }

    /// Reads what the socket holds now, up to `max` bytes, into `buf`'s spare capacity: no
    /// zeroing of the area first, and no waiting. `None` when nothing is there (EAGAIN); the
    /// caller then waits through [`Stream::read`].
    pub fn try_read_buf(&self, buf: &mut BytesMut, max: usize) -> Option<io::Result<usize>> {
        if let Some(t) = self.tls.as_deref() {
            return match t.try_borrow_mut() {
                Ok(mut t) => tls::try_read_buf(&self.inner, &mut t, buf, max),
                Err(_) => Some(Err(tls::busy())),
            };
        }
        buf.reserve(max);
        let spare = buf.spare_capacity_mut();
        let len = max.min(spare.len());
        let ptr = spare.as_mut_ptr();
        loop {
            // SAFETY: `ptr` points at `len` bytes of `buf`'s spare capacity, valid for writes;
            // recv writes at most `len` bytes there and returns how many.
            let r =
                unsafe { libc::recv(self.inner.as_raw_fd(), ptr.cast(), len, libc::MSG_DONTWAIT) };
            if r >= 0 {
                let n = r as usize;
                // SAFETY: recv initialized the first `n` (<= len) bytes of the spare capacity.
                unsafe { buf.set_len(buf.len() + n) };
                return Some(Ok(n));
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return None,
                _ => return Some(Err(err)),
            }
        }
    }

    /// Waits until the socket has bytes to read (or the peer closed it, or failed), without
    /// taking any: the wait can be dropped at any point and loses nothing.
    pub async fn readable(&self) -> io::Result<()> {
        if let Some(t) = self.tls.as_deref() {
            return tls::readable(&self.inner, t).await;
        }
        let mut probe = [0u8; 1];
        self.inner
            .peek(&mut probe)
            .await
            .map(|_| ())
            .map_err(io::Error::from)
    }

    pub async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if let Some(t) = self.tls.as_deref_mut().map(RefCell::get_mut) {
            return tls::write(&mut self.inner, t, buf, true).await;
        }
        self.inner.write_all(buf).await
    }

    /// Writes `buf` with MSG_MORE: the kernel holds it until the next write without the flag
    /// (a sendfile's last chunk, or [`Stream::set_cork`] off), so a pull response's header
    /// leaves with its zero-copy body instead of as a segment of its own.
    /// Whatever the socket does not take at once goes through [`Stream::write_all`], which
    /// pushes: correct, only without the merge.
    pub async fn write_all_more(&mut self, buf: &[u8]) -> io::Result<()> {
        if let Some(t) = self.tls.as_deref_mut().map(RefCell::get_mut) {
            return tls::write(&mut self.inner, t, buf, false).await;
        }
        let mut sent = 0;
        while sent < buf.len() {
            let rest = &buf[sent..];
            // SAFETY: `rest` is a valid, initialized slice for the duration of the call.
            let r = unsafe {
                libc::send(
                    self.inner.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_DONTWAIT | libc::MSG_MORE | libc::MSG_NOSIGNAL,
                )
            };
            if r >= 0 {
                sent += r as usize;
                continue;
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return self.inner.write_all(rest).await,
                _ => return Err(err),
            }
        }
        Ok(())
    }

    /// TCP_CORK on or off. On: full segments only, so a response written as many sendfiles
    /// (records of one queue scattered in the commit log) is not pushed once per record.
    /// Off: pushes whatever is held.
    pub fn set_cork(&self, on: bool) -> io::Result<()> {
        let v: libc::c_int = on.into();
        // SAFETY: setsockopt with a pointer to a live c_int and its size.
        let rc = unsafe {
            libc::setsockopt(
                self.inner.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CORK,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sends `len` bytes of `file` starting at `offset` straight from the page cache.
    /// The caller keeps `file` open until this returns.
    ///
    /// `live` is asked before every call that reads the file, and a false ends the write with
    /// an error: the file may be reused for other bytes (a retired commit-log segment).
    pub async fn sendfile_all(
        &mut self,
        file: RawFd,
        offset: u64,
        len: usize,
        live: &dyn Fn() -> bool,
    ) -> io::Result<()> {
        if let Some(t) = self.tls.as_deref_mut().map(RefCell::get_mut) {
            return tls::write_file(&mut self.inner, t, file, offset, len, live).await;
        }
        let sock = self.inner.as_raw_fd();
        let mut off = offset as libc::off_t;
        let end = offset + len as u64;
        while (off as u64) < end {
            if !live() {
                return Err(retired());
            }
            let want = (end - off as u64) as usize;
            // SAFETY: both fds are open for the duration of the call; `off` is a valid pointer.
            let n = unsafe { libc::sendfile(sock, file, &mut off, want) };
            if n > 0 {
                SENDFILE_BYTES.fetch_add(n as u64, Ordering::Relaxed);
                continue;
            }
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "sendfile: source file shorter than the range",
                ));
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {
                    // Socket full: write one byte through the normal path, which waits for
                    // writability without blocking the core, then go back to sendfile.
                    let mut b = [0u8; 1];
                    // SAFETY: `b` is a valid 1-byte buffer; `file` is open.
                    let r = unsafe { libc::pread(file, b.as_mut_ptr().cast(), 1, off) };
                    if r != 1 {
                        return Err(if r < 0 {
                            io::Error::last_os_error()
                        } else {
                            io::Error::new(io::ErrorKind::UnexpectedEof, "pread: short file")
                        });
                    }
                    self.inner.write_all(&b).await?;
                    SENDFILE_FALLBACK_BYTES.fetch_add(1, Ordering::Relaxed);
                    off += 1;
                }
                _ => return Err(err),
            }
        }
        Ok(())
    }

    /// Writes `ranges` (bytes inside read-only commit-log mappings) zero-copy through the shard
    /// thread's pipe: vmsplice in, splice out, two syscalls per pipe-full however many ranges
    /// there are (see [`super::splice`]). A full socket costs one byte through glommio's write
    /// path, as in [`Stream::sendfile_all`]. Returns `Ok(false)`, having written nothing, when
    /// no pipe is free, or when vmsplice itself fails (the shard then stops using the pipe); the
    /// caller then uses sendfile per range.
    /// `live` as for [`Stream::sendfile_all`], asked before every vmsplice.
    pub async fn splice_all(
        &mut self,
        ranges: &[&[u8]],
        live: &dyn Fn() -> bool,
    ) -> io::Result<bool> {
        if let Some(t) = self.tls.as_deref_mut().map(RefCell::get_mut) {
            tls::write_slices(&mut self.inner, t, ranges, live).await?;
            return Ok(true);
        }
        let Some(pipe) = super::splice::take() else {
            return Ok(false);
        };
        let sock = self.inner.as_raw_fd();
        let total: usize = ranges.iter().map(|r| r.len()).sum();
        let (mut cursor, mut sent) = ((0, 0), 0);
        while sent < total {
            if !live() {
                return Err(retired());
            }
            let filled = match pipe.fill(ranges, &mut cursor) {
                Ok(n) => n,
                // Nothing sent yet: the caller can still use sendfile for this response.
                Err(e) if sent == 0 => {
                    super::splice::disable(pipe, &e);
                    return Ok(false);
                }
                Err(e) => return Err(e),
            };
            if filled == 0 {
                return Err(io::Error::other(
                    "vmsplice took no bytes into an empty pipe",
                ));
            }
            let mut left = filled;
            while left > 0 {
                match pipe.drain_to(sock, left, sent + left < total) {
                    Ok(n) => {
                        SENDFILE_BYTES.fetch_add(n as u64, Ordering::Relaxed);
                        left -= n;
                        sent += n;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        // Socket full: one byte through the normal path waits for room.
                        let b = [pipe.read_byte()?];
                        self.inner.write_all(&b).await?;
                        SENDFILE_FALLBACK_BYTES.fetch_add(1, Ordering::Relaxed);
                        left -= 1;
                        sent += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        super::splice::give_back(pipe);
        Ok(true)
    }

    pub async fn flush(&mut self) -> io::Result<()> {
        if let Some(t) = self.tls.as_deref_mut().map(RefCell::get_mut) {
            return tls::flush(&mut self.inner, t).await;
        }
        self.inner.flush().await
    }
}

/// The error that ends a zero-copy write whose source was retired meanwhile.
fn retired() -> io::Error {
    io::Error::other("the commit-log range was retired while it was being sent")
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fcntl calls on an fd we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
