// Proves a synchronous send to ringmq returns SEND_OK with a msgId, an offset msgId naming this
// broker and consecutive queue offsets, and that a push consumer gets the same messages back
// with the right body, keys, tags, queue and offsets.

use crate::common;

use std::time::Duration;

use common::*;
use rocketmq_client_rust::SendStatus;

#[test]
fn sync_send_returns_send_ok_and_round_trips() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("sync");
        let producer = producer(&ns).await;

        let first = within(
            15,
            "first sync send",
            producer.send_with_timeout(message(&topic, "TagSync", "key-1", b"hello-sync-1"), 5_000),
        )
        .await
        .expect("sync send failed")
        .expect("sync send returned no SendResult");
        assert_eq!(first.send_status, SendStatus::SendOk, "{first:?}");
        let msg_id_1 = first.msg_id.clone().expect("msgId").to_string();
        assert!(!msg_id_1.is_empty(), "empty msgId: {first:?}");
        let mq = first
            .message_queue
            .clone()
            .expect("message queue in SendResult");
        assert_eq!(mq.topic().as_str(), topic);
        let offset_id_1 = first
            .offset_msg_id
            .clone()
            .expect("offsetMsgId in SendResult");
        let (port_1, phy_1) = decode_offset_msg_id(&offset_id_1)
            .unwrap_or_else(|| panic!("offsetMsgId {offset_id_1:?} is not 32 hex chars"));
        assert_eq!(
            port_1,
            broker.broker_port(),
            "offsetMsgId must name the broker's store host port"
        );

        // A second message to the same queue lands at the next queue offset.
        let msg = message(&topic, "TagSync", "key-2", b"hello-sync-2");
        let second = send_to_queue(&producer, msg, &mq, "second sync send").await;
        assert_eq!(second.send_status, SendStatus::SendOk, "{second:?}");
        let msg_id_2 = second.msg_id.clone().expect("msgId").to_string();
        assert_ne!(msg_id_1, msg_id_2);
        assert_eq!(
            second.message_queue.as_ref().map(|q| q.queue_id()),
            Some(mq.queue_id())
        );
        assert_eq!(
            second.queue_offset,
            first.queue_offset + 1,
            "consecutive sends to one queue get consecutive queue offsets"
        );
        let (_, phy_2) = decode_offset_msg_id(second.offset_msg_id.as_deref().unwrap_or_default())
            .expect("second offsetMsgId");
        assert!(
            phy_2 > phy_1,
            "commit-log offset must grow: {phy_1} then {phy_2}"
        );

        // Consume both back.
        let group = unique_group("sync");
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let got = collect_distinct(&mut inbox, 2, Duration::from_secs(30)).await;
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let find = |id: &str| {
            got.iter()
                .find(|r| r.msg_id == id)
                .unwrap_or_else(|| panic!("message {id} not consumed; got {got:?}"))
                .clone()
        };
        for (id, body, key, res, phy) in [
            (&msg_id_1, "hello-sync-1", "key-1", &first, phy_1),
            (&msg_id_2, "hello-sync-2", "key-2", &second, phy_2),
        ] {
            let r = find(id);
            assert_eq!(r.topic, topic);
            assert_eq!(r.body_str(), body);
            assert_eq!(r.keys.as_deref(), Some(key));
            assert_eq!(r.tags.as_deref(), Some("TagSync"));
            assert_eq!(r.queue_id, mq.queue_id());
            assert_eq!(r.queue_offset as u64, res.queue_offset);
            assert_eq!(
                r.commit_log_offset, phy,
                "consumed commitLogOffset matches offsetMsgId"
            );
            assert_eq!(r.reconsume_times, 0);
            assert_eq!(
                Some(r.offset_msg_id.as_str()),
                res.offset_msg_id.as_deref(),
                "consumed offset msgId matches the SendResult's"
            );
        }
    });
}
