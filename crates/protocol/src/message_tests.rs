//! Tests of the stored-record codec: golden bytes written by hand field by field (not by the
//! encoder), error paths, and properties (round trip, no panic on arbitrary bytes).

use super::*;
use proptest::prelude::*;

fn v4(a: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a)), port)
}

fn golden_msg() -> MessageToStore<'static> {
    MessageToStore {
        topic: "T",
        queue_id: 3,
        flag: 0x11,
        sys_flag: 0,
        born_timestamp: 0x0102_0304_0506_0708,
        born_host: v4([10, 0, 0, 1], 5555),
        store_host: v4([192, 168, 1, 2], 10911),
        reconsume_times: 2,
        prepared_transaction_offset: 0,
        body: b"hi",
        properties: "a\u{1}b\u{2}",
    }
}

/// The V1/IPv4 record of `golden_msg`, field by field from the spec table.
fn golden_v1_bytes() -> Vec<u8> {
    let mut v: Vec<u8> = Vec::new();
    v.extend([0, 0, 0, 98]); // TOTALSIZE = 91 + 2 + 1 + 4
    v.extend([0xDA, 0xA3, 0x20, 0xA7]); // MAGIC V1
    v.extend([0x58, 0x93, 0x2A, 0xAC]); // CRC32("hi") & 0x7FFFFFFF (zlib)
    v.extend([0, 0, 0, 3]); // QUEUEID
    v.extend([0, 0, 0, 0x11]); // FLAG
    v.extend([0; 8]); // QUEUEOFFSET
    v.extend([0; 8]); // PHYSICALOFFSET
    v.extend([0, 0, 0, 0]); // SYSFLAG
    v.extend([1, 2, 3, 4, 5, 6, 7, 8]); // BORNTIMESTAMP
    v.extend([10, 0, 0, 1, 0, 0, 0x15, 0xB3]); // BORNHOST 10.0.0.1:5555
    v.extend([0; 8]); // STORETIMESTAMP
    v.extend([192, 168, 1, 2, 0, 0, 0x2A, 0x9F]); // STOREHOST :10911
    v.extend([0, 0, 0, 2]); // RECONSUMETIMES
    v.extend([0; 8]); // PREPARED TX OFFSET
    v.extend([0, 0, 0, 2, b'h', b'i']); // BODYLEN + BODY
    v.extend([1, b'T']); // TOPICLEN (1 byte) + TOPIC
    v.extend([0, 4, b'a', 1, b'b', 2]); // PROPERTIESLEN + PROPERTIES
    v
}

#[test]
fn golden_v1_ipv4_encode_matches_spec_bytes() {
    let mut dst = BytesMut::new();
    encode(&golden_msg(), &mut dst).unwrap();
    assert_eq!(&dst[..], &golden_v1_bytes()[..]);
    assert_eq!(stored_len(0, 2, 1, 4), 98);
}

#[test]
fn golden_patch_writes_offsets_and_store_timestamp_at_spec_positions() {
    let mut rec = golden_v1_bytes();
    patch(&mut rec, 0x0A0B, 0x0102_0304, 0x7788);
    assert_eq!(&rec[20..28], &[0, 0, 0, 0, 0, 0, 0x0A, 0x0B]);
    assert_eq!(&rec[28..36], &[0, 0, 0, 0, 1, 2, 3, 4]);
    assert_eq!(&rec[56..64], &[0, 0, 0, 0, 0, 0, 0x77, 0x88]);
    let d = decode(&rec, true).unwrap();
    assert_eq!(
        (d.queue_offset, d.phy_offset, d.store_timestamp),
        (0x0A0B, 0x0102_0304, 0x7788)
    );
}

#[test]
fn golden_v2_ipv6_born_host_and_long_topic() {
    let topic = "x".repeat(200);
    let born = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 1);
    let msg = MessageToStore {
        topic: &topic,
        born_host: born,
        body: b"",
        properties: "",
        ..golden_msg()
    };
    let mut dst = BytesMut::new();
    encode(&msg, &mut dst).unwrap();
    // 91 + 12 (IPv6 born host) + 1 (V2 topic length) + 200 topic bytes.
    assert_eq!(dst.len(), 304);
    assert_eq!(&dst[0..4], &[0, 0, 0x01, 0x30]);
    assert_eq!(&dst[4..8], &[0xDA, 0xA3, 0x20, 0xAB]);
    assert_eq!(&dst[8..12], &[0, 0, 0, 0]); // CRC32("") = 0
    assert_eq!(&dst[36..40], &[0, 0, 0, 0x10]); // BORNHOST_V6 set from the address family
    let mut host = [0u8; 16];
    host[15] = 1;
    assert_eq!(&dst[48..64], &host);
    assert_eq!(&dst[64..68], &[0, 0, 0, 1]);
    // STORETIMESTAMP follows the 20-byte born host, then the IPv4 store host.
    assert_eq!(&dst[76..80], &[192, 168, 1, 2]);
    let tail = &dst[dst.len() - 2 - 200 - 2..];
    assert_eq!(&tail[0..2], &[0, 200]); // topic length is a short in V2
    let d = decode(&dst, true).unwrap();
    assert_eq!(d.topic, topic);
    assert_eq!(d.born_host, born);
    assert_eq!(d.magic, MESSAGE_MAGIC_V2);
    patch(&mut dst, 1, 2, 3);
    assert_eq!(&dst[68..76], &[0, 0, 0, 0, 0, 0, 0, 3]);
}

#[test]
fn encode_rejects_long_properties_and_topic() {
    let props = "p".repeat(32768);
    let msg = MessageToStore {
        properties: &props,
        ..golden_msg()
    };
    assert_eq!(
        encode(&msg, &mut BytesMut::new()),
        Err(RecordError::PropertiesTooLong(32768))
    );
    let topic = "t".repeat(40000);
    let msg = MessageToStore {
        topic: &topic,
        ..golden_msg()
    };
    assert_eq!(
        encode(&msg, &mut BytesMut::new()),
        Err(RecordError::TopicTooLong(40000))
    );
}

#[test]
fn decode_error_paths() {
    let good = golden_v1_bytes();
    assert!(matches!(
        decode(&good[..5], true),
        Err(RecordError::Truncated { .. })
    ));
    assert!(matches!(
        decode(&good[..97], true),
        Err(RecordError::Truncated { .. })
    ));
    let mut bad = good.clone();
    bad[4] = 0;
    assert!(matches!(decode(&bad, true), Err(RecordError::BadMagic(_))));
    let mut bad = good.clone();
    bad[84 + 4] ^= 1; // flip a body byte
    assert!(matches!(
        decode(&bad, true),
        Err(RecordError::BadCrc { .. })
    ));
    assert!(decode(&bad, false).is_ok());
    let mut bad = good.clone();
    bad[3] = 99; // total size larger than the fields
    bad.push(0);
    assert!(matches!(
        decode(&bad, true),
        Err(RecordError::SizeMismatch { .. })
    ));
    let mut bad = good.clone();
    bad[3] = 97; // total size smaller than the fields
    assert!(matches!(
        decode(&bad, true),
        Err(RecordError::Truncated { .. })
    ));
    let mut bad = good.clone();
    bad[91] = 0xFF; // topic byte not UTF-8
    assert_eq!(decode(&bad, true), Err(RecordError::BadUtf8("topic")));
    let mut bad = good.clone();
    bad[84] = 0x80; // negative body length
    assert_eq!(
        decode(&bad, true),
        Err(RecordError::BadLength("body length"))
    );
    let blank = [0, 0, 0x10, 0, 0xCB, 0xD4, 0x31, 0x94];
    assert_eq!(
        decode(&blank, true),
        Err(RecordError::Blank { remaining: 4096 })
    );
    assert_eq!(decode(&[0u8; 16], true), Err(RecordError::BadMagic(0)));
}

#[test]
fn transaction_types_decide_dispatch() {
    assert!(sys_flag::is_dispatched(0));
    assert!(sys_flag::is_dispatched(
        sys_flag::TRANSACTION_COMMIT | sys_flag::COMPRESSED
    ));
    assert!(!sys_flag::is_dispatched(sys_flag::TRANSACTION_PREPARED));
    assert!(!sys_flag::is_dispatched(sys_flag::TRANSACTION_ROLLBACK));
    assert_eq!(sys_flag::transaction_type(0x1C), 0xC);
}

fn arb_host() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(a, p)| v4(a, p)),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(a, p)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(a)), p)),
    ]
}

proptest! {
    #[test]
    fn decode_never_panics_on_arbitrary_bytes(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode(&buf, true);
        let _ = peek_total_size(&buf);
    }

    #[test]
    fn decode_never_panics_on_mutated_records(pos in 0usize..98, val in any::<u8>()) {
        let mut rec = golden_v1_bytes();
        rec[pos] = val;
        let _ = decode(&rec, true);
    }

    #[test]
    fn encode_patch_decode_round_trip(
        topic in "[a-zA-Z0-9_%-]{1,300}",
        body in proptest::collection::vec(any::<u8>(), 0..300),
        props in "[a-z\u{1}\u{2}]{0,100}",
        born in arb_host(), store in arb_host(),
        queue_id in any::<i32>(), flag in any::<i32>(), sys in any::<i32>(),
        qo in any::<i64>(), phy in any::<i64>(), ts in any::<i64>(),
    ) {
        let msg = MessageToStore { topic: &topic, queue_id, flag, sys_flag: sys, born_timestamp: ts,
            born_host: born, store_host: store, reconsume_times: 7, prepared_transaction_offset: phy,
            body: &body, properties: &props };
        let mut dst = BytesMut::new();
        encode(&msg, &mut dst).unwrap();
        let expect_flag = (sys & !0x30) | if born.is_ipv6() { 0x10 } else { 0 } | if store.is_ipv6() { 0x20 } else { 0 };
        prop_assert_eq!(dst.len(), stored_len(expect_flag, body.len(), topic.len(), props.len()));
        patch(&mut dst, qo, phy, ts);
        let d = decode(&dst, true).unwrap();
        prop_assert_eq!(d.total_size as usize, dst.len());
        prop_assert_eq!(d.topic, topic.as_str());
        prop_assert_eq!(d.body, &body[..]);
        prop_assert_eq!(d.properties, props.as_str());
        prop_assert_eq!((d.queue_id, d.flag, d.sys_flag), (queue_id, flag, expect_flag));
        prop_assert_eq!((d.queue_offset, d.phy_offset, d.store_timestamp), (qo, phy, ts));
        prop_assert_eq!((d.born_host, d.store_host), (born, store));
        prop_assert_eq!(d.magic, if topic.len() > 127 { MESSAGE_MAGIC_V2 } else { MESSAGE_MAGIC_V1 });
    }

    #[test]
    fn without_body_plus_the_body_is_the_whole_record(
        topic in "[a-zA-Z0-9_%-]{1,300}",
        body in proptest::collection::vec(any::<u8>(), 0..300),
        props in "[a-z\u{1}\u{2}]{0,100}",
        born in arb_host(), store in arb_host(), sys in any::<i32>(),
        qo in any::<i64>(), phy in any::<i64>(), ts in any::<i64>(),
        prefix in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let msg = MessageToStore { topic: &topic, queue_id: 3, flag: 1, sys_flag: sys, born_timestamp: ts,
            born_host: born, store_host: store, reconsume_times: 0, prepared_transaction_offset: 0,
            body: &body, properties: &props };
        let mut whole = BytesMut::new();
        encode(&msg, &mut whole).unwrap();
        // Encoded after other bytes, as the send path encodes a batch into one buffer.
        let mut part = BytesMut::from(&prefix[..]);
        let at = encode_without_body(&msg, &mut part).unwrap();
        let mut part = part.split_off(prefix.len());
        prop_assert_eq!(part.len() + body.len(), whole.len());
        patch(&mut part, qo, phy, ts);
        patch(&mut whole, qo, phy, ts);
        let mut joined = part[..at].to_vec();
        joined.extend_from_slice(&body);
        joined.extend_from_slice(&part[at..]);
        prop_assert_eq!(&joined[..], &whole[..]);
    }
}
