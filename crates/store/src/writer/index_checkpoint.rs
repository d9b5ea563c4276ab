//! The periodic index checkpoint. Until it existed `indexMsgTimestamp` moved only at a clean
//! shutdown, so after a crash recovery dropped every IndexFile written since the last clean
//! stop and re-indexed all of it from the commit log. Now, every `index_flush_interval_ms`, the
//! writer hands the checkpoint thread clones of the IndexFiles written since its last hand-off
//! together with a timestamp; that thread fdatasyncs them and only then records the timestamp
//! (`checkpointer.rs`), and recovery cuts the index back to it (`index_file/repair.rs`).
//!
//! The timestamp is `min(last indexed batch, newest durable commit-log record)`: every entry
//! stored before it is in the handed files (the writer indexes in phy order) and points at a
//! record that is on disk, so recovery never keeps an entry past the recovered commit log.
//!
//! Runs on the writer thread, from `tick`: it only dups file descriptors and does a `try_send`;
//! a busy checkpoint thread means the next interval tries again (the hand-off is bounded by the
//! checkpointer's queue). Invariant: `sync_from_ms` only moves once a hand-off was accepted, so
//! a file rolled in between is synced by the next one.

use std::time::{Duration, Instant};

use super::checkpointer::{Checkpointer, IndexSync};
use crate::IndexService;

pub(super) struct IndexCheckpoint {
    interval: Duration,
    last: Instant,
    /// Creation time of the oldest IndexFile that may hold entries no accepted hand-off covers
    /// (0 at start: files re-indexed by recovery are synced by the first hand-off).
    sync_from_ms: i64,
    /// Newest timestamp handed over (or already in the checkpoint at start).
    submitted_ts: i64,
}

impl IndexCheckpoint {
    pub(super) fn new(interval_ms: u64, recorded_ts: i64) -> Self {
        IndexCheckpoint {
            interval: Duration::from_millis(interval_ms.max(1)),
            last: Instant::now(),
            sync_from_ms: 0,
            submitted_ts: recorded_ts,
        }
    }

    /// Time until the next hand-off is due (for the writer's wake-up).
    pub(super) fn due_in(&self) -> Duration {
        self.interval.saturating_sub(self.last.elapsed())
    }

    /// Hands the index to `cp` if the interval passed and there is something newer to record:
    /// `indexed_ts` is the store timestamp of the last batch indexed, `durable_ts` that of the
    /// newest record durable in the commit log.
    pub(super) fn tick(
        &mut self,
        index: &IndexService,
        cp: &Checkpointer,
        indexed_ts: i64,
        durable_ts: i64,
    ) {
        if !self.due_in().is_zero() {
            return;
        }
        self.last = Instant::now();
        let ts = indexed_ts.min(durable_ts);
        if ts <= self.submitted_ts {
            return;
        }
        let newest = index.newest_created_ms();
        let files = match index.sync_handles(self.sync_from_ms) {
            Ok(f) => f,
            Err(e) => return tracing::error!(error = %e, "preparing the index checkpoint"),
        };
        if cp.submit_index(IndexSync { files, ts }).is_ok() {
            self.submitted_ts = ts;
            self.sync_from_ms = newest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Checkpoint;

    /// Proves the recorded index time never passes the newest durable commit-log record (an
    /// entry kept by recovery must point into the recovered log), and moves once both are past.
    #[test]
    fn index_time_is_capped_by_the_durable_commit_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut ix = IndexService::open(dir.path(), 4, 16).unwrap();
        ix.put("T", &["k"], 0, 1_000).unwrap();
        let cp = Checkpointer::spawn(Checkpoint::open(dir.path()).unwrap(), None).unwrap();
        let mut ic = IndexCheckpoint::new(1, 0);
        let tick = |ic: &mut IndexCheckpoint, indexed, durable| {
            std::thread::sleep(Duration::from_millis(2)); // past the 1 ms interval
            ic.tick(&ix, &cp, indexed, durable);
        };
        tick(&mut ic, 5_000, 3_000);
        let read = || {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let ts = Checkpoint::open(dir.path()).unwrap().index_msg_timestamp;
                if ts != 0 || Instant::now() > deadline {
                    return ts;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        assert_eq!(read(), 3_000);
        tick(&mut ic, 5_000, 6_000);
        let stopped = cp.stop().expect("checkpoint back");
        assert_eq!(stopped.checkpoint.index_msg_timestamp, 5_000);
    }
}
