//! Signatures checked against values computed by the JDK's `javax.crypto.Mac` ("HmacSHA1")
//! over a `TreeMap`'s values and the body, as Java's RocketMQ client signs.

use super::*;

fn fields(pairs: &[(&str, &str)]) -> ExtFields {
    let mut f = ExtFields::default();
    for (k, v) in pairs {
        f.insert(k, v);
    }
    f
}

/// A SEND_MESSAGE_V2 header as a Java producer with `rocketmq2`/`12345678` signs it.
fn send_v2() -> ExtFields {
    // Inserted out of order: the content follows the keys' order, not the arrival order.
    fields(&[
        ("m", "false"),
        ("b", "TopicTest"),
        ("a", "producerGroupA"),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", "0"),
        ("AccessKey", "rocketmq2"),
        ("f", "0"),
        ("g", "1733400000000"),
        ("h", "0"),
        ("j", "0"),
        ("k", "false"),
    ])
}

const SEND_V2_SIGNATURE: &str = "GoKeh7wzCa8OBrD/SuG2mZwY2ks=";

#[test]
fn signs_like_java() {
    assert_eq!(
        sign("12345678", &send_v2(), b"Hello RocketMQ").unwrap(),
        SEND_V2_SIGNATURE
    );
    let cpp_style = fields(&[
        ("consumerGroup", "g1"),
        ("OnsChannel", "ALIYUN"),
        ("AccessKey", ""),
    ]);
    assert_eq!(
        sign("k", &cpp_style, b"").unwrap(),
        "PqCpJaBncke3EDHeL8/ZVNWZCLM="
    );
}

#[test]
fn orders_keys_by_utf16_code_units_as_java_does() {
    // U+1F600 is a surrogate pair (D83D ...) and sorts before U+FF21 in Java, after it in UTF-8.
    let f = fields(&[
        ("\u{ff21}key", "fullwidth"),
        ("\u{1f600}", "emoji"),
        ("topic", "T\u{e9}\u{4e2d}"),
        ("Z", "upper"),
        ("SecurityToken", "tok"),
        ("AccessKey", "ak"),
    ]);
    assert_eq!(
        sign("s\u{e9}cret", &f, &[0, 1, 2, 255]).unwrap(),
        "6igZ9Y9T43dpHu40qF0i/Ne2Zak="
    );
}

#[test]
fn verifies_the_right_signature_and_refuses_any_change() {
    let body = b"Hello RocketMQ";
    let mut f = send_v2();
    f.insert(SIGNATURE, SEND_V2_SIGNATURE);
    assert_eq!(verify("12345678", &f, body, 479), Ok(()));
    assert_eq!(
        verify("12345679", &f, body, 479),
        Err(SignatureError::Mismatch),
        "wrong secret"
    );
    assert_eq!(
        verify("12345678", &f, b"Hello RocketMQ!", 479),
        Err(SignatureError::Mismatch),
        "tampered body"
    );
    let mut topic = f.clone();
    topic.insert("b", "OtherTopic");
    assert_eq!(
        verify("12345678", &topic, body, 479),
        Err(SignatureError::Mismatch),
        "replayed for another topic"
    );
    let mut extra = f.clone();
    extra.insert("x", "");
    assert_eq!(
        verify("12345678", &extra, body, 479),
        Ok(()),
        "an empty value adds nothing to the content, as in Java"
    );
    extra.insert("x", "1");
    assert_eq!(
        verify("12345678", &extra, body, 479),
        Err(SignatureError::Mismatch)
    );
}

#[test]
fn malformed_or_missing_signatures_are_refused() {
    let f = send_v2();
    assert_eq!(
        verify("12345678", &f, b"", 479),
        Err(SignatureError::Missing)
    );
    for bad in [
        "",
        "not base64!",
        "GoKeh7wzCa8OBrD/SuG2mZwY2ks",
        "GoKeh7wzCa8OBrD/SuG2mZwY2ks=AAAA",
    ] {
        let mut g = f.clone();
        g.insert(SIGNATURE, bad);
        assert_eq!(
            verify("12345678", &g, b"Hello RocketMQ", 479),
            Err(SignatureError::Mismatch),
            "{bad:?}"
        );
    }
    // Non-canonical Base64 (the last character's unused bits set) is not the same signature.
    let mut g = f.clone();
    g.insert(SIGNATURE, "GoKeh7wzCa8OBrD/SuG2mZwY2kt=");
    assert_eq!(
        verify("12345678", &g, b"Hello RocketMQ", 479),
        Err(SignatureError::Mismatch)
    );
}

#[test]
fn unique_key_query_is_unsigned_only_for_old_clients() {
    let body = b"Hello RocketMQ";
    let mut f = send_v2();
    f.insert(SIGNATURE, SEND_V2_SIGNATURE);
    f.insert(UNIQUE_KEY_QUERY, "true");
    assert_eq!(verify("12345678", &f, body, V4_9_3), Ok(()));
    assert_eq!(
        verify("12345678", &f, body, V4_9_3 + 1),
        Err(SignatureError::Mismatch)
    );
}

#[test]
fn too_many_fields_are_refused_before_hashing() {
    let mut f = ExtFields::default();
    for i in 0..=MAX_SIGNED_FIELDS {
        f.insert(&format!("k{i}"), "v");
    }
    assert_eq!(
        sign("s", &f, b""),
        Err(SignatureError::TooManyFields(MAX_SIGNED_FIELDS + 1))
    );
}

/// The gRPC form: HmacSHA1 over the date-time string, hex in either case; anything else fails.
#[test]
fn grpc_signatures_are_checked_in_either_case() {
    let sig = sign_grpc("secret", "20261208T014500Z");
    assert_eq!(sig.len(), 40);
    assert_eq!(verify_grpc("secret", "20261208T014500Z", &sig), Ok(()));
    assert_eq!(
        verify_grpc("secret", "20261208T014500Z", &sig.to_uppercase()),
        Ok(())
    );
    assert_eq!(
        verify_grpc("other", "20261208T014500Z", &sig),
        Err(SignatureError::Mismatch)
    );
    assert_eq!(
        verify_grpc("secret", "20261208T014501Z", &sig),
        Err(SignatureError::Mismatch)
    );
    assert_eq!(
        verify_grpc("secret", "x", "zz"),
        Err(SignatureError::Mismatch)
    );
    assert_eq!(
        verify_grpc("secret", "x", &"g".repeat(40)),
        Err(SignatureError::Mismatch)
    );
}
