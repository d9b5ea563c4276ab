//! Transactional messages, as RocketMQ's TransactionalMessageService does them.
//!
//! A prepared send (`TRAN_MSG=true`) is stored as a half message in `RMQ_SYS_TRANS_HALF_TOPIC`
//! queue 0 (`records::half_record`, called by the send path); consumers never see that topic.
//! END_TRANSACTION (`end`) commits it (the message is stored again on its real topic and queue
//! and becomes consumable) or rolls it back; either way the decision is stored as an op record
//! in `RMQ_SYS_TRANS_OP_HALF_TOPIC` queue 0, in the same writer request as the committed record,
//! so a decision is never half-applied. The check service (`check`) asks a live producer of the
//! group (CHECK_TRANSACTION_STATE) about half messages older than `transactionTimeOut`, and gives
//! up on a message after `transactionCheckMax` checks by moving it to
//! `TRANS_CHECK_MAX_TIME_TOPIC`.
//!
//! Ownership: the op queue is owned by the half queue's owner shard (`broker::owner_of` maps the
//! op topic to the half topic), and that shard alone holds the [`TransactionState`] and takes
//! every decision: END_TRANSACTION on another shard is forwarded there, so two decisions about
//! one message are serialized and the second is refused. Progress is kept as RocketMQ keeps it,
//! as the offsets of group `CID_RMQ_SYS_TRANS` on the half and op queues in
//! `consumerOffset.json`; at start the op records past the op progress are read back, so
//! decisions survive restarts and crashes.

pub mod check;
pub mod end;
pub mod records;
pub mod state;

use std::collections::HashMap;
use std::rc::Rc;

pub use state::{Refusal, TransactionState};

use crate::error::BrokerError;
use crate::metadata::topic_validator::{TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC};
use crate::offsets;
use crate::protocol::message;
use crate::protocol::properties::{self, keys};
use crate::shard::Shard;

/// The consumer group whose offsets record the service's progress (Java's `CID_SYS_RMQ_TRANS`).
pub const CID_SYS_TRANS: &str = "CID_RMQ_SYS_TRANS";
/// The tag of op records (Java's `TransactionalMessageUtil.REMOVE_TAG`).
pub const REMOVE_TAG: &str = "d";
/// Half messages, and so op records, all live in queue 0.
pub const HALF_QUEUE_ID: u32 = 0;

/// The shard that owns the half and op queues and takes every decision.
pub fn owner(shard: &Shard) -> usize {
    shard.owner(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
}

/// Recovers the state on the owner shard and starts its check service there.
pub fn start(shard: &Rc<Shard>) {
    if owner(shard) != shard.id {
        return;
    }
    let state = recover(shard);
    tracing::info!(
        half_progress = state.half_progress,
        op_progress = state.op_progress(),
        "transaction service started"
    );
    *shard.transaction_mut() = Some(state);
    crate::runtime::spawn(check::run(shard.clone()));
}

/// Rebuilds the state from the persisted progress and the half and op queues.
fn recover(shard: &Shard) -> TransactionState {
    let (half_min, half_max) = shard.queue_bounds(TRANS_HALF_TOPIC, HALF_QUEUE_ID);
    let (op_min, op_max) = shard.queue_bounds(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID);
    let stored = |topic: &str| {
        offsets::query_local(shard, topic, CID_SYS_TRANS, HALF_QUEUE_ID).map(|o| o.max(0) as u64)
    };
    let half = stored(TRANS_HALF_TOPIC)
        .unwrap_or(half_min)
        .clamp(half_min, half_max);
    let op = stored(TRANS_OP_HALF_TOPIC)
        .unwrap_or(op_min)
        .clamp(op_min, op_max);
    let mut state = TransactionState::new(half, op);
    for op_offset in op..op_max {
        let halves = match read_record(shard, TRANS_OP_HALF_TOPIC, op_offset, |r| {
            records::op_offsets(r.body)
        }) {
            Ok(Some(h)) => h,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(op_offset, error = %e, "unreadable op record skipped");
                continue;
            }
        };
        state.take_op(op_offset, &halves);
    }
    // Several open half records of one transaction: a check put copies back before the crash.
    let mut by_uniq: HashMap<String, Vec<u64>> = HashMap::new();
    // Open transactions by real topic, for the half-messages metric: one per UNIQ_KEY.
    let mut open: HashMap<String, i64> = HashMap::new();
    for off in state.half_progress..half_max {
        if state.is_resolved(off) {
            continue;
        }
        let read = read_record(shard, TRANS_HALF_TOPIC, off, |r| {
            let get = |k| properties::get(r.properties, k).map(str::to_owned);
            (
                get(keys::UNIQ_KEY),
                get(keys::REAL_TOPIC).unwrap_or_default(),
            )
        });
        let Ok(Some((uniq, topic))) = read else {
            continue;
        };
        match uniq {
            Some(u) => {
                let offs = by_uniq.entry(u).or_default();
                if offs.is_empty() {
                    *open.entry(topic).or_default() += 1;
                }
                offs.push(off);
            }
            None => *open.entry(topic).or_default() += 1,
        }
    }
    for (u, offs) in by_uniq {
        if offs.len() > 1 {
            state.add_copies(u, offs);
        }
    }
    for (topic, n) in open {
        crate::metrics::record::half_adjust(&topic, n);
    }
    persist(shard, &state);
    state
}

/// Reads the record of unit `offset` of an owned queue and maps it; `Ok(None)` for a blank
/// unit.
pub fn read_record<R>(
    shard: &Shard,
    topic: &str,
    offset: u64,
    f: impl FnOnce(&message::DecodedRecord<'_>) -> R,
) -> Result<Option<R>, BrokerError> {
    let Some(unit) = shard.unit_at(topic, HALF_QUEUE_ID, offset) else {
        return Ok(None);
    };
    let mut reader = shard.reader();
    let bytes = reader.read(unit.phy_offset, unit.size)?;
    let r = message::decode(bytes, false).map_err(|e| {
        BrokerError::System(format!(
            "corrupt record at {} ({topic} offset {offset}): {e}",
            unit.phy_offset
        ))
    })?;
    Ok(Some(f(&r)))
}

/// Records the progress as the `CID_RMQ_SYS_TRANS` offsets, which shard 0 persists.
pub fn persist(shard: &Shard, state: &TransactionState) {
    offsets::commit_local(
        shard,
        TRANS_HALF_TOPIC,
        CID_SYS_TRANS,
        HALF_QUEUE_ID,
        state.half_progress as i64,
    );
    offsets::commit_local(
        shard,
        TRANS_OP_HALF_TOPIC,
        CID_SYS_TRANS,
        HALF_QUEUE_ID,
        state.op_progress() as i64,
    );
}
