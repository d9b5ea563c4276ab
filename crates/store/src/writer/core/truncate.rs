//! The writer's side of a commit-log truncation (`WriterSender::try_truncate_to`), handled in
//! inbox order: every append before it is written, published and dispatched first, every
//! append after it lands at the new end.
//!
//! Order, chosen so that a crash at any step leaves a store recovery reads correctly: check the
//! offset (nothing changes if refused); let the syncs on the ring complete; have every
//! consume queue cut and fdatasync what the owners changed (a unit left pointing past the cut
//! would name whatever is appended there next); cut the index (msynced); cut the commit log
//! (later segments unlinked, the tail zeroed, all fdatasync'd); then move the positions,
//! the published end and the sequencer's queue offsets back. Before the commit log is cut, a
//! crash leaves its records in place (the caller truncates again); after it, recovery finds the
//! new end. Blocking waits here are bounded (`TRUNCATE_WAIT`) and happen on the writer's own
//! thread, never on a shard.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::WriterCore;
use crate::writer::{CqTruncate, StartReply};
use crate::{CqCutFiles, StoreError};

/// How long the writer waits for its syncs to drain and for the consume queues' owners to
/// answer a truncation.
const TRUNCATE_WAIT: Duration = Duration::from_secs(30);

impl WriterCore {
    /// Truncates the commit log back to `offset` and reports to `done` (see the module docs).
    pub(super) fn truncate_to(&mut self, offset: u64, done: StartReply) {
        let res = self.try_truncate(offset);
        match &res {
            Ok(()) | Err(StoreError::Invalid(_)) => {}
            Err(e) => {
                tracing::error!(error = %e, offset, "commit-log truncation failed; refusing appends");
                self.flush_failed = true;
                self.publish_writable();
            }
        }
        done(res);
    }

    fn try_truncate(&mut self, offset: u64) -> Result<(), StoreError> {
        self.observe_flush_failure();
        if self.flush_failed {
            // Refused before anything changed.
            return Err(StoreError::Invalid(
                "an earlier commit-log flush failed; the store cannot truncate".into(),
            ));
        }
        let (min, max) = (self.log.min_phy_offset(), self.log.max_phy_offset());
        let below = offset < min;
        if below && !offset.is_multiple_of(self.log.segment_size()) {
            return Err(StoreError::Invalid(format!(
                "offset {offset} lies below the commit log's first byte {min} and is not a \
                 multiple of the segment size {}",
                self.log.segment_size()
            )));
        }
        let keep = self.log.check_boundary(offset.max(min))?;
        if offset == max {
            return Ok(());
        }
        let back = self.log.dropped_queue_offsets(keep)?;
        self.quiesce()?;
        self.cut_consume_queues(offset)?;
        if let Some(ix) = self.index.as_mut() {
            ix.truncate_from_phy(offset)?;
        }
        self.log.truncate_to(keep)?;
        if below {
            self.log.start_empty_at(offset)?;
        }
        let end = self.log.max_phy_offset();
        self.durable.reset_to(end);
        for ((topic, queue_id), next) in back {
            if let Some(q) = self.queue_offsets.get_mut(topic.as_str()) {
                q.insert(queue_id, next);
            }
        }
        // Before anything lands in a segment created again under a removed one's name.
        let bounds = &self.published.read_bounds;
        bounds.truncations.fetch_add(1, Ordering::AcqRel);
        bounds
            .min_phy
            .store(self.log.min_phy_offset(), Ordering::Release);
        self.published.set_back(end);
        Ok(())
    }

    /// Waits until every batch written so far is durable, published, handed to the shards and
    /// (SYNC_FLUSH) indexed, and no sync runs, then flushes the whole log.
    fn quiesce(&mut self) -> Result<(), StoreError> {
        let deadline = Instant::now() + TRUNCATE_WAIT;
        self.drain_rounds(deadline)?;
        self.deliver_all(deadline)?;
        self.index_durable();
        self.index_pending.clear();
        self.observe_flush_failure();
        if self.flush_failed {
            return Err(StoreError::NotWritable(
                "a commit-log flush failed before a truncation".into(),
            ));
        }
        self.log.flush()?;
        Ok(())
    }

    /// Waits until the shards took every completion kept for them.
    fn deliver_all(&mut self, deadline: Instant) -> Result<(), StoreError> {
        while !self.dispatcher.flush() {
            if Instant::now() >= deadline {
                return Err(StoreError::NotWritable(
                    "the shards did not take the writer's completions before a truncation".into(),
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    /// Hands the consume-queue cut to the dispatcher (behind every unit dispatched before),
    /// collects every owner's answer and fdatasyncs the files and directories they changed.
    fn cut_consume_queues(&mut self, offset: u64) -> Result<(), StoreError> {
        let (cut, answers) = CqTruncate::new(offset);
        self.dispatcher.truncate(cut);
        let deadline = Instant::now() + TRUNCATE_WAIT;
        let mut got = 0;
        let mut expected = 1;
        let mut files = CqCutFiles::default();
        while got < expected {
            // The cut may wait in the dispatcher for room on a shard.
            let kept = !self.dispatcher.flush();
            let wait = if kept {
                Duration::from_micros(200)
            } else {
                deadline.saturating_duration_since(Instant::now())
            };
            let a = match answers.recv_timeout(wait) {
                Ok(a) => a,
                Err(_) if Instant::now() < deadline => continue,
                Err(_) => {
                    return Err(StoreError::NotWritable(format!(
                        "{got} of {expected} consume-queue owners answered a truncation in time"
                    )))
                }
            };
            expected = a.answers;
            got += 1;
            let cut = a.result?;
            files.remove.extend(cut.remove);
            files.sync.extend(cut.sync);
        }
        // Unlinked first, so the directories' fsyncs below cover the unlinks.
        for p in &files.remove {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(p, e)),
            }
        }
        for p in &files.sync {
            match std::fs::File::open(p) {
                Ok(f) => f.sync_all().map_err(|e| StoreError::io(p, e))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(p, e)),
            }
        }
        Ok(())
    }
}
