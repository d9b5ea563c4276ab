//! The "ringmq-checkpoint" thread: owns the checkpoint file while the writer runs. The writer's
//! periodic checkpoint is a pwrite + fdatasync (0.3-4 ms on the reference VM); done inline it
//! stalled every append behind it once per flush interval. The writer now only hands over the
//! newest flushed store timestamp and goes on; at a clean shutdown it takes the file back and
//! writes the final checkpoint itself.
//!
//! Invariants: only this thread touches the checkpoint while it runs; the channel holds one value
//! (a busy thread simply gets a newer timestamp on a later tick); a timestamp is written only if it
//! is newer than the last one written.

use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::store::{Checkpoint, StoreError};

pub(super) struct Checkpointer {
    tx: Option<Sender<i64>>,
    thread: Option<JoinHandle<Checkpoint>>,
}

impl Checkpointer {
    pub(super) fn spawn(checkpoint: Checkpoint) -> Result<Self, StoreError> {
        let (tx, rx) = bounded(1);
        let thread = std::thread::Builder::new()
            .name("ringmq-checkpoint".into())
            .spawn(move || run(checkpoint, rx))
            .map_err(|e| StoreError::io("ringmq-checkpoint thread", e))?;
        Ok(Checkpointer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Asks for `physic_msg_timestamp = ts` to be made durable; never blocks.
    pub(super) fn submit(&self, ts: i64) {
        if let Some(tx) = self.tx.as_ref() {
            // Full: a write is pending and the next tick brings a newer value.
            let _ = tx.try_send(ts);
        }
    }

    /// Lets the thread finish its pending write and returns the checkpoint.
    pub(super) fn stop(mut self) -> Option<Checkpoint> {
        self.tx = None;
        match self.thread.take()?.join() {
            Ok(cp) => Some(cp),
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

fn run(mut cp: Checkpoint, rx: Receiver<i64>) -> Checkpoint {
    while let Ok(mut ts) = rx.recv() {
        while let Ok(newer) = rx.try_recv() {
            ts = ts.max(newer);
        }
        if ts <= cp.physic_msg_timestamp {
            continue;
        }
        cp.physic_msg_timestamp = ts;
        if let Err(e) = cp.flush() {
            tracing::error!(error = %e, "checkpoint flush failed");
        }
    }
    cp
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A submitted timestamp reaches the file before `stop` returns; an older one never
    /// overwrites a newer one.
    #[test]
    fn submitted_timestamp_is_durable_and_monotonic() {
        let dir = tempfile::tempdir().unwrap();
        let c = Checkpointer::spawn(Checkpoint::open(dir.path()).unwrap()).unwrap();
        c.submit(1_000);
        c.submit(500);
        let cp = c.stop().expect("checkpoint back");
        assert_eq!(cp.physic_msg_timestamp, 1_000);
        drop(cp);
        assert_eq!(
            Checkpoint::open(dir.path()).unwrap().physic_msg_timestamp,
            1_000
        );
    }
}
