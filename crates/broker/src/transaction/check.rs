//! The check service (Java's `TransactionalMessageCheckService` and the `check` of
//! `TransactionalMessageServiceImpl`): every `transactionCheckInterval`, on the half queue's
//! owner shard, walk the half queue from the progress and, for each open half message:
//! - stop at one stored after this run began, or younger than `transactionTimeOut` (or its own
//!   CHECK_IMMUNITY_TIME_IN_SECONDS, whose message is first moved to the end of the queue once,
//!   so that it does not hold the messages behind it);
//! - move it to TRANS_CHECK_MAX_TIME_TOPIC once it was checked `transactionCheckMax` times;
//! - skip it when it is older than `fileReservedTime` or its record is gone;
//! - otherwise put a copy back at the end of the half queue with TRANSACTION_CHECK_TIMES + 1 and
//!   send CHECK_TRANSACTION_STATE about the copy to a live producer of its group. The producer
//!   answers with END_TRANSACTION about the copy.
//!
//! A run walks at most `TRANSACTION_CHECK_MAX_MS`, in batches of up to `TRANSACTION_CHECK_BATCH`
//! messages (`TRANSACTION_CHECK_BATCH_BYTES` of copies) whose copies and discards go to the
//! writer as one request, and yields to the shard's other tasks after each batch. A group with no live producer is logged once per run; its
//! messages still count a check, so they end in TRANS_CHECK_MAX_TIME_TOPIC, as in RocketMQ.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::common::now_ms;
use crate::constants::{
    TRANSACTION_CHECK_BATCH, TRANSACTION_CHECK_BATCH_BYTES, TRANSACTION_CHECK_MAX_MS,
};
use crate::metadata::topic_validator::{TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC};
use crate::protocol::message;
use crate::protocol::properties::{self, keys};
use crate::remoting::{encode_frame, Outbound};
use crate::runtime;
use crate::shard::Shard;
use crate::topic_manager::ensure_system_topic;
use crate::transaction::end::immunity_ms;
use crate::transaction::records::{value, CopyAt};
use crate::transaction::{persist, records, HALF_QUEUE_ID};
use crate::writer::AppendRecord;
use crate::{append, broker2client};

/// Runs the check every `transactionCheckInterval` until the broker stops.
pub async fn run(shard: Rc<Shard>) {
    let interval = shard.ctx.cfg.transaction.check_interval();
    loop {
        runtime::sleep(interval).await;
        if shard.is_stopping() {
            break;
        }
        if shard.is_paused() {
            continue;
        }
        check_once(&shard).await;
    }
}

/// What the walk does with the half message at the progress.
enum Step {
    /// Too young, or stored after the run began: the run ends here.
    Stop,
    /// Resolved without writing anything (blank unit, record gone, too old); the half
    /// message's real topic when it could be read.
    Skip(Option<String>),
    /// Checked `transactionCheckMax` times: moved to TRANS_CHECK_MAX_TIME_TOPIC.
    Discard {
        record: AppendRecord,
        uniq: String,
        real_topic: String,
    },
    /// Copied to the end of the half queue, with a check to send about the copy (none for an
    /// immunity copy).
    PutBack {
        copy: AppendRecord,
        uniq: String,
        check: Option<PendingCheck>,
    },
}

/// A CHECK_TRANSACTION_STATE waiting for its copy's offsets.
struct PendingCheck {
    group: String,
    real_topic: String,
    body: BytesMut,
}

/// One run of the check over the half queue: batches of up to `TRANSACTION_CHECK_BATCH` open
/// half messages, each batch's copies and discards stored by one writer request.
pub async fn check_once(shard: &Rc<Shard>) {
    let started_ms = now_ms();
    let deadline = Instant::now() + Duration::from_millis(TRANSACTION_CHECK_MAX_MS);
    let mut producers = ProducerPicker::default();
    let (mut checked, mut discarded) = (0usize, 0usize);
    let mut last = false;
    while !last && !shard.is_stopping() && !shard.is_paused() && Instant::now() < deadline {
        let (offs, steps, end) = walk_batch(shard, started_ms);
        last = end;
        if offs.is_empty() {
            break;
        }
        {
            let mut st = shard.transaction_mut();
            let Some(st) = st.as_mut() else { return };
            if !st.begin_checks(&offs) {
                break;
            }
        }
        let mut records = Vec::new();
        let has_discard = steps.iter().any(|s| matches!(s, Step::Discard { .. }));
        let mut ok = !has_discard
            || match ensure_system_topic(shard, TRANS_CHECK_MAX_TIME_TOPIC).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot create {TRANS_CHECK_MAX_TIME_TOPIC}; the next run retries");
                    false
                }
            };
        let mut entries = Vec::with_capacity(offs.len());
        let mut pending = Vec::new();
        let mut parts = Vec::with_capacity(steps.len());
        // The real topics of the half messages this batch closes without a decision.
        let mut closed = Vec::new();
        for step in steps {
            match step {
                Step::Stop => parts.push((None, None, None)),
                Step::Skip(real_topic) => {
                    closed.extend(real_topic);
                    parts.push((None, None, None));
                }
                Step::Discard {
                    record,
                    uniq,
                    real_topic,
                } => {
                    records.push(record);
                    closed.push(real_topic);
                    parts.push((Some(uniq), None, None));
                }
                Step::PutBack { copy, uniq, check } => {
                    parts.push((Some(uniq), Some(records.len()), check));
                    records.push(copy);
                }
            }
        }
        let outcome = if !ok || records.is_empty() {
            None
        } else {
            match append::append(shard, records, true).await {
                Ok(o) => Some(o),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot store the check's copies; the next run retries");
                    ok = false;
                    None
                }
            }
        };
        for (off, (uniq, at_index, check)) in offs.iter().zip(parts) {
            let at = match (&outcome, at_index) {
                (Some(o), Some(i)) => Some(CopyAt {
                    phy: o.phy_offsets.get(i).copied().unwrap_or(0),
                    queue_offset: o.queue_offsets.get(i).copied().unwrap_or(0),
                    store_timestamp: o.store_timestamp,
                }),
                _ => None,
            };
            if ok && at.is_none() && uniq.is_some() {
                discarded += 1;
                tracing::info!(half = off, uniq = uniq.as_deref().unwrap_or(""), "transaction checked transactionCheckMax times without a decision; moved to {TRANS_CHECK_MAX_TIME_TOPIC}");
            }
            entries.push((*off, uniq.clone(), at.as_ref().map(|a| a.queue_offset)));
            if let (Some(c), Some(at), Some(u)) = (check, at, uniq) {
                pending.push((c, u, at));
            }
        }
        {
            let mut st = shard.transaction_mut();
            let Some(st) = st.as_mut() else { return };
            st.end_checks(&entries, ok);
            persist(shard, st);
        }
        if !ok {
            break;
        }
        for topic in closed {
            crate::metrics::record::half_adjust(&topic, -1);
        }
        for (c, uniq, at) in pending {
            let cmd = records::check_request(shard, c.body, &c.real_topic, &uniq, &at);
            producers.send(shard, &c.group, cmd).await;
            checked += 1;
        }
        futures_lite::future::yield_now().await;
    }
    if checked + discarded > 0 {
        let ms = now_ms() - started_ms;
        tracing::info!(checked, discarded, ms, "transaction check run");
    }
}

/// Examines up to a batch of open half messages from the progress on: their offsets, what to do
/// with each, and whether the walk ends after them (a message too young, the queue's end, or
/// one being decided).
fn walk_batch(shard: &Shard, started_ms: i64) -> (Vec<u64>, Vec<Step>, bool) {
    let (min, max) = shard.queue_bounds(TRANS_HALF_TOPIC, HALF_QUEUE_ID);
    let mut next = {
        let mut st = shard.transaction_mut();
        let Some(st) = st.as_mut() else {
            return (Vec::new(), Vec::new(), true);
        };
        st.skip_to(min);
        st.half_progress
    };
    let (mut offs, mut steps) = (Vec::new(), Vec::new());
    let mut bytes = 0usize;
    while offs.len() < TRANSACTION_CHECK_BATCH && bytes < TRANSACTION_CHECK_BATCH_BYTES {
        if next >= max {
            return (offs, steps, true);
        }
        let (resolved, deciding) = {
            let st = shard.transaction();
            let Some(st) = st.as_ref() else {
                return (offs, steps, true);
            };
            (st.is_resolved(next), st.is_deciding(next))
        };
        if resolved {
            next += 1;
            continue;
        }
        if deciding {
            return (offs, steps, true);
        }
        let step = examine(shard, next, started_ms);
        if matches!(step, Step::Stop) {
            return (offs, steps, true);
        }
        bytes += match &step {
            Step::Discard { record, .. } | Step::PutBack { copy: record, .. } => {
                record.stored_len()
            }
            Step::Stop | Step::Skip(_) => 0,
        };
        offs.push(next);
        steps.push(step);
        next += 1;
    }
    (offs, steps, false)
}

/// Reads the half message at `off` and decides what the walk does with it.
fn examine(shard: &Shard, off: u64, started_ms: i64) -> Step {
    let cfg = &shard.ctx.cfg;
    let Some(unit) = shard.unit_at(TRANS_HALF_TOPIC, HALF_QUEUE_ID, off) else {
        return Step::Skip(None);
    };
    let mut reader = shard.reader();
    let half = match reader
        .read(unit.phy_offset, unit.size)
        .map_err(|e| e.to_string())
        .and_then(|b| message::decode(b, false).map_err(|e| e.to_string()))
    {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(half = off, phy = unit.phy_offset, error = %e, "half message unreadable; skipped");
            return Step::Skip(None);
        }
    };
    if half.store_timestamp >= started_ms {
        return Step::Stop;
    }
    let now = now_ms();
    let mut props = properties::parse(half.properties);
    let uniq = value(&props, keys::UNIQ_KEY).unwrap_or("").to_owned();
    let real_topic = value(&props, keys::REAL_TOPIC).unwrap_or("").to_owned();
    let times: i32 = value(&props, keys::TRANSACTION_CHECK_TIMES)
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    if times >= cfg.transaction.check_max {
        return match records::discarded_record(&half) {
            Ok(record) => Step::Discard {
                record,
                uniq,
                real_topic,
            },
            Err(e) => {
                tracing::error!(half = off, error = %e, "cannot re-encode a half message to discard it; skipped");
                Step::Skip(Some(real_topic))
            }
        };
    }
    let reserved_ms = cfg.store.file_reserved_time_hours as i64 * 3_600_000;
    if now - half.born_timestamp > reserved_ms {
        tracing::info!(
            half = off,
            "half message older than fileReservedTime; skipped"
        );
        return Step::Skip(Some(real_topic));
    }
    let age = now - half.born_timestamp;
    let immunity_prop = value(&props, keys::CHECK_IMMUNITY_TIME_IN_SECONDS);
    let timeout = cfg.transaction.timeout_ms;
    let immunity = immunity_prop.map_or(timeout, |s| immunity_ms(s, timeout)) as i64;
    if (0..immunity).contains(&age) {
        let is_copy = value(&props, keys::TRAN_PREPARED_QUEUE_OFFSET).is_some();
        if immunity_prop.is_none() || is_copy {
            return Step::Stop;
        }
        // Moved once to the end so that its immunity does not hold the queue.
        records::set(
            &mut props,
            keys::TRAN_PREPARED_QUEUE_OFFSET,
            off.to_string(),
        );
        return match records::half_copy(&half, &props) {
            Ok(copy) => Step::PutBack {
                copy,
                uniq,
                check: None,
            },
            Err(e) => {
                tracing::error!(half = off, error = %e, "cannot copy a half message; skipped");
                Step::Skip(Some(real_topic))
            }
        };
    }
    records::set(
        &mut props,
        keys::TRANSACTION_CHECK_TIMES,
        (times + 1).to_string(),
    );
    let group = value(&props, keys::PGROUP).unwrap_or("").to_owned();
    match (
        records::half_copy(&half, &props),
        records::check_body(&half, &props),
    ) {
        (Ok(copy), Ok(body)) => Step::PutBack {
            copy,
            uniq,
            check: Some(PendingCheck {
                group,
                real_topic,
                body,
            }),
        },
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(half = off, error = %e, "cannot copy a half message for its check; skipped");
            Step::Skip(Some(real_topic))
        }
    }
}

/// The live producers of each group seen in one run, asked of shard 0 once per group, taken in
/// turn (Java's `ProducerManager.getAvailableChannel`).
#[derive(Default)]
struct ProducerPicker {
    groups: HashMap<String, (Vec<u64>, usize)>,
}

impl ProducerPicker {
    async fn send(
        &mut self,
        shard: &Rc<Shard>,
        group: &str,
        cmd: crate::protocol::RemotingCommand,
    ) {
        if !self.groups.contains_key(group) {
            let g = group.to_owned();
            let conns: Vec<u64> = shard
                .mesh
                .call(0, move |s0| async move {
                    s0.meta()
                        .producers
                        .get(&g)
                        .map(|m| m.values().map(|c| c.conn_id).collect())
                        .unwrap_or_default()
                })
                .await
                .unwrap_or_default();
            if conns.is_empty() {
                tracing::warn!(
                    group,
                    "no live producer of the group to check a transaction with"
                );
            }
            self.groups.insert(group.to_owned(), (conns, 0));
        }
        let Some((conns, next)) = self.groups.get_mut(group) else {
            return;
        };
        if conns.is_empty() {
            return;
        }
        let conn_id = conns[*next % conns.len()];
        *next += 1;
        let Some(Outbound::Frame(frame)) = encode_frame(&cmd) else {
            return;
        };
        broker2client::send_oneway(shard, conn_id, frame);
    }
}
