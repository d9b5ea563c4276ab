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
    if s.is_ascii() {
        return s
            .bytes()
            .fold(0i32, |h, b| h.wrapping_mul(31).wrapping_add(b as i32));
    }
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
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

    /// Tags codes: absent/empty are 0; negative hashes stay negative in the i64.
    #[test]
    fn tags_code_sign_extends() {
        assert_eq!(tags_code(None), 0);
        assert_eq!(tags_code(Some("")), 0);
        assert_eq!(tags_code(Some("TagA")), 2598919);
        assert_eq!(tags_code(Some("polygenelubricants")), i32::MIN as i64);
    }
}
