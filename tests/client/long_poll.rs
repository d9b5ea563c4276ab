// Proves long polling delivers promptly: with a push consumer parked on an empty queue, a message
// sent afterwards reaches the listener within a few hundred milliseconds of the send call.

use crate::common;

use std::time::{Duration, Instant};

use common::*;

const SAMPLES: usize = 5;

#[test]
fn parked_pull_delivers_new_message_quickly() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    run(async move {
        let topic = unique_topic("lpoll");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        let group = unique_group("lpoll");
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;

        // Warm-up: the consumer has rebalanced and pulled once a first message has arrived.
        within(
            15,
            "warm-up send",
            producer.send_with_timeout(message(&topic, "Ready", "", b"ready"), 5_000),
        )
        .await
        .expect("send")
        .expect("no SendResult");
        let ready = collect_until(&mut inbox, Duration::from_secs(20), |got| {
            got.iter().any(|r| r.body_str() == "ready")
        })
        .await;
        assert!(
            ready.iter().any(|r| r.body_str() == "ready"),
            "consumer never received the warm-up message"
        );

        let mut samples = Vec::new();
        for i in 0..SAMPLES {
            // Idle long enough that every queue's pull is parked at the broker.
            tokio::time::sleep(Duration::from_millis(1_200)).await;
            while inbox.try_recv().is_ok() {}
            let body = format!("lp-{i}");
            let sent_at = Instant::now();
            within(
                15,
                "send",
                producer.send_with_timeout(message(&topic, "LP", "", body.as_bytes()), 5_000),
            )
            .await
            .expect("send")
            .expect("no SendResult");
            let got = collect_until(&mut inbox, Duration::from_secs(5), |got| {
                got.iter().any(|r| r.body_str() == body)
            })
            .await;
            let r = got
                .iter()
                .find(|r| r.body_str() == body)
                .unwrap_or_else(|| panic!("{body} not delivered within 5 s"));
            samples.push(r.at.duration_since(sent_at));
        }
        shutdown_push(consumer).await;
        shutdown_producer(producer).await;

        let mut sorted = samples.clone();
        sorted.sort();
        let median = sorted[SAMPLES / 2];
        eprintln!("send-to-receive latencies: {samples:?}");
        assert!(
            median < Duration::from_millis(200),
            "median send-to-receive {median:?} (samples {samples:?}): a parked pull must be answered when the message arrives"
        );
        assert!(
            sorted[SAMPLES - 1] < Duration::from_millis(1_000),
            "worst send-to-receive {:?} (samples {samples:?}) looks like short polling",
            sorted[SAMPLES - 1]
        );
    });
}

// ---------------------------------------------------------------------------------------------
// The client cannot show that a pull is *held* (an immediate PULL_NOT_FOUND followed by an
// immediate re-pull would also look fast), so this test speaks the remoting protocol directly:
// a PULL_MESSAGE with the suspend flag at the queue's end must stay unanswered while the queue
// is empty, be answered with the message shortly after it is sent, and otherwise be answered
// with PULL_NOT_FOUND once suspendTimeoutMillis passes.
// ---------------------------------------------------------------------------------------------

mod raw {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    pub const PULL_MESSAGE: i32 = 11;
    pub const SUCCESS: i32 = 0;
    pub const PULL_NOT_FOUND: i32 = 19;
    /// FLAG_SUSPEND | FLAG_SUBSCRIPTION (PullSysFlag).
    pub const SYS_FLAG: i32 = 0x2 | 0x4;

    pub fn pull_frame(
        opaque: i32,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
        suspend_ms: u64,
    ) -> Vec<u8> {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        let header = serde_json::json!({
            "code": PULL_MESSAGE,
            "language": "JAVA",
            "version": 475,
            "opaque": opaque,
            "flag": 0,
            "extFields": {
                "consumerGroup": group,
                "topic": topic,
                "queueId": queue_id.to_string(),
                "queueOffset": offset.to_string(),
                "maxMsgNums": "32",
                "sysFlag": SYS_FLAG.to_string(),
                "commitOffset": "0",
                "suspendTimeoutMillis": suspend_ms.to_string(),
                "subscription": "*",
                "subVersion": now_ms.to_string(),
                "expressionType": "TAG"
            }
        });
        let header = serde_json::to_vec(&header).expect("json");
        let mut frame = Vec::with_capacity(8 + header.len());
        frame.extend_from_slice(&((4 + header.len()) as u32).to_be_bytes());
        frame.extend_from_slice(&(header.len() as u32).to_be_bytes()); // serialize type 0 = JSON
        frame.extend_from_slice(&header);
        frame
    }

    /// (code, opaque, body length) of one response frame.
    pub async fn read_response(stream: &mut TcpStream) -> std::io::Result<(i32, i32, usize)> {
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).await?;
        let len = u32::from_be_bytes(len) as usize;
        let mut frame = vec![0u8; len];
        stream.read_exact(&mut frame).await?;
        let mark = u32::from_be_bytes(frame[0..4].try_into().expect("4 bytes"));
        let header_len = (mark & 0x00FF_FFFF) as usize;
        let header = &frame[4..4 + header_len];
        let body_len = len - 4 - header_len;
        if mark >> 24 == 0 {
            let v: serde_json::Value =
                serde_json::from_slice(header).expect("JSON response header");
            let code = v["code"].as_i64().expect("code") as i32;
            let opaque = v["opaque"].as_i64().expect("opaque") as i32;
            Ok((code, opaque, body_len))
        } else {
            // ROCKETMQ binary header: code i16, language u8, version i16, opaque i32, ...
            let code = i16::from_be_bytes([header[0], header[1]]) as i32;
            let opaque = i32::from_be_bytes(header[5..9].try_into().expect("4 bytes"));
            Ok((code, opaque, body_len))
        }
    }

    pub async fn connect(addr: &str) -> TcpStream {
        tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
            .await
            .expect("connect timeout")
            .expect("connect to broker")
    }

    pub async fn send(stream: &mut TcpStream, frame: &[u8]) {
        stream.write_all(frame).await.expect("write pull request");
    }
}

#[test]
fn broker_holds_a_pull_until_a_message_arrives() {
    let broker = Broker::start();
    let ns = broker.namesrv_addr();
    let broker_addr = broker.broker_addr();
    run(async move {
        let topic = unique_topic("lpraw");
        let group = unique_group("lpraw");
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        let queues = publish_queues(&mut producer, &topic).await;
        let q0 = queue_by_id(&queues, 0);
        let first =
            send_to_queue(&producer, message(&topic, "Raw", "", b"raw-0"), &q0, "send").await;
        let end = first.queue_offset as i64 + 1;

        // 1. Held, then answered by the arriving message.
        let mut conn = raw::connect(&broker_addr).await;
        raw::send(
            &mut conn,
            &raw::pull_frame(7001, &group, &topic, 0, end, 5_000),
        )
        .await;
        let early =
            tokio::time::timeout(Duration::from_millis(1_000), raw::read_response(&mut conn)).await;
        assert!(
            early.is_err(),
            "pull at the queue end answered at once instead of being held: {early:?}"
        );
        let sent_at = Instant::now();
        send_to_queue(&producer, message(&topic, "Raw", "", b"raw-1"), &q0, "send").await;
        let (code, opaque, body_len) =
            within(5, "held pull response", raw::read_response(&mut conn))
                .await
                .expect("read pull response");
        let waited = sent_at.elapsed();
        assert_eq!(opaque, 7001, "response must carry the request's opaque");
        assert_eq!(
            code,
            raw::SUCCESS,
            "held pull must be answered FOUND (SUCCESS) once the message lands"
        );
        assert!(body_len > 0, "FOUND response without a body");
        assert!(
            waited < Duration::from_millis(200),
            "held pull answered {waited:?} after the send"
        );

        // 2. Held until suspendTimeoutMillis, then PULL_NOT_FOUND.
        let started = Instant::now();
        raw::send(
            &mut conn,
            &raw::pull_frame(7002, &group, &topic, 0, end + 1, 1_500),
        )
        .await;
        let (code, opaque) = within(10, "suspended pull timeout", raw::read_response(&mut conn))
            .await
            .map(|(c, o, _)| (c, o))
            .expect("read pull response");
        let held = started.elapsed();
        assert_eq!(opaque, 7002);
        assert_eq!(
            code,
            raw::PULL_NOT_FOUND,
            "an empty held pull ends with PULL_NOT_FOUND"
        );
        assert!(
            held >= Duration::from_millis(1_200) && held < Duration::from_millis(4_000),
            "held for {held:?}, expected about suspendTimeoutMillis = 1500 ms"
        );
        shutdown_producer(producer).await;
    });
}
