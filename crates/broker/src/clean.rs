//! Consume-queue retention on each shard (RocketMQ's CleanConsumeQueueService): when the writer
//! has moved the commit log's minimum physical offset (`WriterSender::min_phy_offset`), every
//! queue this shard owns deletes its files whose units all point below it and moves its min
//! logical offset to the first unit still in the commit log. Pulls below that offset then get
//! OFFSET_TOO_SMALL with the new min as next begin offset (`pull::lookup`).
//!
//! Runs as one local task per shard, started by `start::run_shard`; only this shard touches its
//! queues (invariant 1). A trim borrows one queue, unlinks at most a few files and returns; the
//! pause between queues that lost files is an async sleep, so the executor keeps serving.

use std::rc::Rc;
use std::time::Duration;

use crate::runtime;
use crate::shard::Shard;

pub fn start(shard: &Rc<Shard>) {
    runtime::spawn(run(shard.clone()));
}

async fn run(s: Rc<Shard>) {
    let store = &s.ctx.cfg.store;
    let interval = Duration::from_millis(store.retention_check_interval_ms.max(1));
    let pause = Duration::from_millis(store.delete_consume_queue_files_interval_ms);
    // Recovery already trimmed every queue against the min at start-up (`store::open`).
    let mut trimmed_to = s.ctx.writer.min_phy_offset();
    while !s.is_stopping() {
        runtime::sleep(interval).await;
        let min_phy = s.ctx.writer.min_phy_offset();
        if min_phy <= trimmed_to {
            continue;
        }
        trimmed_to = min_phy;
        let keys: Vec<(String, u32)> = s.read_queues().keys().cloned().collect();
        for key in keys {
            if s.is_stopping() {
                return;
            }
            if trim_queue(&s, &key, min_phy) > 0 && !pause.is_zero() {
                runtime::sleep(pause).await;
            }
        }
    }
}

/// Trims one owned queue (it may have been removed since the keys were taken); returns the
/// number of files deleted. A failure is logged and retried at the next move of the min.
pub fn trim_queue(s: &Shard, key: &(String, u32), min_phy: u64) -> usize {
    let mut queues = s.queues_mut();
    let Some(q) = queues.get_mut(key) else {
        return 0;
    };
    let before = q.cq.min_offset();
    match q.cq.delete_expired(min_phy) {
        Ok(deleted) => {
            if deleted > 0 || q.cq.min_offset() != before {
                tracing::info!(topic = %key.0, queue = key.1, deleted, min_offset = q.cq.min_offset(),
                    min_phy, "consume queue trimmed after commit-log retention");
            }
            deleted
        }
        Err(e) => {
            tracing::error!(topic = %key.0, queue = key.1, error = %e, "consume queue trim failed");
            0
        }
    }
}
