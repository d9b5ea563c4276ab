//! Header parsing: V1/V2 send names, Java type rules, missing/invalid fields, write_to round trips.

use super::*;
use crate::codes::request_code;

fn cmd_with(code: i32, pairs: &[(&str, &str)]) -> RemotingCommand {
    let mut c = RemotingCommand::new_request(code);
    for (k, v) in pairs {
        c.set_ext(k, v);
    }
    c
}

const V2_SEND: &[(&str, &str)] = &[
    ("a", "PG"),
    ("b", "TopicTest"),
    ("c", "TBW102"),
    ("d", "4"),
    ("e", "3"),
    ("f", "0"),
    ("g", "1717000000000"),
    ("h", "0"),
    ("i", "TAGS\u{1}TagA\u{2}"),
    ("j", "0"),
    ("k", "false"),
    ("m", "TRUE"),
];

/// A Java V2 send header parses into the typed header (and `m` is case-insensitive).
#[test]
fn send_v2_parses() {
    let h =
        SendMessageRequestHeader::from_command(&cmd_with(request_code::SEND_MESSAGE_V2, V2_SEND))
            .unwrap();
    assert_eq!(h.producer_group, "PG");
    assert_eq!(h.topic, "TopicTest");
    assert_eq!(h.default_topic, "TBW102");
    assert_eq!(h.default_topic_queue_nums, 4);
    assert_eq!(h.queue_id, 3);
    assert_eq!(h.born_timestamp, 1_717_000_000_000);
    assert_eq!(h.properties, "TAGS\u{1}TagA\u{2}");
    assert!(h.batch);
    assert!(!h.unit_mode);
    assert_eq!(h.max_reconsume_times, None);
    assert_eq!(h.broker_name, None);
}

/// V1 long names parse under code 10; optional fields take their Java defaults.
#[test]
fn send_v1_parses_with_defaults() {
    let c = cmd_with(
        request_code::SEND_MESSAGE,
        &[
            ("producerGroup", "PG"),
            ("topic", "T"),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", "-1"),
            ("sysFlag", "4"),
            ("bornTimestamp", "1"),
            ("flag", "+7"),
            ("maxReconsumeTimes", "16"),
        ],
    );
    let h = SendMessageRequestHeader::from_command(&c).unwrap();
    assert_eq!(h.queue_id, -1);
    assert_eq!(h.sys_flag, 4);
    assert_eq!(h.flag, 7, "Integer.parseInt accepts a leading +");
    assert_eq!(h.properties, "");
    assert_eq!(h.reconsume_times, 0);
    assert_eq!(h.max_reconsume_times, Some(16));
    assert!(!h.batch);
}

/// The send header round-trips through both name sets; `b` alone selects V2.
#[test]
fn send_write_to_round_trips() {
    let h = SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: "t".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 2,
        sys_flag: 1,
        born_timestamp: 99,
        flag: 3,
        properties: "K\u{1}V\u{2}".into(),
        reconsume_times: 1,
        unit_mode: true,
        max_reconsume_times: Some(5),
        batch: true,
        broker_name: Some("b".into()),
    };
    let mut v1 = RemotingCommand::new_request(request_code::SEND_MESSAGE);
    h.write_to_v1(&mut v1);
    assert_eq!(v1.ext("bname"), Some("b"));
    assert_eq!(SendMessageRequestHeader::from_command(&v1).unwrap(), h);
    let mut v2 = RemotingCommand::new_request(request_code::SEND_MESSAGE);
    h.write_to_v2(&mut v2);
    assert!(SendMessageRequestHeader::is_v2(&v2));
    assert_eq!(SendMessageRequestHeader::from_command(&v2).unwrap(), h);
}

/// Each missing required send field is reported by its wire name.
#[test]
fn send_missing_fields() {
    for (i, name) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().enumerate() {
        let pairs: Vec<_> = V2_SEND.iter().copied().filter(|(k, _)| k != name).collect();
        let r = SendMessageRequestHeader::from_command(&cmd_with(
            request_code::SEND_BATCH_MESSAGE,
            &pairs,
        ));
        match r {
            Err(ProtocolError::MissingField(n)) => assert_eq!(n, *name, "field {i}"),
            other => panic!("{name}: {other:?}"),
        }
    }
    let r = SendMessageRequestHeader::from_command(&cmd_with(request_code::SEND_MESSAGE, &[]));
    assert!(matches!(
        r,
        Err(ProtocolError::MissingField("producerGroup"))
    ));
}

/// Unparsable numbers are InvalidField with the name and the offending value.
#[test]
fn invalid_numbers() {
    for (k, v) in [
        ("e", "three"),
        ("g", "1.5"),
        ("d", "99999999999"),
        ("h", " 1"),
        ("j", ""),
    ] {
        let mut pairs: Vec<_> = V2_SEND.to_vec();
        pairs.retain(|(kk, _)| *kk != k);
        pairs.push((k, v));
        let r = SendMessageRequestHeader::from_command(&cmd_with(
            request_code::SEND_MESSAGE_V2,
            &pairs,
        ));
        match r {
            Err(ProtocolError::InvalidField { name, value }) => {
                assert_eq!(name, k);
                assert_eq!(value, v);
            }
            other => panic!("{k}={v}: {other:?}"),
        }
    }
}

/// Pull request parses required and optional fields; the response writes all four offsets.
#[test]
fn pull_headers() {
    let c = cmd_with(
        request_code::PULL_MESSAGE,
        &[
            ("consumerGroup", "cg"),
            ("topic", "T"),
            ("queueId", "1"),
            ("queueOffset", "100"),
            ("maxMsgNums", "32"),
            ("sysFlag", "3"),
            ("commitOffset", "90"),
            ("suspendTimeoutMillis", "15000"),
            ("subVersion", "1717000000000"),
            ("subscription", "TagA || TagB"),
            ("expressionType", "TAG"),
        ],
    );
    let h = PullMessageRequestHeader::from_command(&c).unwrap();
    assert_eq!(h.queue_offset, 100);
    assert_eq!(h.sys_flag & pull_sys_flag::SUSPEND, pull_sys_flag::SUSPEND);
    assert_eq!(h.subscription.as_deref(), Some("TagA || TagB"));
    assert_eq!(h.max_msg_bytes, None);
    let mut missing = c.clone();
    missing.ext_fields.remove("commitOffset");
    assert!(matches!(
        PullMessageRequestHeader::from_command(&missing),
        Err(ProtocolError::MissingField("commitOffset"))
    ));

    let mut resp = RemotingCommand::response_for(&c, 19, None);
    PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: 100,
        min_offset: 0,
        max_offset: 100,
    }
    .write_to(&mut resp);
    assert_eq!(resp.ext("suggestWhichBrokerId"), Some("0"));
    assert_eq!(resp.ext("nextBeginOffset"), Some("100"));
    assert_eq!(resp.ext("minOffset"), Some("0"));
    assert_eq!(resp.ext("maxOffset"), Some("100"));
}

/// The send response carries msgId/queueId/queueOffset plus MSG_REGION and TRACE_ON.
#[test]
fn send_response_writes_region_and_trace() {
    let req = RemotingCommand::new_request(request_code::SEND_MESSAGE_V2);
    let mut resp = RemotingCommand::response_for(&req, 0, None);
    let h = SendMessageResponseHeader {
        msg_id: "0A00000100002A9F0000000000001234".into(),
        queue_id: 3,
        queue_offset: 42,
        transaction_id: None,
    };
    h.write_to(&mut resp);
    assert_eq!(resp.ext("MSG_REGION"), Some("DefaultRegion"));
    assert_eq!(resp.ext("TRACE_ON"), Some("true"));
    assert_eq!(resp.ext("queueOffset"), Some("42"));
    assert_eq!(resp.ext("transactionId"), None);
    assert_eq!(SendMessageResponseHeader::from_command(&resp).unwrap(), h);
}

/// Java boolean rules: only case-insensitive "true" is true; absent primitive is false;
/// boundaryType is case-insensitive and defaults to lower.
#[test]
fn booleans_and_boundary() {
    let c = cmd_with(
        request_code::GET_ROUTEINFO_BY_TOPIC,
        &[("topic", "T"), ("acceptStandardJsonOnly", "yes")],
    );
    assert!(
        !GetRouteInfoRequestHeader::from_command(&c)
            .unwrap()
            .accept_standard_json_only
    );
    let c = cmd_with(
        request_code::GET_ROUTEINFO_BY_TOPIC,
        &[("topic", "T"), ("acceptStandardJsonOnly", "True")],
    );
    assert!(
        GetRouteInfoRequestHeader::from_command(&c)
            .unwrap()
            .accept_standard_json_only
    );

    let base = [("topic", "T"), ("queueId", "0"), ("timestamp", "5")];
    let h = SearchOffsetRequestHeader::from_command(&cmd_with(29, &base)).unwrap();
    assert!(!h.boundary_upper);
    let mut up = base.to_vec();
    up.push(("boundaryType", "UPPER"));
    let h = SearchOffsetRequestHeader::from_command(&cmd_with(29, &up)).unwrap();
    assert!(h.boundary_upper);
    let mut back = RemotingCommand::new_request(29);
    h.write_to(&mut back);
    assert_eq!(SearchOffsetRequestHeader::from_command(&back).unwrap(), h);
}

/// Defaults of optional CreateTopic fields, and write_to/from_command round trips of a few
/// macro-built headers.
#[test]
fn macro_headers_round_trip() {
    let c = cmd_with(
        request_code::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", "T"),
            ("readQueueNums", "8"),
            ("writeQueueNums", "8"),
            ("perm", "6"),
        ],
    );
    let h = CreateTopicRequestHeader::from_command(&c).unwrap();
    assert_eq!(h.default_topic, "TBW102");
    assert_eq!(h.topic_filter_type, "SINGLE_TAG");
    assert_eq!(h.topic_sys_flag, 0);
    assert!(!h.order);

    let reg = RegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: "10.0.0.1:10911".into(),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: "10.0.0.1:10912".into(),
        broker_id: 0,
        heartbeat_timeout_millis: Some(120_000),
        compressed: false,
        body_crc32: -5,
    };
    let mut c = RemotingCommand::new_request(request_code::REGISTER_BROKER);
    reg.write_to(&mut c);
    assert_eq!(RegisterBrokerRequestHeader::from_command(&c).unwrap(), reg);

    let un = UnregisterClientRequestHeader {
        client_id: "10.0.0.5@123".into(),
        producer_group: None,
        consumer_group: Some("cg".into()),
    };
    let mut c = RemotingCommand::new_request(request_code::UNREGISTER_CLIENT);
    un.write_to(&mut c);
    assert_eq!(c.ext("clientID"), Some("10.0.0.5@123"));
    assert!(!c.ext_fields.contains_key("producerGroup"));
    assert_eq!(UnregisterClientRequestHeader::from_command(&c).unwrap(), un);

    let q = QueryConsumerOffsetRequestHeader::from_command(&cmd_with(
        14,
        &[
            ("consumerGroup", "g"),
            ("topic", "T"),
            ("queueId", "2"),
            ("setZeroIfNotFound", "false"),
        ],
    ))
    .unwrap();
    assert_eq!(q.set_zero_if_not_found, Some(false));
    assert!(matches!(
        QueryConsumerOffsetRequestHeader::from_command(&cmd_with(
            14,
            &[("consumerGroup", "g"), ("topic", "T")]
        )),
        Err(ProtocolError::MissingField("queueId"))
    ));
}
