//! Broker commands: brokerStatus, getBrokerConfig, updateBrokerConfig.

use std::collections::BTreeMap;

use clap::Args;

use super::output::{emit, key_values};
use super::{BrokerOrCluster, CliError, CliResult, Ctx};
use crate::AdminError;

#[derive(Args, Debug)]
pub struct UpdateBrokerConfigArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    /// Config key.
    #[arg(short = 'k', long = "key")]
    pub key: String,
    /// Config value.
    #[arg(short = 'v', long = "value")]
    pub value: String,
}

/// Broker address -> key -> value, for each broker asked.
type PerBroker = BTreeMap<String, BTreeMap<String, String>>;

fn render(per: &PerBroker, sep: &str) -> String {
    let mut s = String::new();
    for (addr, kv) in per {
        if per.len() > 1 || sep == "=" {
            s.push_str(&format!("============{addr}============\n"));
        }
        if sep == "=" {
            let w = kv.keys().map(String::len).max().unwrap_or(0);
            for (k, v) in kv {
                s.push_str(&format!("{k:<w$}  =  {v}\n"));
            }
        } else {
            s.push_str(&key_values(kv.iter().map(|(k, v)| (k.as_str(), v.clone()))));
        }
    }
    s
}

/// `ask` of every broker `a` names, by address.
fn ask_each(
    ctx: &Ctx,
    a: &BrokerOrCluster,
    ask: impl Fn(&str) -> Result<BTreeMap<String, String>, AdminError>,
) -> Result<PerBroker, CliError> {
    let mut per = PerBroker::new();
    for addr in a.targets(ctx)? {
        let kv = ask(&addr)?;
        per.insert(addr, kv);
    }
    Ok(per)
}

pub fn broker_status(ctx: &Ctx, a: &BrokerOrCluster) -> CliResult {
    let per = ask_each(ctx, a, |addr| {
        ctx.client.broker_runtime_info(addr).map(|t| t.table)
    })?;
    emit(ctx, &per, || render(&per, ":"))
}

pub fn get_broker_config(ctx: &Ctx, a: &BrokerOrCluster) -> CliResult {
    let per = ask_each(ctx, a, |addr| ctx.client.broker_config(addr))?;
    emit(ctx, &per, || render(&per, "="))
}

pub fn update_broker_config(ctx: &Ctx, a: &UpdateBrokerConfigArgs) -> CliResult {
    let props = BTreeMap::from([(a.key.clone(), a.value.clone())]);
    let addrs = a.target.targets(ctx)?;
    for addr in &addrs {
        ctx.client.update_broker_config(addr, &props)?;
    }
    let report: PerBroker = addrs.iter().map(|a| (a.clone(), props.clone())).collect();
    emit(ctx, &report, || {
        addrs
            .iter()
            .map(|addr| format!("update broker config success, {addr}\n"))
            .collect()
    })
}
