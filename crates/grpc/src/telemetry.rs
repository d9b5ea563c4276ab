//! Telemetry, Heartbeat and NotifyClientTermination (Java's `ClientActivity` and
//! `GrpcClientSettingsManager`), and the relay of what the broker sends a gRPC client.
//!
//! A client's settings arrive on its Telemetry stream: the endpoint registers it with the
//! broker as a Remoting client would (HEART_BEAT on its virtual connection: producers under
//! their topics as groups, consumers under their group with their subscriptions), keeps the
//! settings, and answers with the server's side of them (retry policy, batch size, polling
//! time, FIFO from the group's config). Heartbeats renew the registration. What the broker
//! writes to the client's connection arrives at [`relay`]: a transaction check becomes a
//! RecoverOrphanedTransactionCommand on the stream, an admin's questions (307, 309) go to
//! `diagnostics`; requests a gRPC client cannot answer are answered for it with
//! REQUEST_CODE_NOT_SUPPORTED, so the broker never waits on them.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use ringmq_protocol::body::{
    self, ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, ProducerData,
    SubscriptionData, EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, SUB_ALL,
};
use ringmq_protocol::codes::request_code as req;
use ringmq_protocol::headers::{CheckTransactionStateRequestHeader, UnregisterClientRequestHeader};
use ringmq_protocol::java_hash::java_string_hash;
use ringmq_protocol::message;
use ringmq_protocol::RemotingCommand;
use ringmq_remoting::Outbound;
use ringmq_runtime::MailboxReceiver;

use crate::clients::{Client, TelemetryTx};
use crate::convert::{self, duration};
use crate::diagnostics;
use crate::endpoint::{Endpoint, TransactionData};
use crate::pb::{self, settings::PubSub, telemetry_command::Command, ClientType, Code, FilterType};
use crate::route::{check_group, check_topic};
use crate::status::{self, GrpcError};

/// Commands queued for one client's stream before new ones are dropped.
const TELEMETRY_QUEUE: usize = 64;
/// A producer's retries (`GrpcClientSettingsManager`'s defaults).
const PRODUCER_MAX_ATTEMPTS: i32 = 3;
/// A consumer group's retry delays without a policy of its own (Java's default customized
/// policy), by attempt.
const CUSTOMIZED_RETRY_SECS: [i64; 18] = [
    1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
];
const RECEIVE_BATCH_SIZE: i32 = 32;
const LONG_POLLING_MS: i64 = 20_000;

/// The Remoting registration of a client with these settings.
fn heartbeat_data(client_id: &str, settings: &pb::Settings) -> Result<HeartbeatData, GrpcError> {
    let mut hb = HeartbeatData {
        client_id: client_id.to_string(),
        ..Default::default()
    };
    match (&settings.pub_sub, settings.client_type()) {
        (Some(PubSub::Publishing(p)), _) => {
            for t in &p.topics {
                hb.producer_data_set.push(ProducerData {
                    group_name: check_topic(Some(t))?,
                });
            }
        }
        (Some(PubSub::Subscription(sub)), kind) => {
            let group = check_group(sub.group.as_ref())?;
            let mut subs = Vec::new();
            for e in &sub.subscriptions {
                subs.push(subscription(e)?);
            }
            hb.consumer_data_set.push(ConsumerData {
                group_name: group,
                consume_type: if kind == ClientType::PushConsumer {
                    ConsumeType::ConsumePassively
                } else {
                    ConsumeType::ConsumeActively
                },
                message_model: MessageModel::Clustering,
                consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
                subscription_data_set: subs,
                unit_mode: false,
            });
        }
        (None, _) => {
            return Err(GrpcError::new(
                Code::UnrecognizedClientType,
                "settings are neither a producer's nor a consumer's",
            ))
        }
    }
    Ok(hb)
}

fn subscription(e: &pb::SubscriptionEntry) -> Result<SubscriptionData, GrpcError> {
    let topic = check_topic(e.topic.as_ref())?;
    let expr = e.expression.clone().unwrap_or_default();
    let text = expr.expression.trim().to_string();
    let mut d = SubscriptionData {
        topic,
        sub_version: crate::now_ms(),
        ..Default::default()
    };
    match FilterType::try_from(expr.r#type) {
        Ok(FilterType::Sql) => {
            d.expression_type = EXPRESSION_TYPE_SQL92.into();
            d.sub_string = text;
        }
        Ok(_) => {
            d.expression_type = EXPRESSION_TYPE_TAG.into();
            if text.is_empty() || text == SUB_ALL {
                d.sub_string = SUB_ALL.into();
            } else {
                d.tags_set = text
                    .split("||")
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect();
                d.code_set = d.tags_set.iter().map(|t| java_string_hash(t)).collect();
                d.sub_string = text;
            }
        }
        Err(_) => {
            return Err(GrpcError::new(
                Code::IllegalFilterExpression,
                format!("filter type {} is unknown", expr.r#type),
            ))
        }
    }
    Ok(d)
}

/// Registers (or renews) the client with the broker.
pub async fn register(ep: &Endpoint, s: &Client, settings: &pb::Settings) -> Result<(), GrpcError> {
    let hb = heartbeat_data(&s.client_id, settings)?;
    let mut cmd = RemotingCommand::new_request(req::HEART_BEAT).with_body(body::to_json(&hb));
    cmd.language = s.language;
    s.invoke_ok(&ep.gateway, cmd).await?;
    Ok(())
}

/// The settings the server answers with: the client's, with the server's side filled in.
async fn merged(ep: &Endpoint, settings: &pb::Settings) -> Result<pb::Settings, GrpcError> {
    let mut out = settings.clone();
    match &mut out.pub_sub {
        Some(PubSub::Publishing(p)) => {
            p.validate_message_type = ep.cfg.check_message_type;
            p.max_body_size = ep.cfg.limits.max_body as i32;
            out.backoff_policy = Some(pb::RetryPolicy {
                max_attempts: PRODUCER_MAX_ATTEMPTS,
                strategy: Some(pb::retry_policy::Strategy::ExponentialBackoff(
                    pb::ExponentialBackoff {
                        initial: Some(duration(10)),
                        max: Some(duration(1000)),
                        multiplier: 2.0,
                    },
                )),
            });
        }
        Some(PubSub::Subscription(sub)) => {
            let group = check_group(sub.group.as_ref())?;
            let (orderly, retry_max) = ep
                .gateway
                .on(0, move |s0| async move {
                    s0.meta().groups.get(&group).map_or((false, 16), |g| {
                        (g.consume_message_orderly, g.retry_max_times)
                    })
                })
                .await?;
            sub.fifo = Some(orderly);
            sub.receive_batch_size = Some(RECEIVE_BATCH_SIZE);
            sub.long_polling_timeout = Some(duration(LONG_POLLING_MS));
            out.backoff_policy = Some(pb::RetryPolicy {
                max_attempts: retry_max.max(0) + 1,
                strategy: Some(pb::retry_policy::Strategy::CustomizedBackoff(
                    pb::CustomizedBackoff {
                        next: CUSTOMIZED_RETRY_SECS
                            .iter()
                            .map(|s| duration(s * 1000))
                            .collect(),
                    },
                )),
            });
        }
        None => {}
    }
    Ok(out)
}

/// Settings received on the stream: register, keep, answer.
async fn on_settings(
    ep: &Endpoint,
    s: &Client,
    settings: pb::Settings,
) -> Result<pb::Settings, GrpcError> {
    register(ep, s, &settings).await?;
    let merged = merged(ep, &settings).await?;
    s.set_settings(merged.clone());
    Ok(merged)
}

/// Serves a client's Telemetry stream: reads its commands until it ends, and returns the stream
/// of commands to it.
pub fn open_stream(
    ep: Arc<Endpoint>,
    s: Arc<Client>,
    mut inbound: tonic::Streaming<pb::TelemetryCommand>,
) -> ReceiverStream<Result<pb::TelemetryCommand, tonic::Status>> {
    let (tx, rx) = mpsc::channel(TELEMETRY_QUEUE);
    s.set_telemetry(Some(tx.clone()));
    tokio::spawn(async move {
        loop {
            let cmd = match inbound.message().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(client = %s.client_id, error = %e, "telemetry stream ended");
                    break;
                }
            };
            s.touch();
            if let Err(e) = on_command(&ep, &s, &tx, cmd).await {
                let _ = tx
                    .send(Err(tonic::Status::invalid_argument(e.message)))
                    .await;
                break;
            }
        }
        // The client's channel is inactive once its stream is gone (`GrpcClientChannel`).
        if s.telemetry().is_some_and(|t| t.same_channel(&tx)) {
            s.set_telemetry(None);
        }
    });
    ReceiverStream::new(rx)
}

async fn on_command(
    ep: &Endpoint,
    s: &Client,
    tx: &TelemetryTx,
    cmd: pb::TelemetryCommand,
) -> Result<(), GrpcError> {
    match cmd.command {
        Some(Command::Settings(settings)) => {
            let merged = on_settings(ep, s, settings).await?;
            let answer = pb::TelemetryCommand {
                status: Some(status::ok()),
                command: Some(Command::Settings(merged)),
            };
            // A client that stopped reading its stream loses the answer, nothing else.
            let _ = tx.try_send(Ok(answer));
            Ok(())
        }
        Some(Command::ThreadStackTrace(r)) => {
            diagnostics::stack_printed(ep, s, cmd.status.as_ref(), &r);
            Ok(())
        }
        Some(Command::VerifyMessageResult(r)) => {
            diagnostics::verified(ep, s, cmd.status.as_ref(), &r);
            Ok(())
        }
        Some(_) => Err(GrpcError::bad_request(
            "a client may send only settings and results",
        )),
        None => Err(GrpcError::bad_request("telemetry command is empty")),
    }
}

pub async fn heartbeat(
    ep: &Endpoint,
    s: &Client,
    r: pb::HeartbeatRequest,
) -> Result<(), GrpcError> {
    let settings = s.require_settings()?;
    if let (Some(g), Some(PubSub::Subscription(sub))) = (&r.group, &settings.pub_sub) {
        if sub.group.as_ref().is_some_and(|own| own.name != g.name) {
            return Err(GrpcError::bad_request(
                "heartbeat names another group than the settings",
            ));
        }
    }
    register(ep, s, &settings).await
}

pub async fn notify_termination(
    ep: &Endpoint,
    s: &Client,
    r: pb::NotifyClientTerminationRequest,
) -> Result<(), GrpcError> {
    if let Some(settings) = s.settings() {
        let mut h = UnregisterClientRequestHeader {
            client_id: s.client_id.clone(),
            ..Default::default()
        };
        match &settings.pub_sub {
            Some(PubSub::Publishing(p)) => {
                for t in &p.topics {
                    h.producer_group = Some(t.name.clone());
                    unregister(ep, s, &h).await?;
                }
            }
            Some(PubSub::Subscription(_)) => {
                h.consumer_group = r.group.map(|g| g.name);
                unregister(ep, s, &h).await?;
            }
            None => {}
        }
    }
    crate::renew::release(ep, s).await;
    ep.questions.forget_client(&s.client_id);
    ep.clients.close(&s.client_id);
    Ok(())
}

async fn unregister(
    ep: &Endpoint,
    s: &Client,
    h: &UnregisterClientRequestHeader,
) -> Result<(), GrpcError> {
    let mut cmd = RemotingCommand::new_request(req::UNREGISTER_CLIENT);
    h.write_to(&mut cmd);
    s.invoke_ok(&ep.gateway, cmd).await?;
    Ok(())
}

/// Carries what the broker sends the client's virtual connection to the client, until the
/// client is forgotten.
pub async fn relay(ep: Arc<Endpoint>, s: Arc<Client>, outbox: MailboxReceiver<Outbound>) {
    loop {
        let frame = match tokio::time::timeout(Duration::from_secs(10), outbox.recv()).await {
            Ok(Some(Outbound::Frame(f))) => f,
            Ok(Some(_)) => continue,
            Ok(None) => return,
            Err(_) => {
                let current = ep.clients.get(&s.client_id);
                if current.is_none_or(|c| !Arc::ptr_eq(&c, &s)) {
                    return;
                }
                continue;
            }
        };
        let Ok(cmd) = RemotingCommand::decode(frame.slice(4.min(frame.len())..)) else {
            continue;
        };
        if cmd.is_response() {
            continue;
        }
        match cmd.code {
            req::CHECK_TRANSACTION_STATE => check_transaction(&ep, &s, &cmd),
            req::NOTIFY_CONSUMER_IDS_CHANGED => {}
            req::CONSUME_MESSAGE_DIRECTLY | req::GET_CONSUMER_RUNNING_INFO => {
                diagnostics::ask(&ep, &s, &cmd)
            }
            _ if cmd.is_oneway() => {}
            _ => diagnostics::refuse(
                &ep,
                &s,
                &cmd,
                &format!(
                    "request code {} is not supported by a gRPC client",
                    cmd.code
                ),
            ),
        }
    }
}

/// A transaction check as a RecoverOrphanedTransactionCommand on the client's stream.
fn check_transaction(ep: &Endpoint, s: &Client, cmd: &RemotingCommand) {
    let Ok(h) = CheckTransactionStateRequestHeader::from_command(cmd) else {
        return;
    };
    let Ok(rec) = message::decode(&cmd.body, false) else {
        return;
    };
    let topic = h.topic.clone().unwrap_or_else(|| rec.topic.to_string());
    let tx_id = h
        .transaction_id
        .clone()
        .or(h.msg_id.clone())
        .unwrap_or_default();
    ep.transactions.put(
        &topic,
        &tx_id,
        TransactionData {
            tran_state_table_offset: h.tran_state_table_offset,
            commit_log_offset: h.commit_log_offset,
        },
    );
    let command = pb::TelemetryCommand {
        status: Some(status::ok()),
        command: Some(Command::RecoverOrphanedTransactionCommand(
            pb::RecoverOrphanedTransactionCommand {
                message: Some(convert::incoming(&rec, &cmd.body, &topic, None)),
                transaction_id: tx_id,
            },
        )),
    };
    match s.telemetry() {
        // A full or closed stream loses this check; the broker checks again later.
        Some(tx) => {
            if tx.try_send(Ok(command)).is_err() {
                tracing::debug!(client = %s.client_id, "transaction check not delivered: stream full or closed");
            }
        }
        None => {
            tracing::debug!(client = %s.client_id, "transaction check for a client without a stream")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(topic: &str, kind: FilterType, expr: &str) -> pb::SubscriptionEntry {
        pb::SubscriptionEntry {
            topic: Some(pb::Resource {
                resource_namespace: String::new(),
                name: topic.into(),
            }),
            expression: Some(pb::FilterExpression {
                r#type: kind as i32,
                expression: expr.into(),
            }),
        }
    }

    #[test]
    fn subscriptions_become_subscription_data() {
        let d = subscription(&entry("T", FilterType::Tag, "a || b")).unwrap();
        assert_eq!(d.tags_set, vec!["a", "b"]);
        assert_eq!(
            d.code_set,
            vec![java_string_hash("a"), java_string_hash("b")]
        );
        let d = subscription(&entry("T", FilterType::Tag, "*")).unwrap();
        assert!(d.tags_set.is_empty());
        assert_eq!(d.sub_string, "*");
        let d = subscription(&entry("T", FilterType::Sql, "a > 1")).unwrap();
        assert_eq!(d.expression_type, "SQL92");
    }

    #[test]
    fn settings_without_pub_sub_are_refused() {
        let e = heartbeat_data("c", &pb::Settings::default()).unwrap_err();
        assert_eq!(e.code, Code::UnrecognizedClientType);
    }
}
