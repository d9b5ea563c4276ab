//! C5/C6's transactional producer (rocketmq-client-rust's TransactionMQProducer): one that
//! commits every message (C5), or one that never decides (C6, answering UNKNOW to every check),
//! and C6's pre-fill of half messages that then wait in the broker.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_client_rust::{
    LocalTransactionState, SendStatus, TransactionListener, TransactionMQProducer,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_runtime::RuntimeOwner;

use crate::{client_runtime, message, within, Args};

/// Commits every message, or leaves every one undecided.
struct Decide {
    commit: bool,
}

impl Decide {
    fn state(&self) -> LocalTransactionState {
        if self.commit {
            LocalTransactionState::CommitMessage
        } else {
            LocalTransactionState::Unknown
        }
    }
}

impl TransactionListener for Decide {
    fn execute_local_transaction(
        &self,
        _msg: &dyn MessageTrait,
        _arg: Option<&(dyn Any + Send + Sync)>,
    ) -> LocalTransactionState {
        self.state()
    }

    fn check_local_transaction(&self, _msg: &MessageExt) -> LocalTransactionState {
        self.state()
    }
}

/// A started transactional producer in its own group.
pub async fn start(
    owner: &RuntimeOwner,
    a: &Args,
    commit: bool,
) -> Result<TransactionMQProducer, String> {
    let mut p = TransactionMQProducer::builder(client_runtime(owner, "txproducer")?)
        .producer_group(format!("{}_tx_producer", a.group))
        .name_server_addr(a.namesrv.clone())
        .send_msg_timeout(a.timeout_ms as u32)
        .transaction_listener(Decide { commit })
        .build();
    within("transaction producer start", p.start()).await?;
    Ok(p)
}

/// Sends --backlog prepared messages from --inflight tasks; returns how many were stored.
pub async fn prefill(a: &Args, p: &Arc<TransactionMQProducer>) -> Result<u64, String> {
    let stored = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let body: Arc<[u8]> = (0..a.size).map(|i| b'a' + (i % 26) as u8).collect();
    let mut tasks = Vec::new();
    for _ in 0..a.inflight.unwrap_or(16) {
        let (p, stored, next, body) = (p.clone(), stored.clone(), next.clone(), body.clone());
        let (topic, backlog) = (a.topic.clone(), a.backlog);
        tasks.push(tokio::spawn(async move {
            while next.fetch_add(1, Relaxed) < backlog {
                let r = p
                    .send_message_in_transaction::<(), _>(message(&topic, &body), None)
                    .await;
                if let Ok(Some(SendStatus::SendOk)) =
                    r.map(|r| r.send_result.map(|s| s.send_status))
                {
                    stored.fetch_add(1, Relaxed);
                }
            }
        }));
    }
    let deadline = Duration::from_secs(300);
    for t in tasks {
        tokio::time::timeout(deadline, t)
            .await
            .map_err(|_| "the half-message pre-fill took over 300 s".to_owned())?
            .map_err(|e| format!("a pre-fill task failed: {e}"))?;
    }
    let n = stored.load(Relaxed);
    if n < a.backlog {
        return Err(format!(
            "only {n} of {} half messages were stored",
            a.backlog
        ));
    }
    Ok(n)
}
