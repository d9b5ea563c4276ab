//! Golden bytes for both header encodings (built by hand from the frame layout),
//! samples of Java and rocketmq-rust JSON headers, and every decode error path.

use bytes::{Bytes, BytesMut};

use super::*;
use crate::frame::split_frame;

/// Frame for: code 10, JAVA, version 479, opaque 7, flag 0, remark "hi", ext {a: PG}, body "xyz".
fn golden_binary_frame() -> Vec<u8> {
    let mut f = vec![0, 0, 0, 39]; // length = 4 + 32 header + 3 body
    f.extend_from_slice(&[0x01, 0x00, 0x00, 0x20]); // type ROCKETMQ, header length 32
    f.extend_from_slice(&[0x00, 0x0A]); // code 10
    f.push(0x00); // language JAVA
    f.extend_from_slice(&[0x01, 0xDF]); // version 479
    f.extend_from_slice(&[0, 0, 0, 7]); // opaque
    f.extend_from_slice(&[0, 0, 0, 0]); // flag
    f.extend_from_slice(&[0, 0, 0, 2, b'h', b'i']); // remark
    f.extend_from_slice(&[0, 0, 0, 9]); // ext length: 2 + 1 + 4 + 2
    f.extend_from_slice(&[0, 1, b'a', 0, 0, 0, 2, b'P', b'G']);
    f.extend_from_slice(b"xyz");
    f
}

fn golden_binary_command() -> RemotingCommand {
    RemotingCommand {
        code: 10,
        language: 0,
        version: 479,
        opaque: 7,
        flag: 0,
        remark: Some("hi".into()),
        ext_fields: [("a".to_string(), "PG".to_string())].into_iter().collect(),
        body: Bytes::from_static(b"xyz"),
        serialize_type: SerializeType::RocketMq,
    }
}

fn decode_frame(frame: &[u8]) -> Result<RemotingCommand, ProtocolError> {
    let mut buf = BytesMut::from(frame);
    let f = split_frame(&mut buf, crate::constants::MAX_FRAME_LEN)?.expect("whole frame");
    assert!(buf.is_empty());
    RemotingCommand::decode(f)
}

/// Binary header frames built from the spec decode to the expected command and re-encode
/// to the very same bytes.
#[test]
fn binary_golden_decode_and_encode() {
    let frame = golden_binary_frame();
    let cmd = decode_frame(&frame).unwrap();
    assert_eq!(cmd, golden_binary_command());
    let mut out = BytesMut::new();
    cmd.encode(&mut out).unwrap();
    assert_eq!(&out[..], &frame[..]);
}

/// A JSON response frame is byte-exact: alphabetical fields, extFields always present,
/// language JAVA, version 479, flag 1 and the request's opaque.
#[test]
fn json_response_golden_bytes() {
    let mut req = RemotingCommand::new_request(34);
    req.opaque = 42;
    let resp = RemotingCommand::response_for(&req, 0, None).with_body(&b"ok"[..]);
    let mut out = BytesMut::new();
    resp.encode(&mut out).unwrap();
    let header: &[u8] = br#"{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    let mut want = Vec::new();
    want.extend_from_slice(&((4 + header.len() + 2) as u32).to_be_bytes());
    want.extend_from_slice(&(header.len() as u32).to_be_bytes()); // type byte 0 = JSON
    want.extend_from_slice(header);
    want.extend_from_slice(b"ok");
    assert_eq!(&out[..], &want[..]);
}

/// A remark is written when present and the ext map carries our values.
#[test]
fn json_response_with_remark_and_ext() {
    let req = RemotingCommand::new_request(10);
    let resp = RemotingCommand::response_for(&req, 17, Some("no topic".into())).with_ext("k", 5);
    let mut out = BytesMut::new();
    resp.encode(&mut out).unwrap();
    let text = std::str::from_utf8(&out[8..]).unwrap();
    assert!(text.contains(r#""remark":"no topic""#), "{text}");
    assert!(text.contains(r#""extFields":{"k":"5"}"#), "{text}");
    let back = decode_frame(&out).unwrap();
    assert_eq!(back, resp);
}

fn json_frame(header: &str, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    f.extend_from_slice(&(header.len() as u32).to_be_bytes());
    f.extend_from_slice(header.as_bytes());
    f.extend_from_slice(body);
    f
}

/// Java's fastjson header (alphabetical, serializeTypeCurrentRPC, escaped separators in the
/// properties string) decodes field by field.
#[test]
fn decodes_java_fastjson_header() {
    let header = r#"{"code":310,"extFields":{"a":"PG","b":"TopicTest","c":"TBW102","d":"4","e":"3","f":"0","g":"1717000000000","h":"0","i":"TAGS\u0001TagA\u0002WAIT\u0001true\u0002","j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    let cmd = decode_frame(&json_frame(header, b"hello")).unwrap();
    assert_eq!(cmd.code, 310);
    assert_eq!(cmd.language, 0);
    assert_eq!(cmd.version, 479);
    assert_eq!(cmd.opaque, 42);
    assert_eq!(cmd.flag, 0);
    assert_eq!(cmd.remark, None);
    assert_eq!(cmd.ext("b"), Some("TopicTest"));
    assert_eq!(cmd.ext("i"), Some("TAGS\u{1}TagA\u{2}WAIT\u{1}true\u{2}"));
    assert_eq!(cmd.ext_fields.len(), 12);
    assert_eq!(&cmd.body[..], b"hello");
    assert_eq!(cmd.serialize_type, SerializeType::Json);
    assert!(!cmd.is_response() && !cmd.is_oneway());
}

/// rocketmq-rust's header order, `RUST` language, null remark and null extFields are accepted.
#[test]
fn decodes_rocketmq_rust_header() {
    let header = r#"{"code":34,"language":"RUST","version":474,"opaque":5,"flag":0,"remark":null,"extFields":null,"serializeTypeCurrentRPC":"JSON"}"#;
    let cmd = decode_frame(&json_frame(header, b"{}")).unwrap();
    assert_eq!(cmd.code, 34);
    assert_eq!(cmd.language, 12);
    assert_eq!(cmd.version, 474);
    assert_eq!(cmd.opaque, 5);
    assert!(cmd.remark.is_none());
    assert!(cmd.ext_fields.is_empty());

    let header = r#"{"code":15,"language":"RUST","version":474,"opaque":6,"flag":2,"remark":null,"extFields":{"consumerGroup":"g","queueId":3,"x":null,"b":true}}"#;
    let cmd = decode_frame(&json_frame(header, b"")).unwrap();
    assert!(cmd.is_oneway());
    assert_eq!(cmd.ext("consumerGroup"), Some("g"));
    assert_eq!(cmd.ext("queueId"), Some("3"), "numbers are stringified");
    assert_eq!(cmd.ext("b"), Some("true"));
    assert_eq!(cmd.ext("x"), None, "null values are dropped");

    // A repeated key keeps its last value (Java's map does); a null after a value drops only
    // that field, escapes are decoded, and a float is stringified.
    let header = r#"{"code":15,"extFields":{"k":"1","n":"kept","k":"2","z":null,"e":"a\"b\u0001","f":1.5,"u":18446744073709551615,"i":-7}}"#;
    let cmd = decode_frame(&json_frame(header, b"")).unwrap();
    assert_eq!(cmd.ext_fields.len(), 6);
    assert_eq!(cmd.ext("k"), Some("2"));
    assert_eq!(cmd.ext("n"), Some("kept"));
    assert_eq!(cmd.ext("z"), None);
    assert_eq!(cmd.ext("e"), Some("a\"b\u{1}"));
    assert_eq!(cmd.ext("f"), Some("1.5"));
    assert_eq!(cmd.ext("u"), Some("18446744073709551615"));
    assert_eq!(cmd.ext("i"), Some("-7"));
}

/// Unknown language names land on OTHER; a missing language is JAVA, like Java's default.
#[test]
fn language_fallbacks() {
    let cmd = decode_frame(&json_frame(r#"{"code":1,"language":"ZIG"}"#, b"")).unwrap();
    assert_eq!(cmd.language, crate::codes::LANGUAGE_OTHER);
    let cmd = decode_frame(&json_frame(r#"{"code":1}"#, b"")).unwrap();
    assert_eq!(cmd.language, 0);
    assert_eq!(cmd.version, 0);
}

/// encode_prefix + body bytes == encode, with the length field counting the body.
#[test]
fn encode_prefix_counts_the_body() {
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        let mut cmd = golden_binary_command();
        cmd.serialize_type = st;
        let mut full = BytesMut::new();
        cmd.encode(&mut full).unwrap();
        let mut prefix = BytesMut::new();
        cmd.encode_prefix(cmd.body.len(), &mut prefix).unwrap();
        prefix.extend_from_slice(&cmd.body);
        assert_eq!(full, prefix);
        let mut big = BytesMut::new();
        cmd.encode_prefix(1 << 20, &mut big).unwrap();
        let len = u32::from_be_bytes([big[0], big[1], big[2], big[3]]) as usize;
        assert_eq!(len, big.len() - 4 + (1 << 20));
    }
}

/// Commands that do not fit the binary header are refused and `dst` is left untouched.
#[test]
fn binary_encode_refuses_what_java_would_truncate() {
    let mut cmd = golden_binary_command();
    cmd.code = 200050;
    let mut out = BytesMut::from(&b"keep"[..]);
    assert!(matches!(
        cmd.encode(&mut out),
        Err(ProtocolError::Unencodable(_))
    ));
    assert_eq!(&out[..], b"keep");
    let mut cmd = golden_binary_command();
    cmd.version = 40000;
    assert!(cmd.encode(&mut BytesMut::new()).is_err());
    let mut cmd = golden_binary_command();
    cmd.ext_fields.insert(&"k".repeat(40000), "v");
    assert!(cmd.encode(&mut BytesMut::new()).is_err());
}

/// A body length that pushes the frame past i32 is refused.
#[test]
fn encode_prefix_refuses_oversized_body() {
    let cmd = RemotingCommand::new_request(11);
    let mut out = BytesMut::new();
    assert!(cmd.encode_prefix(i32::MAX as usize, &mut out).is_err());
    assert!(out.is_empty());
}

/// Binary quirk: zero-length strings are null, so an empty remark and empty values vanish.
#[test]
fn binary_zero_length_strings_are_null() {
    let mut cmd = golden_binary_command();
    cmd.remark = Some(String::new());
    cmd.ext_fields.insert("empty", "");
    let mut out = BytesMut::new();
    cmd.encode(&mut out).unwrap();
    let back = decode_frame(&out).unwrap();
    assert_eq!(back.remark, None);
    assert_eq!(back.ext("empty"), None);
    assert_eq!(back.ext("a"), Some("PG"));
}

fn frame_from_parts(word: u32, header: &[u8]) -> Bytes {
    let mut f = word.to_be_bytes().to_vec();
    f.extend_from_slice(header);
    Bytes::from(f)
}

/// Frame-level errors: no header word, header longer than the frame, unknown type byte.
#[test]
fn frame_level_errors() {
    assert!(matches!(
        RemotingCommand::decode(Bytes::from_static(&[0, 0])),
        Err(ProtocolError::BadFrame(_))
    ));
    assert!(matches!(
        RemotingCommand::decode(frame_from_parts(10, b"{}")),
        Err(ProtocolError::BadFrame(_))
    ));
    assert!(matches!(
        RemotingCommand::decode(frame_from_parts(0x00FF_FFFF, b"")),
        Err(ProtocolError::BadFrame(_))
    ));
    assert!(matches!(
        RemotingCommand::decode(frame_from_parts(0x0200_0002, b"{}")),
        Err(ProtocolError::UnknownSerializeType(2))
    ));
}

/// JSON errors: not JSON, no code, a wrong type for code, an object inside extFields.
#[test]
fn json_header_errors() {
    for bad in [
        "",
        "{",
        "not json",
        r#"{"language":"JAVA"}"#,
        r#"{"code":"ten"}"#,
        r#"{"code":1,"extFields":{"a":{"b":1}}}"#,
        r#"{"code":1,"extFields":[1]}"#,
        r#"{"code":1,"remark":5}"#,
        r#"[1,2]"#,
    ] {
        let h = bad.as_bytes();
        let r = RemotingCommand::decode(frame_from_parts(h.len() as u32, h));
        assert!(
            matches!(r, Err(ProtocolError::BadHeader(_))),
            "{bad}: {r:?}"
        );
    }
}

/// Every truncation of the golden binary header is an error, never a panic.
#[test]
fn binary_header_truncated_everywhere() {
    let frame = golden_binary_frame();
    let header = &frame[8..8 + 32];
    for cut in 0..header.len() {
        let r = RemotingCommand::decode(frame_from_parts(0x0100_0000 | cut as u32, &header[..cut]));
        assert!(
            matches!(r, Err(ProtocolError::BadHeader(_))),
            "cut {cut}: {r:?}"
        );
    }
}

/// Lengths that point past the header (huge or negative) are rejected before slicing.
#[test]
fn binary_header_bad_lengths() {
    let fixed = [0u8, 10, 0, 1, 0xDF, 0, 0, 0, 1, 0, 0, 0, 0];
    let cases: Vec<Vec<u8>> = vec![
        // remark length i32::MAX
        [&fixed[..], &[0x7F, 0xFF, 0xFF, 0xFF]].concat(),
        // negative remark length
        [&fixed[..], &[0xFF, 0xFF, 0xFF, 0xFE]].concat(),
        // ext length past the header
        [&fixed[..], &[0, 0, 0, 0], &[0, 0, 0, 100], &[0, 1, b'a']].concat(),
        // negative ext length
        [&fixed[..], &[0, 0, 0, 0], &[0x80, 0, 0, 0]].concat(),
        // negative key length
        [&fixed[..], &[0, 0, 0, 0], &[0, 0, 0, 2], &[0xFF, 0xFF]].concat(),
        // value length past the ext map
        [
            &fixed[..],
            &[0, 0, 0, 0],
            &[0, 0, 0, 8],
            &[0, 1, b'a', 0, 0, 0, 9, b'v'],
        ]
        .concat(),
        // remark not UTF-8
        [&fixed[..], &[0, 0, 0, 1, 0xFF], &[0, 0, 0, 0]].concat(),
    ];
    for (i, h) in cases.iter().enumerate() {
        let r = RemotingCommand::decode(frame_from_parts(0x0100_0000 | h.len() as u32, h));
        assert!(
            matches!(r, Err(ProtocolError::BadHeader(_))),
            "case {i}: {r:?}"
        );
    }
}

/// Flags: response and oneway bits, new_request hands out distinct opaques.
#[test]
fn flags_and_opaque() {
    let mut a = RemotingCommand::new_request(40);
    let b = RemotingCommand::new_request(40);
    assert_ne!(a.opaque, b.opaque);
    assert!(!a.is_oneway());
    a.set_oneway();
    assert!(a.is_oneway() && !a.is_response());
    assert_eq!(a.flag, 2);
    let r = RemotingCommand::response_for(&a, 0, None);
    assert!(r.is_response());
    assert_eq!(r.opaque, a.opaque);
    assert_eq!(r.flag, 1);
}
