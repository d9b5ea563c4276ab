//! END_TRANSACTION (37), usually oneway: a producer's commit or rollback of a half message
//! (Java's `EndTransactionProcessor`). The request is checked against the half message it names
//! (queue offset, commit-log offset, producer group), then decided on the owner shard: a commit
//! stores the committed record and the op record in one writer request, a rollback stores the op
//! record alone. A decision about a message already decided (through it or through a copy a
//! check put back) is refused, so nothing is delivered twice.

use std::rc::Rc;

use crate::append;
use crate::common::now_ms;
use crate::error::BrokerError;
use crate::metadata::topic_validator::TRANS_HALF_TOPIC;
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::EndTransactionRequestHeader;
use crate::protocol::message::{self, sys_flag};
use crate::protocol::properties::{self, keys};
use crate::protocol::RemotingCommand;
use crate::shard::Shard;
use crate::transaction::{owner, persist, records, Refusal, HALF_QUEUE_ID};

/// Serves END_TRANSACTION; `None` when there is nothing to answer (state UNKNOW, as Java).
pub async fn end_transaction(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<Option<RemotingCommand>, BrokerError> {
    if shard.ctx.role.is_slave() {
        return Err(BrokerError::SlaveNotAvailable(
            "the broker is a SLAVE: end transaction is forbidden".into(),
        ));
    }
    let h = EndTransactionRequestHeader::from_command(cmd)?;
    let commit = match h.commit_or_rollback {
        sys_flag::TRANSACTION_NOT_TYPE => return Ok(None),
        sys_flag::TRANSACTION_COMMIT => true,
        sys_flag::TRANSACTION_ROLLBACK => false,
        other => {
            return Err(BrokerError::InvalidParameter(format!(
                "commitOrRollback {other} is not 0, 8 or 12"
            )))
        }
    };
    if h.tran_state_table_offset < 0 || h.commit_log_offset < 0 {
        return Err(BrokerError::InvalidParameter(format!(
            "negative offset: tranStateTableOffset {}, commitLogOffset {}",
            h.tran_state_table_offset, h.commit_log_offset
        )));
    }
    let target = owner(&shard);
    let decision = Decision {
        half_offset: h.tran_state_table_offset as u64,
        half_phy: h.commit_log_offset as u64,
        producer_group: h.producer_group,
        from_check: h.from_transaction_check,
        commit,
    };
    let outcome = if target == shard.id {
        decide(&shard, decision).await
    } else {
        shard
            .mesh
            .call(target, move |s| async move {
                decide(&s, decision)
                    .await
                    .map_err(|e| (e.response_code(), e.to_string()))
            })
            .await?
            .map_err(|(code, remark)| owner_error(code, remark))
    };
    outcome?;
    Ok(Some(RemotingCommand::response_for(cmd, rc::SUCCESS, None)))
}

/// An error from the owner shard, with its response code kept.
fn owner_error(code: i32, remark: String) -> BrokerError {
    match code {
        rc::SYSTEM_BUSY => BrokerError::Busy,
        rc::ILLEGAL_OPERATION => BrokerError::IllegalOperation(remark),
        rc::INVALID_PARAMETER => BrokerError::InvalidParameter(remark),
        rc::SERVICE_NOT_AVAILABLE => BrokerError::ServiceNotAvailable(remark),
        _ => BrokerError::System(remark),
    }
}

/// One producer decision, as the owner shard takes it.
pub struct Decision {
    pub half_offset: u64,
    pub half_phy: u64,
    pub producer_group: String,
    pub from_check: bool,
    pub commit: bool,
}

/// Owner shard: checks the decision against the half message and stores it.
pub async fn decide(shard: &Rc<Shard>, d: Decision) -> Result<(), BrokerError> {
    let (committed, uniq, real_topic) = {
        let Some(unit) = shard.unit_at(TRANS_HALF_TOPIC, HALF_QUEUE_ID, d.half_offset) else {
            return Err(BrokerError::System(format!(
                "Find prepared transaction message failed: no half message at queue offset {}",
                d.half_offset
            )));
        };
        if unit.phy_offset != d.half_phy {
            return Err(BrokerError::System(format!(
                "The commit log offset wrong: {} names {}, the half message is at {}",
                d.half_offset, d.half_phy, unit.phy_offset
            )));
        }
        let mut reader = shard.reader();
        let bytes = reader.read(unit.phy_offset, unit.size)?;
        let half = message::decode(bytes, false).map_err(|e| {
            BrokerError::System(format!("corrupt half message at {}: {e}", d.half_phy))
        })?;
        let group = properties::get(half.properties, keys::PGROUP).unwrap_or("");
        if group != d.producer_group {
            return Err(BrokerError::System(format!(
                "The producer group wrong: the half message belongs to {group:?}, not {:?}",
                d.producer_group
            )));
        }
        if !d.from_check && immunity_passed(shard, &half) {
            return Err(BrokerError::IllegalOperation(format!(
                "the half message at {} is past its CHECK_IMMUNITY_TIME_IN_SECONDS; only a check may end it",
                d.half_phy
            )));
        }
        let uniq = properties::get(half.properties, keys::UNIQ_KEY)
            .unwrap_or("")
            .to_owned();
        let committed = if d.commit {
            Some(records::committed_record(shard, &half, d.half_phy)?)
        } else {
            None
        };
        // The topic the producer sent to, for the commit and rollback metrics.
        let real_topic = properties::get(half.properties, keys::REAL_TOPIC)
            .unwrap_or("")
            .to_owned();
        (committed, uniq, real_topic)
    };
    let targets = {
        let mut st = shard.transaction_mut();
        let st = st.as_mut().ok_or_else(|| {
            BrokerError::ServiceNotAvailable(
                "the transaction service is not running on this shard".into(),
            )
        })?;
        st.begin_decision(d.half_offset, &uniq)
            .map_err(|r| match r {
                Refusal::AlreadyDecided => BrokerError::System(format!(
                    "the transaction of the half message at queue offset {} is already decided",
                    d.half_offset
                )),
                Refusal::BeingDecided => BrokerError::System(format!(
                    "the transaction of the half message at queue offset {} is being decided",
                    d.half_offset
                )),
                Refusal::TooManyPending => BrokerError::Busy,
            })?
    };
    let mut batch = Vec::with_capacity(2);
    batch.extend(committed);
    let op = records::op_record(shard, &targets);
    let result = match op {
        Ok(op) => {
            batch.push(op);
            append::append(shard, batch, true).await
        }
        Err(e) => Err(e),
    };
    let mut st = shard.transaction_mut();
    let Some(st) = st.as_mut() else {
        return Err(BrokerError::ServiceNotAvailable(
            "the transaction service stopped".into(),
        ));
    };
    match result {
        Ok(outcome) => {
            let op_offset = outcome.queue_offsets.last().copied().unwrap_or(0);
            st.finish_decision(&uniq, &targets, op_offset);
            persist(shard, st);
            crate::metrics::record::decision(&real_topic, d.commit);
            tracing::debug!(
                half = d.half_offset,
                commit = d.commit,
                ?targets,
                "transaction decided"
            );
            Ok(())
        }
        Err(e) => {
            st.abort_decision(&targets);
            Err(e)
        }
    }
}

/// Java's `rejectCommitOrRollback`: a message with CHECK_IMMUNITY_TIME_IN_SECONDS may be ended by
/// its producer only within that time; after it, only an answer to a check may.
fn immunity_passed(shard: &Shard, half: &message::DecodedRecord<'_>) -> bool {
    let Some(s) = properties::get(half.properties, keys::CHECK_IMMUNITY_TIME_IN_SECONDS) else {
        return false;
    };
    let immunity = immunity_ms(s, shard.ctx.cfg.transaction.timeout_ms);
    now_ms() - half.born_timestamp > immunity as i64
}

/// CHECK_IMMUNITY_TIME_IN_SECONDS in ms, never under `transactionTimeOut`; an unparsable value
/// means `transactionTimeOut` (Java's `TransactionalMessageUtil.getImmunityTime`).
pub fn immunity_ms(seconds: &str, timeout_ms: u64) -> u64 {
    match seconds.trim().parse::<u64>() {
        Ok(s) => s.saturating_mul(1000).max(timeout_ms),
        Err(_) => timeout_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::immunity_ms;

    /// Seconds become ms, never below the timeout; junk falls back to the timeout.
    #[test]
    fn immunity_time() {
        assert_eq!(immunity_ms("10", 6000), 10_000);
        assert_eq!(immunity_ms("1", 6000), 6000);
        assert_eq!(immunity_ms("x", 6000), 6000);
    }
}
