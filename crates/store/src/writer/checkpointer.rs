//! The "ringmq-checkpt" thread (`Role::Checkpoint`, left to the scheduler): owns the checkpoint file while the writer runs. The writer's
//! periodic checkpoint is a pwrite + fdatasync (0.3-4 ms on the reference VM); done inline it
//! stalled every append behind it once per flush interval. The writer now only hands over the
//! newest flushed store timestamp and goes on; at a clean shutdown it takes the file back and
//! writes the final checkpoint itself.
//!
//! The thread also makes the index durable for the periodic index checkpoint
//! (`index_checkpoint.rs`): it fdatasyncs the IndexFiles it is given (a clone of each file's
//! handle; that covers pages the writer put through the mapping) and only then records their
//! timestamp as `indexMsgTimestamp`, in the same checkpoint write as the physical timestamp.
//!
//! Invariants: only this thread touches the checkpoint while it runs; the channel is bounded
//! (`CHECKPOINT_QUEUE_CAPACITY`; a busy thread simply gets newer values on a later tick, and jobs
//! waiting together are merged); a timestamp is written only if it is newer than the last one
//! written; `indexMsgTimestamp` is set only after every fdatasync of its job succeeded, and
//! never again after one failed (after a failed fdatasync the page cache no longer says what is
//! on disk, so a later success proves nothing about the earlier pages; recovery then re-indexes
//! from the last good point).

use std::fs::File;
use std::path::PathBuf;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

use crate::fault::{FaultHook, FaultPoint};
use crate::runtime::placement::{spawn_unpinned, Role};
use crate::{Checkpoint, StoreError};

/// Jobs waiting for the thread: one of each kind, so a pending physical timestamp never keeps
/// an index job out (and the other way round) for long.
pub(super) const CHECKPOINT_QUEUE_CAPACITY: usize = 2;

/// IndexFiles to fdatasync before `ts` may be recorded as the index checkpoint.
pub(super) struct IndexSync {
    pub files: Vec<(PathBuf, File)>,
    pub ts: i64,
}

enum Job {
    Physic(i64),
    Index(IndexSync),
}

pub(super) struct Checkpointer {
    tx: Option<Sender<Job>>,
    thread: Option<JoinHandle<Stopped>>,
}

/// What `stop` hands back.
pub(super) struct Stopped {
    pub checkpoint: Checkpoint,
    /// An index fdatasync failed: the final checkpoint must not move `indexMsgTimestamp`
    /// either (a later msync succeeding proves nothing about the pages the failed one lost).
    pub index_sync_failed: bool,
}

impl Checkpointer {
    pub(super) fn spawn(
        checkpoint: Checkpoint,
        fault: Option<FaultHook>,
    ) -> Result<Self, StoreError> {
        let (tx, rx) = bounded(CHECKPOINT_QUEUE_CAPACITY);
        let thread = spawn_unpinned(Role::Checkpoint, move || {
            run(checkpoint, &rx, fault.as_ref())
        })
        .map_err(|e| StoreError::io("ringmq-checkpt thread", e))?;
        Ok(Checkpointer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Asks for `physic_msg_timestamp = ts` to be made durable; never blocks.
    pub(super) fn submit(&self, ts: i64) {
        if let Some(tx) = self.tx.as_ref() {
            // Full: a write is pending and the next tick brings a newer value.
            let _ = tx.try_send(Job::Physic(ts));
        }
    }

    /// Asks for the files of `job` to be synced and then `index_msg_timestamp = job.ts` to be
    /// made durable; never blocks. A full queue (or a stopped thread) hands the job back.
    pub(super) fn submit_index(&self, job: IndexSync) -> Result<(), IndexSync> {
        let Some(tx) = self.tx.as_ref() else {
            return Err(job);
        };
        match tx.try_send(Job::Index(job)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(Job::Index(j)) | TrySendError::Disconnected(Job::Index(j))) => {
                Err(j)
            }
            Err(_) => unreachable!("an index job comes back as an index job"),
        }
    }

    /// Lets the thread finish its pending write and returns the checkpoint.
    pub(super) fn stop(mut self) -> Option<Stopped> {
        self.tx = None;
        match self.thread.take()?.join() {
            Ok(stopped) => Some(stopped),
            Err(_) => {
                tracing::error!("checkpoint thread panicked");
                None
            }
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Everything waiting, merged: the newest physical timestamp; all index files and the newest
/// index timestamp (syncing the union covers every merged job).
#[derive(Default)]
struct Pending {
    physic: Option<i64>,
    index: Option<IndexSync>,
}

impl Pending {
    fn add(&mut self, job: Job) {
        match job {
            Job::Physic(ts) => self.physic = Some(self.physic.map_or(ts, |p| p.max(ts))),
            Job::Index(j) => match self.index.as_mut() {
                None => self.index = Some(j),
                Some(acc) => {
                    acc.ts = acc.ts.max(j.ts);
                    acc.files.extend(j.files);
                }
            },
        }
    }
}

fn run(mut cp: Checkpoint, rx: &Receiver<Job>, fault: Option<&FaultHook>) -> Stopped {
    let mut index_failed = false;
    while let Ok(first) = rx.recv() {
        let mut p = Pending::default();
        p.add(first);
        while let Ok(more) = rx.try_recv() {
            p.add(more);
        }
        let mut changed = false;
        if let Some(job) = p.index.filter(|_| !index_failed) {
            match sync_index(&job, fault) {
                Ok(()) if job.ts > cp.index_msg_timestamp => {
                    cp.index_msg_timestamp = job.ts;
                    changed = true;
                }
                Ok(()) => {}
                Err(e) => {
                    tracing::error!(error = %e,
                        "index fdatasync failed; the index checkpoint stays where it was");
                    index_failed = true;
                }
            }
        }
        if let Some(ts) = p.physic.filter(|ts| *ts > cp.physic_msg_timestamp) {
            cp.physic_msg_timestamp = ts;
            changed = true;
        }
        if changed {
            if let Err(e) = cp.flush() {
                tracing::error!(error = %e, "checkpoint flush failed");
            }
        }
    }
    Stopped {
        checkpoint: cp,
        index_sync_failed: index_failed,
    }
}

/// fdatasync of every file of `job`; the first failure is the result.
fn sync_index(job: &IndexSync, fault: Option<&FaultHook>) -> Result<(), StoreError> {
    for (path, file) in &job.files {
        FaultHook::check(fault, FaultPoint::IndexSync).map_err(|e| StoreError::io(path, e))?;
        file.sync_data().map_err(|e| StoreError::io(path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fault::FailNth;

    fn index_job(dir: &std::path::Path, ts: i64) -> IndexSync {
        let path = dir.join("index-file");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .unwrap();
        IndexSync {
            files: vec![(path, file)],
            ts,
        }
    }

    /// A submitted timestamp reaches the file before `stop` returns; an older one never
    /// overwrites a newer one.
    #[test]
    fn submitted_timestamp_is_durable_and_monotonic() {
        let dir = tempfile::tempdir().unwrap();
        let c = Checkpointer::spawn(Checkpoint::open(dir.path()).unwrap(), None).unwrap();
        c.submit(1_000);
        c.submit(500);
        let cp = c.stop().expect("checkpoint back").checkpoint;
        assert_eq!(cp.physic_msg_timestamp, 1_000);
        drop(cp);
        assert_eq!(
            Checkpoint::open(dir.path()).unwrap().physic_msg_timestamp,
            1_000
        );
    }

    /// An index timestamp is written once its files synced, next to the physical one, and
    /// never moves back.
    #[test]
    fn index_timestamp_is_written_after_its_files_sync() {
        let dir = tempfile::tempdir().unwrap();
        let c = Checkpointer::spawn(Checkpoint::open(dir.path()).unwrap(), None).unwrap();
        assert!(c.submit_index(index_job(dir.path(), 2_000)).is_ok());
        c.submit(3_000);
        assert!(!c.stop().expect("checkpoint back").index_sync_failed);
        let cp = Checkpoint::open(dir.path()).unwrap();
        assert_eq!(
            (cp.index_msg_timestamp, cp.physic_msg_timestamp),
            (2_000, 3_000)
        );
        let c = Checkpointer::spawn(cp, None).unwrap();
        assert!(c.submit_index(index_job(dir.path(), 1_000)).is_ok());
        drop(c.stop());
        assert_eq!(
            Checkpoint::open(dir.path()).unwrap().index_msg_timestamp,
            2_000
        );
    }

    /// A failed index fdatasync records nothing, and no later job moves the index checkpoint
    /// either (the page cache no longer tells what reached the disk); the physical timestamp
    /// goes on.
    #[test]
    fn failed_index_sync_freezes_the_index_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let fault = FaultHook(Arc::new(FailNth::new(
            FaultPoint::IndexSync,
            1,
            1,
            libc::EIO,
        )));
        let c = Checkpointer::spawn(Checkpoint::open(dir.path()).unwrap(), Some(fault)).unwrap();
        let ok = |job: IndexSync| {
            let mut job = Some(job);
            // The queue holds two jobs: wait for room rather than race the thread.
            while let Some(j) = job.take() {
                if let Err(back) = c.submit_index(j) {
                    job = Some(back);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        };
        ok(index_job(dir.path(), 1_000)); // synced, recorded
        while Checkpoint::open(dir.path()).unwrap().index_msg_timestamp != 1_000 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        c.submit(4_000); // the queue is empty now: taken
        ok(index_job(dir.path(), 2_000)); // the injected EIO
        ok(index_job(dir.path(), 3_000)); // syncs fine, but must not count
        assert!(c.stop().expect("checkpoint back").index_sync_failed);
        let cp = Checkpoint::open(dir.path()).unwrap();
        assert_eq!(cp.index_msg_timestamp, 1_000);
        assert_eq!(cp.physic_msg_timestamp, 4_000);
    }
}
