//! A fast path for decoding the JSON header: one pass over the bytes for the shape clients
//! actually send (a flat object; integer code/flag/opaque/version; a language name; a remark;
//! extFields of string, integer, boolean or null values). serde_json re-validated UTF-8 per
//! string and dispatched through its visitor machinery; under single sends that was most of
//! the codec's ~2.7 us per request.
//!
//! Anything outside that shape (floats, nested values in unknown fields, a repeated known
//! field, surrogate escapes, malformed input of any kind) returns `None`, and the caller
//! decodes with serde_json, which gives the result or the error. So this path never decides
//! an error and never differs from serde's result: a proptest checks the two agree.

use super::{ExtFields, RemotingCommand, SerializeType};
use crate::codes::{language_code, LANGUAGE_NAMES, LANGUAGE_OTHER};

/// The command `header` holds, or `None` to defer to serde_json.
pub(super) fn decode(header: &[u8]) -> Option<RemotingCommand> {
    // Validating once makes every slice between ASCII delimiters a valid &str.
    let text = std::str::from_utf8(header).ok()?;
    let mut p = Parser { text, pos: 0 };
    let mut cmd = RemotingCommand {
        code: 0,
        language: 0,
        version: 0,
        opaque: 0,
        flag: 0,
        remark: None,
        ext_fields: ExtFields::default(),
        body: bytes::Bytes::new(),
        serialize_type: SerializeType::Json,
    };
    // Bit per known field: serde refuses a repeated one, so this path leaves it to serde.
    let mut seen = 0u8;
    let mut once = |bit: u8| {
        let dup = seen & bit != 0;
        seen |= bit;
        (!dup).then_some(())
    };
    p.ws();
    p.eat(b'{')?;
    p.ws();
    if !p.try_eat(b'}') {
        loop {
            // A key with an escape in it is left to serde (no client sends one).
            let key = p.plain_string()?;
            p.ws();
            p.eat(b':')?;
            p.ws();
            match key {
                "code" | "flag" | "opaque" | "version" => {
                    let (bit, slot) = match key {
                        "code" => (1, &mut cmd.code),
                        "flag" => (2, &mut cmd.flag),
                        "opaque" => (4, &mut cmd.opaque),
                        _ => (8, &mut cmd.version),
                    };
                    once(bit)?;
                    *slot = p.int()?.parse().ok()?;
                }
                "language" => {
                    once(16)?;
                    cmd.language = p.language()?;
                }
                "remark" => {
                    once(32)?;
                    if !p.try_null() {
                        let mut r = String::new();
                        p.string_into(&mut r)?;
                        cmd.remark = Some(r);
                    }
                }
                "extFields" => {
                    once(64)?;
                    if !p.try_null() {
                        cmd.ext_fields = p.ext_fields()?;
                    }
                }
                _ => p.skip_scalar()?,
            }
            p.ws();
            if p.try_eat(b',') {
                p.ws();
                continue;
            }
            p.eat(b'}')?;
            break;
        }
    }
    p.ws();
    // serde requires `code`; trailing bytes are serde's error to give.
    (seen & 1 != 0 && p.pos == header.len()).then_some(cmd)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.try_eat(b).then_some(())
    }

    fn try_eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.pos += usize::from(hit);
        hit
    }

    fn try_literal(&mut self, lit: &str) -> bool {
        let hit = self.text.as_bytes()[self.pos..].starts_with(lit.as_bytes());
        if hit {
            self.pos += lit.len();
        }
        hit
    }

    fn try_null(&mut self) -> bool {
        self.try_literal("null")
    }

    /// A JSON string without escapes or control characters, as the slice between its quotes.
    /// `None`, with nothing consumed, for any other string or for no string at all.
    fn plain_string(&mut self) -> Option<&'a str> {
        let start = self.pos;
        let text: &'a str = self.text;
        let rest = text.as_bytes().get(start..)?.strip_prefix(b"\"")?;
        let end = memchr::memchr2(b'"', b'\\', rest)?;
        let plain = rest[end] == b'"' && !rest[..end].iter().any(|&b| b < 0x20);
        plain.then(|| {
            self.pos = start + 1 + end + 1;
            &text[start + 1..start + 1 + end]
        })
    }

    /// A JSON string, unescaped and appended to `out`.
    fn string_into(&mut self, out: &mut String) -> Option<()> {
        self.eat(b'"')?;
        let bytes = self.text.as_bytes();
        loop {
            let rest = &bytes[self.pos..];
            let end = memchr::memchr2(b'"', b'\\', rest)?;
            // A raw control character before the end is serde's error; the check folds over the
            // run without branching so it vectorizes.
            let ctrl = rest[..end]
                .iter()
                .fold(0u8, |acc, &b| acc | u8::from(b < 0x20));
            let run = if ctrl == 0 {
                end
            } else {
                rest.iter().position(|&b| b < 0x20)?
            };
            out.push_str(&self.text[self.pos..self.pos + run]);
            self.pos += run;
            match bytes[self.pos] {
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                b'\\' => {
                    let esc = *bytes.get(self.pos + 1)?;
                    self.pos += 2;
                    let c = match esc {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hex = self.text.get(self.pos..self.pos + 4)?;
                            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                                return None;
                            }
                            self.pos += 4;
                            // Surrogates (pairs or lone) are left to serde.
                            char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
                        }
                        _ => return None,
                    };
                    out.push(c);
                }
                _ => return None, // a raw control character: serde's error
            }
        }
    }

    /// An integer as written: `-?(0|[1-9][0-9]*)` not followed by a fraction or exponent
    /// (those, and "-0", are left to serde). Its text is also its canonical decimal form.
    fn int(&mut self) -> Option<&str> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        self.try_eat(b'-');
        let digits = bytes[self.pos..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let first = *bytes.get(self.pos)?;
        if digits == 0 || (first == b'0' && (digits > 1 || self.pos > start)) {
            return None;
        }
        self.pos += digits;
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(&self.text[start..self.pos])
    }

    /// `language`: a name, a number (an index into the table; other numbers are OTHER), or
    /// null (JAVA), as `json_header::de_language` reads it.
    fn language(&mut self) -> Option<u8> {
        match self.peek()? {
            b'"' => {
                let mut name = String::new();
                self.string_into(&mut name)?;
                Some(language_code(&name))
            }
            b'n' => self.try_null().then_some(0),
            _ => {
                let n = self.int()?;
                if n.starts_with('-') {
                    // Must still be an i64 for serde; then it is OTHER.
                    n.parse::<i64>().ok()?;
                    return Some(LANGUAGE_OTHER);
                }
                let v: u64 = n.parse().ok()?;
                Some(
                    usize::try_from(v)
                        .ok()
                        .filter(|i| *i < LANGUAGE_NAMES.len())
                        .map_or(LANGUAGE_OTHER, |i| i as u8),
                )
            }
        }
    }

    /// extFields: an object of string, integer, boolean or null values (nulls dropped).
    fn ext_fields(&mut self) -> Option<ExtFields> {
        let mut out = ExtFields::with_capacity(16, 256);
        self.eat(b'{')?;
        self.ws();
        if self.try_eat(b'}') {
            return Some(out);
        }
        loop {
            let start = out.text_mark();
            self.string_into(out.text_mut())?;
            let key_end = out.text_mark();
            self.ws();
            self.eat(b':')?;
            self.ws();
            let keep = match self.peek()? {
                b'"' => {
                    self.string_into(out.text_mut())?;
                    true
                }
                b'n' => {
                    self.try_null().then_some(())?;
                    false
                }
                b't' | b'f' => {
                    let v = if self.try_literal("true") {
                        "true"
                    } else if self.try_literal("false") {
                        "false"
                    } else {
                        return None;
                    };
                    out.text_mut().push_str(v);
                    true
                }
                _ => {
                    let n = self.int()?;
                    // serde reads it as i64 or u64; past both it is a float: serde's path.
                    if n.starts_with('-') {
                        n.parse::<i64>().ok()?;
                    } else {
                        n.parse::<u64>().ok()?;
                    }
                    out.text_mut().push_str(n);
                    true
                }
            };
            if keep {
                out.commit_field(start, key_end);
            } else {
                out.rollback_field(start);
            }
            self.ws();
            if self.try_eat(b',') {
                self.ws();
                continue;
            }
            self.eat(b'}')?;
            out.dedup();
            return Some(out);
        }
    }

    /// An unknown field's value, if it is a string, integer, boolean or null.
    fn skip_scalar(&mut self) -> Option<()> {
        match self.peek()? {
            // Allocates only for a string with escapes.
            b'"' => self
                .plain_string()
                .map(|_| ())
                .or_else(|| self.string_into(&mut String::new())),
            b'n' => self.try_null().then_some(()),
            b't' => self.try_literal("true").then_some(()),
            b'f' => self.try_literal("false").then_some(()),
            _ => self.int().map(|_| ()),
        }
    }
}
