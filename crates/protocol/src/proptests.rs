//! Properties over arbitrary input: decoders never panic, encode -> decode is the identity
//! (modulo the binary header's documented "zero length = null" rule).

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::batch::{decode_batch, encode_batch, BatchEntry};
use super::body::{
    from_json, to_fastjson_legacy, to_json, ConsumerOffsetSerializeWrapper, HeartbeatData,
    TopicRouteData,
};
use super::frame::split_frame;
use super::{msg_id, properties, RemotingCommand, SerializeType};

fn arb_command() -> impl Strategy<Value = RemotingCommand> {
    (
        any::<i16>(),
        0u8..14,
        any::<i16>(),
        any::<i32>(),
        any::<i32>(),
        proptest::option::of(".{0,20}"),
        proptest::collection::hash_map(".{0,12}", ".{0,24}", 0..8),
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<bool>(),
    )
        .prop_map(
            |(code, language, version, opaque, flag, remark, ext, body, binary)| RemotingCommand {
                code: code as i32,
                language,
                version: version as i32,
                opaque,
                flag,
                remark,
                ext_fields: ext.into_iter().collect(),
                body: Bytes::from(body),
                serialize_type: if binary {
                    SerializeType::RocketMq
                } else {
                    SerializeType::Json
                },
            },
        )
}

/// What a command looks like after a trip through the binary header: empty strings are null.
fn binary_normalized(mut c: RemotingCommand) -> RemotingCommand {
    if c.remark.as_deref() == Some("") {
        c.remark = None;
    }
    let ext: crate::command::ExtFields = c
        .ext_fields
        .into_iter()
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .collect();
    c.ext_fields = ext;
    c
}

proptest! {
    /// encode -> split_frame -> decode returns the same command, in both header encodings.
    #[test]
    fn command_round_trips(cmd in arb_command()) {
        let mut buf = BytesMut::new();
        cmd.encode(&mut buf).unwrap();
        let frame = split_frame(&mut buf, crate::constants::MAX_FRAME_LEN).unwrap().unwrap();
        prop_assert!(buf.is_empty());
        let back = RemotingCommand::decode(frame).unwrap();
        let want = match cmd.serialize_type {
            SerializeType::Json => cmd,
            SerializeType::RocketMq => binary_normalized(cmd),
        };
        prop_assert_eq!(back, want);
    }

    /// Arbitrary bytes, as a frame or behind a plausible header word, never panic the decoder.
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256), ty in 0u8..3) {
        let _ = RemotingCommand::decode(Bytes::from(bytes.clone()));
        let mut framed = (((ty as u32) << 24) | bytes.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&bytes);
        let _ = RemotingCommand::decode(Bytes::from(framed));
        let mut buf = BytesMut::from(&bytes[..]);
        while let Ok(Some(f)) = split_frame(&mut buf, 1024) {
            let _ = RemotingCommand::decode(f);
        }
    }

    /// Mutating one byte of a valid binary frame never panics the decoder.
    #[test]
    fn mutated_binary_header_never_panics(cmd in arb_command(), at in any::<usize>(), val in any::<u8>()) {
        let mut cmd = cmd;
        cmd.serialize_type = SerializeType::RocketMq;
        let mut buf = BytesMut::new();
        cmd.encode(&mut buf).unwrap();
        let mut v = buf[4..].to_vec();
        let i = at % v.len();
        v[i] = val;
        let _ = RemotingCommand::decode(Bytes::from(v));
    }

    /// The other untrusted-input decoders never panic either.
    #[test]
    fn other_decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256), s in ".{0,80}") {
        let _ = decode_batch(&Bytes::from(bytes.clone()), 16);
        let _ = from_json::<HeartbeatData>(&bytes);
        let _ = from_json::<TopicRouteData>(s.as_bytes());
        let _ = properties::parse(&s);
        let _ = msg_id::decode_offset_msg_id(&s);
    }

    /// Batches round-trip.
    #[test]
    fn batch_round_trips(entries in proptest::collection::vec(
        (any::<i32>(), proptest::collection::vec(any::<u8>(), 0..40), ".{0,30}"), 1..6)) {
        let entries: Vec<BatchEntry> = entries
            .into_iter()
            .map(|(flag, body, properties)| BatchEntry { flag, body: Bytes::from(body), properties })
            .collect();
        let mut buf = BytesMut::new();
        encode_batch(&entries, &mut buf).unwrap();
        prop_assert_eq!(decode_batch(&buf.freeze(), 16).unwrap(), entries);
    }

    /// Properties without separators in keys/values and with non-empty parts round-trip.
    #[test]
    fn properties_round_trip(pairs in proptest::collection::btree_map("[A-Za-z_]{1,10}", "[^\u{1}\u{2}]{1,20}", 0..8)) {
        let s = properties::encode(&pairs);
        let parsed: std::collections::BTreeMap<String, String> = properties::parse(&s).into_iter().collect();
        prop_assert_eq!(parsed, pairs.clone());
        for (k, v) in &pairs {
            prop_assert_eq!(properties::get(&s, k), Some(v.as_str()));
        }
    }

    /// Legacy (unquoted integer keys) and strict output both parse back to the same value,
    /// whatever the string keys contain (braces, colons, digits, quotes, escapes).
    #[test]
    fn legacy_json_round_trips(table in proptest::collection::btree_map(
        "[0-9{}:,\"\\ a-z@\u{1}]{0,12}",
        proptest::collection::btree_map(any::<i32>(), any::<i64>(), 0..4),
        0..4)) {
        let w = ConsumerOffsetSerializeWrapper { offset_table: table, ..Default::default() };
        prop_assert_eq!(&from_json::<ConsumerOffsetSerializeWrapper>(&to_fastjson_legacy(&w)).unwrap(), &w);
        prop_assert_eq!(&from_json::<ConsumerOffsetSerializeWrapper>(&to_json(&w)).unwrap(), &w);
    }
}
