//! Topic attributes (RocketMQ 5's `message.type`, `queue.type`, `cleanup.policy`): the
//! `attributes` field of UPDATE_AND_CREATE_TOPIC, `+key=value` to set and `-key` to remove,
//! comma-separated (Java's `AttributeParser`), applied to a topic's current attributes the way
//! Java's `AttributeUtil.alterCurrentAttributes` applies them. Pure; called by `broker::admin`
//! on shard 0, which owns the topic table.

use std::collections::BTreeMap;

use crate::error::BrokerError;

/// The attributes Java's `TopicAttributes.ALL` knows, with their allowed values.
const SUPPORTED: [(&str, &[&str]); 3] = [
    (
        "message.type",
        &[
            "UNSPECIFIED",
            "NORMAL",
            "FIFO",
            "DELAY",
            "TRANSACTION",
            "MIXED",
        ],
    ),
    ("queue.type", &["BatchCQ", "SimpleCQ"]),
    ("cleanup.policy", &["DELETE", "COMPACTION"]),
];

fn bad(msg: String) -> BrokerError {
    BrokerError::InvalidParameter(msg)
}

/// `+k=v,-k2` into (key with its sign, value); a repeated key is refused.
fn parse(modification: &str) -> Result<Vec<(String, String)>, BrokerError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for kv in modification.split(',').filter(|s| !s.is_empty()) {
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) if k.starts_with('+') => (k, v),
            Some((k, _)) => return Err(bad(format!("add/alter attribute format is wrong: {k}"))),
            None if kv.starts_with('-') => (kv, ""),
            None => return Err(bad(format!("delete attribute format is wrong: {kv}"))),
        };
        if out.iter().any(|(k, _)| k == key) {
            return Err(bad(format!("key duplication: {key}")));
        }
        out.push((key.to_string(), value.to_string()));
    }
    Ok(out)
}

/// The topic's attributes after `modification` (absent or empty: unchanged). `creating`: the
/// topic does not exist yet, so nothing can be removed.
pub fn alter(
    current: &BTreeMap<String, String>,
    modification: Option<&str>,
    creating: bool,
) -> Result<BTreeMap<String, String>, BrokerError> {
    let mut out = if creating {
        BTreeMap::new()
    } else {
        current.clone()
    };
    for (signed, value) in parse(modification.unwrap_or(""))? {
        let (sign, key) = signed.split_at(1);
        let Some((_, allowed)) = SUPPORTED.iter().find(|(k, _)| *k == key) else {
            return Err(bad(format!("unsupported key: {key}")));
        };
        if sign == "-" {
            if creating || out.remove(key).is_none() {
                return Err(bad(format!("attempt to delete a nonexistent key: {key}")));
            }
            continue;
        }
        if !allowed.contains(&value.as_str()) {
            return Err(bad(format!("value is not in set: {key}={value}")));
        }
        out.insert(key.to_string(), value);
    }
    if out.get("message.type").map(String::as_str) == Some("MIXED") {
        // Java refuses it unless `enableMixedMessageType`, which ringmq does not implement.
        return Err(bad("MIXED message type is not supported.".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Creating sets the `+` keys without their sign; updating keeps, changes and removes
    /// keys; malformed, unknown, duplicated and MIXED modifications are refused.
    #[test]
    fn alter_like_java() {
        let none = BTreeMap::new();
        let created = alter(&none, Some("+message.type=FIFO"), true).unwrap();
        assert_eq!(
            created.get("message.type").map(String::as_str),
            Some("FIFO")
        );
        assert_eq!(alter(&created, None, false).unwrap(), created);
        let updated = alter(&created, Some("+cleanup.policy=DELETE"), false).unwrap();
        assert_eq!(updated.len(), 2);
        let removed = alter(&updated, Some("-message.type"), false).unwrap();
        assert_eq!(removed.keys().collect::<Vec<_>>(), ["cleanup.policy"]);
        for bad in [
            "message.type=NORMAL",
            "+nope=1",
            "+message.type=LOUD",
            "+message.type=NORMAL,+message.type=FIFO",
            "+message.type=MIXED",
            "-queue.type",
        ] {
            assert!(alter(&created, Some(bad), false).is_err(), "{bad}");
        }
        assert!(alter(&none, Some("-message.type"), true).is_err());
    }
}
