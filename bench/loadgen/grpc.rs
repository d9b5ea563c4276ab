//! The gRPC modes: RocketMQ 5's `MessagingService` driven the way the SDKs drive it, with the
//! client generated from ringmq's own schema. `grpc-send`: SendMessage of one message per call,
//! --inflight calls outstanding on each of --connections HTTP/2 connections (W2's shape over
//! gRPC). `grpc-receive`: after the Telemetry settings handshake, ReceiveMessage of up to
//! --pull-batch messages with --invisible-ms, each answer acked with one AckMessage, --inflight
//! receives per connection; for draining a prefilled backlog as the `pop` mode does over
//! Remoting.
//!
//! One thread runs a current-thread tokio runtime with every call as a task (the broker's side
//! is one thread too). Called by main. Invariant: every call has a deadline (--timeout plus the
//! polling time), so a run never hangs; a failed call ends the run with its status.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ringmq::grpc::pb::messaging_service_client::MessagingServiceClient;
use ringmq::grpc::pb::{self, Code};
use tokio_stream::StreamExt;
use tonic::transport::Channel;

use crate::stats::{record_ns, Shared};

#[derive(Clone, Debug)]
pub struct GrpcPlan {
    /// `host:port` of the gRPC endpoint.
    pub endpoint: String,
    pub topic: String,
    pub group: String,
    pub connections: usize,
    pub inflight: usize,
    pub size: usize,
    pub batch: i32,
    pub invisible_ms: i64,
    pub poll_ms: i64,
    pub timeout: Duration,
}

fn resource(name: &str) -> Option<pb::Resource> {
    Some(pb::Resource {
        resource_namespace: String::new(),
        name: name.to_string(),
    })
}

fn duration(ms: i64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration {
        seconds: ms / 1000,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    })
}

/// A request with the headers every SDK sends, under a deadline.
fn request<T>(msg: T, client_id: &str, deadline: Duration) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(deadline);
    let md = r.metadata_mut();
    if let Ok(v) = client_id.parse() {
        md.insert("x-mq-client-id", v);
    }
    md.insert(
        "x-mq-language",
        tonic::metadata::MetadataValue::from_static("JAVA"),
    );
    r
}

fn bad_status(what: &str, s: Option<&pb::Status>) -> String {
    match s {
        Some(s) => format!("{what}: status {} {}", s.code, s.message),
        None => format!("{what}: no status"),
    }
}

/// Starts the senders (`receive` false) or the receivers on one thread.
pub fn start(
    plan: &GrpcPlan,
    sh: &Arc<Shared>,
    receive: bool,
) -> Result<Vec<JoinHandle<()>>, String> {
    let (plan, sh) = (plan.clone(), sh.clone());
    let h = std::thread::Builder::new()
        .name("grpc-client".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return sh.fail(format!("tokio runtime: {e}")),
            };
            rt.block_on(async {
                if let Err(e) = run(&plan, &sh, receive).await {
                    if !sh.stopped() {
                        sh.fail(e);
                    }
                }
            });
        })
        .map_err(|e| format!("spawn: {e}"))?;
    Ok(vec![h])
}

async fn run(plan: &GrpcPlan, sh: &Arc<Shared>, receive: bool) -> Result<(), String> {
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..plan.connections.max(1) {
        let channel = Channel::from_shared(format!("http://{}", plan.endpoint))
            .map_err(|e| format!("endpoint {}: {e}", plan.endpoint))?
            .connect_timeout(plan.timeout)
            // Windows as the SDKs' transports open them (grpc-java: 1 MiB), not h2's 64 KiB:
            // 16 receives of 32 KiB would otherwise wait on WINDOW_UPDATE round trips.
            .initial_stream_window_size(Some(1 << 20))
            .initial_connection_window_size(Some(16 << 20))
            .connect()
            .await
            .map_err(|e| format!("connect {}: {e}", plan.endpoint))?;
        let client = MessagingServiceClient::new(channel).max_decoding_message_size(64 << 20);
        let client_id = format!("bench@{}@{c}", std::process::id());
        if receive {
            handshake(plan, client.clone(), &client_id).await?;
        }
        for i in 0..plan.inflight.max(1) {
            let (plan, sh, client, id) =
                (plan.clone(), sh.clone(), client.clone(), client_id.clone());
            tasks.spawn(async move {
                let r = if receive {
                    receiver(&plan, &sh, client, &id).await
                } else {
                    sender(&plan, &sh, client, &id, c * 1_000_000 + i).await
                };
                if let Err(e) = r {
                    if !sh.stopped() {
                        sh.fail(e);
                    }
                }
            });
        }
    }
    while tasks.join_next().await.is_some() {}
    Ok(())
}

async fn sender(
    plan: &GrpcPlan,
    sh: &Shared,
    mut client: MessagingServiceClient<Channel>,
    client_id: &str,
    task: usize,
) -> Result<(), String> {
    let body = bytes::Bytes::from(vec![b'x'; plan.size]);
    let latency = sh.latency.part();
    let mut n = 0u64;
    while !sh.stopped() {
        if !sh.take_budget(1) {
            return Ok(());
        }
        n += 1;
        let msg = pb::Message {
            topic: resource(&plan.topic),
            user_properties: Default::default(),
            system_properties: Some(pb::SystemProperties {
                message_id: format!("{task:08X}{n:016X}"),
                message_type: pb::MessageType::Normal as i32,
                ..Default::default()
            }),
            body: body.clone(),
        };
        let req = pb::SendMessageRequest {
            messages: vec![msg],
        };
        let t0 = sh.now_ns();
        let r = client
            .send_message(request(req, client_id, plan.timeout))
            .await
            .map_err(|e| format!("SendMessage: {e}"))?
            .into_inner();
        let done = sh.now_ns();
        let code = r.status.as_ref().map_or(0, |s| s.code);
        if !sh.measures(t0) {
            continue;
        }
        if code == Code::Ok as i32 {
            sh.record_ok(1, plan.size as u64, done);
            record_ns(&latency, done - t0);
        } else {
            let message = r.status.as_ref().map(|s| s.message.clone());
            sh.record_err(code, done, || message);
        }
    }
    Ok(())
}

/// Opens Telemetry and sends a simple consumer's settings, as every SDK does before receiving.
async fn handshake(
    plan: &GrpcPlan,
    mut client: MessagingServiceClient<Channel>,
    client_id: &str,
) -> Result<(), String> {
    let settings = pb::Settings {
        client_type: Some(pb::ClientType::SimpleConsumer as i32),
        pub_sub: Some(pb::settings::PubSub::Subscription(pb::Subscription {
            group: resource(&plan.group),
            subscriptions: vec![pb::SubscriptionEntry {
                topic: resource(&plan.topic),
                expression: Some(pb::FilterExpression {
                    r#type: pb::FilterType::Tag as i32,
                    expression: "*".into(),
                }),
            }],
            ..Default::default()
        })),
        ..Default::default()
    };
    let first = pb::TelemetryCommand {
        status: None,
        command: Some(pb::telemetry_command::Command::Settings(settings)),
    };
    // The stream stays open for the run: its first command is the settings, then nothing.
    let out = tokio_stream::iter(vec![first]).chain(tokio_stream::pending());
    let mut r = tonic::Request::new(out);
    if let Ok(v) = client_id.parse() {
        r.metadata_mut().insert("x-mq-client-id", v);
    }
    let mut inbound = client
        .telemetry(r)
        .await
        .map_err(|e| format!("Telemetry: {e}"))?
        .into_inner();
    let answer = tokio::time::timeout(plan.timeout, inbound.message())
        .await
        .map_err(|_| "Telemetry: no settings answer".to_string())?
        .map_err(|e| format!("Telemetry: {e}"))?
        .ok_or("Telemetry: closed")?;
    if answer.status.as_ref().map_or(0, |s| s.code) != Code::Ok as i32 {
        return Err(bad_status("Telemetry settings", answer.status.as_ref()));
    }
    // Keep reading (server commands) for as long as the run lasts.
    tokio::spawn(async move { while let Ok(Some(_)) = inbound.message().await {} });
    Ok(())
}

async fn receiver(
    plan: &GrpcPlan,
    sh: &Shared,
    mut client: MessagingServiceClient<Channel>,
    client_id: &str,
) -> Result<(), String> {
    use pb::receive_message_response::Content;
    let latency = sh.latency.part();
    let deadline = plan.timeout + Duration::from_millis(plan.poll_ms.max(0) as u64);
    while !sh.stopped() {
        let req = pb::ReceiveMessageRequest {
            group: resource(&plan.group),
            message_queue: Some(pb::MessageQueue {
                topic: resource(&plan.topic),
                id: -1,
                ..Default::default()
            }),
            filter_expression: None,
            batch_size: plan.batch,
            invisible_duration: duration(plan.invisible_ms),
            auto_renew: false,
            long_polling_timeout: duration(plan.poll_ms),
            attempt_id: None,
        };
        let t0 = sh.now_ns();
        let mut stream = client
            .receive_message(request(req, client_id, deadline))
            .await
            .map_err(|e| format!("ReceiveMessage: {e}"))?
            .into_inner();
        let mut entries = Vec::new();
        let mut bytes = 0u64;
        while let Some(frame) = stream
            .message()
            .await
            .map_err(|e| format!("ReceiveMessage: {e}"))?
        {
            match frame.content {
                Some(Content::Message(m)) => {
                    bytes += m.body.len() as u64;
                    let sys = m.system_properties.unwrap_or_default();
                    entries.push(pb::AckMessageEntry {
                        message_id: sys.message_id,
                        receipt_handle: sys.receipt_handle.unwrap_or_default(),
                        lite_topic: None,
                    });
                }
                Some(Content::Status(s))
                    if s.code != Code::Ok as i32 && s.code != Code::MessageNotFound as i32 =>
                {
                    return Err(bad_status("ReceiveMessage", Some(&s)));
                }
                _ => {}
            }
        }
        if entries.is_empty() {
            continue;
        }
        let n = entries.len() as u64;
        let ack = pb::AckMessageRequest {
            group: resource(&plan.group),
            topic: resource(&plan.topic),
            entries,
        };
        let r = client
            .ack_message(request(ack, client_id, plan.timeout))
            .await
            .map_err(|e| format!("AckMessage: {e}"))?
            .into_inner();
        let done = sh.now_ns();
        if r.status.as_ref().map_or(0, |s| s.code) != Code::Ok as i32 {
            return Err(bad_status("AckMessage", r.status.as_ref()));
        }
        if sh.measures(t0) {
            sh.record_ok(n, bytes, done);
            record_ns(&latency, done - t0);
        }
    }
    Ok(())
}

/// `grpc-send` and `grpc-receive` (main's dispatch): the plan from the arguments, the phases as
/// the Remoting modes run them (a warm-up for sends; a prefill over Remoting, then a drain, for
/// receives).
pub fn run_mode(
    a: &crate::Args,
    t: &crate::route::Target,
    s: &mut crate::stats::Summary,
    receive: bool,
) -> Result<(), String> {
    let endpoint = match &a.grpc {
        Some(e) => e.clone(),
        None => {
            let host = t
                .broker
                .rsplit_once(':')
                .map_or(t.broker.as_str(), |(h, _)| h);
            format!("{host}:8081")
        }
    };
    let plan = GrpcPlan {
        endpoint: endpoint.clone(),
        topic: a.topic.clone(),
        group: a.group.clone(),
        connections: a.connections,
        inflight: a.inflight,
        size: a.size,
        batch: a.pull_batch,
        invisible_ms: a.invisible_ms,
        poll_ms: a.poll_ms,
        timeout: Duration::from_secs_f64(a.timeout),
    };
    s.broker = endpoint;
    let cpu = if receive {
        crate::prefill(a, t)?;
        let target = a.count.or((a.prefill > 0).then_some(a.prefill));
        let sh = Shared::new(std::time::Instant::now(), None);
        let d = crate::drain(a, target, "grpc-receive");
        let cpu = d.run(&sh, || start(&plan, &sh, true), a.broker_pid)?;
        s.fill_from(&sh);
        cpu
    } else {
        let sh = Shared::new(std::time::Instant::now(), a.count);
        let d = crate::Drive {
            warmup: a.warmup,
            duration: crate::duration_of(a),
            stop_at: None,
            stall: None,
            progress: (!a.quiet).then_some("grpc-send"),
            follower: None,
        };
        let cpu = d.run(&sh, || start(&plan, &sh, false), a.broker_pid)?;
        s.fill_from(&sh);
        cpu
    };
    (s.broker_cpu_pct, s.client_cpu_pct, s.host_steal_pct) = cpu;
    Ok(())
}
