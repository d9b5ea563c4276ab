//! What an admin asks a gRPC client through the broker (Java's `GrpcClientChannel` and
//! `ClientActivity`): CONSUME_MESSAGE_DIRECTLY (309) becomes a VerifyMessageCommand on the
//! client's Telemetry stream, GET_CONSUMER_RUNNING_INFO (307) with `jstackEnable` a
//! PrintThreadStackTraceCommand; the client's answer (matched by nonce) becomes the Remoting
//! answer the broker waits for: a `ConsumeMessageDirectlyResult` (OK: CR_SUCCESS,
//! FAILED_TO_CONSUME_MESSAGE: CR_LATER, MESSAGE_CORRUPTED: CR_RETURN_NULL), or a
//! `ConsumerRunningInfo` with the stack. A client without a stream, or a running-info request
//! without `jstackEnable` (Java's proxy leaves those unanswered), is answered at once. Questions
//! waiting per client are bounded (`questions::MAX_WAITING`); the broker's own timeout ends the others.

use ringmq_broker::local;
use ringmq_protocol::codes::{request_code as req, response_code as rc};
use ringmq_protocol::headers::GetConsumerRunningInfoRequestHeader;
use ringmq_protocol::message;
use ringmq_protocol::RemotingCommand;

use crate::clients::Client;
use crate::convert;
use crate::endpoint::Endpoint;
use crate::pb::{self, telemetry_command::Command, Code};
use crate::questions::Waiting;

/// Hands `answer` to the broker request it answers, on the client's shard.
fn answer(ep: &Endpoint, s: &Client, answer: RemotingCommand) {
    let conn = s.conn.id;
    if !ep.gateway.post(s.shard, move |sh| {
        local::complete_answer(sh, conn, answer);
    }) {
        tracing::debug!(client = %s.client_id, "shard busy: the broker's request times out instead");
    }
}

fn answer_to(w: Waiting, code: i32, remark: Option<String>) -> RemotingCommand {
    let mut asked = RemotingCommand::new_request(w.code);
    asked.opaque = w.opaque;
    RemotingCommand::response_for(&asked, code, remark)
}

/// A broker request the client cannot answer: answered for it.
pub fn refuse(ep: &Endpoint, s: &Client, cmd: &RemotingCommand, why: &str) {
    let w = Waiting {
        opaque: cmd.opaque,
        code: cmd.code,
    };
    answer(
        ep,
        s,
        answer_to(w, rc::REQUEST_CODE_NOT_SUPPORTED, Some(why.to_string())),
    );
}

/// Puts the broker's question `cmd` (307 or 309) to the client on its stream.
pub fn ask(ep: &Endpoint, s: &Client, cmd: &RemotingCommand) {
    let Some(tx) = s.telemetry() else {
        return refuse(ep, s, cmd, "the gRPC client has no open Telemetry stream");
    };
    let w = Waiting {
        opaque: cmd.opaque,
        code: cmd.code,
    };
    let command = match cmd.code {
        req::CONSUME_MESSAGE_DIRECTLY => {
            let Ok(rec) = message::decode(&cmd.body, false) else {
                return refuse(ep, s, cmd, "the message to verify does not decode");
            };
            let Some(nonce) = ep.questions.open(&s.client_id, w) else {
                return refuse(ep, s, cmd, "too many questions waiting for this client");
            };
            Command::VerifyMessageCommand(pb::VerifyMessageCommand {
                nonce,
                message: Some(convert::incoming(&rec, &cmd.body, rec.topic, None)),
            })
        }
        _ => {
            let jstack = GetConsumerRunningInfoRequestHeader::from_command(cmd)
                .is_ok_and(|h| h.jstack_enable);
            if !jstack {
                return refuse(
                    ep,
                    s,
                    cmd,
                    "a gRPC client reports its running info only as a thread stack (jstackEnable)",
                );
            }
            let Some(nonce) = ep.questions.open(&s.client_id, w) else {
                return refuse(ep, s, cmd, "too many questions waiting for this client");
            };
            Command::PrintThreadStackTraceCommand(pb::PrintThreadStackTraceCommand { nonce })
        }
    };
    let sent = tx.try_send(Ok(pb::TelemetryCommand {
        status: None,
        command: Some(command),
    }));
    if sent.is_err() {
        refuse(
            ep,
            s,
            cmd,
            "the gRPC client's Telemetry stream is full or closed",
        );
    }
}

/// The client's answer to a verify-message question.
pub fn verified(
    ep: &Endpoint,
    s: &Client,
    status: Option<&pb::Status>,
    r: &pb::VerifyMessageResult,
) {
    let Some(w) = ep.questions.close(&s.client_id, &r.nonce) else {
        return;
    };
    let code = status.map_or(Code::Ok as i32, |st| st.code);
    let result = if code == Code::Ok as i32 {
        "CR_SUCCESS"
    } else if code == Code::FailedToConsumeMessage as i32 {
        "CR_LATER"
    } else if code == Code::MessageCorrupted as i32 {
        "CR_RETURN_NULL"
    } else {
        "CR_THROW_EXCEPTION"
    };
    let body = format!(
        r#"{{"autoCommit":true,"consumeResult":"{result}","order":false,"remark":"from gRPC client","spentTimeMills":0}}"#
    );
    answer(ep, s, answer_to(w, rc::SUCCESS, None).with_body(body));
}

/// The client's answer to a thread-stack question.
pub fn stack_printed(
    ep: &Endpoint,
    s: &Client,
    status: Option<&pb::Status>,
    r: &pb::ThreadStackTrace,
) {
    let Some(w) = ep.questions.close(&s.client_id, &r.nonce) else {
        return;
    };
    let code = status.map_or(Code::Ok as i32, |st| st.code);
    let reply = if code == Code::Ok as i32 {
        let info = serde_json::json!({
            "jstack": r.thread_stack_trace.clone().unwrap_or_default(),
            "mqTable": {},
            "properties": {},
            "statusTable": {},
            "subscriptionSet": [],
        });
        answer_to(w, rc::SUCCESS, None).with_body(info.to_string())
    } else if code == Code::VerifyFifoMessageUnsupported as i32 {
        answer_to(
            w,
            rc::NO_PERMISSION,
            Some("forbidden to verify message".into()),
        )
    } else {
        answer_to(
            w,
            rc::SYSTEM_ERROR,
            Some("the gRPC client could not print its stack".into()),
        )
    };
    answer(ep, s, reply);
}
