//! JSON entry points for bodies: a lenient reader and the strict and legacy writers.
//!
//! `from_json` reads what fastjson (the JSON library of RocketMQ's Java broker) reads, so a
//! body any client's Java broker accepts is accepted here too, for every body type at once.
//! It first tries serde_json as is; only if that fails does it take the slow path:
//!
//! - fastjson 1.x writes integer map keys unquoted (`{0:"10.0.0.1:10911"}`), which is not
//!   JSON: bare numeric keys are quoted (outside string literals, in key position only);
//! - the text is then read into a `serde_json::Value` and the body type is deserialized from
//!   that tree through [`Lenient`], which accepts what fastjson's typed fields accept: an enum
//!   as its Java name or its ordinal (index in the Java enum's declaration order, which the
//!   Rust enums keep), an integer or float inside a string (`"subVersion":"1796423541740"`,
//!   as the C++ client 2.1 writes it), a boolean as `"true"`/`"false"` or `1`/`0`, and a
//!   number or boolean where a string is expected.
//!
//! Unknown fields are ignored and missing ones take the type's defaults (the body structs'
//! `#[serde(default)]`). `to_fastjson_legacy` produces fastjson's legacy form exactly:
//! integer-typed keys unquoted, string keys quoted, so a topic named "123" stays quoted.

mod lenient;

use std::io;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};

use crate::ProtocolError;
use lenient::Lenient;

/// Parses a body as fastjson would (see the module doc): strict JSON first, then the lenient
/// reading of fastjson's forms.
pub fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ProtocolError> {
    let strict_err = match serde_json::from_slice(bytes) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let quoted = quote_numeric_keys(bytes);
    let tree: serde_json::Value = match &quoted {
        Some(fixed) => serde_json::from_slice(fixed).map_err(bad_body)?,
        None => serde_json::from_slice(bytes).map_err(|_| bad_body(strict_err))?,
    };
    T::deserialize(Lenient(&tree)).map_err(bad_body)
}

fn bad_body(e: serde_json::Error) -> ProtocolError {
    ProtocolError::BadBody(format!("JSON body: {e}"))
}

/// Strict JSON (quoted keys): what clients with version >= V4_9_4 get, and what we persist.
/// Panics only if `T`'s Serialize impl fails, which for the body types here cannot happen
/// (string or integer map keys only).
pub fn to_json<T: Serialize + ?Sized>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("body types serialize to JSON")
}

/// fastjson's default output: integer map keys unquoted. For old clients' routes and for
/// RocketMQ-compatible config files. Same panic contract as `to_json`.
pub fn to_fastjson_legacy<T: Serialize + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, LegacyFormatter::default());
    v.serialize(&mut ser).expect("body types serialize to JSON");
    out
}

/// Returns a copy of `src` with bare numeric object keys quoted, or None when there are none.
/// A token is a key when it follows `{` or `,` and is followed by `:` (whitespace allowed);
/// bytes inside string literals are never touched.
fn quote_numeric_keys(src: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    let mut last_significant = 0u8;
    let mut copied_to = 0usize;
    let mut i = 0usize;
    while i < src.len() {
        let c = src[i];
        if c == b'"' {
            i = skip_string(src, i);
            last_significant = b'"';
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if (c == b'-' || c.is_ascii_digit()) && matches!(last_significant, b'{' | b',') {
            let end = i + src[i..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b'-')
                .count();
            let after = end
                + src[end..]
                    .iter()
                    .take_while(|b| b.is_ascii_whitespace())
                    .count();
            if src.get(after) == Some(&b':') {
                let buf = out.get_or_insert_with(|| Vec::with_capacity(src.len() + 16));
                buf.extend_from_slice(&src[copied_to..i]);
                buf.push(b'"');
                buf.extend_from_slice(&src[i..end]);
                buf.push(b'"');
                copied_to = end;
            }
            last_significant = src[end - 1];
            i = end;
            continue;
        }
        last_significant = c;
        i += 1;
    }
    let mut buf = out?;
    buf.extend_from_slice(&src[copied_to..]);
    Some(buf)
}

/// Index just past the string literal starting at `start` (a `"`), honouring backslash
/// escapes; an unterminated string runs to the end (serde_json reports the error).
fn skip_string(src: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < src.len() {
        match src[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    src.len()
}

/// serde_json wraps integer map keys in `begin_string`/`end_string`; this formatter holds back
/// the opening quote of every key until it sees whether the key is a string (write the quote)
/// or an integer (drop both quotes).
#[derive(Default)]
struct LegacyFormatter {
    in_key: bool,
    quote_pending: bool,
    unquoted_key: bool,
}

impl LegacyFormatter {
    fn flush_quote<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.quote_pending {
            self.quote_pending = false;
            w.write_all(b"\"")?;
        }
        Ok(())
    }

    fn integer_key(&mut self) {
        if self.in_key && self.quote_pending {
            self.quote_pending = false;
            self.unquoted_key = true;
        }
    }
}

macro_rules! legacy_int {
    ($($name:ident: $t:ty),*) => {$(
        fn $name<W: ?Sized + io::Write>(&mut self, w: &mut W, v: $t) -> io::Result<()> {
            self.integer_key();
            CompactFormatter.$name(w, v)
        }
    )*};
}

impl Formatter for LegacyFormatter {
    legacy_int!(write_i8: i8, write_i16: i16, write_i32: i32, write_i64: i64, write_i128: i128,
        write_u8: u8, write_u16: u16, write_u32: u32, write_u64: u64, write_u128: u128);

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.in_key = true;
        if first {
            Ok(())
        } else {
            w.write_all(b",")
        }
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.in_key = false;
        Ok(())
    }

    fn begin_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.in_key {
            self.quote_pending = true;
            Ok(())
        } else {
            w.write_all(b"\"")
        }
    }

    fn end_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.in_key && self.unquoted_key {
            self.unquoted_key = false;
            return Ok(());
        }
        self.flush_quote(w)?; // an empty string key: both quotes still owed
        w.write_all(b"\"")
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        s: &str,
    ) -> io::Result<()> {
        self.flush_quote(w)?;
        w.write_all(s.as_bytes())
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        e: CharEscape,
    ) -> io::Result<()> {
        self.flush_quote(w)?;
        CompactFormatter.write_char_escape(w, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys are quoted only in key position and never inside strings or arrays.
    #[test]
    fn quotes_only_bare_numeric_keys() {
        let src = br#"{0:"a", -1 :"b","s":"{1:x}, 2:y","arr":[1, 2,3],"n":{10:{20:5}}}"#;
        let fixed = quote_numeric_keys(src).unwrap();
        assert_eq!(
            std::str::from_utf8(&fixed).unwrap(),
            r#"{"0":"a", "-1" :"b","s":"{1:x}, 2:y","arr":[1, 2,3],"n":{"10":{"20":5}}}"#
        );
        assert!(quote_numeric_keys(br#"{"0":"a","s":"\"{1:2}"}"#).is_none());
        assert!(quote_numeric_keys(br#"[1,2,{"a":3}]"#).is_none());
    }

    /// Escaped quotes inside strings do not end the string early.
    #[test]
    fn escaped_quotes_inside_strings() {
        let src = br#"{"k":"a\",1:b",2:"c"}"#;
        let fixed = quote_numeric_keys(src).unwrap();
        assert_eq!(
            std::str::from_utf8(&fixed).unwrap(),
            r#"{"k":"a\",1:b","2":"c"}"#
        );
    }
}
