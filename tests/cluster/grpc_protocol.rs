// The gRPC endpoint at the protocol level, with a client generated from the same schema:
// what the Java SDK relies on that the Python SDK cannot show (TLS with any certificate on the
// port plaintext clients use, the settings handshake on Telemetry before the first receive), and
// bad input: no client id, a receive before settings, an unknown RPC, an oversized message,
// garbage bytes. Each gets a clear status and the endpoint goes on serving.

use crate::raw_support::admin::create_topic;
use crate::raw_support::{RawBroker, GRPC};

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use ringmq::grpc::pb::messaging_service_client::MessagingServiceClient;
use ringmq::grpc::pb::{self, Code};
use tonic::transport::Channel;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

async fn client(addr: SocketAddr) -> MessagingServiceClient<Channel> {
    MessagingServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect to the gRPC endpoint")
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

fn resource(name: &str) -> Option<pb::Resource> {
    Some(pb::Resource {
        resource_namespace: String::new(),
        name: name.into(),
    })
}

/// `msg` with the headers every SDK sends.
fn req<T>(msg: T, client_id: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    let md = r.metadata_mut();
    if !client_id.is_empty() {
        md.insert("x-mq-client-id", client_id.parse().unwrap());
    }
    md.insert("x-mq-language", "JAVA".parse().unwrap());
    md.insert("x-mq-client-version", "5.0.7".parse().unwrap());
    r
}

fn code(s: &Option<pb::Status>) -> i32 {
    s.as_ref().map_or(0, |s| s.code)
}

async fn query_route(
    c: &mut MessagingServiceClient<Channel>,
    topic: &str,
    id: &str,
) -> pb::QueryRouteResponse {
    let r = pb::QueryRouteRequest {
        topic: resource(topic),
        endpoints: None,
    };
    c.query_route(req(r, id))
        .await
        .expect("QueryRoute")
        .into_inner()
}

fn consumer_settings(group: &str, topic: &str) -> pb::Settings {
    pb::Settings {
        client_type: Some(pb::ClientType::SimpleConsumer as i32),
        request_timeout: Some(prost_types::Duration {
            seconds: 3,
            nanos: 0,
        }),
        pub_sub: Some(pb::settings::PubSub::Subscription(pb::Subscription {
            group: resource(group),
            subscriptions: vec![pb::SubscriptionEntry {
                topic: resource(topic),
                expression: Some(pb::FilterExpression {
                    r#type: pb::FilterType::Tag as i32,
                    expression: "*".into(),
                }),
            }],
            ..Default::default()
        })),
        ..Default::default()
    }
}

type TelemetryTx = tokio::sync::mpsc::Sender<pb::TelemetryCommand>;

/// Opens Telemetry as client `id` and sends a simple consumer's settings for `group` and
/// `topic`, as every SDK does first; the stream's sender and the server's commands.
async fn handshake(
    c: &mut MessagingServiceClient<Channel>,
    id: &str,
    group: &str,
    topic: &str,
) -> (TelemetryTx, tonic::Streaming<pb::TelemetryCommand>) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let out = tokio_stream::wrappers::ReceiverStream::new(rx);
    let inbound = c
        .telemetry(req(out, id))
        .await
        .expect("Telemetry")
        .into_inner();
    tx.send(pb::TelemetryCommand {
        status: None,
        command: Some(pb::telemetry_command::Command::Settings(consumer_settings(
            group, topic,
        ))),
    })
    .await
    .unwrap();
    (tx, inbound)
}

fn receive_request(group: &str, topic: &str) -> pb::ReceiveMessageRequest {
    pb::ReceiveMessageRequest {
        group: resource(group),
        message_queue: Some(pb::MessageQueue {
            topic: resource(topic),
            id: -1,
            ..Default::default()
        }),
        filter_expression: None,
        batch_size: 4,
        invisible_duration: Some(prost_types::Duration {
            seconds: 30,
            nanos: 0,
        }),
        auto_renew: false,
        long_polling_timeout: Some(prost_types::Duration {
            seconds: 5,
            nanos: 0,
        }),
        attempt_id: None,
    }
}

/// The statuses of a receive's stream frames, in order.
async fn receive_statuses(
    c: &mut MessagingServiceClient<Channel>,
    r: pb::ReceiveMessageRequest,
    id: &str,
) -> Vec<i32> {
    use pb::receive_message_response::Content;
    let mut stream = c
        .receive_message(req(r, id))
        .await
        .expect("ReceiveMessage")
        .into_inner();
    let mut out = Vec::new();
    while let Some(f) = stream.message().await.expect("receive frame") {
        match f.content {
            Some(Content::Status(s)) => out.push(s.code),
            Some(Content::Message(_)) => out.push(-1),
            Some(Content::DeliveryTimestamp(_)) => out.push(-2),
            None => out.push(0),
        }
    }
    out
}

/// No client id: CLIENT_ID_REQUIRED in-band; a receive before the client's settings: a clear
/// error, then after the Telemetry handshake (settings answered with the server's side) the
/// same receive runs and finds nothing (MESSAGE_NOT_FOUND, then the delivery timestamp).
#[test]
fn client_id_and_settings_handshake_come_first() {
    let b = RawBroker::start(&[GRPC]);
    create_topic(b.namesrv, b.broker, "GrpcP1", 2);
    let addr = b.grpc.unwrap();
    runtime().block_on(async {
        let mut c = client(addr).await;
        let r = query_route(&mut c, "GrpcP1", "").await;
        assert_eq!(code(&r.status), Code::ClientIdRequired as i32, "{r:?}");
        let r = query_route(&mut c, "GrpcP1", "java-1").await;
        assert_eq!(code(&r.status), Code::Ok as i32, "{r:?}");
        assert_eq!(r.message_queues.len(), 2);
        let q = &r.message_queues[0];
        let ep = &q
            .broker
            .as_ref()
            .unwrap()
            .endpoints
            .as_ref()
            .unwrap()
            .addresses[0];
        assert_eq!(
            (ep.host.as_str(), ep.port),
            ("127.0.0.1", i32::from(addr.port()))
        );
        let r = query_route(&mut c, "NoSuchTopic", "java-1").await;
        assert_eq!(code(&r.status), Code::TopicNotFound as i32, "{r:?}");

        let before = receive_statuses(&mut c, receive_request("GrpcPG", "GrpcP1"), "java-1").await;
        assert_eq!(before, vec![Code::UnrecognizedClientType as i32, -2]);

        let (_tx, mut inbound) = handshake(&mut c, "java-1", "GrpcPG", "GrpcP1").await;
        let answer = tokio::time::timeout(Duration::from_secs(5), inbound.message())
            .await
            .expect("settings answered in time")
            .expect("telemetry frame")
            .expect("a command");
        assert_eq!(code(&answer.status), Code::Ok as i32);
        let Some(pb::telemetry_command::Command::Settings(s)) = answer.command else {
            panic!("settings expected: {answer:?}");
        };
        assert!(s.backoff_policy.unwrap().max_attempts > 1);
        let Some(pb::settings::PubSub::Subscription(sub)) = s.pub_sub else {
            panic!("subscription expected");
        };
        assert_eq!(sub.receive_batch_size, Some(32));
        assert_eq!(sub.fifo, Some(false));
        let after = receive_statuses(&mut c, receive_request("GrpcPG", "GrpcP1"), "java-1").await;
        assert_eq!(after, vec![Code::MessageNotFound as i32, -2]);
    });
}

/// A 5 MiB body: MESSAGE_BODY_TOO_LARGE in-band; a 20 MiB request: refused by the transport
/// before it is buffered; an RPC Java's proxy does not serve: UNIMPLEMENTED. The endpoint
/// answers normally after each.
#[test]
fn oversized_messages_and_unserved_rpcs_get_clear_statuses() {
    let b = RawBroker::start(&[GRPC]);
    create_topic(b.namesrv, b.broker, "GrpcP2", 2);
    runtime().block_on(async {
        let mut c = client(b.grpc.unwrap()).await;
        let send = |body: Vec<u8>| pb::SendMessageRequest {
            messages: vec![pb::Message {
                topic: resource("GrpcP2"),
                user_properties: Default::default(),
                system_properties: Some(pb::SystemProperties {
                    message_id: "BIG".into(),
                    message_type: pb::MessageType::Normal as i32,
                    ..Default::default()
                }),
                body: body.into(),
            }],
        };
        let r = c
            .send_message(req(send(vec![7u8; 5 << 20]), "java-2"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            code(&r.status),
            Code::MessageBodyTooLarge as i32,
            "{:?}",
            r.status
        );
        let e = c
            .send_message(req(send(vec![7u8; 20 << 20]), "java-2"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                e.code(),
                tonic::Code::ResourceExhausted | tonic::Code::OutOfRange
            ),
            "{e:?}"
        );
        let mut c = client(b.grpc.unwrap()).await;
        let r = c
            .send_message(req(send(b"fits".to_vec()), "java-2"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&r.status), Code::Ok as i32, "{:?}", r.status);
        let e = c
            .get_offset(req(pb::GetOffsetRequest::default(), "java-2"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unimplemented);
        let r = query_route(&mut c, "GrpcP2", "java-2").await;
        assert_eq!(code(&r.status), Code::Ok as i32);
    });
}

/// Trusts any certificate, as the Java SDK does by default.
#[derive(Debug)]
struct AnyCert;

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// With no certificate configured the port serves TLS with a certificate made at start (ALPN
/// h2, an HTTP/2 server behind it) beside plaintext; garbage bytes end only their own
/// connection.
#[test]
fn tls_and_plaintext_share_the_port_and_garbage_is_contained() {
    let b = RawBroker::start(&[GRPC]);
    create_topic(b.namesrv, b.broker, "GrpcP3", 1);
    let addr = b.grpc.unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(AnyCert))
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
    let mut sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut stream = rustls::Stream::new(&mut tls, &mut sock);
    // The HTTP/2 client preface and an empty SETTINGS frame; the server answers with its own
    // SETTINGS frame (type 4).
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .unwrap();
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(head[3], 4, "an HTTP/2 SETTINGS frame over TLS");
    assert_eq!(tls.alpn_protocol(), Some(&b"h2"[..]));

    let mut junk = TcpStream::connect(addr).unwrap();
    junk.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    junk.write_all(&[0x42; 4096]).unwrap();
    let mut buf = [0u8; 256];
    // Closed, or answered with an HTTP/2 GOAWAY: never a hang.
    let _ = junk.read(&mut buf);

    runtime().block_on(async {
        let mut c = client(addr).await;
        let r = query_route(&mut c, "GrpcP3", "java-3").await;
        assert_eq!(code(&r.status), Code::Ok as i32);
    });
}

/// Several entries of one AckMessage go to the broker as one batch ack; each entry gets its
/// own status (a handle that does not parse: INVALID_RECEIPT_HANDLE) and the answer says
/// MULTIPLE_RESULTS; the acked messages are not received again.
#[test]
fn one_ack_of_several_entries_answers_each() {
    use pb::receive_message_response::Content;
    let b = RawBroker::start(&[GRPC]);
    create_topic(b.namesrv, b.broker, "GrpcP4", 2);
    runtime().block_on(async {
        let mut c = client(b.grpc.unwrap()).await;
        for i in 0..3 {
            let m = pb::SendMessageRequest {
                messages: vec![pb::Message {
                    topic: resource("GrpcP4"),
                    user_properties: Default::default(),
                    system_properties: Some(pb::SystemProperties {
                        message_id: format!("ACK{i}"),
                        message_type: pb::MessageType::Normal as i32,
                        ..Default::default()
                    }),
                    body: format!("m{i}").into_bytes().into(),
                }],
            };
            let r = c.send_message(req(m, "java-4")).await.unwrap().into_inner();
            assert_eq!(code(&r.status), Code::Ok as i32, "{:?}", r.status);
        }
        let (_tx, mut inbound) = handshake(&mut c, "java-4", "GrpcPG4", "GrpcP4").await;
        inbound.message().await.unwrap().expect("settings answer");
        let mut handles = Vec::new();
        while handles.len() < 3 {
            let mut s = c
                .receive_message(req(receive_request("GrpcPG4", "GrpcP4"), "java-4"))
                .await
                .unwrap()
                .into_inner();
            while let Some(f) = s.message().await.unwrap() {
                if let Some(Content::Message(m)) = f.content {
                    let sys = m.system_properties.unwrap();
                    handles.push((sys.message_id, sys.receipt_handle.unwrap()));
                }
            }
        }
        let mut entries: Vec<pb::AckMessageEntry> = handles
            .iter()
            .map(|(id, h)| pb::AckMessageEntry {
                message_id: id.clone(),
                receipt_handle: h.clone(),
                lite_topic: None,
            })
            .collect();
        entries.push(pb::AckMessageEntry {
            message_id: "BAD".into(),
            receipt_handle: "not a handle".into(),
            lite_topic: None,
        });
        let ack = pb::AckMessageRequest {
            group: resource("GrpcPG4"),
            topic: resource("GrpcP4"),
            entries,
        };
        let r = c
            .ack_message(req(ack, "java-4"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&r.status), Code::MultipleResults as i32, "{r:?}");
        let codes: Vec<i32> = r.entries.iter().map(|e| code(&e.status)).collect();
        let ok = Code::Ok as i32;
        assert_eq!(
            codes,
            vec![ok, ok, ok, Code::InvalidReceiptHandle as i32],
            "{r:?}"
        );
        let after = receive_statuses(&mut c, receive_request("GrpcPG4", "GrpcP4"), "java-4").await;
        assert_eq!(after, vec![Code::MessageNotFound as i32, -2]);
    });
}

/// An admin's CONSUME_MESSAGE_DIRECTLY (309) and GET_CONSUMER_RUNNING_INFO with jstack (307)
/// for a gRPC consumer reach it on its Telemetry stream (VerifyMessageCommand with the stored
/// message, PrintThreadStackTraceCommand), and its answers come back to the admin as Java's
/// proxy makes them; without jstack the admin is answered at once.
#[test]
fn admin_questions_reach_a_grpc_consumer_and_come_back() {
    use crate::raw_support::{send_cmd, Conn};
    use ringmq::protocol::codes::request_code;
    use ringmq::protocol::RemotingCommand;
    let b = RawBroker::start(&[GRPC]);
    create_topic(b.namesrv, b.broker, "GrpcP5", 1);
    let mut producer = Conn::connect(b.broker);
    let sent = producer.call(send_cmd("GrpcP5", 0, b"verify me", "UNIQ_KEY\u{1}V1\u{2}"));
    let msg_id = sent.ext("msgId").unwrap().to_string();
    let rt = runtime();
    let (tx, mut inbound) = rt.block_on(async {
        let mut c = client(b.grpc.unwrap()).await;
        let (tx, mut inbound) = handshake(&mut c, "java-5", "GrpcPG5", "GrpcP5").await;
        inbound.message().await.unwrap().expect("settings answer");
        (tx, inbound)
    });
    let admin = std::thread::spawn({
        let broker = b.broker;
        let id = msg_id.clone();
        move || {
            let mut a = Conn::connect(broker);
            let verify = a.call(
                RemotingCommand::new_request(request_code::CONSUME_MESSAGE_DIRECTLY)
                    .with_ext("consumerGroup", "GrpcPG5")
                    .with_ext("clientId", "java-5")
                    .with_ext("msgId", id)
                    .with_ext("topic", "GrpcP5"),
            );
            let stack = a.call(
                RemotingCommand::new_request(request_code::GET_CONSUMER_RUNNING_INFO)
                    .with_ext("consumerGroup", "GrpcPG5")
                    .with_ext("clientId", "java-5")
                    .with_ext("jstackEnable", true),
            );
            let plain = a.call(
                RemotingCommand::new_request(request_code::GET_CONSUMER_RUNNING_INFO)
                    .with_ext("consumerGroup", "GrpcPG5")
                    .with_ext("clientId", "java-5")
                    .with_ext("jstackEnable", false),
            );
            (verify, stack, plain)
        }
    });
    let (verify, stack, plain) = rt.block_on(async {
        use pb::telemetry_command::Command;
        for _ in 0..2 {
            let cmd = tokio::time::timeout(Duration::from_secs(10), inbound.message())
                .await
                .expect("a question within 10 s")
                .unwrap()
                .expect("a command");
            let answer = match cmd.command {
                Some(Command::VerifyMessageCommand(v)) => {
                    let m = v.message.unwrap();
                    assert_eq!(&m.body[..], b"verify me");
                    assert_eq!(m.system_properties.unwrap().message_id, "V1");
                    Command::VerifyMessageResult(pb::VerifyMessageResult { nonce: v.nonce })
                }
                Some(Command::PrintThreadStackTraceCommand(p)) => {
                    Command::ThreadStackTrace(pb::ThreadStackTrace {
                        nonce: p.nonce,
                        thread_stack_trace: Some("\"main\" RUNNABLE".into()),
                    })
                }
                other => panic!("unexpected command {other:?}"),
            };
            tx.send(pb::TelemetryCommand {
                status: Some(pb::Status {
                    code: Code::Ok as i32,
                    message: "OK".into(),
                }),
                command: Some(answer),
            })
            .await
            .unwrap();
        }
        // The runtime keeps the stream going (the last answer is still to be written) until
        // the admin has its answers.
        tokio::task::spawn_blocking(move || admin.join().unwrap())
            .await
            .unwrap()
    });
    assert_eq!(verify.code, 0, "{:?}", verify.remark);
    assert!(
        String::from_utf8_lossy(&verify.body).contains("CR_SUCCESS"),
        "{verify:?}"
    );
    assert_eq!(stack.code, 0, "{:?}", stack.remark);
    assert!(
        String::from_utf8_lossy(&stack.body).contains("RUNNABLE"),
        "{stack:?}"
    );
    assert_eq!(
        plain.code,
        ringmq::protocol::codes::response_code::REQUEST_CODE_NOT_SUPPORTED
    );
    drop(tx);
}
