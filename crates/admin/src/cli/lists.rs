//! The batch commands provisioning scripts use: updateTopicList and updateSubGroupList, each
//! reading a JSON array from a file (`-f`: Java's `TopicConfig` or `SubscriptionGroupConfig`
//! objects, as mqadmin reads them) and sending it in one request to a broker or to every master
//! of a cluster (UPDATE_AND_CREATE_TOPIC_LIST, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST).

use std::path::PathBuf;

use clap::Args;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::output::emit;
use super::{BrokerOrCluster, CliError, CliResult, Ctx};
use crate::bodies::{SubscriptionGroupConfig, TopicConfig};

#[derive(Args, Debug)]
pub struct ListFileArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    /// A JSON file holding the list of configs.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
}

/// What a batch command did, for `--json`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BatchReport<'a, T> {
    broker_addrs: Vec<String>,
    configs: &'a [T],
}

/// The file's JSON array; an unreadable file or another shape is a usage error naming the file.
fn read_list<T: DeserializeOwned>(file: &PathBuf) -> Result<Vec<T>, CliError> {
    let bytes = std::fs::read(file)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", file.display())))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        CliError::Usage(format!(
            "{} is not a JSON array of configs: {e}",
            file.display()
        ))
    })
}

/// Sends `configs` with `send` to every target and says so per broker, as mqadmin prints it.
fn submit<T: Serialize>(
    ctx: &Ctx,
    target: &BrokerOrCluster,
    configs: &[T],
    what: &str,
    send: impl Fn(&str) -> Result<(), crate::AdminError>,
) -> CliResult {
    let addrs = if configs.is_empty() {
        Vec::new()
    } else {
        target.targets(ctx)?
    };
    for addr in &addrs {
        send(addr)?;
    }
    let report = BatchReport {
        broker_addrs: addrs,
        configs,
    };
    emit(ctx, &report, || {
        report
            .broker_addrs
            .iter()
            .map(|a| {
                format!("submit batch of {what} to {a} success, please check the result later.\n")
            })
            .collect()
    })
}

pub fn update_topic_list(ctx: &Ctx, a: &ListFileArgs) -> CliResult {
    let configs: Vec<TopicConfig> = read_list(&a.file)?;
    submit(ctx, &a.target, &configs, "topic config", |addr| {
        ctx.client.create_topic_list(addr, &configs)
    })
}

pub fn update_sub_group_list(ctx: &Ctx, a: &ListFileArgs) -> CliResult {
    let configs: Vec<SubscriptionGroupConfig> = read_list(&a.file)?;
    submit(
        ctx,
        &a.target,
        &configs,
        "subscription group config",
        |addr| ctx.client.create_subscription_group_list(addr, &configs),
    )
}
