//! Segment allocator: a helper thread ("ringmq-prealloc") that prepares the NEXT commit-log
//! segment ahead of need (a retired one from the reuse pool, `store::recycle`, else a new file,
//! fallocated), so the writer never waits on file creation in steady state.
//!
//! Owned by the `CommitLog`. Protocol: `request(start)` asks for the segment at `start` (at most
//! one outstanding); `take(start)` returns it, waiting only if it is not ready yet. An allocation
//! error (ENOSPC -> DiskFull) is returned by `take`; the next `take` tries again.
//!
//! With warming on (SYNC_FLUSH by default, `StoreConfig::warm_segments`), the thread also writes
//! zeros over a new (not reused) segment. `take` raises the `wanted` flag and unparks the helper first, so a
//! writer that catches up with the warming waits for one 1 MiB write at most, never for the
//! whole segment or a pacing pause. While group commits run, the warming writes in the disk's
//! idle windows the writer's group commits signal through the allocator's `WarmGate`, and not at
//! all while their syncs keep the disk saturated (`WarmGate::disk_saturated`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::fault::FaultHook;
use crate::mapped_file::{MappedFile, Warm};
use crate::recycle::RecyclePool;
use crate::runtime::placement::{Role, ThreadPlan};
use crate::warm_gate::WarmGate;
use crate::StoreError;

type Allocated = (u64, Result<MappedFile, StoreError>);

pub struct SegmentAllocator {
    fault: Option<FaultHook>,
    /// Set by `take`: the writer waits for the pending segment, stop warming it.
    wanted: Arc<AtomicBool>,
    tx: Option<Sender<u64>>,
    rx: Receiver<Allocated>,
    pending: Option<u64>,
    thread: Option<JoinHandle<()>>,
    /// Group commits tell the warming when the disk is idle (see `warm_gate`).
    gate: Arc<WarmGate>,
    /// Retired segments to reuse before creating new ones; its directory and segment size are
    /// where and how big segments are created.
    pool: Arc<RecyclePool>,
}

impl SegmentAllocator {
    /// `threads`: the plan that places this thread (`Role::Prealloc`: on the writer core when
    /// the writer is pinned, so its warming and file creation stay off the shards' cores).
    pub fn spawn(
        fault: Option<FaultHook>,
        warm: bool,
        pool: Arc<RecyclePool>,
        threads: ThreadPlan,
    ) -> Result<Self, StoreError> {
        // One request in flight at a time, so capacity 1 both ways is enough.
        let (req_tx, req_rx) = bounded::<u64>(1);
        let (res_tx, res_rx) = bounded::<Allocated>(1);
        let f = fault.clone();
        let wanted = Arc::new(AtomicBool::new(false));
        let gate = Arc::new(WarmGate::default());
        let (w, g, p) = (wanted.clone(), gate.clone(), pool.clone());
        let thread = threads
            .spawn(Role::Prealloc, move || {
                for start in req_rx {
                    let how = if warm {
                        Warm::UntilWanted(&w, Some(&g))
                    } else {
                        Warm::Off
                    };
                    let res = p.take_or_create(start, f.as_ref(), how);
                    if res_tx.send((start, res)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| StoreError::io("ringmq-prealloc thread", e))?;
        gate.set_warmer(thread.thread().clone());
        Ok(SegmentAllocator {
            fault,
            wanted,
            tx: Some(req_tx),
            rx: res_rx,
            pending: None,
            thread: Some(thread),
            gate,
            pool,
        })
    }

    /// What the group commit tells the warming thread (see `warm_gate`).
    pub fn warm_gate(&self) -> Arc<WarmGate> {
        self.gate.clone()
    }

    /// Starts allocating the segment at `start` in the background (no-op if one is pending).
    pub fn request(&mut self, start: u64) {
        if self.pending.is_some() {
            return;
        }
        if let Some(tx) = &self.tx {
            self.wanted.store(false, Ordering::Release);
            if tx.send(start).is_ok() {
                self.pending = Some(start);
            }
        }
    }

    /// The segment at `start`: the preallocated one if ready, else allocated now.
    pub fn take(&mut self, start: u64) -> Result<MappedFile, StoreError> {
        if let Some(p) = self.pending.take() {
            self.hurry();
            match self.rx.recv() {
                Ok((s, res)) if s == start && p == start => return res,
                Ok((_, Ok(other))) => drop(other), // wrong start: unused spare, keep the file
                Ok((_, Err(_))) | Err(_) => {}
            }
        }
        // Not requested (or the helper is gone): allocate synchronously on this thread, unwarmed
        // (the writer is waiting for it).
        self.pool
            .take_or_create(start, self.fault.as_ref(), Warm::Off)
    }
}

impl SegmentAllocator {
    /// Waits for the requested segment (if any) and hands it back unused: its file stays on
    /// disk for the caller to remove (a commit log truncated to an earlier segment).
    pub fn discard_pending(&mut self) {
        if self.pending.take().is_some() {
            self.hurry();
            // Ok or not, the caller removes whatever file the helper left.
            let _spare = self.rx.recv();
        }
    }

    /// Stops a warming in progress: raises `wanted` and wakes the helper from a pacing pause.
    fn hurry(&self) {
        self.wanted.store(true, Ordering::Release);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }
}

impl Drop for SegmentAllocator {
    fn drop(&mut self) {
        // Closing the request channel makes the helper exit after its current job, and hurrying
        // cuts a warming short. Receiving until disconnect both unblocks a helper sending its
        // last result and waits for it to finish (its sender drops when it returns).
        self.tx = None;
        self.hurry();
        while self.rx.recv().is_ok() {}
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("segment allocator thread panicked");
            }
        }
    }
}
