//! The writer's housekeeping between batches: the flush policy (periodic and eager async flush
//! jobs), the checkpoint, retention passes and the index checkpoint, and when the next of them
//! is due. Runs only on the "ringmq-writer" thread, as part of `WriterCore`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::WriterCore;
use crate::constants::{ASYNC_FLUSH_EAGER_BYTES, DISK_FULL_RECHECK_MS, OS_PAGE_SIZE};
use crate::retention;

impl WriterCore {
    pub(super) fn next_tick_in(&self) -> Duration {
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
            self.start_async_flush(least.max(ASYNC_FLUSH_EAGER_BYTES), false);
        }
        if self.last_retention.elapsed() >= self.retention_interval() {
            self.last_retention = Instant::now();
            let mut clock = retention::PassClock::system();
            clock.manual = self.published.take_manual_delete();
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

    /// After a batch under ASYNC_FLUSH: a burst is written to disk while the writer appends,
    /// not after it.
    pub(super) fn eager_async_flush(&mut self) {
        let least = u64::from(self.cfg.flush_commit_log_least_pages) * OS_PAGE_SIZE;
        self.start_async_flush(least.max(ASYNC_FLUSH_EAGER_BYTES), false);
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
        // SYNC_FLUSH has nothing to do here: every written group already waits for its round.
        let least = u64::from(self.cfg.flush_commit_log_least_pages) * OS_PAGE_SIZE;
        self.start_async_flush(least, thorough);
        if thorough {
            self.last_thorough = Instant::now();
        }
        self.write_checkpoint();
    }

    fn flushed_timestamp(&self) -> i64 {
        self.log
            .flushed_store_timestamp()
            .max(self.durable.flushed_timestamp)
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
