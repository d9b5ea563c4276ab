// Proves transactional messages through rocketmq-client-rust's TransactionMQProducer: a commit
// is delivered once, a rollback never, an UNKNOW answer is settled by the broker's check-back
// (CHECK_TRANSACTION_STATE) either way, and none of it changes after a SIGKILL of the broker
// between the prepared send and the decision or right after the decision.

use crate::common;

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rocketmq_client_rust::{
    LocalTransactionState, SendStatus, TransactionListener, TransactionMQProducer,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::MessageTrait;

/// Short timeouts so that checks happen within a test's budget.
const TX_OPTIONS: [(&str, &str); 2] = [
    ("transactionTimeOut", "1000"),
    ("transactionCheckInterval", "300"),
];

/// Decides by the message body's prefix: `commit`, `rollback`, anything else UNKNOW; a check
/// answers commit for bodies containing `-commit`, rollback for `-rollback`. Counts checks.
struct ByBody {
    checks: Arc<AtomicUsize>,
}

fn body_of(msg: &dyn MessageTrait) -> String {
    msg.get_body()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

impl TransactionListener for ByBody {
    fn execute_local_transaction(
        &self,
        msg: &dyn MessageTrait,
        _arg: Option<&(dyn Any + Send + Sync)>,
    ) -> LocalTransactionState {
        let body = body_of(msg);
        if body.starts_with("commit") {
            LocalTransactionState::CommitMessage
        } else if body.starts_with("rollback") {
            LocalTransactionState::RollbackMessage
        } else {
            LocalTransactionState::Unknown
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        self.checks.fetch_add(1, Ordering::SeqCst);
        let body = body_of(msg);
        if body.contains("-commit") || body.starts_with("commit") {
            LocalTransactionState::CommitMessage
        } else if body.contains("-rollback") || body.starts_with("rollback") {
            LocalTransactionState::RollbackMessage
        } else {
            LocalTransactionState::Unknown
        }
    }
}

async fn tx_producer(
    namesrv: &str,
    group: &str,
    checks: Arc<AtomicUsize>,
) -> TransactionMQProducer {
    let mut p = TransactionMQProducer::builder(client_runtime("txproducer"))
        .producer_group(group.to_string())
        .name_server_addr(namesrv.to_string())
        .send_msg_timeout(5_000)
        .transaction_listener(ByBody { checks })
        .build();
    within(15, "transaction producer start", p.start())
        .await
        .expect("transaction producer start");
    p
}

async fn send_tx(p: &TransactionMQProducer, topic: &str, body: &str) {
    let r = within(
        15,
        "send_message_in_transaction",
        p.send_message_in_transaction::<(), _>(
            message(topic, "TagTx", body, body.as_bytes()),
            None,
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("transactional send of {body} failed: {e:?}"));
    let sr = r.send_result.expect("a send result");
    assert_eq!(sr.send_status, SendStatus::SendOk, "{body}: {sr:?}");
}

/// Waits until `want` distinct bodies arrived, then 2 s more for anything extra; returns the
/// bodies sorted, duplicates kept.
async fn delivered(inbox: &mut Inbox, want: usize, wait: Duration) -> Vec<String> {
    let mut got = collect_distinct(inbox, want, wait).await;
    got.extend(drain_for(inbox, Duration::from_secs(2)).await);
    let mut bodies: Vec<String> = got.iter().map(|r| r.body_str()).collect();
    bodies.sort();
    bodies
}

fn sorted(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Commit is delivered once, rollback never, and UNKNOW is settled by the check-back: the
/// producer's check answer commits or rolls back, and each was asked about at least once.
#[test]
fn commit_rollback_and_check_back_deliver_exactly_the_committed() {
    let broker = Broker::start_with(&TX_OPTIONS);
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("tx");
        let mut plain = producer(&ns).await;
        create_topic_by_send(&mut plain, &topic).await;
        let checks = Arc::new(AtomicUsize::new(0));
        let mut tx = tx_producer(&ns, &unique_group("txp"), checks.clone()).await;
        let (consumer, mut inbox) = push_consumer(&ns, &unique_group("txc"), &topic).await;
        let bodies = [
            "commit-1",
            "rollback-1",
            "unknown-commit-1",
            "commit-2",
            "unknown-rollback-1",
            "rollback-2",
            "unknown-commit-2",
        ];
        for b in bodies {
            send_tx(&tx, &topic, b).await;
        }
        let got = delivered(&mut inbox, 4, Duration::from_secs(25)).await;
        assert_eq!(
            got,
            sorted(&[
                "commit-1",
                "commit-2",
                "unknown-commit-1",
                "unknown-commit-2"
            ]),
            "exactly the committed messages, once each"
        );
        assert!(
            checks.load(Ordering::SeqCst) >= 3,
            "each UNKNOW message is checked (checks: {})",
            checks.load(Ordering::SeqCst)
        );
        shutdown_push(consumer).await;
        tx.shutdown().await;
        shutdown_producer(plain).await;
    });
}

/// SIGKILL right after the prepared sends (some undecided, some decided by END_TRANSACTION a
/// moment before the kill): after restart the decided stay decided and the check-back settles
/// the rest through a restarted producer of the same group; nothing committed is lost and
/// nothing rolled back or already delivered comes again.
#[test]
fn decisions_survive_sigkill() {
    let mut broker = Broker::start_with(&TX_OPTIONS);
    let ns = broker.namesrv_addr();
    let topic = unique_topic("txkill");
    let group = unique_group("txkp");
    let consumer_group = unique_group("txkc");
    {
        let (topic, group) = (topic.clone(), group.clone());
        run(async move {
            let mut plain = producer(&ns).await;
            create_topic_by_send(&mut plain, &topic).await;
            let tx = tx_producer(&ns, &group, Arc::new(AtomicUsize::new(0))).await;
            for b in [
                "pending-commit-1",
                "commit-1",
                "pending-rollback-1",
                "rollback-1",
                "pending-commit-2",
                "commit-2",
            ] {
                send_tx(&tx, &topic, b).await;
            }
            // Dropped without shutdown: the producer dies with the broker.
            std::mem::forget(tx);
            std::mem::forget(plain);
        });
    }
    broker.kill9();
    broker.respawn();
    let ns = broker.namesrv_addr();
    run(async move {
        let checks = Arc::new(AtomicUsize::new(0));
        let mut tx = tx_producer(&ns, &group, checks.clone()).await;
        // A producer heartbeats to the brokers it publishes to: its first send makes it one the
        // broker can check with.
        send_tx(&tx, &topic, "commit-3").await;
        let (consumer, mut inbox) = push_consumer(&ns, &consumer_group, &topic).await;
        let got = delivered(&mut inbox, 5, Duration::from_secs(30)).await;
        assert_eq!(
            got,
            sorted(&[
                "commit-1",
                "commit-2",
                "commit-3",
                "pending-commit-1",
                "pending-commit-2"
            ]),
            "after the crash: exactly the committed messages, once each"
        );
        assert!(
            checks.load(Ordering::SeqCst) >= 3,
            "the pending ones were checked"
        );
        shutdown_push(consumer).await;
        tx.shutdown().await;
    });
}

/// A transaction its producer never decides is checked `transactionCheckMax` times, then moved
/// to TRANS_CHECK_MAX_TIME_TOPIC, where an operator's consumer finds it; its own topic never
/// delivers it.
#[test]
fn undecided_transactions_end_in_the_check_max_topic() {
    let broker = Broker::start_with(&[
        ("transactionTimeOut", "1000"),
        ("transactionCheckInterval", "300"),
        ("transactionCheckMax", "2"),
    ]);
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("txmax");
        let mut plain = producer(&ns).await;
        create_topic_by_send(&mut plain, &topic).await;
        let checks = Arc::new(AtomicUsize::new(0));
        let mut tx = tx_producer(&ns, &unique_group("txmp"), checks.clone()).await;
        let (consumer, mut inbox) = push_consumer(&ns, &unique_group("txmc"), &topic).await;
        send_tx(&tx, &topic, "unknown-forever").await;
        wait_route(&mut plain, "TRANS_CHECK_MAX_TIME_TOPIC").await;
        let (dlq, mut dlq_inbox) =
            push_consumer(&ns, &unique_group("txmd"), "TRANS_CHECK_MAX_TIME_TOPIC").await;
        let given_up = collect_distinct(&mut dlq_inbox, 1, Duration::from_secs(20)).await;
        assert_eq!(
            given_up.iter().map(|r| r.body_str()).collect::<Vec<_>>(),
            vec!["unknown-forever"]
        );
        assert_eq!(
            checks.load(Ordering::SeqCst),
            2,
            "checked transactionCheckMax times"
        );
        assert!(
            drain_for(&mut inbox, Duration::from_secs(1))
                .await
                .is_empty(),
            "never delivered on its own topic"
        );
        shutdown_push(dlq).await;
        shutdown_push(consumer).await;
        tx.shutdown().await;
        shutdown_producer(plain).await;
    });
}
