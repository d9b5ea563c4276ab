//! A consume-queue truncation on its way from the writer to the queues' owners: when the
//! commit log is truncated back to a record boundary (`WriterSender::try_truncate_to`), every
//! consume queue drops the units of the records at or past it. The writer hands one
//! `CqTruncate` to its `Dispatcher` in dispatch order (after every run dispatched before, before
//! any run after); the dispatcher tells each owner, and each owner answers with the files left to
//! unlink and to fsync (`CqCutFiles`), which the writer does, off the owners' cores, before the
//! commit log itself is cut (so no stale unit can survive a crash and point into records
//! appended later at the same offsets).
//!
//! The answers travel over a bounded channel the writer drains; an owner never blocks on it.

use crossbeam_channel::{Receiver, Sender};

use crate::{CqCutFiles, StoreError};

/// Answers one truncation can collect: one per owner shard, far above any core count.
pub const CQ_TRUNCATE_ANSWERS_MAX: usize = 1024;

/// What one owner did: the files to unlink and to fsync, or why it could not.
pub struct CqTruncated {
    /// How many answers the truncation gets in all (every one says the same).
    pub answers: usize,
    pub result: Result<CqCutFiles, StoreError>,
}

/// Every consume queue drops its units whose record starts at or past `phy_offset`.
#[derive(Clone)]
pub struct CqTruncate {
    pub phy_offset: u64,
    /// How many owners answer (the dispatcher sets it before handing out copies).
    answers: usize,
    reply: Sender<CqTruncated>,
}

impl CqTruncate {
    /// A truncation expecting one answer, and where the answers arrive.
    pub fn new(phy_offset: u64) -> (CqTruncate, Receiver<CqTruncated>) {
        let (reply, rx) = crossbeam_channel::bounded(CQ_TRUNCATE_ANSWERS_MAX);
        let cut = CqTruncate {
            phy_offset,
            answers: 1,
            reply,
        };
        (cut, rx)
    }

    /// This truncation answered by `owners` owners (at least one), one copy each.
    pub fn split(self, owners: usize) -> Vec<CqTruncate> {
        let owners = owners.clamp(1, CQ_TRUNCATE_ANSWERS_MAX);
        let cut = CqTruncate {
            answers: owners,
            ..self
        };
        vec![cut; owners]
    }

    /// One owner's answer. Never blocks (the channel holds every answer).
    pub fn answer(&self, result: Result<CqCutFiles, StoreError>) {
        let sent = self.reply.try_send(CqTruncated {
            answers: self.answers,
            result,
        });
        if sent.is_err() {
            tracing::error!("a consume-queue truncation answer was lost (the writer gave up)");
        }
    }
}
