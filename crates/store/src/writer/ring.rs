//! The writer's own io_uring ring: where its fdatasyncs go and where it sleeps.
//!
//! The writer submits the fdatasync of a group commit (SYNC_FLUSH) or of an async flush
//! (ASYNC_FLUSH) here and goes on writing; the completion comes back on the same thread, so a
//! group commit is the completion of a sync, not a hand-off to another thread and back. The
//! kernel runs a sync on an io-wq worker ("iou-wrk-*", a kernel thread of this process created
//! on demand), since an fdatasync cannot complete without blocking.
//!
//! The writer also sleeps in this ring: `wait` returns on a completion, a timeout, or a
//! `RingWaker::wake` from another thread, which writes an eventfd that a read in the ring
//! waits on. A waker writes only while the owner is (about to be) asleep: the owner raises
//! `sleeping` before its last look at its inbox, a waker clears it after its push, and
//! whichever of the two comes second sees the other (sequentially consistent), so no wake is
//! lost and a busy writer costs its wakers no syscall.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use io_uring::{opcode, squeue, types, IoUring};

/// The `user_data` of the ring's own eventfd read and no-op; callers' values must differ.
pub const WAKE_USER_DATA: u64 = u64::MAX;
const NOP_USER_DATA: u64 = u64::MAX - 1;

/// Submission entries; far above what the writer has in flight (a few syncs and the wake read).
const RING_ENTRIES: u32 = 64;

struct WakeShared {
    sleeping: AtomicBool,
    efd: OwnedFd,
}

/// Wakes the ring's owner from `Ring::wait`; cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct RingWaker(Arc<WakeShared>);

impl RingWaker {
    /// Ends the owner's `wait` if it sleeps (one eventfd write); nothing if it is awake.
    pub fn wake(&self) {
        if self.0.sleeping.swap(false, Ordering::SeqCst) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live buffer to an eventfd this handle keeps open.
            let n = unsafe { libc::write(self.0.efd.as_raw_fd(), one.as_ptr().cast(), 8) };
            if n != 8 {
                // EAGAIN: the counter is saturated, so a wake is pending anyway.
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::WouldBlock {
                    tracing::error!(error = %e, "cannot wake the writer");
                }
            }
        }
    }
}

pub struct Ring {
    // Dropped first: the kernel is done with the wake buffer once the ring is closed.
    uring: IoUring,
    shared: Arc<WakeShared>,
    /// Where the eventfd read lands: leaked, because a read still pending when the ring closes
    /// is cancelled by the kernel after this struct is gone (8 bytes, once per writer).
    wake_buf: &'static mut [u8; 8],
    /// Whether the eventfd read is in the ring.
    armed: bool,
}

impl Ring {
    pub fn new() -> io::Result<Ring> {
        let uring = IoUring::new(RING_ENTRIES)?;
        // SAFETY: plain syscall; the result is checked before it is owned.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        let efd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Ring {
            uring,
            shared: Arc::new(WakeShared {
                sleeping: AtomicBool::new(false),
                efd,
            }),
            wake_buf: Box::leak(Box::new([0u8; 8])),
            armed: false,
        })
    }

    /// Has the kernel run the io-wq workers (the fdatasyncs) of the calling thread's
    /// submissions to this ring on `cores` only. The workers belong to the submitting thread, so
    /// the ring's owner calls this, on its own thread; a first no-op submission makes them
    /// exist.
    pub fn set_worker_cores(&mut self, cores: &[usize]) -> io::Result<()> {
        self.push(opcode::Nop::new().build().user_data(NOP_USER_DATA))?;
        self.submit()?;
        // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes inside it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cores {
            // SAFETY: `set` is a valid cpu_set_t; CPU_SET ignores cores past its size.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        self.uring.submitter().register_iowq_aff(&set)
    }

    pub fn waker(&self) -> RingWaker {
        RingWaker(self.shared.clone())
    }

    /// Queues an fdatasync of `fd`, reported under `user_data` (submitted by the next `wait`
    /// or `submit`).
    ///
    /// # Safety
    /// `fd` must stay open until the completion is reaped.
    pub unsafe fn push_fdatasync(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        debug_assert!(user_data < NOP_USER_DATA);
        let e = opcode::Fsync::new(types::Fd(fd))
            .flags(types::FsyncFlags::DATASYNC)
            .build()
            .user_data(user_data);
        self.push(e)
    }

    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        for _ in 0..2 {
            // SAFETY: the entry's resources are the caller's contract (fd) or ours (wake_buf).
            if unsafe { self.uring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            // Full: hand what is queued to the kernel and try once more.
            self.submit()?;
        }
        Err(io::Error::other(
            "the writer's io_uring submission queue stays full",
        ))
    }

    /// Hands every queued entry to the kernel without waiting.
    pub fn submit(&mut self) -> io::Result<()> {
        loop {
            match self.uring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The completion queue is full: the caller reaps, then submits again.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Submits what is queued and sleeps until a completion, a wake or `timeout`, unless
    /// `ready()`, called after the owner declared itself asleep, finds work (then returns at
    /// once). Completions are then in `reap`.
    pub fn wait(&mut self, timeout: Duration, ready: impl FnOnce() -> bool) -> io::Result<()> {
        if !self.armed {
            let buf = self.wake_buf.as_mut_ptr();
            let read = opcode::Read::new(types::Fd(self.shared.efd.as_raw_fd()), buf, 8)
                .build()
                .user_data(WAKE_USER_DATA);
            self.push(read)?;
            self.armed = true;
        }
        if !self.uring.completion().is_empty() {
            return self.submit();
        }
        self.shared.sleeping.store(true, Ordering::SeqCst);
        if ready() {
            self.shared.sleeping.store(false, Ordering::SeqCst);
            return self.submit();
        }
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        let r = self.uring.submitter().submit_with_args(1, &args);
        self.shared.sleeping.store(false, Ordering::SeqCst);
        match r {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) => Ok(()),
                _ => Err(e),
            },
        }
    }

    /// Moves every completion into `out` as (user_data, result: bytes or -errno), the wake read
    /// left out (and queued again by the next `wait`).
    pub fn reap(&mut self, out: &mut Vec<(u64, i32)>) {
        for cqe in self.uring.completion() {
            if cqe.user_data() == WAKE_USER_DATA {
                self.armed = false;
                continue;
            }
            if cqe.user_data() == NOP_USER_DATA {
                continue;
            }
            out.push((cqe.user_data(), cqe.result()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    fn reap_until(ring: &mut Ring, n: usize) -> Vec<(u64, i32)> {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while out.len() < n && Instant::now() < deadline {
            ring.wait(Duration::from_millis(100), || false)
                .expect("wait");
            ring.reap(&mut out);
        }
        out
    }

    /// An fdatasync queued on the ring completes with 0 and the file's bytes are there.
    #[test]
    fn fdatasync_completes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let mut f = std::fs::File::create(&path).expect("create");
        f.write_all(b"hello").expect("write");
        let mut ring = Ring::new().expect("ring");
        // SAFETY: `f` outlives the completion reaped below.
        unsafe { ring.push_fdatasync(f.as_raw_fd(), 7) }.expect("push");
        assert_eq!(reap_until(&mut ring, 1), vec![(7, 0)]);
        assert_eq!(std::fs::read(&path).expect("read"), b"hello");
    }

    /// A sync of a closed descriptor is reported as EBADF, not lost.
    #[test]
    fn a_bad_descriptor_is_reported() {
        let mut ring = Ring::new().expect("ring");
        // SAFETY: -1 is never a live descriptor; the kernel refuses it.
        unsafe { ring.push_fdatasync(-1, 3) }.expect("push");
        assert_eq!(reap_until(&mut ring, 1), vec![(3, -libc::EBADF)]);
    }

    /// A wake from another thread ends a long wait; a wait with nothing to do times out.
    #[test]
    fn a_waker_ends_a_wait_and_a_timeout_ends_it_too() {
        let mut ring = Ring::new().expect("ring");
        let t0 = Instant::now();
        ring.wait(Duration::from_millis(50), || false)
            .expect("wait");
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(40), "{waited:?}");
        let w = ring.waker();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            w.wake();
        });
        let t0 = Instant::now();
        // The wake read may complete a previous wait's leftover first: wait until woken.
        ring.wait(Duration::from_secs(20), || false).expect("wait");
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        t.join().expect("waker thread");
        // `ready` finding work returns at once without sleeping.
        let t0 = Instant::now();
        ring.wait(Duration::from_secs(20), || true).expect("wait");
        assert!(t0.elapsed() < Duration::from_secs(1));
    }

    /// More syncs than the ring has entries all complete.
    #[test]
    fn a_burst_larger_than_the_ring_completes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = std::fs::File::create(dir.path().join("f")).expect("create");
        let mut ring = Ring::new().expect("ring");
        let n = RING_ENTRIES as u64 * 3;
        let mut got = Vec::new();
        for i in 0..n {
            // SAFETY: `f` outlives every completion reaped below.
            unsafe { ring.push_fdatasync(f.as_raw_fd(), i) }.expect("push");
            ring.reap(&mut got);
        }
        got.extend(reap_until(
            &mut ring,
            (n as usize).saturating_sub(got.len()),
        ));
        got.sort_unstable();
        let want: Vec<(u64, i32)> = (0..n).map(|i| (i, 0)).collect();
        assert_eq!(got, want);
    }
}
