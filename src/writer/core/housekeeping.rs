//! The writer's housekeeping between batches: the flush policy (periodic and eager async flush
//! jobs), the checkpoint, retention passes and the index checkpoint, and when the next of them
//! is due. Runs only on the "ringmq-writer" thread, as part of `WriterCore`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Completion, WriterCore};
use crate::constants::{ASYNC_FLUSH_EAGER_BYTES, DISK_FULL_RECHECK_MS, OS_PAGE_SIZE};
use crate::store::retention;
use crate::writer::flusher::FlushJob;

impl WriterCore {
    pub(super) fn next_tick_in(&self) -> Duration {
        if !self.index_pending.is_empty() {
            // Keys wait for the group commit in flight, which takes about one fdatasync.
            return Duration::from_millis(1);
        }
        let flush = Duration::from_millis(self.cfg.flush_interval_commit_log_ms.max(1));
        let ret = self.retention_interval();
        let a = flush.saturating_sub(self.last_flush.elapsed());
        let b = ret.saturating_sub(self.last_retention.elapsed());
        let c = self.index_checkpoint.due_in();
        a.min(b).min(c).max(Duration::from_millis(1))
    }

    /// `cleanResourceInterval`, shortened while appends are refused: the files a pass queued
    /// for deletion free their blocks within a few `deleteCommitLogFilesInterval`s, and the
    /// store should take appends again then, not a whole interval later.
    fn retention_interval(&self) -> Duration {
        let base = Duration::from_millis(self.cfg.retention_check_interval_ms.max(1));
        if self.disk_writable {
            base
        } else {
            base.min(Duration::from_millis(DISK_FULL_RECHECK_MS))
        }
    }

    /// Periodic work: flush policy, checkpoint, retention. Runs between batches.
    pub(super) fn tick(&mut self) {
        self.index_durable();
        let interval = Duration::from_millis(self.cfg.flush_interval_commit_log_ms);
        if self.last_flush.elapsed() >= interval {
            self.periodic_flush();
        } else {
            let least = u64::from(self.cfg.flush_commit_log_least_pages) * OS_PAGE_SIZE;
            self.submit_async_flush(least.max(ASYNC_FLUSH_EAGER_BYTES), false);
        }
        if self.last_retention.elapsed() >= self.retention_interval() {
            self.last_retention = Instant::now();
            let clock = retention::PassClock::system();
            match retention::run(&mut self.log, &self.cfg, clock, &self.deleter) {
                Ok(out) => {
                    let min_phy = self.log.min_phy_offset();
                    // Shards trim their consume queues against this (broker::clean). Published
                    // before `writable`, so whoever sees the pass's verdict sees its trim too.
                    self.published
                        .read_bounds
                        .min_phy
                        .store(min_phy, Ordering::Release);
                    self.disk_writable = out.writable;
                    self.publish_writable();
                    // Every pass: a full deleter may have left expired index files last time.
                    if let Some(ix) = self.index.as_mut() {
                        retention::expire_index(ix, min_phy, &self.deleter);
                    }
                }
                Err(e) => tracing::error!(error = %e, "retention pass failed"),
            }
        }
        if self.index_checkpoint.due_in().is_zero() {
            let durable_ts = self.flushed_timestamp();
            if let (Some(ix), Some(cp)) = (self.index.as_ref(), self.checkpointer.as_ref()) {
                let indexed_ts = self.last_index_timestamp;
                self.index_checkpoint.tick(ix, cp, indexed_ts, durable_ts);
            }
        }
    }

    pub(super) fn publish_writable(&self) {
        self.published
            .writable
            .store(self.disk_writable && !self.flush_failed, Ordering::Release);
    }

    fn periodic_flush(&mut self) {
        let thorough = self.last_thorough.elapsed()
            >= Duration::from_millis(self.cfg.flush_commit_log_thorough_interval_ms);
        self.last_flush = Instant::now();
        self.observe_flush_failure();
        // SYNC_FLUSH has nothing to do here: every written batch is already with the
        // group-commit thread.
        let least = u64::from(self.cfg.flush_commit_log_least_pages) * OS_PAGE_SIZE;
        self.submit_async_flush(least, thorough);
        if thorough {
            self.last_thorough = Instant::now();
        }
        self.write_checkpoint();
    }

    /// ASYNC_FLUSH: hands the flusher everything written since its last job, if it is idle and
    /// at least `least` bytes are dirty (any amount when `thorough`). On the interval `least` is
    /// `flushCommitLogLeastPages`; after a batch it is ASYNC_FLUSH_EAGER_BYTES, so a burst is
    /// written to disk while the writer appends instead of after it.
    fn submit_async_flush(&mut self, least: u64, thorough: bool) {
        let Some(f) = self.flusher.as_ref() else {
            return;
        };
        let dirty = self.log.max_phy_offset() - self.async_submitted;
        if dirty == 0 || (dirty < least && !thorough) || f.state.busy.load(Ordering::Acquire) {
            return;
        }
        let job = FlushJob {
            files: self.log.files_from(self.async_submitted),
            upto_phy: self.log.max_phy_offset(),
            store_timestamp: self.log.last_store_timestamp(),
        };
        if f.submit(job) {
            self.async_submitted = self.log.max_phy_offset();
        }
    }

    fn flushed_timestamp(&self) -> i64 {
        let async_ts = self
            .flusher
            .as_ref()
            .map_or(0, |f| f.state.flushed_timestamp.load(Ordering::Acquire));
        let sync_ts = match &self.completion {
            Completion::GroupCommit(gc) => gc.state.flushed_timestamp.load(Ordering::Acquire),
            Completion::Inline(_) => 0,
        };
        self.log
            .flushed_store_timestamp()
            .max(async_ts)
            .max(sync_ts)
    }

    fn write_checkpoint(&mut self) {
        let ts = self.flushed_timestamp();
        if ts <= self.checkpoint_ts {
            return;
        }
        if let Some(c) = self.checkpointer.as_ref() {
            self.checkpoint_ts = ts;
            c.submit(ts);
        }
    }
}
