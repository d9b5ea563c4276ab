//! The shard thread's pipe for zero-copy writes of scattered commit-log ranges.
//!
//! A pull answers with the records of one queue, and records of one queue are usually spread
//! through the commit log between those of other queues. One sendfile per record costs a syscall
//! and the splice set-up per record, which made a scattered drain several times slower than a
//! contiguous one. Instead the ranges' bytes in the read-only segment mappings go into a pipe with
//! one `vmsplice` (the pipe takes references to the page-cache pages, no copy) and leave it with
//! one `splice` into the socket: two syscalls per pipe-full, whatever the number of records.
//!
//! Owned by the shard thread: a task takes the pipe for the duration of one response and gives it
//! back empty. While a task holds it (its socket is full and it waits), other tasks find no pipe
//! and use sendfile per range, so a pipe never mixes two responses. A task dropped while holding
//! it (connection aborted) drops the pipe and whatever it held; the next use opens a new one.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Requested pipe capacity: 256 page slots (one per page a range touches). A pull answers with at
/// most MAX_PULL_BYTES (256 KiB) in at most MAX_PULL_MSGS (32) records, which touch at most
/// 64 + 32 pages, so one vmsplice takes a whole response. Without CAP_SYS_RESOURCE the kernel may
/// refuse more than /proc/sys/fs/pipe-max-size; the default 16 slots then just means more rounds.
const PIPE_BYTES: libc::c_int = 1 << 20;
const _: () = assert!(
    (crate::constants::MAX_PULL_BYTES / 4096 + crate::constants::MAX_PULL_MSGS) * 4096
        <= PIPE_BYTES as usize
);

/// vmsplice takes at most IOV_MAX (1024) segments per call.
const MAX_IOVECS: usize = 1024;

/// Where the thread's one pipe is.
enum Slot {
    /// Not opened yet, or dropped by a task that could not give it back empty.
    Unopened,
    Free(Pipe),
    /// A task holds it.
    Lent,
    /// vmsplice failed before any byte moved (a kernel or sandbox without it): sendfile only.
    Disabled,
}

thread_local! {
    static SLOT: RefCell<Slot> = const { RefCell::new(Slot::Unopened) };
}

pub(super) struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

/// The thread's pipe, opened on first use; None while another task holds it or if no pipe can
/// be opened (the caller then writes with sendfile).
pub(super) fn take() -> Option<Pipe> {
    SLOT.with(|s| {
        let mut s = s.borrow_mut();
        match std::mem::replace(&mut *s, Slot::Lent) {
            Slot::Free(p) => Some(p),
            Slot::Unopened => Pipe::open()
                .inspect_err(|e| {
                    *s = Slot::Unopened;
                    tracing::debug!(error = %e, "no pipe for vmsplice; using sendfile per range");
                })
                .ok(),
            // Put back what was there: someone holds the pipe, or it is disabled.
            other => {
                *s = other;
                None
            }
        }
    })
}

/// Gives the pipe up for good on this thread: vmsplice itself failed, so every later response
/// would fail the same way. Logged once per thread.
pub(super) fn disable(p: Pipe, err: &io::Error) {
    tracing::warn!(error = %err, "vmsplice failed; this shard writes pulls with sendfile only");
    SLOT.with(|s| *s.borrow_mut() = Slot::Disabled);
    drop(p);
}

/// Returns the pipe, empty, for the next response.
pub(super) fn give_back(p: Pipe) {
    SLOT.with(|s| *s.borrow_mut() = Slot::Free(p));
}

impl Drop for Pipe {
    /// A lent pipe dropped instead of given back (an error, or the connection's task cancelled
    /// mid-response) may hold bytes of that response: its fds close with it, and the next
    /// response opens a new one. `try_*`: at thread exit the slot itself is being destroyed.
    fn drop(&mut self) {
        let _ = SLOT.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if matches!(*s, Slot::Lent) {
                    *s = Slot::Unopened;
                }
            }
        });
    }
}

impl Pipe {
    fn open() -> io::Result<Pipe> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two fds into the array on success.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds were just created and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on a pipe fd we own; a refusal (EPERM) leaves the default size.
        unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES) };
        Ok(Pipe { read, write })
    }

    /// Hands the bytes of `ranges` from `cursor` (range index, offset in it) to the pipe, as many
    /// as it takes, and advances `cursor`. Returns how many bytes the pipe took.
    ///
    /// The pipe keeps references to the pages, not copies: the bytes must not change until they
    /// left the pipe. Commit-log bytes below the published frontier never change.
    pub(super) fn fill(&self, ranges: &[&[u8]], cursor: &mut (usize, usize)) -> io::Result<usize> {
        let mut iov = Vec::with_capacity((ranges.len() - cursor.0).min(MAX_IOVECS));
        for (i, r) in ranges.iter().enumerate().skip(cursor.0).take(MAX_IOVECS) {
            let skip = if i == cursor.0 { cursor.1 } else { 0 };
            iov.push(libc::iovec {
                iov_base: r[skip..].as_ptr() as *mut libc::c_void,
                iov_len: r.len() - skip,
            });
        }
        let n = loop {
            // SAFETY: every iovec points into a live slice of `ranges` for the duration of the
            // call; vmsplice only reads them (no SPLICE_F_GIFT).
            let n = unsafe {
                libc::vmsplice(
                    self.write.as_raw_fd(),
                    iov.as_ptr(),
                    iov.len(),
                    libc::SPLICE_F_NONBLOCK,
                )
            };
            if n >= 0 {
                break n as usize;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        };
        let mut left = n;
        while left > 0 {
            let avail = ranges[cursor.0].len() - cursor.1;
            if left < avail {
                cursor.1 += left;
                left = 0;
            } else {
                left -= avail;
                *cursor = (cursor.0 + 1, 0);
            }
        }
        Ok(n)
    }

    /// Moves up to `len` bytes from the pipe into `sock`; `more` tells TCP that more of the same
    /// response follows (so it holds a partial segment). WouldBlock when the socket is full.
    pub(super) fn drain_to(&self, sock: RawFd, len: usize, more: bool) -> io::Result<usize> {
        let flags = libc::SPLICE_F_NONBLOCK | if more { libc::SPLICE_F_MORE } else { 0 };
        loop {
            // SAFETY: plain splice between two fds we hold open; no offsets (both are streams).
            let n = unsafe {
                libc::splice(
                    self.read.as_raw_fd(),
                    std::ptr::null_mut(),
                    sock,
                    std::ptr::null_mut(),
                    len,
                    flags,
                )
            };
            if n > 0 {
                return Ok(n as usize);
            }
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "splice: pipe empty before the range was written",
                ));
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    /// Takes one byte out of the pipe (the data is there: it was accounted as filled).
    pub(super) fn read_byte(&self) -> io::Result<u8> {
        let mut b = [0u8; 1];
        loop {
            // SAFETY: reads at most one byte into a valid one-byte buffer.
            let n = unsafe { libc::read(self.read.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
            if n == 1 {
                return Ok(b[0]);
            }
            let err = if n == 0 {
                io::Error::new(io::ErrorKind::UnexpectedEof, "pipe empty")
            } else {
                io::Error::last_os_error()
            };
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pipe per thread: lent to one task at a time, reusable once given back, and replaced
    /// by a new one after a holder dropped it.
    #[test]
    fn one_pipe_lent_at_a_time() {
        let first = take().expect("pipe");
        let fd = first.read.as_raw_fd();
        assert!(take().is_none(), "lent twice");
        give_back(first);
        let again = take().expect("pipe back");
        assert_eq!(again.read.as_raw_fd(), fd, "the same pipe again");
        drop(again);
        let fresh = take().expect("a new pipe after a drop");
        give_back(fresh);
    }

    /// After `disable` (vmsplice refused) the thread hands out no pipe again.
    #[test]
    fn a_disabled_thread_gets_no_pipe() {
        std::thread::spawn(|| {
            let p = take().expect("pipe");
            disable(p, &io::Error::from_raw_os_error(libc::EPERM));
            assert!(take().is_none());
            assert!(take().is_none());
        })
        .join()
        .unwrap();
    }

    /// Scattered slices go through the pipe in order, across several fills when the pipe is
    /// smaller than the data, and come out byte for byte.
    #[test]
    fn fill_and_drain_preserve_bytes_and_order() {
        let pipe = Pipe::open().unwrap();
        // A socket pair stands in for the client connection.
        let mut sv = [0 as libc::c_int; 2];
        // SAFETY: socketpair writes two fds into the array on success.
        let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) };
        assert_eq!(rc, 0);
        // SAFETY: fresh fds owned by this test.
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
        let data: Vec<Vec<u8>> = (0..300u32)
            .map(|i| (0..(i * 7919 % 5000 + 1)).map(|j| (i + j) as u8).collect())
            .collect();
        let slices: Vec<&[u8]> = data.iter().map(|v| &v[..]).collect();
        let total: usize = slices.iter().map(|s| s.len()).sum();
        let reader = std::thread::spawn(move || {
            let mut f = std::fs::File::from(b);
            let mut got = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut got).unwrap();
            got
        });
        let (mut cursor, mut sent, mut fills) = ((0, 0), 0, 0);
        while sent < total {
            let n = pipe.fill(&slices, &mut cursor).unwrap();
            assert!(n > 0);
            fills += 1;
            let mut left = n;
            while left > 0 {
                match pipe.drain_to(a.as_raw_fd(), left, sent + left < total) {
                    Ok(k) => {
                        left -= k;
                        sent += k;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(std::time::Duration::from_millis(1))
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        assert_eq!(cursor, (slices.len(), 0));
        assert!(
            fills > 1,
            "{total} bytes should need more than one pipe-full"
        );
        drop(a);
        assert_eq!(reader.join().unwrap(), slices.concat());
    }
}
