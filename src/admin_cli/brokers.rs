//! Broker commands: brokerStatus, getBrokerConfig, updateBrokerConfig.

use std::collections::BTreeMap;

use clap::Args;

use super::output::{emit, key_values};
use super::{target_brokers, CliResult, Ctx};

#[derive(Args, Debug)]
pub struct BrokerOrClusterArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
}

#[derive(Args, Debug)]
pub struct UpdateBrokerConfigArgs {
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker: Option<String>,
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
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

pub fn broker_status(ctx: &Ctx, a: &BrokerOrClusterArgs) -> CliResult {
    let mut per = PerBroker::new();
    for addr in target_brokers(ctx, a.broker.as_deref(), a.cluster.as_deref())? {
        let t = ctx.client.broker_runtime_info(&addr)?;
        per.insert(addr, t.table);
    }
    emit(ctx, &per, || render(&per, ":"))
}

pub fn get_broker_config(ctx: &Ctx, a: &BrokerOrClusterArgs) -> CliResult {
    let mut per = PerBroker::new();
    for addr in target_brokers(ctx, a.broker.as_deref(), a.cluster.as_deref())? {
        let c = ctx.client.broker_config(&addr)?;
        per.insert(addr, c);
    }
    emit(ctx, &per, || render(&per, "="))
}

pub fn update_broker_config(ctx: &Ctx, a: &UpdateBrokerConfigArgs) -> CliResult {
    let props = BTreeMap::from([(a.key.clone(), a.value.clone())]);
    let addrs = target_brokers(ctx, a.broker.as_deref(), a.cluster.as_deref())?;
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
