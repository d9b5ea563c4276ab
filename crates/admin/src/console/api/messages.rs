//! `GET /api/messages`: a message looked up by id (`id`, with `topic` to look a producer's id
//! up by its UNIQ_KEY; an offset id alone is read at its broker and commit-log offset) or the
//! messages of a topic with a key (`topic` and `key`, QUERY_MESSAGE on the topic's masters),
//! each with its properties and body (cut past `CONSOLE_MAX_BODY_SHOWN` bytes).

use serde_json::{json, Value};

use super::super::error::ConsoleError;
use super::super::http::Request;
use super::super::Console;
use crate::common::now_ms;
use crate::constants::{CONSOLE_MAX_BODY_SHOWN, CONSOLE_MAX_LOOKUP_MESSAGES};
use crate::{AdminError, MessageView};

/// A lookup by key covers every message stored until now and this much after (clocks of the
/// console's and the broker's hosts may differ), as Java's dashboard looks up to "now".
const LOOKUP_SLACK_MS: i64 = 60_000;

pub fn lookup(c: &Console, req: &Request) -> Result<Value, ConsoleError> {
    let topic = req.param("topic");
    let found = match (req.param("id"), req.param("key")) {
        (Some(id), _) => {
            vec![c
                .admin
                .view_message_by_id(topic, id.trim())
                .map_err(|e| match e {
                    AdminError::InvalidArgument(_) if topic.is_none() => {
                        ConsoleError::BadRequest(format!(
                            "{id} is not a broker's offset id: give the topic to look up a \
                         producer's message id"
                        ))
                    }
                    e => ConsoleError::not_found_as(e, || format!("No message has id {id}")),
                })?]
        }
        (None, Some(key)) => {
            let topic = topic.ok_or_else(|| {
                ConsoleError::BadRequest("a lookup by key needs the topic too".into())
            })?;
            let max = CONSOLE_MAX_LOOKUP_MESSAGES as i32;
            let mut found = c
                .admin
                .query_message_by_key(topic, key, max, 0, now_ms() + LOOKUP_SLACK_MS)
                .map_err(|e| {
                    ConsoleError::not_found_as(e, || format!("Topic {topic} does not exist"))
                })?;
            // The index is a hash: keep only the messages that really carry the key.
            found.retain(|m| has_key(m, key));
            found.truncate(CONSOLE_MAX_LOOKUP_MESSAGES);
            found
        }
        (None, None) => {
            return Err(ConsoleError::BadRequest(
                "give a message id, or a topic and a key".into(),
            ))
        }
    };
    let messages: Vec<Value> = found.iter().map(message_json).collect();
    Ok(json!({ "messages": messages }))
}

/// True when `key` is one of the message's keys (KEYS holds them separated by spaces).
fn has_key(m: &MessageView, key: &str) -> bool {
    m.keys
        .as_deref()
        .is_some_and(|keys| keys.split(' ').any(|k| k == key))
}

fn message_json(m: &MessageView) -> Value {
    let (body, cut) = cut_body(&m.body, CONSOLE_MAX_BODY_SHOWN);
    json!({
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "topic": m.topic,
        "tags": m.tags,
        "keys": m.keys,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.commit_log_offset,
        "storeTimestamp": m.store_timestamp,
        "bornTimestamp": m.born_timestamp,
        "bornHost": m.born_host,
        "storeHost": m.store_host,
        "reconsumeTimes": m.reconsume_times,
        "properties": m.properties,
        "body": body,
        "bodyEncoding": "UTF-8",
        "bodySize": m.body.len(),
        "bodyTruncated": cut,
    })
}

/// At most `max` bytes of `body`, cut at a character boundary; true when something was cut.
fn cut_body(body: &str, max: usize) -> (&str, bool) {
    if body.len() <= max {
        return (body, false);
    }
    let mut end = max;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    (&body[..end], true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bodies past the limit are cut at a character boundary and said to be.
    #[test]
    fn bodies_are_cut_on_characters() {
        assert_eq!(cut_body("abc", 3), ("abc", false));
        assert_eq!(cut_body("abcd", 3), ("abc", true));
        assert_eq!(cut_body("a\u{e9}b", 2), ("a", true));
    }

    /// A key matches one of the space-separated keys exactly, not a part of one.
    #[test]
    fn keys_match_whole() {
        let m = MessageView {
            keys: Some("k1 k22".into()),
            ..MessageView::default()
        };
        assert!(has_key(&m, "k22") && has_key(&m, "k1"));
        assert!(!has_key(&m, "k2"));
    }
}
