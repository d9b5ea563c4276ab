//! Java's `String.hashCode()` and the ConsumeQueue tags code derived from it.
//!
//! RocketMQ stores `tags.hashCode()` (sign-extended into the CQ unit's i64) and clients send the
//! same hashes in `SubscriptionData.codeSet`, so broker-side tag filtering only works if we hash
//! exactly like Java: over UTF-16 code units, `h = 31*h + c`, wrapping i32. Called by the send
//! path (tags code of a new record) and the pull path (subscription code sets).

/// `String.hashCode()`: iterates UTF-16 code units (a char outside the BMP counts as its two
/// surrogates), wrapping on overflow.
pub fn java_string_hash(s: &str) -> i32 {
    // ASCII (topics, tags, keys, UNIQ_KEY hex) is one UTF-16 unit per byte.
    if let Some(h) = ascii_hash(s.as_bytes()) {
        return h;
    }
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// `31 * h + b` over ASCII bytes, four bytes per step: `h * 31^4 + b0 * 31^3 + b1 * 31^2 +
/// b2 * 31 + b3` is the same value (wrapping arithmetic is a ring), but its four products do
/// not wait on each other, where the byte-at-a-time fold is one multiply-add chain. The writer
/// hashes `topic#key` of every indexed message. `None` if a byte is not ASCII; the ASCII check
/// rides along instead of taking a pass of its own.
fn ascii_hash(b: &[u8]) -> Option<i32> {
    const P2: i32 = 31 * 31;
    const P3: i32 = P2 * 31;
    const P4: i32 = P3 * 31;
    let mut h = 0i32;
    let mut high = 0u8;
    let mut quads = b.chunks_exact(4);
    for q in &mut quads {
        high |= q[0] | q[1] | q[2] | q[3];
        h = h
            .wrapping_mul(P4)
            .wrapping_add((q[0] as i32) * P3)
            .wrapping_add((q[1] as i32) * P2)
            .wrapping_add((q[2] as i32) * 31)
            .wrapping_add(q[3] as i32);
    }
    for &x in quads.remainder() {
        high |= x;
        h = h.wrapping_mul(31).wrapping_add(x as i32);
    }
    (high < 0x80).then_some(h)
}

/// The CQ tags code of a message: 0 without a tag or with an empty one, else the Java hash
/// sign-extended (Java's `MessageExtBrokerInner.tagsString2tagsCode`).
pub fn tags_code(tag: Option<&str>) -> i64 {
    match tag {
        None | Some("") => 0,
        Some(t) => java_string_hash(t) as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known Java values, including one computed by hand over UTF-16 units.
    #[test]
    fn matches_java_string_hash_code() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("TagA"), 2598919);
        // "Hello".hashCode() = 69609650 (textbook value).
        assert_eq!(java_string_hash("Hello"), 69609650);
        // Overflow wraps: "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // "é" is U+00E9 = 233 (one unit; its UTF-8 is 2 bytes): 233. "aé" = 97*31 + 233 = 3240.
        assert_eq!(java_string_hash("é"), 233);
        assert_eq!(java_string_hash("aé"), 3240);
        // "标签": U+6807 = 26631, U+7B7E = 31614 -> 26631*31 + 31614 = 857175.
        assert_eq!(java_string_hash("标签"), 857175);
        // U+1F600 is the surrogate pair D83D DE00: 55357*31 + 56832 = 1772899.
        assert_eq!(java_string_hash("\u{1F600}"), 1772899);
    }

    /// The four-at-a-time hash equals the byte-at-a-time fold for every length and every
    /// ASCII string, and gives way to the UTF-16 path on the first non-ASCII byte.
    #[test]
    fn ascii_hash_matches_the_plain_fold() {
        use proptest::prelude::*;
        let fold = |s: &str| {
            s.encode_utf16()
                .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32))
        };
        proptest!(|(s in "[ -~]{0,80}")| {
            prop_assert_eq!(ascii_hash(s.as_bytes()), Some(fold(&s)));
            prop_assert_eq!(java_string_hash(&s), fold(&s));
        });
        proptest!(|(s in "\\PC{0,40}")| {
            prop_assert_eq!(java_string_hash(&s), fold(&s));
        });
        assert_eq!(ascii_hash("abcé".as_bytes()), None);
        assert_eq!(ascii_hash("abcdefgh\u{80}".as_bytes()), None);
    }

    /// Tags codes: absent/empty are 0; negative hashes stay negative in the i64.
    #[test]
    fn tags_code_sign_extends() {
        assert_eq!(tags_code(None), 0);
        assert_eq!(tags_code(Some("")), 0);
        assert_eq!(tags_code(Some("TagA")), 2598919);
        assert_eq!(tags_code(Some("polygenelubricants")), i32::MIN as i64);
    }
}
