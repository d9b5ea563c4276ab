//! Broker-to-client requests with the real client, rocketmq-client-rust 1.0.0: request-reply
//! (`DefaultMQProducer::request` answered by a push consumer through `MessageUtil`'s reply
//! helper, so SEND_REPLY_MESSAGE_V2 and PUSH_REPLY_MESSAGE_TO_CLIENT carry it back) and
//! GET_CONSUMER_RUNNING_INFO relayed by the broker from `DefaultMQAdminExt` to a live push
//! consumer.

use crate::common;
use crate::raw_support;

use std::time::Duration;

use cheetah_string::CheetahString;
use common::*;
use rocketmq_client_rust::{
    ClientConfig, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumerAdmin,
    DefaultMQProducer, DefaultMQPushConsumer, MQPushConsumer, MessageUtil,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use tokio::sync::mpsc;

/// A started producer in its own client instance (its own client id and connection).
async fn own_producer(namesrv: &str) -> DefaultMQProducer {
    let mut config = ClientConfig::new();
    config.set_instance_name(unique_name("inst").into());
    let builder = DefaultMQProducer::builder(client_runtime("producer"))
        .client_config(config)
        .producer_group(unique_group("producer"))
        .name_server_addr(namesrv.to_string())
        .send_msg_timeout(5_000);
    start_producer(builder.build()).await
}

/// A started push consumer of `topic` in its own client instance, forwarding each request
/// message (not the warm-up) to the returned channel.
async fn requests_consumer(
    namesrv: &str,
    group: &str,
    topic: &str,
) -> (DefaultMQPushConsumer, mpsc::UnboundedReceiver<Message>) {
    let mut config = ClientConfig::new();
    config.set_instance_name(unique_name("inst").into());
    let mut consumer = DefaultMQPushConsumer::builder(client_runtime("push"))
        .client_config(config)
        .name_server_addr(namesrv.to_string())
        .consumer_group(group.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_thread_min(1)
        .consume_thread_max(2)
        .build();
    within(10, "subscribe", consumer.subscribe(topic, "*"))
        .await
        .expect("subscribe");
    let (tx, rx) = mpsc::unbounded_channel();
    consumer.register_message_listener_concurrently(
        move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
            for m in msgs {
                if m.get_tags().as_deref() != Some(WARMUP_TAG) {
                    let _ = tx.send(m.message.clone());
                }
            }
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        },
    );
    within(20, "push consumer start", consumer.start())
        .await
        .expect("push consumer start");
    (consumer, rx)
}

/// The client ids registered in `group`, asked of the broker with GET_CONSUMER_LIST_BY_GROUP.
async fn consumer_ids(broker_addr: &str, group: &str) -> Vec<String> {
    use ringmq::protocol::codes::request_code;
    use ringmq::protocol::RemotingCommand;
    let (addr, group) = (broker_addr.parse().unwrap(), group.to_string());
    tokio::task::spawn_blocking(move || {
        let mut c = raw_support::Conn::connect(addr);
        let r = c.call(
            RemotingCommand::new_request(request_code::GET_CONSUMER_LIST_BY_GROUP)
                .with_ext("consumerGroup", group),
        );
        if r.code != 0 {
            return Vec::new();
        }
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        v["consumerIdList"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    })
    .await
    .unwrap()
}

/// `producer.request()` gets the consumer's reply: the request reaches the consumer with the
/// broker's CLUSTER property, the reply helper addresses it to the reply topic, and the broker
/// pushes it to the requesting producer, which matches it by correlation id.
#[test]
fn request_gets_the_consumers_reply() {
    run(async {
        let broker = Broker::start();
        let ns = broker.namesrv_addr();
        let topic = unique_topic("rr");
        let group = unique_group("rr");
        let mut creator = producer(&ns).await;
        create_topic_by_send(&mut creator, &topic).await;
        let (consumer, mut requests) = requests_consumer(&ns, &group, &topic).await;
        let replier = own_producer(&ns).await;
        let requester = own_producer(&ns).await;
        let answer = async {
            let req = within(30, "request at the consumer", requests.recv())
                .await
                .expect("request message");
            let cluster = req.property(&CheetahString::from_static_str("CLUSTER"));
            assert_eq!(cluster, Some("DefaultCluster"));
            let body = format!("re: {}", String::from_utf8_lossy(&req.body().unwrap()));
            let reply =
                MessageUtil::create_reply_message(&req, body.as_bytes()).expect("reply message");
            assert_eq!(reply.topic().as_str(), "DefaultCluster_REPLY_TOPIC");
            // Boxed: the client's send future is too large for a test thread's stack in debug.
            let sent = within(15, "send reply", Box::pin(replier.send(reply))).await;
            assert!(sent.is_ok(), "reply send: {sent:?}");
        };
        let request = message(&topic, "Ask", "", b"ping 1");
        let (got, ()) = tokio::join!(
            within(
                40,
                "producer.request",
                Box::pin(requester.request(request, 30_000))
            ),
            answer
        );
        let got = got.expect("request() returned an error");
        assert_eq!(
            got.get_body().map(|b| b.to_vec()),
            Some(b"re: ping 1".to_vec())
        );
        assert_eq!(got.topic().as_str(), "DefaultCluster_REPLY_TOPIC");
        shutdown_push(consumer).await;
        for p in [creator, replier, requester] {
            shutdown_producer(p).await;
        }
    });
}

/// `DefaultMQAdminExt::get_consumer_running_info` is relayed by the broker to the live push
/// consumer and returns the consumer's own report (its subscription to our topic).
#[test]
fn consumer_running_info_comes_from_the_live_consumer() {
    run(async {
        let broker = Broker::start();
        let ns = broker.namesrv_addr();
        let topic = unique_topic("cri");
        let group = unique_group("cri");
        let mut creator = producer(&ns).await;
        create_topic_by_send(&mut creator, &topic).await;
        let (consumer, _requests) = requests_consumer(&ns, &group, &topic).await;
        let ids = {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
            loop {
                let ids = consumer_ids(&broker.broker_addr(), &group).await;
                if !ids.is_empty() || tokio::time::Instant::now() > deadline {
                    break ids;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        assert_eq!(ids.len(), 1, "one registered consumer: {ids:?}");
        let admin = admin(&ns).await;
        let info = {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            loop {
                let r = within(
                    15,
                    "get_consumer_running_info",
                    admin.get_consumer_running_info(
                        group.clone().into(),
                        ids[0].clone().into(),
                        false,
                        None,
                    ),
                )
                .await;
                // The admin finds the broker through the group's retry topic route, which the
                // name server learns at the broker's next registration.
                match r {
                    Ok(info) => break info,
                    Err(e) if tokio::time::Instant::now() > deadline => {
                        panic!("get_consumer_running_info kept failing: {e}")
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
                }
            }
        };
        assert!(
            info.subscription_set
                .iter()
                .any(|s| s.topic.as_str() == topic),
            "the consumer reports its subscription: {:?}",
            info.subscription_set
        );
        shutdown_push(consumer).await;
        shutdown_producer(creator).await;
    });
}
