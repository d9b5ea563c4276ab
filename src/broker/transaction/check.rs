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
//! A run walks at most `TRANSACTION_CHECK_MAX_MS` and yields to the shard's other tasks every
//! `TRANSACTION_CHECK_BATCH` messages. A group with no live producer is logged once per run; its
//! messages still count a check, so they end in TRANS_CHECK_MAX_TIME_TOPIC, as in RocketMQ.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::broker::topic_validator::{TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC};
use crate::broker::transaction::end::immunity_ms;
use crate::broker::transaction::records::{self, value, CopyAt};
use crate::broker::transaction::{ensure_system_topic, persist, HALF_QUEUE_ID};
use crate::broker::{broker2client, now_ms, send, Shard};
use crate::constants::{TRANSACTION_CHECK_BATCH, TRANSACTION_CHECK_MAX_MS};
use crate::protocol::message;
use crate::protocol::properties::{self, keys};
use crate::remoting::{encode_frame, Outbound};
use crate::runtime;
use crate::writer::AppendRecord;

/// Runs the check every `transactionCheckInterval` until the broker stops.
pub async fn run(shard: Rc<Shard>) {
    let interval = shard.ctx.cfg.transaction.check_interval();
    loop {
        runtime::sleep(interval).await;
        if shard.stopping.get() {
            break;
        }
        if shard.paused.get() {
            continue;
        }
        check_once(&shard).await;
    }
}

/// What the walk does with the half message at the progress.
enum Step {
    /// Too young, or stored after the run began: the run ends here.
    Stop,
    /// Resolved without writing anything (blank unit, record gone, too old).
    Skip,
    /// Checked `transactionCheckMax` times: moved to TRANS_CHECK_MAX_TIME_TOPIC.
    Discard { record: AppendRecord, uniq: String },
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

/// One run of the check over the half queue.
pub async fn check_once(shard: &Rc<Shard>) {
    let started_ms = now_ms();
    let deadline = Instant::now() + Duration::from_millis(TRANSACTION_CHECK_MAX_MS);
    let mut producers = ProducerPicker::default();
    let mut walked = 0usize;
    let (mut checked, mut discarded) = (0usize, 0usize);
    while !shard.stopping.get() && !shard.paused.get() && Instant::now() < deadline {
        walked += 1;
        if walked.is_multiple_of(TRANSACTION_CHECK_BATCH) {
            futures_lite::future::yield_now().await;
        }
        let (min, max) = shard.queue_bounds(TRANS_HALF_TOPIC, HALF_QUEUE_ID);
        let off = {
            let mut st = shard.transaction.borrow_mut();
            let Some(st) = st.as_mut() else { return };
            st.skip_to(min);
            if st.half_progress >= max || !st.begin_check(st.half_progress) {
                break;
            }
            st.half_progress
        };
        let step = examine(shard, off, started_ms);
        let (ok, uniq, copy) = match step {
            Step::Stop => {
                end_check(shard, off, false, None, None);
                break;
            }
            Step::Skip => (true, None, None),
            Step::Discard { record, uniq } => {
                let ok = discard(shard, record, &uniq).await;
                discarded += ok as usize;
                (ok, Some(uniq), None)
            }
            Step::PutBack { copy, uniq, check } => {
                match send::append(shard, vec![copy], true).await {
                    Ok(outcome) => {
                        let at = CopyAt {
                            phy: outcome.phy_offsets.first().copied().unwrap_or(0),
                            queue_offset: outcome.queue_offsets.first().copied().unwrap_or(0),
                            store_timestamp: outcome.store_timestamp,
                        };
                        if let Some(c) = check {
                            let cmd =
                                records::check_request(shard, c.body, &c.real_topic, &uniq, &at);
                            producers.send(shard, &c.group, cmd).await;
                            checked += 1;
                        }
                        (true, Some(uniq), Some(at.queue_offset))
                    }
                    Err(e) => {
                        tracing::warn!(half = off, error = %e, "cannot put a half message back for its check; the next run retries");
                        (false, None, None)
                    }
                }
            }
        };
        end_check(shard, off, ok, uniq.as_deref(), copy);
        if !ok {
            break;
        }
    }
    if checked + discarded > 0 {
        let ms = now_ms() - started_ms;
        tracing::info!(checked, discarded, ms, "transaction check run");
    }
}

fn end_check(shard: &Shard, off: u64, ok: bool, uniq: Option<&str>, copy: Option<u64>) {
    let mut st = shard.transaction.borrow_mut();
    if let Some(st) = st.as_mut() {
        st.end_check(off, ok, uniq, copy);
        persist(shard, st);
    }
}

/// Reads the half message at `off` and decides what the walk does with it.
fn examine(shard: &Shard, off: u64, started_ms: i64) -> Step {
    let cfg = &shard.ctx.cfg;
    let Some(unit) = shard.unit_at(TRANS_HALF_TOPIC, HALF_QUEUE_ID, off) else {
        return Step::Skip;
    };
    let mut reader = shard.reader.borrow_mut();
    let half = match reader
        .read(unit.phy_offset, unit.size)
        .map_err(|e| e.to_string())
        .and_then(|b| message::decode(b, false).map_err(|e| e.to_string()))
    {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(half = off, phy = unit.phy_offset, error = %e, "half message unreadable; skipped");
            return Step::Skip;
        }
    };
    if half.store_timestamp >= started_ms {
        return Step::Stop;
    }
    let now = now_ms();
    let mut props = properties::parse(half.properties);
    let uniq = value(&props, keys::UNIQ_KEY).unwrap_or("").to_owned();
    let times: i32 = value(&props, keys::TRANSACTION_CHECK_TIMES)
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    if times >= cfg.transaction.check_max {
        return match records::discarded_record(&half) {
            Ok(record) => Step::Discard { record, uniq },
            Err(e) => {
                tracing::error!(half = off, error = %e, "cannot re-encode a half message to discard it; skipped");
                Step::Skip
            }
        };
    }
    let reserved_ms = cfg.store.file_reserved_time_hours as i64 * 3_600_000;
    if now - half.born_timestamp > reserved_ms {
        tracing::info!(
            half = off,
            "half message older than fileReservedTime; skipped"
        );
        return Step::Skip;
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
                Step::Skip
            }
        };
    }
    records::set(
        &mut props,
        keys::TRANSACTION_CHECK_TIMES,
        (times + 1).to_string(),
    );
    let group = value(&props, keys::PGROUP).unwrap_or("").to_owned();
    let real_topic = value(&props, keys::REAL_TOPIC).unwrap_or("").to_owned();
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
            Step::Skip
        }
    }
}

/// Stores a half message in TRANS_CHECK_MAX_TIME_TOPIC; false when it could not.
async fn discard(shard: &Rc<Shard>, record: AppendRecord, uniq: &str) -> bool {
    if let Err(e) = ensure_system_topic(shard, TRANS_CHECK_MAX_TIME_TOPIC).await {
        tracing::warn!(error = %e, "cannot create {TRANS_CHECK_MAX_TIME_TOPIC}; the next run retries");
        return false;
    }
    match send::append(shard, vec![record], true).await {
        Ok(_) => {
            tracing::warn!(uniq, "transaction checked transactionCheckMax times without a decision; moved to {TRANS_CHECK_MAX_TIME_TOPIC}");
            true
        }
        Err(e) => {
            tracing::warn!(uniq, error = %e, "cannot discard a half message; the next run retries");
            false
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
                        .borrow()
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
