//! The exposition's text: names, labels, types and values as Prometheus reads them.

use super::*;
use crate::metrics::record::{Flow, RpcKey, RpcResult, TopicIn};
use crate::metrics::snapshot::Lag;

fn common() -> Vec<(String, String)> {
    vec![
        ("cluster".into(), "C".into()),
        ("node_type".into(), "broker".into()),
        ("node_id".into(), "b".into()),
    ]
}

/// The line of `text` that starts with `prefix`, or a panic showing the text.
fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in\n{text}"))
}

/// Counters are exposed with Java's `_total` names and labels, carry the common labels,
/// and the text ends with OpenMetrics' `# EOF`.
#[test]
fn counters_with_java_names_and_labels() {
    let mut snap = Snapshot::default();
    let mut t = TopicIn::default();
    t.flow[MessageType::Normal as usize] = Flow { msgs: 7, bytes: 70 };
    t.sizes[MessageType::Normal as usize].observe(&MESSAGE_SIZE_BOUNDS, 10.0);
    snap.topics_in.insert("T".into(), t);
    snap.out
        .insert(("T".into(), "G".into()), Flow { msgs: 3, bytes: 30 });
    let text = render(
        common(),
        Exposition {
            snap,
            broker: BrokerFigures::default(),
        },
    );
    assert_eq!(
        line(&text, "rocketmq_messages_in_total{"),
        "rocketmq_messages_in_total{cluster=\"C\",node_type=\"broker\",node_id=\"b\",\
         topic=\"T\",message_type=\"normal\",is_system=\"false\"} 7"
    );
    assert!(line(&text, "rocketmq_throughput_in_total{").ends_with(" 70"));
    assert!(line(&text, "rocketmq_messages_out_total{")
        .contains("topic=\"T\",consumer_group=\"G\",is_retry=\"false\",is_system=\"false\"} 3"));
    let bucket = line(&text, "rocketmq_message_size_bucket{");
    assert!(
        bucket.contains("le=\"1024.0\"")
            && bucket.contains("topic=\"T\"")
            && bucket.ends_with("} 1"),
        "{bucket}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
}

/// RPC latency is a histogram in ms with Java's buckets and lower-cased code names; a code
/// without a name is written as its number.
#[test]
fn rpc_latency_histogram() {
    let mut snap = Snapshot::default();
    let mut h = Hist::default();
    h.observe(&RPC_LATENCY_BOUNDS_MS, 2.0);
    h.observe(&RPC_LATENCY_BOUNDS_MS, 5000.0);
    let key = RpcKey {
        request_code: 310,
        response_code: 0,
        long_polling: false,
        result: RpcResult::Success,
    };
    snap.rpc.insert(key, h);
    snap.rpc.insert(
        RpcKey {
            request_code: 9999,
            response_code: 77,
            ..key
        },
        h,
    );
    let text = render(
        common(),
        Exposition {
            snap,
            broker: BrokerFigures::default(),
        },
    );
    assert!(
        text.contains("# TYPE rocketmq_rpc_latency_milliseconds histogram"),
        "{text}"
    );
    let l = line(&text, "rocketmq_rpc_latency_milliseconds_bucket{");
    for part in [
        "protocol_type=\"remoting\"",
        "request_code=\"send_message_v2\"",
        "response_code=\"success\"",
        "is_long_polling=\"false\"",
        "result=\"success\"",
        "le=\"1.0\"",
    ] {
        assert!(l.contains(part) && l.ends_with("} 0"), "{part}: {l}");
    }
    // Cumulative buckets: 2 ms falls in le=3, 5000 ms only in +Inf.
    let bucket = |le: &str| {
        text.lines()
            .find(|l| {
                l.starts_with("rocketmq_rpc_latency_milliseconds_bucket{")
                    && l.contains("send_message_v2")
                    && l.contains(&format!("le=\"{le}\""))
            })
            .unwrap_or_else(|| panic!("no le={le} bucket in\n{text}"))
    };
    assert!(bucket("3.0").ends_with("} 1"), "{text}");
    assert!(bucket("3000.0").ends_with("} 1"), "{text}");
    assert!(bucket("+Inf").ends_with("} 2"), "{text}");
    assert!(
        text.contains("request_code=\"9999\",response_code=\"77\""),
        "{text}"
    );
    assert!(line(&text, "rocketmq_rpc_latency_milliseconds_sum{").ends_with(" 5002.0"));
    assert!(line(&text, "rocketmq_rpc_latency_milliseconds_count{").ends_with(" 2"));
}

/// Lag, connections, metadata and storage gauges carry their values and units.
#[test]
fn gauges() {
    let mut snap = Snapshot::default();
    snap.lag.insert(
        ("G".into(), "%RETRY%G".into()),
        Lag {
            messages: 5,
            latency_ms: 1200,
            inflight: 2,
            ready: 3,
            queueing_ms: 700,
        },
    );
    snap.meta.topics = 3;
    snap.meta.producers.insert(("java".into(), "479".into()), 2);
    let broker = BrokerFigures {
        permission: 6,
        storage_size_bytes: Some(4096),
        reserve_time_ms: Some(60_000),
        group_commit: Some([2, 10, 4096, 500]),
        completion_depths: vec![0, 3],
        mesh_depths: vec![2],
        ..BrokerFigures::default()
    };
    let text = render(common(), Exposition { snap, broker });
    assert!(line(&text, "rocketmq_consumer_lag_messages{").ends_with(
        "consumer_group=\"G\",topic=\"%RETRY%G\",is_retry=\"true\",is_system=\"false\"} 5"
    ));
    assert!(line(&text, "rocketmq_consumer_lag_latency_milliseconds{").ends_with(" 1200"));
    assert!(
        line(&text, "rocketmq_consumer_inflight_messages{").ends_with(
            "consumer_group=\"G\",topic=\"%RETRY%G\",is_retry=\"true\",is_system=\"false\"} 2"
        )
    );
    assert!(line(&text, "rocketmq_consumer_ready_messages{").ends_with(" 3"));
    assert!(line(&text, "rocketmq_consumer_queueing_latency_milliseconds{").ends_with(" 700"));
    assert!(line(&text, "rocketmq_topic_number{").ends_with(" 3"));
    assert!(line(&text, "rocketmq_broker_permission{").ends_with(" 6"));
    assert!(line(&text, "rocketmq_producer_connections{")
        .ends_with("language=\"java\",version=\"479\",protocol_type=\"remoting\"} 2"));
    assert!(line(&text, "rocketmq_storage_size_bytes{").ends_with(" 4096"));
    assert!(
        text.contains("# UNIT rocketmq_storage_size_bytes bytes"),
        "{text}"
    );
    assert!(line(&text, "rocketmq_storage_message_reserve_time_milliseconds{").ends_with(" 60000"));
    assert!(text.contains(",shard=\"1\"} 3\n"), "{text}");
    assert!(line(&text, "ringmq_mesh_queue_depth{").ends_with(",shard=\"0\"} 2"));
    assert!(line(&text, "ringmq_group_commit_rounds_total{").ends_with(" 2"));
    assert!(
        !text.contains("rocketmq_topic_create_execution_time_milliseconds_count{"),
        "no creation seen, no point: {text}"
    );
    assert!(line(&text, "ringmq_group_commit_sync_microseconds_total{").ends_with(" 500"));
}
