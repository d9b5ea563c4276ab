//! The JSON header (PROTOCOL.md 1.3): fastjson output from Java, serde output from rocketmq-rust.
//!
//! Decode is by field name, order-free, unknown fields ignored; `remark`/`extFields` may be
//! null; `language` is an enum name (a number is tolerated); extFields values should be strings
//! but numbers/booleans are stringified and nulls dropped, as Java's map would hold them. Encode
//! writes fastjson's shape: fields sorted by name, null remark omitted, `extFields` always present.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::{RemotingCommand, SerializeType};
use crate::protocol::codes::{language_code, language_name, LANGUAGE_OTHER};
use crate::protocol::ProtocolError;

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
    ext_fields: Option<ExtFields>,
}

/// Field order is alphabetical because fastjson sorts, so our bytes look like Java's (and hit
/// rocketmq-rust's fast "Java layout" parser). `language` and `serializeTypeCurrentRPC` must be
/// present: rocketmq-rust treats both as required. `encode` writes these bytes by hand; this
/// serde form is the reference its tests compare against.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Serialize)]
struct JsonHeaderOut<'a> {
    code: i32,
    #[serde(rename = "extFields")]
    ext_fields: &'a super::ExtFieldMap,
    flag: i32,
    language: &'static str,
    opaque: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    remark: Option<&'a str>,
    #[serde(rename = "serializeTypeCurrentRPC")]
    serialize_type_current_rpc: &'static str,
    version: i32,
}

pub(super) fn decode(header: &[u8]) -> Result<RemotingCommand, ProtocolError> {
    // serde would also accept a JSON array for a struct; a header is always an object.
    if header.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ProtocolError::BadHeader(
            "JSON header is not an object".to_owned(),
        ));
    }
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

/// Writes the same bytes serde_json writes for [`JsonHeaderOut`], by hand: every response goes
/// through here, and serde_json's byte-at-a-time escaping of a batch's 32 message ids was ~3 %
/// of a shard's time under batch sends. Strings without a byte that needs escaping (control
/// characters, `"` and `\`; the usual case) are copied as they are; others go through
/// serde_json's escaper, so the output never differs.
pub(super) fn encode(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), ProtocolError> {
    let ext_len: usize = cmd
        .ext_fields
        .iter()
        .map(|(k, v)| k.len() + v.len() + 6)
        .sum();
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
    let needs_escape = s.bytes().fold(false, |acc, b| {
        acc | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if needs_escape {
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
                .filter(|n| *n < crate::protocol::codes::LANGUAGE_NAMES.len())
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

/// extFields read straight into the map: string values as is, numbers and booleans
/// stringified (what Java's `toString` would have sent), null values dropped.
struct ExtFields(super::ExtFieldMap);

impl<'de> Deserialize<'de> for ExtFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ExtFieldsVisitor)
    }
}

struct ExtFieldsVisitor;

impl<'de> Visitor<'de> for ExtFieldsVisitor {
    type Value = ExtFields;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of string values")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ExtFields, A::Error> {
        // JSON gives no size hint; 16 holds a send header (up to 14 fields) without rehashing.
        let hint = map.size_hint().unwrap_or(16).min(32);
        let mut out = super::ExtFieldMap::with_capacity_and_hasher(hint, Default::default());
        while let Some(key) = map.next_key::<String>()? {
            if let ExtValue(Some(v)) = map.next_value::<ExtValue>()? {
                out.insert(key, v);
            }
        }
        Ok(ExtFields(out))
    }
}

struct ExtValue(Option<String>);

impl<'de> Deserialize<'de> for ExtValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ExtValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, number, boolean or null")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(v)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ExtValue, E> {
                Ok(ExtValue(Some(v.to_string())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<ExtValue, E> {
                Ok(ExtValue(None))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::command::ExtFieldMap;

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
        c.ext_fields = ExtFieldMap::default();
        c.ext_fields
            .insert("msgId".into(), "7F00000100002A9F0000000000000000".into());
        let mut dst = BytesMut::new();
        encode(&c, &mut dst).unwrap();
        assert_eq!(
            &dst[..],
            &br#"{"code":0,"extFields":{"msgId":"7F00000100002A9F0000000000000000"},"flag":1,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":475}"#[..]
        );
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
