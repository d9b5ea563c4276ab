//! setConsumeMode: how a consumer group reads a topic on a broker or on every master of a
//! cluster, pull or pop (SET_MESSAGE_REQUEST_MODE), as mqadmin's command sets it.

use clap::Args;

use super::output::emit;
use super::{BrokerOrCluster, CliResult, Ctx};
use crate::protocol::assignment::{MessageRequestMode, SetMessageRequestModeRequestBody};
use crate::AdminError;

#[derive(Args, Debug)]
pub struct SetConsumeModeArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    #[arg(short = 't', long = "topicName")]
    pub topic: String,
    #[arg(short = 'g', long = "groupName")]
    pub group: String,
    /// PULL or POP.
    #[arg(short = 'm', long = "mode")]
    pub mode: String,
    /// With POP: how many other clients' queues each client also pops (0: every queue).
    #[arg(short = 'q', long = "popShareQueueNum")]
    pub pop_share_queue_num: Option<i32>,
}

pub fn set_consume_mode(ctx: &Ctx, a: &SetConsumeModeArgs) -> CliResult {
    let mode = match a.mode.to_ascii_uppercase().as_str() {
        "PULL" => MessageRequestMode::Pull,
        "POP" => MessageRequestMode::Pop,
        other => {
            return Err(AdminError::InvalidArgument(format!(
                "mode {other} is neither PULL nor POP"
            ))
            .into())
        }
    };
    let body = SetMessageRequestModeRequestBody {
        consumer_group: a.group.clone(),
        mode,
        pop_share_queue_num: a.pop_share_queue_num.unwrap_or(0),
        topic: a.topic.clone(),
    };
    let addrs = a.target.targets(ctx)?;
    for addr in &addrs {
        ctx.client.set_message_request_mode(addr, &body)?;
    }
    let report = serde_json::json!({ "brokerAddrs": addrs, "mode": body });
    emit(ctx, &report, || {
        addrs
            .iter()
            .map(|addr| {
                format!(
                    "set consume mode to {addr} success: {}@{} {}",
                    a.topic,
                    a.group,
                    a.mode.to_ascii_uppercase()
                )
            })
            .collect()
    })
}
