//! The message properties string: `key 0x01 value 0x02` repeated; well-known keys are Java's
//! `MessageConst`.
//!
//! Parse follows Java's `MessageDecoder.string2messageProperties` exactly: split on 0x02, keep a
//! segment only if its first 0x01 has a non-empty key before it and a non-empty value after it,
//! tolerate a missing trailing 0x02, and let a later duplicate key win (HashMap::put). Encode
//! terminates every pair with 0x02. Called by the send path (TAGS, KEYS, UNIQ_KEY, DELAY, ...),
//! retry/transaction paths, and the load generator.

/// Separates a key from its value.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Terminates every pair, the last one included.
pub const PROPERTY_SEPARATOR: char = '\u{2}';

/// Well-known property keys (`MessageConst`).
pub mod keys {
    pub const TAGS: &str = "TAGS";
    pub const KEYS: &str = "KEYS";
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    pub const WAIT: &str = "WAIT";
    pub const DELAY: &str = "DELAY";
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    pub const REAL_QID: &str = "REAL_QID";
    pub const TRAN_MSG: &str = "TRAN_MSG";
    pub const PGROUP: &str = "PGROUP";
    pub const TRANSACTION_ID: &str = "__transactionId__";
    pub const TRAN_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    pub const CONSUME_START_TIME: &str = "CONSUME_START_TIME";
    pub const CLUSTER: &str = "CLUSTER";
    pub const MSG_REGION: &str = "MSG_REGION";
    pub const TRACE_ON: &str = "TRACE_ON";
    pub const INSTANCE_ID: &str = "INSTANCE_ID";
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    pub const TTL: &str = "TTL";
    pub const ARRIVE_TIME: &str = "ARRIVE_TIME";
    pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
    pub const MSG_TYPE: &str = "MSG_TYPE";
    pub const SHARDING_KEY: &str = "__SHARDINGKEY";
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    pub const TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
    pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
    pub const TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";
    pub const TIMER_DELAY_LEVEL: &str = "TIMER_DELAY_LEVEL";
    pub const INNER_NUM: &str = "INNER_NUM";
    pub const INNER_BASE: &str = "INNER_BASE";
    pub const CRC32: &str = "__CRC32#";
    pub const DLQ_ORIGIN_TOPIC: &str = "DLQ_ORIGIN_TOPIC";
    pub const DLQ_ORIGIN_MESSAGE_ID: &str = "DLQ_ORIGIN_MESSAGE_ID";
    /// Prefix of keys that are never persisted.
    pub const TRANSIENT_PREFIX: &str = "__RMQ.TRANSIENT.";
    /// Separator of business keys inside `KEYS`.
    pub const KEY_SEPARATOR: &str = " ";
}

/// Iterates the pairs Java would accept, in string order (duplicates included).
pub fn pairs(s: &str) -> impl Iterator<Item = (&str, &str)> {
    accepted_pairs(s)
}

fn accepted_pairs(s: &str) -> impl Iterator<Item = (&str, &str)> {
    s.split(PROPERTY_SEPARATOR).filter_map(|segment| {
        // Java looks for the first 0x01 and needs key and value to be non-empty.
        let (k, v) = segment.split_once(NAME_VALUE_SEPARATOR)?;
        (!k.is_empty() && !v.is_empty()).then_some((k, v))
    })
}

/// Parses a properties string with Java's acceptance rules; a later duplicate key replaces the
/// earlier value (at the earlier position).
pub fn parse(s: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    // Duplicate keys are rare and messages carry a handful of pairs: a linear search is
    // cheapest there. Past `INDEX_FROM` pairs an index by key keeps a hostile 32 KiB string of
    // tiny pairs linear instead of quadratic.
    const INDEX_FROM: usize = 16;
    let mut index: Option<std::collections::HashMap<&str, usize>> = None;
    for (k, v) in accepted_pairs(s) {
        let found = match &index {
            Some(ix) => ix.get(k).copied(),
            None => out.iter().position(|(ek, _)| ek == k),
        };
        match found {
            Some(i) => out[i].1 = v.to_owned(),
            None => {
                if let Some(ix) = index.as_mut() {
                    ix.insert(k, out.len());
                }
                out.push((k.to_owned(), v.to_owned()));
                if index.is_none() && out.len() >= INDEX_FROM {
                    // Keys borrowed from `s`: find each stored key's slice in the input again.
                    let mut ix = std::collections::HashMap::with_capacity(out.len() * 2);
                    for (kk, _) in accepted_pairs(s) {
                        if let Some(pos) = out.iter().position(|(ek, _)| ek == kk) {
                            ix.entry(kk).or_insert(pos);
                        }
                        if ix.len() == out.len() {
                            break;
                        }
                    }
                    index = Some(ix);
                }
            }
        }
    }
    out
}

/// The value Java's parsed map would hold for `key` (the last accepted occurrence), without
/// allocating.
pub fn get<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    accepted_pairs(s)
        .filter(|(k, _)| *k == key)
        .last()
        .map(|(_, v)| v)
}

/// Encodes pairs as `k 0x01 v 0x02` each (the last one terminated too); empty input -> "".
pub fn encode<K: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (K, V)>) -> String {
    let mut s = String::new();
    for (k, v) in pairs {
        append(&mut s, k.as_ref(), v.as_ref());
    }
    s
}

/// Appends one pair to an encoded string (the broker adds CLUSTER, UNIQ_KEY, REAL_TOPIC, ...).
/// A string missing its trailing 0x02 gets one first so the new pair stays separate.
pub fn append(s: &mut String, key: &str, value: &str) {
    if !s.is_empty() && !s.ends_with(PROPERTY_SEPARATOR) {
        s.push(PROPERTY_SEPARATOR);
    }
    s.push_str(key);
    s.push(NAME_VALUE_SEPARATOR);
    s.push_str(value);
    s.push(PROPERTY_SEPARATOR);
}

/// Re-encodes `s` without the given keys (e.g. REAL_TOPIC/REAL_QID/TRAN_MSG on commit),
/// dropping whatever Java's parser would drop.
pub fn remove_keys(s: &str, remove: &[&str]) -> String {
    encode(
        parse(s)
            .into_iter()
            .filter(|(k, _)| !remove.contains(&k.as_str())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encode writes a trailing 0x02 after every pair and parse reads it back.
    #[test]
    fn encode_and_parse_round_trip() {
        let s = encode([("TAGS", "TagA"), ("KEYS", "k1 k2")]);
        assert_eq!(s, "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}");
        assert_eq!(
            parse(&s),
            vec![
                ("TAGS".to_string(), "TagA".to_string()),
                ("KEYS".to_string(), "k1 k2".to_string())
            ]
        );
        assert_eq!(encode(Vec::<(String, String)>::new()), "");
        assert!(parse("").is_empty());
    }

    /// Java's rules: empty values and empty keys dropped, segments without 0x01 dropped,
    /// missing trailing separator tolerated, value may contain 0x01, later duplicate wins.
    #[test]
    fn java_acceptance_edge_cases() {
        let s = "A\u{1}\u{2}\u{1}v\u{2}junk\u{2}\u{2}B\u{1}x\u{1}y\u{2}C\u{1}1\u{2}C\u{1}2\u{2}D\u{1}last";
        let p = parse(s);
        assert_eq!(
            p,
            vec![
                ("B".to_string(), "x\u{1}y".to_string()),
                ("C".to_string(), "2".to_string()),
                ("D".to_string(), "last".to_string()),
            ]
        );
        assert_eq!(get(s, "A"), None, "empty value is dropped");
        assert_eq!(get(s, "C"), Some("2"), "later duplicate wins");
        assert_eq!(get(s, "D"), Some("last"), "no trailing 0x02 needed");
        assert_eq!(get(s, "B"), Some("x\u{1}y"));
        assert_eq!(get(s, "junk"), None);
    }

    /// Append repairs a missing trailing separator; remove_keys drops exactly the named keys.
    #[test]
    fn append_and_remove() {
        let mut s = "A\u{1}1".to_string();
        append(&mut s, keys::CLUSTER, "DefaultCluster");
        assert_eq!(s, "A\u{1}1\u{2}CLUSTER\u{1}DefaultCluster\u{2}");
        let mut e = String::new();
        append(&mut e, "K", "V");
        assert_eq!(e, "K\u{1}V\u{2}");
        let r = remove_keys(&s, &[keys::CLUSTER]);
        assert_eq!(r, "A\u{1}1\u{2}");
    }
}
