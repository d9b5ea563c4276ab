//! Client factories and what they receive: producers, push and lite-pull consumers, the admin
//! client, topic creation and route waits, the [`Received`] copy of a delivered message, and
//! collecting from a push consumer's inbox until a condition, a count or a deadline.

use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use rocketmq_client_rust::{
    AclClientRPCHook, ClientConfig, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext, ConsumeOrderlyStatus, DefaultLitePullConsumer, DefaultMQAdminExt,
    DefaultMQProducer, DefaultMQPushConsumer, MQPushConsumer, SendResult, SessionCredentials,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use tokio::sync::mpsc;

use super::{client_runtime, unique_group, unique_name, within, WARMUP_TAG};

/// A started producer in a fresh group with a 5 s send timeout.
pub async fn producer(namesrv: &str) -> DefaultMQProducer {
    let builder = DefaultMQProducer::builder(client_runtime("producer"))
        .producer_group(unique_group("producer"))
        .name_server_addr(namesrv.to_string())
        .send_msg_timeout(5_000);
    start_producer(builder.build()).await
}

/// A started producer whose requests are signed with `access_key` and `secret_key`.
pub async fn signed_producer(
    namesrv: &str,
    access_key: &str,
    secret_key: &str,
) -> DefaultMQProducer {
    let builder = DefaultMQProducer::builder(client_runtime("producer"))
        .producer_group(unique_group("producer"))
        .name_server_addr(namesrv.to_string())
        .send_msg_timeout(5_000)
        .rpc_hook(acl_hook(access_key, secret_key));
    start_producer(builder.build()).await
}

/// Java's `AclClientRPCHook` with these keys.
fn acl_hook(access_key: &str, secret_key: &str) -> std::sync::Arc<AclClientRPCHook> {
    std::sync::Arc::new(AclClientRPCHook::new(SessionCredentials::with_keys(
        access_key.to_string(),
        secret_key.to_string(),
    )))
}

/// Starts a producer built by the caller (custom options), with a timeout.
pub async fn start_producer(mut producer: DefaultMQProducer) -> DefaultMQProducer {
    within(15, "producer.start()", producer.start())
        .await
        .expect("producer.start()");
    producer
}

pub fn message(topic: &str, tag: &str, key: &str, body: &[u8]) -> Message {
    let mut b = Message::builder().topic(topic).body_slice(body);
    if !tag.is_empty() {
        b = b.tags(tag);
    }
    if !key.is_empty() {
        b = b.key(key);
    }
    b.build_unchecked()
}

/// Makes `topic` exist (auto-created from TBW102 by the first send) and waits until the name
/// server routes it, so consumers started afterwards find it at once. Sends one message tagged
/// [`WARMUP_TAG`] with body "warmup"; tests must ignore it.
pub async fn create_topic_by_send(producer: &mut DefaultMQProducer, topic: &str) {
    // Retried: right after startup the broker's first REGISTER_BROKER (which carries TBW102,
    // the auto-create template) may not have reached the name server yet.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let attempt = tokio::time::timeout(
            Duration::from_secs(6),
            producer.send_with_timeout(message(topic, WARMUP_TAG, "", b"warmup"), 5_000),
        )
        .await;
        match attempt {
            Ok(Ok(Some(_))) => break,
            other => {
                if Instant::now() >= deadline {
                    panic!(
                        "warm-up send (auto-create topic {topic}) kept failing for 15 s: {other:?}"
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    wait_route(producer, topic).await;
}

/// Waits (up to 15 s) until the name server returns at least one publishable queue for `topic`.
pub async fn wait_route(producer: &mut DefaultMQProducer, topic: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            producer.fetch_publish_message_queues(topic),
        )
        .await;
        match r {
            Ok(Ok(queues)) if !queues.is_empty() => return queues.len(),
            other => {
                if Instant::now() >= deadline {
                    panic!(
                        "no route for topic {topic} from the name server within 15 s: {other:?}"
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The producer's publishable queues of `topic`, fetched within 10 s.
pub async fn publish_queues(producer: &mut DefaultMQProducer, topic: &str) -> Vec<MessageQueue> {
    within(
        10,
        "fetch queues",
        producer.fetch_publish_message_queues(topic),
    )
    .await
    .expect("fetch queues")
}

/// The queue numbered `id` among `queues`; panics if there is none.
pub fn queue_by_id(queues: &[MessageQueue], id: i32) -> MessageQueue {
    queues
        .iter()
        .find(|q| q.queue_id() == id)
        .unwrap_or_else(|| panic!("queue {id}"))
        .clone()
}

/// Sends `msg` to `mq` (5 s send timeout, 15 s in all), panicking with `what` if it fails.
pub async fn send_to_queue(
    producer: &DefaultMQProducer,
    msg: Message,
    mq: &MessageQueue,
    what: &str,
) -> SendResult {
    within(
        15,
        what,
        producer.send_to_queue_with_timeout(msg, mq.clone(), 5_000),
    )
    .await
    .expect(what)
    .expect("no SendResult")
}

/// What a listener saw of one delivered message (owned, so it can cross the channel).
#[derive(Clone, Debug)]
pub struct Received {
    /// The client-side unique id (property UNIQ_KEY), which is what `SendResult::msg_id` holds;
    /// falls back to the offset id when the property is absent.
    pub msg_id: String,
    /// The broker-side offset message id (store host + commit-log offset).
    pub offset_msg_id: String,
    pub topic: String,
    pub tags: Option<String>,
    pub keys: Option<String>,
    pub body: Vec<u8>,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commit_log_offset: i64,
    pub broker_name: String,
    pub reconsume_times: i32,
    /// The receipt handle of a popped message (property POP_CK); none for pulled ones.
    pub pop_ck: Option<String>,
    pub at: Instant,
    /// Which consumer of the test received it (set by the helper's `consumer_no`).
    pub consumer_no: usize,
}

impl Received {
    pub fn from_ext(m: &MessageExt, consumer_no: usize) -> Received {
        // rocketmq-client-rust's MessageExt::msg_id() is the offset id; Java's MessageClientExt
        // would return UNIQ_KEY instead, so do the same here.
        let uniq = MessageTrait::property(m, &CheetahString::from_static_str("UNIQ_KEY"))
            .map(|k| k.to_string())
            .filter(|k| !k.is_empty());
        Received {
            msg_id: uniq.unwrap_or_else(|| m.msg_id().to_string()),
            offset_msg_id: m.msg_id().to_string(),
            topic: m.topic().to_string(),
            tags: m.get_tags().map(|t| t.to_string()),
            keys: MessageTrait::get_keys(m).map(|k| k.to_string()),
            body: m.body().map(|b| b.to_vec()).unwrap_or_default(),
            queue_id: m.queue_id(),
            queue_offset: m.queue_offset(),
            commit_log_offset: m.commit_log_offset(),
            broker_name: m.broker_name().to_string(),
            reconsume_times: m.reconsume_times(),
            pop_ck: MessageTrait::property(m, &CheetahString::from_static_str("POP_CK"))
                .map(|k| k.to_string()),
            at: Instant::now(),
            consumer_no,
        }
    }

    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn is_warmup(&self) -> bool {
        self.tags.as_deref() == Some(WARMUP_TAG)
    }
}

/// How to build a push consumer.
#[derive(Clone, Debug)]
pub struct PushSpec {
    pub group: String,
    pub topic: String,
    pub expression: String,
    pub orderly: bool,
    pub broadcasting: bool,
    /// Label stamped into [`Received::consumer_no`].
    pub consumer_no: usize,
    pub consume_from_where: ConsumeFromWhere,
    /// An access key and secret key every request is signed with (`AclClientRPCHook`).
    pub credentials: Option<(String, String)>,
    /// Leave the rebalance to the broker (`clientRebalance=false`): QUERY_ASSIGNMENT decides
    /// the queues and whether they are pulled or popped.
    pub broker_rebalance: bool,
}

impl PushSpec {
    pub fn new(group: &str, topic: &str) -> PushSpec {
        PushSpec {
            group: group.to_string(),
            topic: topic.to_string(),
            expression: "*".to_string(),
            orderly: false,
            broadcasting: false,
            consumer_no: 0,
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            credentials: None,
            broker_rebalance: false,
        }
    }
}

pub type Inbox = mpsc::UnboundedReceiver<Received>;

/// A started concurrent push consumer of `topic` (all tags) in `group`, reading from the first
/// offset, forwarding every delivered message to the returned channel.
pub async fn push_consumer(
    namesrv: &str,
    group: &str,
    topic: &str,
) -> (DefaultMQPushConsumer, Inbox) {
    push_consumer_with(namesrv, PushSpec::new(group, topic)).await
}

pub async fn push_consumer_with(namesrv: &str, spec: PushSpec) -> (DefaultMQPushConsumer, Inbox) {
    let mut builder = DefaultMQPushConsumer::builder(client_runtime("push"));
    if spec.broadcasting {
        // Broadcasting consumers keep the "DEFAULT" instance name (only clustering ones get a
        // pid-derived one), so two in one process would share a client instance: give each its
        // own.
        let mut config = ClientConfig::new();
        config.set_instance_name(unique_name("inst").into());
        builder = builder.client_config(config);
        // MessageModel lives in rocketmq-protocol, not a direct dependency; its serde form is
        // the Java enum name.
        builder = builder.message_model(
            serde_json::from_str("\"BROADCASTING\"").expect("MessageModel deserializes"),
        );
    }
    if let Some((ak, sk)) = &spec.credentials {
        builder = builder.rpc_hook(Some(acl_hook(ak, sk)));
    }
    if spec.broker_rebalance {
        builder = builder.client_rebalance(false);
    }
    let mut consumer = builder
        .name_server_addr(namesrv.to_string())
        .consumer_group(spec.group.clone())
        .consume_from_where(spec.consume_from_where)
        .consume_thread_min(1)
        .consume_thread_max(4)
        .pull_batch_size(32)
        .build();
    within(
        10,
        "push consumer subscribe",
        consumer.subscribe(spec.topic.as_str(), spec.expression.as_str()),
    )
    .await
    .expect("subscribe");
    let (tx, rx) = mpsc::unbounded_channel();
    let no = spec.consumer_no;
    if spec.orderly {
        consumer.register_message_listener_orderly(
            move |msgs: &[&MessageExt], _ctx: &mut ConsumeOrderlyContext| {
                for m in msgs {
                    let _ = tx.send(Received::from_ext(m, no));
                }
                Ok(ConsumeOrderlyStatus::Success)
            },
        );
    } else {
        consumer.register_message_listener_concurrently(
            move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
                for m in msgs {
                    let _ = tx.send(Received::from_ext(m, no));
                }
                Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
            },
        );
    }
    within(20, "push consumer start", consumer.start())
        .await
        .expect("push consumer start");
    (consumer, rx)
}

pub async fn shutdown_push(mut consumer: DefaultMQPushConsumer) {
    let _ = tokio::time::timeout(Duration::from_secs(10), consumer.shutdown()).await;
}

pub async fn shutdown_producer(mut producer: DefaultMQProducer) {
    let _ = tokio::time::timeout(Duration::from_secs(10), producer.shutdown()).await;
}

/// Waits (up to 20 s) until the consumer behind `inbox` delivered the warm-up message, i.e. it
/// has rebalanced and pulls.
pub async fn wait_warmup(inbox: &mut Inbox) {
    within(20, "warm-up delivery", async {
        loop {
            match inbox.recv().await {
                Some(r) if r.is_warmup() => break,
                Some(_) => {}
                None => panic!("listener channel closed"),
            }
        }
    })
    .await;
}

/// Receives (skipping warm-up messages) until `done(&received)` holds or `timeout` passes.
/// Returns everything received, whether or not `done` was reached.
pub async fn collect_until(
    inbox: &mut Inbox,
    timeout: Duration,
    mut done: impl FnMut(&[Received]) -> bool,
) -> Vec<Received> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut got = Vec::new();
    while !done(&got) {
        match tokio::time::timeout_at(deadline, inbox.recv()).await {
            Ok(Some(r)) => {
                if !r.is_warmup() {
                    got.push(r);
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    got
}

/// Receives (skipping warm-up messages) for exactly `dur`.
pub async fn drain_for(inbox: &mut Inbox, dur: Duration) -> Vec<Received> {
    collect_until(inbox, dur, |_| false).await
}

/// Receives until `n` distinct msgIds (non-warm-up) arrived or `timeout` passes.
pub async fn collect_distinct(inbox: &mut Inbox, n: usize, timeout: Duration) -> Vec<Received> {
    let mut seen = std::collections::HashSet::new();
    collect_until(inbox, timeout, |got| {
        if let Some(last) = got.last() {
            seen.insert(last.msg_id.clone());
        }
        seen.len() >= n
    })
    .await
}

/// A started lite pull consumer in `group` subscribed to `topic` with `expression`, auto-commit on.
pub async fn lite_pull_consumer(
    namesrv: &str,
    group: &str,
    topic: &str,
    expression: &str,
) -> DefaultLitePullConsumer {
    let consumer = DefaultLitePullConsumer::builder(client_runtime("lite"))
        .consumer_group(group.to_string())
        .name_server_addr(namesrv.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pull_batch_size(16)
        .poll_timeout_millis(500)
        .auto_commit(true)
        .build()
        .expect("build lite pull consumer");
    within(
        10,
        "lite subscribe",
        consumer.subscribe_with_expression(topic, expression),
    )
    .await
    .expect("lite subscribe");
    within(20, "lite start", consumer.start())
        .await
        .expect("lite start");
    consumer
}

/// A started lite pull consumer in assign mode (no subscription; caller assigns queues).
pub async fn lite_pull_consumer_assign(namesrv: &str, group: &str) -> DefaultLitePullConsumer {
    let consumer = DefaultLitePullConsumer::builder(client_runtime("lite-assign"))
        .consumer_group(group.to_string())
        .name_server_addr(namesrv.to_string())
        .pull_batch_size(16)
        .poll_timeout_millis(500)
        .auto_commit(false)
        .build()
        .expect("build lite pull consumer");
    within(20, "lite start", consumer.start())
        .await
        .expect("lite start");
    consumer
}

/// A started admin client talking to `namesrv`.
pub async fn admin(namesrv: &str) -> DefaultMQAdminExt {
    let mut admin =
        DefaultMQAdminExt::with_admin_ext_group(client_runtime("admin"), unique_group("admin"));
    admin.set_namesrv_addr(namesrv.to_string());
    within(15, "admin.start()", admin.start())
        .await
        .expect("admin.start()");
    admin
}

/// Creates (or updates) `topic` with `queues` read and write queues on the broker at
/// `broker_addr` (UPDATE_AND_CREATE_TOPIC through the admin client), panicking on failure.
pub async fn create_topic(admin: &DefaultMQAdminExt, broker_addr: &str, topic: &str, queues: u32) {
    within(
        15,
        "create topic",
        rocketmq_client_rust::TopicAdmin::create_and_update_topic_config(
            admin,
            CheetahString::from(broker_addr),
            rocketmq_model::common::config::TopicConfig::with_queues(topic, queues, queues),
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("UPDATE_AND_CREATE_TOPIC {topic} on {broker_addr} failed: {e:?}"));
}

/// Decodes a RocketMQ offset message id (hex of store-host IPv4 (4 B), port (4 B), commit-log
/// offset (8 B)) into (port, phy_offset). None if it is not that shape.
pub fn decode_offset_msg_id(id: &str) -> Option<(u16, i64)> {
    if id.len() != 32 {
        return None;
    }
    let bytes: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&id[i * 2..i * 2 + 2], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let port = u32::from_be_bytes(bytes[4..8].try_into().ok()?);
    let phy = i64::from_be_bytes(bytes[8..16].try_into().ok()?);
    Some((u16::try_from(port).ok()?, phy))
}
