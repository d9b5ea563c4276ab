//! The bodies of server-side assignment (Java's `QueryAssignmentRequestBody`,
//! `QueryAssignmentResponseBody`, `MessageQueueAssignment`, `SetMessageRequestModeRequestBody`
//! and `MessageRequestModeSerializeWrapper`): QUERY_ASSIGNMENT (400) asks which queues a client
//! of a group reads and whether it pulls or pops them; SET_MESSAGE_REQUEST_MODE (401) sets a
//! (topic, group)'s mode; GET_ALL_MESSAGE_REQUEST_MODE (402) lists them. JSON as fastjson writes
//! it: fields in alphabetical order, enums by name, nulls left out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::body::MessageQueue;

/// How a group reads a topic (Java's `MessageRequestMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageRequestMode {
    #[default]
    #[serde(rename = "PULL")]
    Pull,
    #[serde(rename = "POP")]
    Pop,
}

/// QUERY_ASSIGNMENT's body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueryAssignmentRequestBody {
    pub client_id: String,
    pub consumer_group: String,
    /// `CLUSTERING` or `BROADCASTING`.
    pub message_model: Option<String>,
    /// `AVG` or `AVG_BY_CIRCLE`.
    pub strategy_name: String,
    pub topic: String,
}

/// One queue assigned, with the mode to read it in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueueAssignment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<BTreeMap<String, String>>,
    pub message_queue: MessageQueue,
    #[serde(default)]
    pub mode: MessageRequestMode,
}

/// QUERY_ASSIGNMENT's answer; `None` (written `{}`) tells the client to keep what it has.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryAssignmentResponseBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_queue_assignments: Option<Vec<MessageQueueAssignment>>,
}

/// SET_MESSAGE_REQUEST_MODE's body, also what is kept per (topic, group).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SetMessageRequestModeRequestBody {
    pub consumer_group: String,
    pub mode: MessageRequestMode,
    /// With POP: how many other clients' queues each client also pops (0: every queue).
    pub pop_share_queue_num: i32,
    pub topic: String,
}

/// `messageRequestMode.json` and GET_ALL_MESSAGE_REQUEST_MODE's body: topic -> group -> mode.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MessageRequestModeSerializeWrapper {
    pub message_request_mode_map:
        BTreeMap<String, BTreeMap<String, SetMessageRequestModeRequestBody>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bodies read and write fastjson's field names and enum spellings.
    #[test]
    fn json_shapes() {
        let req: QueryAssignmentRequestBody = serde_json::from_str(
            r#"{"clientId":"c1","consumerGroup":"g","messageModel":"CLUSTERING","strategyName":"AVG","topic":"T"}"#,
        )
        .unwrap();
        assert_eq!(req.strategy_name, "AVG");
        let resp = QueryAssignmentResponseBody {
            message_queue_assignments: Some(vec![MessageQueueAssignment {
                attachments: None,
                message_queue: MessageQueue {
                    broker_name: "b".into(),
                    queue_id: -1,
                    topic: "T".into(),
                },
                mode: MessageRequestMode::Pop,
            }]),
        };
        assert_eq!(
            serde_json::to_string(&resp).unwrap(),
            r#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"b","queueId":-1,"topic":"T"},"mode":"POP"}]}"#
        );
        assert_eq!(
            serde_json::to_string(&QueryAssignmentResponseBody::default()).unwrap(),
            "{}"
        );
        let set: SetMessageRequestModeRequestBody = serde_json::from_str(
            r#"{"consumerGroup":"g","mode":"POP","popShareQueueNum":0,"topic":"T"}"#,
        )
        .unwrap();
        assert_eq!(set.mode, MessageRequestMode::Pop);
    }
}
