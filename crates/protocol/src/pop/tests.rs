use super::*;

/// Java's forms: seven fields from the broker, eight as clients hold them, nine from the gRPC
/// proxy; each prints back as it was read.
#[test]
fn handles_round_trip() {
    for raw in [
        "100 1700000000000 60000 3 0 broker-a 1",
        "100 1700000000000 60000 3 0 broker-a 1 102",
        "100 1700000000000 60000 999 2 broker-a 1 102 7340032",
    ] {
        let h = ExtraInfo::parse(raw).unwrap();
        assert_eq!(h.to_string(), raw);
        assert_eq!(h.broker_name, "broker-a");
    }
    let h = ExtraInfo::parse("100 1700000000000 60000 999 2 b 1 102").unwrap();
    assert!(h.is_order());
    assert_eq!(h.retry, RetryFlag::RetryV2);
    assert_eq!(h.queue_offset, Some(102));
    assert_eq!(h.next_visible_time(), 1_700_000_060_000);
}

/// Malformed handles are errors naming the field: too few or too many fields, numbers that are
/// not, an unknown retry flag, an empty broker name, huge values.
#[test]
fn malformed_handles_are_refused() {
    for raw in [
        "",
        "1 2 3",
        "100 1700000000000 60000 3 0 broker-a",
        "x 1700000000000 60000 3 0 broker-a 1",
        "100 1700000000000 60000 3 7 broker-a 1",
        "100 1700000000000 60000 3 0  1",
        "100 1700000000000 60000 3 0 broker-a 1 102 5 9",
        "100 1700000000000 60000 99999999999 0 broker-a 1",
        "100 1700000000000 60000 3 0 broker-a 1 1e3",
    ] {
        let err = ExtraInfo::parse(raw).unwrap_err();
        assert!(err.to_string().contains("extraInfo"), "{raw:?}: {err}");
    }
    assert_eq!(
        ExtraInfo::parse(&"9".repeat(10_000))
            .unwrap_err()
            .to_string()
            .len(),
        ExtraInfo::parse(&"9".repeat(100))
            .unwrap_err()
            .to_string()
            .len(),
        "the echoed value is bounded"
    );
}

#[test]
fn retry_flags_follow_the_topic() {
    assert_eq!(RetryFlag::of_topic("T"), RetryFlag::Normal);
    assert_eq!(RetryFlag::of_topic("%RETRY%G_T"), RetryFlag::RetryV1);
    assert_eq!(RetryFlag::of_topic("%RETRY%G+T"), RetryFlag::RetryV2);
    assert_eq!(RetryFlag::RetryV1.real_topic("T", "G"), "%RETRY%G_T");
    assert_eq!(RetryFlag::RetryV2.real_topic("T", "G"), "%RETRY%G+T");
    assert_eq!(RetryFlag::Normal.real_topic("T", "G"), "T");
}

/// Info strings as Java's builders write them, and back.
#[test]
fn info_strings() {
    let starts = vec![
        InfoEntry {
            retry: RetryFlag::Normal,
            queue_id: 1,
            value: 100,
        },
        InfoEntry {
            retry: RetryFlag::RetryV1,
            queue_id: 0,
            value: 5,
        },
    ];
    assert_eq!(start_offset_info(&starts), "0 1 100;1 0 5");
    assert_eq!(parse_start_offset_info("0 1 100;1 0 5").unwrap(), starts);
    let msgs = vec![InfoEntry {
        retry: RetryFlag::Normal,
        queue_id: 1,
        value: vec![100, 101, 102],
    }];
    assert_eq!(msg_offset_info(&msgs), "0 1 100,101,102");
    assert_eq!(parse_msg_offset_info("0 1 100,101,102").unwrap(), msgs);
    assert!(parse_start_offset_info("").unwrap().is_empty());
    for bad in ["0 1", "0 1 2 3", "9 1 100", "0 x 100", "0 1 1,x"] {
        assert!(parse_msg_offset_info(bad).is_err(), "{bad:?}");
    }
}

/// A batch ack as Java's fastjson writes it: short names, the bit set in Base64 of
/// `BitSet.toByteArray()`; the long names are read too.
#[test]
fn batch_ack_body() {
    let json = br#"{"acks":[{"b":"Kg==","c":"G","it":60000,"pt":1700000000000,"q":1,"r":"0","rq":3,"so":100,"t":"T"}],"brokerName":"broker-a"}"#;
    let body: BatchAckMessageRequestBody = serde_json::from_slice(json).unwrap();
    assert_eq!(body.broker_name.as_deref(), Some("broker-a"));
    let ack = &body.acks[0];
    assert_eq!(ack.offsets().unwrap(), vec![101, 103, 105]);
    assert_eq!(BatchAck::bits_of(100, &[101, 103, 105]), vec![0x2A]);
    let long = br#"{"acks":[{"bitSet":"AQ==","consumerGroup":"G","invisibleTime":1,"popTime":2,"queueId":0,"retry":"1","reviveQueueId":0,"startOffset":7,"topic":"T"}]}"#;
    let body: BatchAckMessageRequestBody = serde_json::from_slice(long).unwrap();
    assert_eq!(body.acks[0].offsets().unwrap(), vec![7]);
    let back = serde_json::to_vec(&body).unwrap();
    let again: BatchAckMessageRequestBody = serde_json::from_slice(&back).unwrap();
    assert_eq!(again, body);
    let huge = BatchAck {
        bit_set: vec![0xFF; BATCH_ACK_MAX_BITS / 8 + 1],
        ..body.acks[0].clone()
    };
    assert!(huge.offsets().is_err());
    assert!(
        serde_json::from_slice::<BatchAckMessageRequestBody>(br#"{"acks":[{"b":"!!"}]}"#).is_err()
    );
}
