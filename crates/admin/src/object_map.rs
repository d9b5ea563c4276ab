//! fastjson's maps keyed by JSON objects, read.
//!
//! fastjson writes a `Map<MessageQueue, _>` (ConsumeStats, TopicStatsTable, ResetOffsetBody)
//! with the key bean written as a JSON object: `{{"brokerName":"b","queueId":0,"topic":"T"}:1}`.
//! That is not JSON. [`parse`] turns each object in key position into a JSON string holding
//! the object's text, so the whole body reads as JSON; [`queue_entries`] then reads such a map
//! as `(MessageQueue, V)` pairs. The scan keeps a stack of open containers (no recursion), so
//! deep or hostile input costs memory in proportion to its length and never panics.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::protocol::body::MessageQueue;

/// Where the scanner is inside one open container.
#[derive(Clone, Copy)]
enum Open {
    /// An object; true while a key is expected (after `{` or `,`).
    Object(bool),
    Array,
}

/// The end (exclusive) of the JSON string starting at `start` (a `"`).
fn string_end(b: &[u8], start: usize) -> Result<usize, String> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err("unterminated string".into())
}

/// The end (exclusive) of the balanced object starting at `start` (a `{`).
fn object_end(b: &[u8], start: usize) -> Result<usize, String> {
    let mut depth = 0usize;
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = string_end(b, i)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| "unbalanced brackets".to_owned())?;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err("unterminated object key".into())
}

/// Rewrites fastjson text so every object in key position becomes a JSON string of its text.
pub fn quote_object_keys(text: &str) -> Result<String, String> {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut stack: Vec<Open> = Vec::new();
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = string_end(b, i)?;
                continue;
            }
            b'{' => {
                if let Some(Open::Object(true)) = stack.last() {
                    let end = object_end(b, i)?;
                    out.push_str(&text[copied..i]);
                    let key = serde_json::to_string(&text[i..end]).map_err(|e| e.to_string())?;
                    out.push_str(&key);
                    copied = end;
                    i = end;
                    if let Some(top) = stack.last_mut() {
                        *top = Open::Object(false);
                    }
                    continue;
                }
                stack.push(Open::Object(true));
            }
            b'[' => stack.push(Open::Array),
            b'}' | b']' => {
                stack
                    .pop()
                    .ok_or_else(|| "unbalanced brackets".to_owned())?;
            }
            b',' => {
                if let Some(Open::Object(expect)) = stack.last_mut() {
                    *expect = true;
                }
            }
            b':' => {
                if let Some(Open::Object(expect)) = stack.last_mut() {
                    *expect = false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if !stack.is_empty() {
        return Err("unterminated object or array".into());
    }
    out.push_str(&text[copied..]);
    Ok(out)
}

/// Reads a fastjson body that may hold object-keyed maps into a JSON tree (those keys become
/// strings of their JSON text).
pub fn parse(body: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("body is not UTF-8: {e}"))?;
    if let Ok(v) = serde_json::from_str(text) {
        return Ok(v);
    }
    let fixed = quote_object_keys(text)?;
    serde_json::from_str(&fixed).map_err(|e| format!("JSON body: {e}"))
}

/// The entries of a `Map<MessageQueue, V>` read by [`parse`]; a missing or null map is empty.
pub fn queue_entries<V: DeserializeOwned>(
    map: Option<&Value>,
) -> Result<Vec<(MessageQueue, V)>, String> {
    let obj = match map {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(o)) => o,
        Some(other) => return Err(format!("expected a map, found {other}")),
    };
    let mut out = Vec::with_capacity(obj.len());
    for (k, v) in obj {
        let mq: MessageQueue = serde_json::from_str(k)
            .map_err(|e| format!("map key {k:?} is not a MessageQueue: {e}"))?;
        let v: V = serde_json::from_value(v.clone()).map_err(|e| format!("value of {k}: {e}"))?;
        out.push((mq, v));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(b: &str, q: i32, t: &str) -> MessageQueue {
        MessageQueue {
            broker_name: b.into(),
            queue_id: q,
            topic: t.into(),
        }
    }

    /// A ConsumeStats body as fastjson writes it reads back into its queues and values, in
    /// queue order.
    #[test]
    fn reads_message_queue_keys() {
        let body = br#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerOffset":7},{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":3}}}"#;
        let v = parse(body).unwrap();
        assert_eq!(v["consumeTps"], 1.5);
        let e: Vec<(MessageQueue, Value)> = queue_entries(v.get("offsetTable")).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].0, mq("b", 0, "T"));
        assert_eq!(e[0].1["brokerOffset"], 3);
        assert_eq!(e[1].0, mq("b", 1, "T"));
    }

    /// Braces, colons and commas inside strings (keys and values) do not fool the scanner.
    #[test]
    fn strings_with_brackets_are_left_alone() {
        let body = br#"{"a":"{x:}","t":{{"brokerName":"b}{,:","queueId":0,"topic":"q\"}"}:5}}"#;
        let v = parse(body).unwrap();
        assert_eq!(v["a"], "{x:}");
        let e: Vec<(MessageQueue, i64)> = queue_entries(v.get("t")).unwrap();
        assert_eq!(e, vec![(mq("b}{,:", 0, "q\"}"), 5)]);
    }

    /// Objects as values and in arrays stay objects; only key positions are quoted.
    #[test]
    fn only_key_positions_are_rewritten() {
        let text =
            r#"{"x":{"y":[{"z":1}]},"m":{{"brokerName":"b","queueId":2,"topic":"T"}:{"k":[1,2]}}}"#;
        let fixed = quote_object_keys(text).unwrap();
        let v: Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(v["x"]["y"][0]["z"], 1);
        let e: Vec<(MessageQueue, Value)> = queue_entries(v.get("m")).unwrap();
        assert_eq!(e[0].0.queue_id, 2);
        assert_eq!(e[0].1["k"][1], 2);
    }

    /// Plain JSON and empty maps read as they are; a missing map is empty.
    #[test]
    fn plain_json_and_empty_maps() {
        let v = parse(br#"{"offsetTable":{}}"#).unwrap();
        let e: Vec<(MessageQueue, i64)> = queue_entries(v.get("offsetTable")).unwrap();
        assert!(e.is_empty());
        let e: Vec<(MessageQueue, i64)> = queue_entries(v.get("nothing")).unwrap();
        assert!(e.is_empty());
    }

    /// Truncated, unbalanced and non-map input is an error, never a panic.
    #[test]
    fn bad_input_is_an_error() {
        for bad in [
            &br#"{"t":{{"brokerName":"b""#[..],
            br#"{"t":{{"brokerName":"b"}:1"#,
            br#"}}}"#,
            br#"{"t":"#,
            b"\xff\xfe",
            br#"{"t":{{"queueId":"x"}:1}}"#,
        ] {
            let r = parse(bad).and_then(|v| queue_entries::<i64>(v.get("t")));
            assert!(
                r.is_err(),
                "{:?} was accepted",
                String::from_utf8_lossy(bad)
            );
        }
        let v = parse(br#"{"t":[1]}"#).unwrap();
        assert!(queue_entries::<i64>(v.get("t")).is_err());
    }
}
