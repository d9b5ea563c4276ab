//! Body JSON: exact fastjson field names, samples of Java clients' output, legacy keys both ways.

use super::*;
use crate::java_hash::java_string_hash;
use crate::ProtocolError;

/// A Java client's `HeartbeatData` JSON parses with its fastjson names and enum names.
#[test]
fn parses_java_heartbeat() {
    let json = br#"{"clientID":"10.0.0.5@12345#1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",
 "consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING",
 "subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG",
 "subString":"TagA","subVersion":1717000000000,"tagsSet":["TagA"],"topic":"T"}],"unitMode":false}],
 "heartbeatFingerprint":0,"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"pg"}],
 "withoutSub":false}"#;
    let hb: HeartbeatData = from_json(json).unwrap();
    assert_eq!(hb.client_id, "10.0.0.5@12345#1");
    assert_eq!(hb.producer_data_set.len(), 2);
    let c = &hb.consumer_data_set[0];
    assert_eq!(c.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(c.message_model, MessageModel::Clustering);
    assert_eq!(
        c.consume_from_where,
        ConsumeFromWhere::ConsumeFromLastOffset
    );
    let s = &c.subscription_data_set[0];
    assert_eq!(s.code_set, vec![java_string_hash("TagA")]);
    assert_eq!(s.sub_version, 1_717_000_000_000);
    // Writing it back uses the same names.
    let out = String::from_utf8(to_json(&hb)).unwrap();
    for name in [
        "\"clientID\"",
        "\"consumerDataSet\"",
        "\"withoutSub\":false",
        "\"CONSUME_PASSIVELY\"",
        "\"subString\":\"TagA\"",
    ] {
        assert!(out.contains(name), "{name} in {out}");
    }
}

/// rocketmq-rust style: nulls where fastjson omits, unknown enum names, extra fields.
#[test]
fn parses_lenient_heartbeat() {
    let json = br#"{"clientID":"c","producerDataSet":null,"consumerDataSet":[{"groupName":"g",
      "consumeType":"CONSUME_SOMEHOW","messageModel":"BROADCASTING","consumeFromWhere":"CONSUME_FROM_TIMESTAMP",
      "subscriptionDataSet":[{"topic":"T","subString":"*","expressionType":null,"tagsSet":[],"codeSet":[],"subVersion":1,"extra":1}]}]}"#;
    let hb: HeartbeatData = from_json(json).unwrap();
    assert!(hb.producer_data_set.is_empty());
    let c = &hb.consumer_data_set[0];
    assert_eq!(c.consume_type, ConsumeType::Unknown);
    assert_eq!(c.message_model, MessageModel::Broadcasting);
    assert_eq!(c.subscription_data_set[0].expression_type, "");
}

fn sample_route() -> TopicRouteData {
    TopicRouteData {
        broker_datas: vec![BrokerData {
            broker_addrs: [
                (0, "10.0.0.1:10911".to_string()),
                (1, "10.0.0.2:10911".to_string()),
            ]
            .into(),
            broker_name: "broker-a".into(),
            cluster: "DefaultCluster".into(),
            enable_acting_master: false,
            zone_name: None,
        }],
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            perm: 6,
            read_queue_nums: 4,
            topic_sys_flag: 0,
            write_queue_nums: 4,
        }],
        ..Default::default()
    }
}

/// A `TopicRouteData` route, byte-exact in both the legacy and strict forms.
#[test]
fn route_legacy_and_strict_bytes() {
    let r = sample_route();
    let legacy = String::from_utf8(to_fastjson_legacy(&r)).unwrap();
    assert_eq!(
        legacy,
        r#"{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#
    );
    let strict = String::from_utf8(to_json(&r)).unwrap();
    assert!(strict.contains(r#"{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}"#));
    assert_eq!(from_json::<TopicRouteData>(legacy.as_bytes()).unwrap(), r);
    assert_eq!(from_json::<TopicRouteData>(strict.as_bytes()).unwrap(), r);
}

/// Legacy output keeps string keys quoted even when they look numeric, and escapes inside
/// keys survive.
#[test]
fn legacy_quotes_string_keys() {
    let mut t = TopicConfigSerializeWrapper::default();
    t.topic_config_table.insert(
        "123".into(),
        TopicConfig {
            topic_name: "123".into(),
            ..Default::default()
        },
    );
    let mut o = ConsumerOffsetSerializeWrapper::default();
    o.offset_table
        .insert("T@g\"x".into(), [(0, 5i64), (-1, 7)].into());
    let legacy = String::from_utf8(to_fastjson_legacy(&t)).unwrap();
    assert!(
        legacy.contains(r#""topicConfigTable":{"123":{"#),
        "{legacy}"
    );
    let legacy = String::from_utf8(to_fastjson_legacy(&o)).unwrap();
    assert!(
        legacy.contains(r#""offsetTable":{"T@g\"x":{-1:7,0:5}}"#),
        "{legacy}"
    );
    assert_eq!(
        from_json::<ConsumerOffsetSerializeWrapper>(legacy.as_bytes()).unwrap(),
        o
    );
    let empty_key: BTreeMap<String, i32> = [(String::new(), 1)].into();
    assert_eq!(to_fastjson_legacy(&empty_key), br#"{"":1}"#);
}

/// Lock bodies use `clientId` and the odd `lockOKMQSet`; TopicConfig keeps Java's defaults.
#[test]
fn field_names_and_defaults() {
    let req: LockBatchRequestBody = from_json(
        br#"{"consumerGroup":"cg","clientId":"c1","onlyThisBroker":false,"mqSet":[{"brokerName":"b","queueId":0,"topic":"T"}]}"#,
    )
    .unwrap();
    assert_eq!(req.mq_set[0].queue_id, 0);
    let resp = LockBatchResponseBody {
        lock_ok_mq_set: req.mq_set.clone(),
    };
    assert_eq!(
        to_json(&resp),
        br#"{"lockOKMQSet":[{"brokerName":"b","queueId":0,"topic":"T"}]}"#
    );
    let tc: TopicConfig = from_json(br#"{"topicName":"T","topicFilterType":"MULTI_TAG"}"#).unwrap();
    assert_eq!(
        (tc.read_queue_nums, tc.write_queue_nums, tc.perm),
        (16, 16, 6)
    );
    assert_eq!(tc.topic_filter_type, TopicFilterType::MultiTag);
    let g: SubscriptionGroupConfig = from_json(br#"{"groupName":"g"}"#).unwrap();
    assert_eq!((g.retry_max_times, g.retry_queue_nums), (16, 1));
    assert!(g.consume_enable && g.consume_broadcast_enable);
    assert_eq!(
        to_json(&ConsumerListBody {
            consumer_id_list: vec!["a".into()]
        }),
        br#"{"consumerIdList":["a"]}"#
    );
    assert_eq!(
        to_json(&DataVersion {
            counter: 5,
            state_version: 0,
            timestamp: 9
        }),
        br#"{"counter":5,"stateVersion":0,"timestamp":9}"#
    );
}

/// Register-broker body and cluster info round-trip.
#[test]
fn register_body_and_cluster_info() {
    let body: RegisterBrokerBody = from_json(
        br#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":5,"stateVersion":0,"timestamp":1},"topicConfigTable":{"T":{"topicName":"T","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false,"attributes":{}}}}}"#,
    )
    .unwrap();
    let w = &body.topic_config_serialize_wrapper;
    assert_eq!(w.data_version.counter, 5);
    assert_eq!(w.topic_config_table["T"].read_queue_nums, 4);
    let mut ci = ClusterInfo::default();
    ci.broker_addr_table
        .insert("broker-a".into(), sample_route().broker_datas[0].clone());
    ci.cluster_addr_table
        .insert("DefaultCluster".into(), ["broker-a".to_string()].into());
    let legacy = to_fastjson_legacy(&ci);
    assert_eq!(from_json::<ClusterInfo>(&legacy).unwrap(), ci);
}

/// Malformed bodies are BadBody, whether or not the quoting fallback runs.
#[test]
fn bad_bodies() {
    for bad in [&b""[..], b"{", b"{0:}", b"{\"clientID\":[5]}", b"{0:\"a\""] {
        assert!(
            matches!(
                from_json::<HeartbeatData>(bad),
                Err(ProtocolError::BadBody(_))
            ),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

/// The consumer heartbeat the C++ client 2.1 really sends (enum ordinals, `subVersion` as a
/// string, no `expressionType`, tags only when subscribed by tag) reads as the Java one would.
#[test]
fn parses_cpp_client_heartbeat() {
    let json = br#"{"clientID":"127.0.0.1@21180#DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,"groupName":"CG_EXP1","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":"1796427476064","topic":"%RETRY%CG_EXP1"},{"codeSet":[2598919,2598920],"subString":"TagA || TagB","subVersion":"1796427476065","tagsSet":["TagA","TagB"],"topic":"TopicExp1"}]}],"producerDataSet":[{"groupName":"PG_EXP1"}]}"#;
    let hb: HeartbeatData = from_json(json).unwrap();
    assert_eq!(hb.client_id, "127.0.0.1@21180#DEFAULT");
    assert_eq!(hb.producer_data_set[0].group_name, "PG_EXP1");
    let c = &hb.consumer_data_set[0];
    assert_eq!(c.group_name, "CG_EXP1");
    assert_eq!(c.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(c.message_model, MessageModel::Clustering);
    assert_eq!(
        c.consume_from_where,
        ConsumeFromWhere::ConsumeFromLastOffset
    );
    let retry = &c.subscription_data_set[0];
    assert_eq!(retry.sub_version, 1_796_427_476_064);
    assert_eq!(retry.expression_type, EXPRESSION_TYPE_TAG);
    assert_eq!(retry.sub_string, SUB_ALL);
    let tagged = &c.subscription_data_set[1];
    assert_eq!(tagged.sub_version, 1_796_427_476_065);
    assert_eq!(tagged.tags_set, ["TagA", "TagB"]);
    assert_eq!(
        tagged.code_set,
        [java_string_hash("TagA"), java_string_hash("TagB")]
    );
}

/// An enum ordinal reads as the variant Java declares at that index (the same order as the
/// C++ client's enums); past the end it is `Unknown`, as an unknown name is.
#[test]
fn enum_ordinals_follow_java_declaration_order() {
    let consume_type = ["CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP"];
    let message_model = ["BROADCASTING", "CLUSTERING"];
    let consume_from_where = [
        "CONSUME_FROM_LAST_OFFSET",
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        "CONSUME_FROM_MIN_OFFSET",
        "CONSUME_FROM_MAX_OFFSET",
        "CONSUME_FROM_FIRST_OFFSET",
        "CONSUME_FROM_TIMESTAMP",
    ];
    let consumer = |field: &str, value: String| -> ConsumerData {
        from_json(format!(r#"{{"{field}":{value}}}"#).as_bytes()).unwrap()
    };
    for (field, names) in [
        ("consumeType", &consume_type[..]),
        ("messageModel", &message_model[..]),
        ("consumeFromWhere", &consume_from_where[..]),
    ] {
        for (ordinal, name) in names.iter().enumerate() {
            let by_ordinal = consumer(field, ordinal.to_string());
            let by_name = consumer(field, format!("\"{name}\""));
            assert_eq!(by_ordinal, by_name, "{field} {ordinal} is {name}");
            let written = String::from_utf8(to_json(&by_ordinal)).unwrap();
            assert!(
                written.contains(&format!("\"{field}\":\"{name}\"")),
                "{field} {ordinal} must be {name}: {written}"
            );
        }
        let past_end = consumer(field, names.len().to_string());
        assert!(
            format!("{past_end:?}").contains("Unknown"),
            "{field} {}: {past_end:?}",
            names.len()
        );
    }
    for (ordinal, want) in [
        (0, TopicFilterType::SingleTag),
        (1, TopicFilterType::MultiTag),
    ] {
        let tc: TopicConfig =
            from_json(format!(r#"{{"topicFilterType":{ordinal}}}"#).as_bytes()).unwrap();
        assert_eq!(tc.topic_filter_type, want);
    }
}

/// Numbers inside strings (fields and integer map keys, with or without fastjson's bare keys),
/// booleans as strings or 0/1, and numbers where text is expected read as fastjson reads them.
#[test]
fn scalars_typed_as_fastjson_types_them() {
    let dv: DataVersion =
        from_json(br#"{"counter":"5","stateVersion":"-2","timestamp":9}"#).unwrap();
    assert_eq!((dv.counter, dv.state_version, dv.timestamp), (5, -2, 9));
    let g: SubscriptionGroupConfig = from_json(
        br#"{"groupName":"g","consumeEnable":"false","consumeBroadcastEnable":0,"consumeMessageOrderly":"true","retryMaxTimes":"3"}"#,
    )
    .unwrap();
    assert!(!g.consume_enable && !g.consume_broadcast_enable && g.consume_message_orderly);
    assert_eq!(g.retry_max_times, 3);
    let o: ConsumerOffsetSerializeWrapper =
        from_json(br#"{"offsetTable":{"T@g":{0:"12","1":7}}}"#).unwrap();
    assert_eq!(o.offset_table["T@g"], [(0, 12), (1, 7)].into());
    let p: ProducerData = from_json(br#"{"groupName":42}"#).unwrap();
    assert_eq!(p.group_name, "42");
    let hb: HeartbeatData = from_json(br#"{"clientID":"c","withoutSub":"true"}"#).unwrap();
    assert!(hb.without_sub);
}

/// Leniency stops where fastjson's does: text that is not a number, a negative ordinal, a
/// boolean spelled otherwise, and an object where a list is expected are still BadBody.
#[test]
fn lenient_reading_still_rejects() {
    for bad in [
        &br#"{"heartbeatFingerprint":"12abc"}"#[..],
        br#"{"heartbeatFingerprint":" 12"}"#,
        br#"{"consumerDataSet":[{"consumeType":-1}]}"#,
        br#"{"consumerDataSet":[{"consumeType":1.5}]}"#,
        br#"{"withoutSub":"yes"}"#,
        br#"{"withoutSub":2}"#,
        br#"{"consumerDataSet":{"groupName":"g"}}"#,
    ] {
        assert!(
            matches!(
                from_json::<HeartbeatData>(bad),
                Err(ProtocolError::BadBody(_))
            ),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

/// A group created without a body field gets Java's `SubscriptionGroupConfig` defaults, among
/// them `consumeFromMinEnable=true`.
#[test]
fn subscription_group_defaults_are_java_defaults() {
    let g: SubscriptionGroupConfig = from_json(br#"{"groupName":"g"}"#).unwrap();
    assert!(g.consume_enable && g.consume_from_min_enable && g.consume_broadcast_enable);
    assert!(!g.consume_message_orderly && g.notify_consumer_ids_changed_enable);
    assert_eq!((g.retry_queue_nums, g.retry_max_times), (1, 16));
    assert_eq!((g.broker_id, g.which_broker_when_consume_slowly), (0, 1));
    assert_eq!((g.group_sys_flag, g.consume_timeout_minute), (0, 15));
    assert!(SubscriptionGroupConfig::default().consume_from_min_enable);
}
