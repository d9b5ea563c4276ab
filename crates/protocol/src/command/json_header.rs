//! The JSON header: fastjson output from Java, serde output from rocketmq-rust.
//!
//! Decode is by field name, order-free, unknown fields ignored; `remark`/`extFields` may be
//! null; `language` is an enum name (a number is tolerated); extFields values should be strings
//! but numbers/booleans are stringified and nulls dropped, as Java's map would hold them. Encode
//! writes fastjson's shape: fields sorted by name, null remark omitted, `extFields` always present.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::{RemotingCommand, SerializeType};
use crate::codes::{language_code, language_name, LANGUAGE_OTHER};
use crate::ProtocolError;

#[derive(Deserialize)]
struct JsonHeaderIn {
    code: i32,
    #[serde(default, deserialize_with = "de_language")]
    language: u8,
    #[serde(default)]
    version: i32,
    #[serde(default)]
    opaque: i32,
    #[serde(default)]
    flag: i32,
    #[serde(default)]
    remark: Option<String>,
    #[serde(default, rename = "extFields")]
    ext_fields: Option<ExtFieldsIn>,
}

pub(super) fn decode(header: &[u8]) -> Result<RemotingCommand, ProtocolError> {
    // serde would also accept a JSON array for a struct; a header is always an object.
    if header.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ProtocolError::BadHeader(
            "JSON header is not an object".to_owned(),
        ));
    }
    if let Some(cmd) = super::json_fast::decode(header) {
        return Ok(cmd);
    }
    decode_serde(header)
}

/// The reference decode: everything the fast path defers (and every error) comes from here.
fn decode_serde(header: &[u8]) -> Result<RemotingCommand, ProtocolError> {
    let h: JsonHeaderIn = serde_json::from_slice(header)
        .map_err(|e| ProtocolError::BadHeader(format!("JSON header: {e}")))?;
    Ok(RemotingCommand {
        code: h.code,
        language: h.language,
        version: h.version,
        opaque: h.opaque,
        flag: h.flag,
        remark: h.remark,
        ext_fields: h.ext_fields.map(|e| e.0).unwrap_or_default(),
        body: Bytes::new(),
        serialize_type: SerializeType::Json,
    })
}

/// Writes fastjson's shape by hand: fields sorted by name, as fastjson sorts, so our bytes look
/// like Java's (and hit rocketmq-rust's fast "Java layout" parser); `language` and
/// `serializeTypeCurrentRPC` always present (rocketmq-rust requires both); a null remark
/// omitted. The bytes are exactly what serde_json writes for the tests' `JsonHeaderOut`. By
/// hand because every response goes through here, and serde_json's byte-at-a-time escaping of
/// a batch's 32 message ids was ~3 % of a shard's time under batch sends. Strings without a byte that needs escaping (control
/// characters, `"` and `\`; the usual case) are copied as they are; others go through
/// serde_json's escaper, so the output never differs.
pub(super) fn encode(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), ProtocolError> {
    let ext_len = cmd.ext_fields.text_len() + 6 * cmd.ext_fields.len();
    let remark_len = cmd.remark.as_ref().map_or(0, |r| r.len() + 12);
    dst.reserve(140 + ext_len + remark_len);
    dst.put_slice(b"{\"code\":");
    put_int(dst, cmd.code);
    dst.put_slice(b",\"extFields\":{");
    for (i, (k, v)) in cmd.ext_fields.iter().enumerate() {
        if i > 0 {
            dst.put_u8(b',');
        }
        put_str(dst, k)?;
        dst.put_u8(b':');
        put_str(dst, v)?;
    }
    dst.put_slice(b"},\"flag\":");
    put_int(dst, cmd.flag);
    dst.put_slice(b",\"language\":");
    put_str(dst, language_name(cmd.language))?;
    dst.put_slice(b",\"opaque\":");
    put_int(dst, cmd.opaque);
    if let Some(r) = &cmd.remark {
        dst.put_slice(b",\"remark\":");
        put_str(dst, r)?;
    }
    dst.put_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    put_int(dst, cmd.version);
    dst.put_u8(b'}');
    Ok(())
}

fn put_int(dst: &mut BytesMut, v: i32) {
    dst.put_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// A JSON string literal. The check folds over every byte without branching so it vectorizes.
fn put_str(dst: &mut BytesMut, s: &str) -> Result<(), ProtocolError> {
    let needs_escape = s.bytes().fold(0u8, |acc, b| {
        acc | u8::from(b < 0x20) | u8::from(b == b'"') | u8::from(b == b'\\')
    });
    if needs_escape != 0 {
        return serde_json::to_writer(dst.writer(), s)
            .map_err(|e| ProtocolError::Unencodable(format!("JSON header: {e}")));
    }
    dst.put_u8(b'"');
    dst.put_slice(s.as_bytes());
    dst.put_u8(b'"');
    Ok(())
}

/// `language` as an enum name (unknown names become OTHER), a number, or null (JAVA).
fn de_language<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    struct LanguageVisitor;
    impl Visitor<'_> for LanguageVisitor {
        type Value = u8;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a LanguageCode name or number")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u8, E> {
            Ok(language_code(v))
        }
        // A number outside the LanguageCode table is OTHER, as an unknown name is: the
        // command then re-encodes to what it decodes to.
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u8, E> {
            Ok(usize::try_from(v)
                .ok()
                .filter(|n| *n < crate::codes::LANGUAGE_NAMES.len())
                .map_or(LANGUAGE_OTHER, |n| n as u8))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u8, E> {
            match u64::try_from(v) {
                Ok(u) => self.visit_u64(u),
                Err(_) => Ok(LANGUAGE_OTHER),
            }
        }
        fn visit_unit<E: de::Error>(self) -> Result<u8, E> {
            Ok(0)
        }
    }
    d.deserialize_any(LanguageVisitor)
}

/// extFields read straight into one `ExtFields` buffer (no `String` per key or value): string
/// values as is, numbers and booleans stringified (what Java's `toString` would have sent),
/// null values dropped.
struct ExtFieldsIn(super::ExtFields);

impl<'de> Deserialize<'de> for ExtFieldsIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ExtFieldsVisitor)
    }
}

struct ExtFieldsVisitor;

impl<'de> Visitor<'de> for ExtFieldsVisitor {
    type Value = ExtFieldsIn;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of string values")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ExtFieldsIn, A::Error> {
        // JSON gives no size hint; 16 fields hold a send header (up to 14) without growing.
        let mut out = super::ExtFields::with_capacity(16, 256);
        loop {
            let start = out.text_mark();
            if map.next_key_seed(KeyIn(out.text_mut()))?.is_none() {
                break;
            }
            let key_end = out.text_mark();
            if map.next_value_seed(ValueIn(out.text_mut()))? {
                out.commit_field(start, key_end);
            } else {
                out.rollback_field(start);
            }
        }
        out.dedup();
        Ok(ExtFieldsIn(out))
    }
}

/// A key, appended to the fields' buffer.
struct KeyIn<'b>(&'b mut String);

impl<'de> DeserializeSeed<'de> for KeyIn<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIn<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.0.push_str(v);
        Ok(())
    }
}

/// A value, appended to the fields' buffer; false for a null (the field is dropped).
struct ValueIn<'b>(&'b mut String);

impl<'de> DeserializeSeed<'de> for ValueIn<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for ValueIn<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, number, boolean or null")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        self.0.push_str(v);
        Ok(true)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        self.0.push_str(if v { "true" } else { "false" });
        Ok(true)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        self.0.push_str(itoa::Buffer::new().format(v));
        Ok(true)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        self.0.push_str(itoa::Buffer::new().format(v));
        Ok(true)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<bool, E> {
        use std::fmt::Write as _;
        // Writing to a String cannot fail.
        let _ = write!(self.0, "{v}");
        Ok(true)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::command::ExtFields;

    /// Field order is alphabetical because fastjson sorts, so our bytes look like Java's (and hit
    /// rocketmq-rust's fast "Java layout" parser). `language` and `serializeTypeCurrentRPC` must be
    /// present: rocketmq-rust treats both as required. `encode` writes these bytes by hand; this
    /// serde form is the reference it is compared against.
    #[derive(serde::Serialize)]
    struct JsonHeaderOut<'a> {
        code: i32,
        #[serde(rename = "extFields")]
        ext_fields: &'a ExtFields,
        flag: i32,
        language: &'static str,
        opaque: i32,
        #[serde(skip_serializing_if = "Option::is_none")]
        remark: Option<&'a str>,
        #[serde(rename = "serializeTypeCurrentRPC")]
        serialize_type_current_rpc: &'static str,
        version: i32,
    }

    fn serde_reference(cmd: &RemotingCommand) -> Vec<u8> {
        let out = JsonHeaderOut {
            code: cmd.code,
            ext_fields: &cmd.ext_fields,
            flag: cmd.flag,
            language: language_name(cmd.language),
            opaque: cmd.opaque,
            remark: cmd.remark.as_deref(),
            serialize_type_current_rpc: "JSON",
            version: cmd.version,
        };
        serde_json::to_vec(&out).unwrap()
    }

    fn command(
        ints: (i32, i32, i32, i32),
        language: u8,
        remark: Option<String>,
    ) -> RemotingCommand {
        let mut c = RemotingCommand::new_request(ints.0);
        c.flag = ints.1;
        c.opaque = ints.2;
        c.version = ints.3;
        c.language = language;
        c.remark = remark;
        c
    }

    /// A send response's header: escaping-free strings take the copy path.
    #[test]
    fn send_response_header_bytes() {
        let mut c = command((0, 1, 7, 475), 0, None);
        c.ext_fields = ExtFields::default();
        c.ext_fields
            .insert("msgId", "7F00000100002A9F0000000000000000");
        let mut dst = BytesMut::new();
        encode(&c, &mut dst).unwrap();
        assert_eq!(
            &dst[..],
            &br#"{"code":0,"extFields":{"msgId":"7F00000100002A9F0000000000000000"},"flag":1,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":475}"#[..]
        );
    }

    /// JSON whitespace, sometimes.
    fn ws() -> impl Strategy<Value = &'static str> {
        prop_oneof![4 => Just(""), 1 => Just(" "), 1 => Just("\n\t "), 1 => Just("\r")]
    }

    /// A JSON string literal: serde_json's own escaping of arbitrary text, or hand-made
    /// escapes (short forms, \u of ASCII and BMP characters, surrogate pairs, lone
    /// surrogates, bad escapes, raw control characters).
    fn json_string() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-zA-Z0-9_]{0,8}".prop_map(|s| format!("\"{s}\"")),
            3 => ".{0,8}".prop_map(|s| serde_json::to_string(&s).unwrap()),
            2 => proptest::sample::select(vec![
                r#""a\u0001b\u0002""#, r#""\"\\\/\b\f\n\r\t""#, r#""\u00e9\u4e2d""#,
                r#""\ud83d\ude00""#, r#""\ud800""#, r#""\x""#, "\"tab\there\"",
                r#""\u12""#, r#""unterminated"#, r#""é""#,
            ])
            .prop_map(str::to_owned),
        ]
    }

    fn json_number() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => any::<i32>().prop_map(|v| v.to_string()),
            2 => any::<i64>().prop_map(|v| v.to_string()),
            1 => any::<u64>().prop_map(|v| v.to_string()),
            2 => proptest::sample::select(vec![
                "0", "-0", "01", "1.5", "-2e3", "1E2", "18446744073709551616",
                "-9223372036854775809", "2147483648", "-", "3.",
            ])
            .prop_map(str::to_owned),
        ]
    }

    fn json_scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => json_string(),
            3 => json_number(),
            1 => proptest::sample::select(vec!["null", "true", "false", "nul", "[]", "{}", "[1]"])
                .prop_map(str::to_owned),
        ]
    }

    fn json_object(
        values: BoxedStrategy<String>,
        keys: BoxedStrategy<String>,
    ) -> impl Strategy<Value = String> {
        proptest::collection::vec((ws(), keys, ws(), ws(), values, ws()), 0..8).prop_map(|fields| {
            let body: Vec<String> = fields
                .into_iter()
                .map(|(a, k, b, c, v, d)| format!("{a}{k}{b}:{c}{v}{d}"))
                .collect();
            format!("{{{}}}", body.join(","))
        })
    }

    /// One field of a header: mostly a value of the field's type, sometimes anything.
    fn header_field() -> impl Strategy<Value = String> {
        let ext = json_object(
            prop_oneof![6 => "[a-zA-Z0-9]{0,6}".prop_map(|s| format!("\"{s}\"")), 3 => json_scalar()].boxed(),
            prop_oneof![6 => "[a-z]{1,3}".prop_map(|s| format!("\"{s}\"")), 1 => json_string()].boxed(),
        )
        .boxed();
        let lang = proptest::sample::select(vec![
            "\"JAVA\"", "\"RUST\"", "\"ZIG\"", "3", "-1", "99", "null",
        ])
        .prop_map(str::to_owned);
        let int = prop_oneof![6 => any::<i32>().prop_map(|v| v.to_string()), 1 => json_number()];
        let typed = prop_oneof![
            Just("code"),
            Just("flag"),
            Just("opaque"),
            Just("version"),
            Just("language"),
            Just("remark"),
            Just("extFields"),
            Just("serializeTypeCurrentRPC"),
            Just("x"),
        ]
        .prop_flat_map(move |k| {
            let v: BoxedStrategy<String> = match k {
                "language" => lang.clone().boxed(),
                "remark" => prop_oneof![3 => json_string(), 1 => Just("null".to_owned())].boxed(),
                "extFields" => prop_oneof![6 => ext.clone(), 1 => Just("null".to_owned())].boxed(),
                "serializeTypeCurrentRPC" | "x" => json_scalar().boxed(),
                _ => int.clone().boxed(),
            };
            (
                Just(format!("\"{k}\"")),
                prop_oneof![9 => v, 1 => json_scalar()],
            )
        });
        let any_field = (json_string(), json_scalar());
        (ws(), prop_oneof![9 => typed, 1 => any_field], ws(), ws())
            .prop_map(|(a, (k, v), b, c)| format!("{a}{k}{b}:{c}{v}"))
    }

    fn header_json() -> impl Strategy<Value = String> {
        let code = prop_oneof![9 => any::<i16>().prop_map(|c| format!("\"code\":{c}")), 1 => Just(String::new())];
        (
            ws(),
            code,
            proptest::collection::vec(header_field(), 0..7),
            any::<prop::sample::Index>(),
            ws(),
            proptest::sample::select(vec!["", "", "", "", "", "", "x", "}"]),
        )
            .prop_map(|(a, code, mut fields, at, b, tail)| {
                if !code.is_empty() {
                    let i = at.index(fields.len() + 1);
                    fields.insert(i, code);
                }
                format!("{a}{{{}}}{b}{tail}", fields.join(","))
            })
    }

    /// The headers Java (fastjson) and rocketmq-rust clients send take the fast path.
    #[test]
    fn client_headers_take_the_fast_path() {
        let java = r#"{"code":310,"extFields":{"a":"PG","b":"TopicTest","c":"TBW102","d":"4","e":"3","f":"0","g":"1717000000000","h":"0","i":"TAGS\u0001TagA\u0002WAIT\u0001true\u0002","j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}"#;
        let rust = r#"{"code":34,"language":"RUST","version":474,"opaque":5,"flag":0,"remark":null,"extFields":null,"serializeTypeCurrentRPC":"JSON"}"#;
        for h in [java, rust] {
            let fast = super::super::json_fast::decode(h.as_bytes()).expect("fast path");
            assert_eq!(fast, decode_serde(h.as_bytes()).unwrap());
        }
    }

    /// Keeps the agreement test honest: the generator must produce many headers the fast path
    /// takes (and many it defers), or agreement would hold vacuously.
    #[test]
    fn generated_headers_exercise_both_paths() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = header_json();
        let (mut fast, mut serde_ok, n) = (0, 0, 2000);
        for _ in 0..n {
            let h = strategy.new_tree(&mut runner).unwrap().current();
            fast += usize::from(super::super::json_fast::decode(h.as_bytes()).is_some());
            serde_ok += usize::from(decode_serde(h.as_bytes()).is_ok());
        }
        assert!(fast > n / 4, "fast path took {fast} of {n}");
        assert!(serde_ok > fast, "serde took {serde_ok}, fast {fast} of {n}");
        assert!(serde_ok < n, "no header was refused");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The fast path either defers (None) or decodes exactly what serde_json decodes; it
        /// never accepts a header serde refuses.
        #[test]
        fn fast_decode_agrees_with_serde(h in header_json()) {
            let serde = decode_serde(h.as_bytes());
            if let Some(fast) = super::super::json_fast::decode(h.as_bytes()) {
                let serde = serde.map_err(|e| TestCaseError::fail(format!("serde refused what the fast path took: {e} in {h}")))?;
                prop_assert_eq!(fast, serde, "{}", h);
            }
        }
    }

    proptest! {
        /// The hand-written encoder writes exactly serde_json's bytes, escapes and all.
        #[test]
        fn encode_matches_serde_json(
            ints in any::<(i32, i32, i32, i32)>(),
            language in 0u8..20,
            remark in proptest::option::of(prop_oneof![".{0,20}", "[\\x00-\\x7f]{0,20}"]),
            ext in proptest::collection::hash_map(
                prop_oneof![".{0,12}", "[\\x00-\\x7f]{0,12}"],
                prop_oneof![".{0,24}", "[\\x00-\\x7f]{0,24}", "[0-9A-F,]{0,400}"],
                0..8,
            ),
        ) {
            let mut c = command(ints, language, remark);
            c.ext_fields = ext.into_iter().collect();
            let mut dst = BytesMut::from(&b"prefix"[..]);
            encode(&c, &mut dst).unwrap();
            prop_assert_eq!(&dst[..6], &b"prefix"[..]);
            prop_assert_eq!(&dst[6..], &serde_reference(&c)[..]);
        }
    }
}
