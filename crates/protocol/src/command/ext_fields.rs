//! `ExtFields`: a command's extFields, a string map kept in one buffer.
//!
//! Every request's header is decoded into one of these, so it is built for that: all keys and
//! values are appended to one `String` and found again through their spans, which costs two
//! allocations per command instead of two per field plus a hash table (the map's inserts,
//! rehashes and frees were ~8 % of a shard's time under single sends). Lookups scan the spans:
//! a header has a handful to a few dozen fields. Semantics are a map's: one value per key, the
//! last one written wins, equality ignores order. Iteration is in insertion order.

use std::fmt;

/// Past this many fields, duplicates are found with a hash set instead of pairwise compares.
const PAIRWISE_DEDUP_MAX: usize = 32;

#[derive(Clone, Default)]
pub struct ExtFields {
    text: String,
    spans: Vec<Span>,
}

/// One field: `text[key..value]` is the key, `text[value..end]` the value. `tag` is a cheap
/// fingerprint of the key (length, first and last byte) compared before the bytes: header keys
/// are short and mostly differ there, so a lookup rarely calls memcmp.
#[derive(Clone, Copy)]
struct Span {
    key: u32,
    value: u32,
    end: u32,
    tag: u32,
}

fn tag_of(key: &[u8]) -> u32 {
    match (key.first(), key.last()) {
        (Some(&f), Some(&l)) => ((key.len() as u32) << 16) | ((f as u32) << 8) | l as u32,
        _ => 0,
    }
}

impl ExtFields {
    /// Room for `fields` fields of `bytes` bytes of keys and values in all.
    pub fn with_capacity(fields: usize, bytes: usize) -> Self {
        ExtFields {
            text: String::with_capacity(bytes),
            spans: Vec::with_capacity(fields),
        }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key).map(|i| self.value_at(i))
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key` to `value`, replacing an earlier value (whose bytes stay in the buffer until
    /// the command is dropped).
    pub fn insert(&mut self, key: &str, value: &str) {
        match self.position(key) {
            Some(i) => self.spans[i] = self.append(key, value),
            None => self.push(key, value),
        }
    }

    /// Removes `key`; returns its value if it was there.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.position(key)?;
        let v = self.value_at(i).to_owned();
        self.spans.remove(i);
        Some(v)
    }

    /// Each (key, value), in insertion order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            text: &self.text,
            spans: self.spans.iter(),
        }
    }

    /// Appends a field without looking for an earlier one: decoders push every field, then
    /// call [`ExtFields::dedup`] once.
    pub(super) fn push(&mut self, key: &str, value: &str) {
        let span = self.append(key, value);
        self.spans.push(span);
    }

    /// For decoders that write a field's text themselves: the buffer to append the key and
    /// then the value to. `text_mark` before, then `commit_field` (with the key's end) or
    /// `rollback_field` (a field to drop).
    pub(super) fn text_mut(&mut self) -> &mut String {
        &mut self.text
    }

    pub(super) fn text_mark(&self) -> usize {
        self.text.len()
    }

    pub(super) fn commit_field(&mut self, start: usize, key_end: usize) {
        let tag = tag_of(&self.text.as_bytes()[start..key_end]);
        self.spans.push(Span {
            key: start as u32,
            value: key_end as u32,
            end: self.text.len() as u32,
            tag,
        });
    }

    pub(super) fn rollback_field(&mut self, start: usize) {
        self.text.truncate(start);
    }

    /// Offsets are u32: a command's fields are far below 4 GiB (a header's length is 24 bits).
    fn append(&mut self, key: &str, value: &str) -> Span {
        let k = self.text.len();
        self.text.push_str(key);
        let v = self.text.len();
        self.text.push_str(value);
        Span {
            key: k as u32,
            value: v as u32,
            end: self.text.len() as u32,
            tag: tag_of(key.as_bytes()),
        }
    }

    /// Keeps only the last field of each key (a JSON object or a binary header may repeat a
    /// key; Java's map keeps the last). Linear in the field count for long headers.
    pub(super) fn dedup(&mut self) {
        let n = self.spans.len();
        if n < 2 {
            return;
        }
        if n <= PAIRWISE_DEDUP_MAX {
            // Bit i set: field i is shadowed by a later one.
            let mut shadowed = 0u64;
            for i in 0..n {
                let a = self.spans[i];
                if self.spans[i + 1..]
                    .iter()
                    .any(|b| b.tag == a.tag && self.key_of(b) == self.key_of(&a))
                {
                    shadowed |= 1 << i;
                }
            }
            if shadowed != 0 {
                let mut i = 0;
                self.spans.retain(|_| {
                    i += 1;
                    shadowed & (1 << (i - 1)) == 0
                });
            }
        } else {
            let mut keep = vec![true; n];
            {
                let mut seen = hashbrown::HashSet::with_capacity(n);
                for i in (0..n).rev() {
                    keep[i] = seen.insert(self.key_of(&self.spans[i]));
                }
            }
            let mut it = keep.into_iter();
            self.spans.retain(|_| it.next().unwrap_or(true));
        }
    }

    /// The number of bytes the keys and values take (for sizing an encode).
    pub fn text_len(&self) -> usize {
        self.spans.iter().map(|s| (s.end - s.key) as usize).sum()
    }

    fn position(&self, key: &str) -> Option<usize> {
        let tag = tag_of(key.as_bytes());
        self.spans
            .iter()
            .rposition(|s| s.tag == tag && self.key_of(s) == key)
    }

    fn key_of(&self, s: &Span) -> &str {
        &self.text[s.key as usize..s.value as usize]
    }

    fn value_at(&self, i: usize) -> &str {
        let s = self.spans[i];
        &self.text[s.value as usize..s.end as usize]
    }

    /// The `i`th field's (key, value), in insertion order (`i < len()`).
    pub fn field(&self, i: usize) -> (&str, &str) {
        let s = self.spans[i];
        (
            &self.text[s.key as usize..s.value as usize],
            &self.text[s.value as usize..s.end as usize],
        )
    }
}

impl PartialEq for ExtFields {
    /// As maps: the same keys with the same values, in any order.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Eq for ExtFields {}

impl fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut out = ExtFields::default();
        for (k, v) in iter {
            out.push(k.as_ref(), v.as_ref());
        }
        out.dedup();
        out
    }
}

impl<'a> IntoIterator for &'a ExtFields {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// The fields of an [`ExtFields`], in insertion order.
pub struct Iter<'a> {
    text: &'a str,
    spans: std::slice::Iter<'a, Span>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);
    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        let s = self.spans.next()?;
        Some((
            &self.text[s.key as usize..s.value as usize],
            &self.text[s.value as usize..s.end as usize],
        ))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

impl serde::Serialize for ExtFields {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(String, String),
        Remove(String),
    }

    fn arb_key() -> impl Strategy<Value = String> {
        // Few distinct keys, so inserts replace and removes hit.
        prop_oneof!["[a-d]", "[a-z]{0,3}", ".{0,6}"]
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (arb_key(), ".{0,8}").prop_map(|(k, v)| Op::Insert(k, v)),
            1 => arb_key().prop_map(Op::Remove),
        ]
    }

    fn as_map(e: &ExtFields) -> HashMap<String, String> {
        e.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    proptest! {
        /// Any sequence of inserts and removes leaves the same contents as a HashMap.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec(arb_op(), 0..60)) {
            let mut e = ExtFields::default();
            let mut m = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        e.insert(&k, &v);
                        m.insert(k, v);
                    }
                    Op::Remove(k) => prop_assert_eq!(e.remove(&k), m.remove(&k)),
                }
            }
            prop_assert_eq!(e.len(), m.len());
            prop_assert_eq!(e.text_len(), m.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>());
            for (k, v) in &m {
                prop_assert_eq!(e.get(k), Some(v.as_str()));
                prop_assert!(e.contains_key(k));
            }
            prop_assert_eq!(as_map(&e), m);
        }

        /// Collecting pairs with repeated keys keeps each key's last value, on both sides of
        /// the pairwise/hash-set threshold; equality ignores order.
        #[test]
        fn collect_keeps_the_last_value(
            pairs in proptest::collection::vec((arb_key(), ".{0,4}"), 0..80),
        ) {
            let e: ExtFields = pairs.iter().cloned().collect();
            let m: HashMap<String, String> = pairs.iter().cloned().collect();
            prop_assert_eq!(as_map(&e), m);
            prop_assert_eq!(e.len(), as_map(&e).len());
            let reversed: ExtFields = e.iter().collect::<Vec<_>>().into_iter().rev().collect();
            prop_assert_eq!(&reversed, &e);
        }
    }

    #[test]
    fn equality_compares_values() {
        let a: ExtFields = [("k", "1"), ("j", "2")].into_iter().collect();
        let b: ExtFields = [("j", "2"), ("k", "1")].into_iter().collect();
        let c: ExtFields = [("j", "2"), ("k", "3")].into_iter().collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, ExtFields::default());
        assert_eq!(format!("{b:?}"), r#"{"j": "2", "k": "1"}"#);
    }
}
