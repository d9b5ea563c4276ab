//! The generated `apache.rocketmq.v2` code: prost messages and enums for every type of
//! `proto/apache/rocketmq/v2/{definition,service}.proto`, the server side of
//! `MessagingService` (`messaging_service_server::{MessagingService, MessagingServiceServer}`)
//! and its client (`messaging_service_client::MessagingServiceClient`). `bytes` fields are
//! `bytes::Bytes`; `google.protobuf.Duration`/`Timestamp` are `prost_types`' types.

// Generated code: clippy flags e.g. `large_enum_variant` on the `content` oneofs, where a
// `Message` sits unboxed beside a small `Status`.
#![allow(clippy::all)]

tonic::include_proto!("apache.rocketmq.v2");

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use prost::Message as _;

    #[test]
    fn send_message_request_round_trips() {
        let request = SendMessageRequest {
            messages: vec![Message {
                topic: Some(Resource {
                    resource_namespace: String::new(),
                    name: "TopicTest".to_string(),
                }),
                user_properties: [("k".to_string(), "v".to_string())].into(),
                system_properties: Some(SystemProperties {
                    tag: Some("TagA".to_string()),
                    message_id: "01ABCDEF0123456789".to_string(),
                    message_type: MessageType::Normal as i32,
                    ..Default::default()
                }),
                body: Bytes::from_static(b"hello ringmq"),
            }],
        };
        let wire = request.encode_to_vec();
        let decoded = SendMessageRequest::decode(Bytes::from(wire)).unwrap();
        assert_eq!(decoded, request);
        let message = &decoded.messages[0];
        assert_eq!(message.body, Bytes::from_static(b"hello ringmq"));
        let system = message.system_properties.as_ref().unwrap();
        assert_eq!(system.message_id, "01ABCDEF0123456789");
        assert_eq!(system.tag.as_deref(), Some("TagA"));
        assert_eq!(system.message_type(), MessageType::Normal);
    }

    #[test]
    fn code_values_match_the_wire() {
        assert_eq!(Code::Ok as i32, 20000);
        assert_eq!(Code::MessageNotFound as i32, 40401);
        assert_eq!(Code::try_from(40401), Ok(Code::MessageNotFound));
    }
}
