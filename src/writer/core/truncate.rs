//! The writer's side of a commit-log truncation (`WriterSender::try_truncate_to`), handled in
//! inbox order: every append before it is written, published and dispatched first, every
//! append after it lands at the new end.
//!
//! Order, chosen so that a crash at any step leaves a store recovery reads correctly: check the
//! offset (nothing changes if refused); let the flush threads finish what they hold; have every
//! consume queue cut and fdatasync what the owners changed (a unit left pointing past the cut
//! would name whatever is appended there next); cut the index (msynced); cut the commit log
//! (later segments unlinked, the tail zeroed, all fdatasync'd); then move the positions,
//! the published end and the sequencer's queue offsets back. Before the commit log is cut, a
//! crash leaves its records in place (the caller truncates again); after it, recovery finds the
//! new end. Blocking waits here are bounded (`TRUNCATE_WAIT`) and happen on the writer's own
//! thread, never on a shard.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Completion, WriterCore};
use crate::store::{CqCutFiles, StoreError};
use crate::writer::group_commit::GroupCommitRequest;
use crate::writer::{AppendOutcome, AppendStatus, CqTruncate, StartReply};

/// How long the writer waits for the flush threads to drain and for the consume queues' owners
/// to answer a truncation.
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
        self.async_submitted = end;
        if let Some(f) = &self.flusher {
            f.state.flushed_phy.store(end, Ordering::Release);
        }
        if let Completion::GroupCommit(gc) = &self.completion {
            gc.state.flushed_phy.store(end, Ordering::Release);
        }
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

    /// Waits until every batch written so far is published, dispatched and (SYNC_FLUSH)
    /// indexed, and no flush is running, then flushes the whole log.
    fn quiesce(&mut self) -> Result<(), StoreError> {
        let deadline = Instant::now() + TRUNCATE_WAIT;
        if let Some(f) = &self.flusher {
            while f.state.busy.load(Ordering::Acquire) {
                if Instant::now() >= deadline {
                    return Err(StoreError::NotWritable(
                        "the async flush did not finish before a truncation".into(),
                    ));
                }
                std::thread::park_timeout(Duration::from_micros(200));
            }
        }
        if let Completion::GroupCommit(gc) = &self.completion {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let barrier = GroupCommitRequest {
                files: Vec::new(),
                upto_phy: self.log.max_phy_offset(),
                store_timestamp: self.log.last_store_timestamp(),
                units: Vec::new(),
                waiters: vec![(
                    Box::new(move |r: Result<AppendOutcome, StoreError>| {
                        // The writer waits for this; it is gone only if it gave up.
                        let _waiting = tx.send(r.map(|_| ()));
                    }),
                    AppendOutcome {
                        status: AppendStatus::PutOk,
                        phy_offsets: Vec::new(),
                        queue_offsets: Vec::new(),
                        store_timestamp: 0,
                    },
                )],
                deadline: None,
                truncate: None,
            };
            if gc.submit(barrier).is_err() {
                return Err(StoreError::NotWritable(
                    "the group-commit thread stopped".into(),
                ));
            }
            rx.recv_deadline(deadline).map_err(|_| {
                StoreError::NotWritable("the group commit did not drain before a truncation".into())
            })??;
            self.index_durable();
        }
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

    /// Hands the consume-queue cut to the dispatcher (through the group-commit thread under
    /// SYNC_FLUSH, which dispatches in order), collects every owner's answer and fdatasyncs the
    /// files and directories they changed.
    fn cut_consume_queues(&mut self, offset: u64) -> Result<(), StoreError> {
        let (cut, answers) = CqTruncate::new(offset);
        match &mut self.completion {
            Completion::Inline(d) => d.truncate(cut),
            Completion::GroupCommit(gc) => {
                let marker = GroupCommitRequest {
                    files: Vec::new(),
                    upto_phy: self.log.max_phy_offset(),
                    store_timestamp: self.log.last_store_timestamp(),
                    units: Vec::new(),
                    waiters: Vec::new(),
                    deadline: None,
                    truncate: Some(Box::new(cut)),
                };
                if gc.submit(marker).is_err() {
                    return Err(StoreError::NotWritable(
                        "the group-commit thread stopped".into(),
                    ));
                }
            }
        }
        let deadline = Instant::now() + TRUNCATE_WAIT;
        let mut got = 0;
        let mut expected = 1;
        let mut files = CqCutFiles::default();
        while got < expected {
            let a = answers.recv_deadline(deadline).map_err(|_| {
                StoreError::NotWritable(format!(
                    "{got} of {expected} consume-queue owners answered a truncation in time"
                ))
            })?;
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
