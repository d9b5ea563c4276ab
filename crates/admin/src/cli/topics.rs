//! Cluster and topic commands: clusterList, topicList, topicRoute, topicStatus, updateTopic,
//! deleteTopic.

use std::collections::BTreeMap;

use clap::Args;
use serde::Serialize;

use super::output::{emit, fmt_ms, Table};
use super::{masters_of, BrokerOrCluster, CliError, CliResult, Ctx};
use crate::bodies::{KvTable, TopicConfig};
use crate::{AdminError, BrokerRef};

#[derive(Args, Debug)]
pub struct ClusterListArgs {
    /// Only this cluster.
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
}

#[derive(Args, Debug)]
pub struct TopicArg {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
}

#[derive(Args, Debug)]
pub struct UpdateTopicArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    #[arg(short = 'r', long = "readQueueNums", default_value_t = 8)]
    pub read_queue_nums: i32,
    #[arg(short = 'w', long = "writeQueueNums", default_value_t = 8)]
    pub write_queue_nums: i32,
    /// Permission: 2 write, 4 read, 6 read and write.
    #[arg(short = 'p', long = "perm", default_value_t = 6)]
    pub perm: i32,
    /// Ordered topic (true|false).
    #[arg(short = 'o', long = "order")]
    pub order: Option<bool>,
    /// Attributes, `+key=value,+key=value`.
    #[arg(short = 'a', long = "attributes")]
    pub attributes: Option<String>,
}

#[derive(Args, Debug)]
pub struct DeleteTopicArgs {
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// Delete from every master of this cluster (default: the brokers of the topic's route).
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
}

/// One broker row of clusterList.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterRow {
    #[serde(flatten)]
    broker: BrokerRef,
    /// GET_BROKER_RUNTIME_INFO, or null when the broker did not answer.
    runtime: Option<BTreeMap<String, String>>,
}

pub fn cluster_list(ctx: &Ctx, a: &ClusterListArgs) -> CliResult {
    let brokers = ctx.client.brokers(a.cluster.as_deref())?;
    let rows: Vec<ClusterRow> = brokers
        .into_iter()
        .map(|b| {
            let runtime = ctx
                .client
                .broker_runtime_info(&b.addr)
                .ok()
                .map(|t: KvTable| t.table);
            ClusterRow { broker: b, runtime }
        })
        .collect();
    emit(ctx, &rows, || {
        let mut t = Table::new(&[
            "Cluster Name",
            "Broker Name",
            "BID",
            "Addr",
            "Version",
            "InTPS",
            "OutTPS",
        ]);
        for r in &rows {
            let get = |k: &str| {
                r.runtime
                    .as_ref()
                    .and_then(|m| m.get(k))
                    .map(|v| v.split(' ').next().unwrap_or("").to_owned())
                    .unwrap_or_else(|| "-".into())
            };
            t.row(vec![
                r.broker.cluster.clone(),
                r.broker.broker_name.clone(),
                r.broker.broker_id.to_string(),
                r.broker.addr.clone(),
                get("brokerVersionDesc"),
                get("putTps"),
                get("getTransferredTps"),
            ]);
        }
        t.render()
    })
}

pub fn topic_list(ctx: &Ctx) -> CliResult {
    let list = ctx.client.topic_list()?;
    emit(ctx, &list, || {
        list.topic_list.iter().map(|t| format!("{t}\n")).collect()
    })
}

pub fn topic_route(ctx: &Ctx, a: &TopicArg) -> CliResult {
    let route = ctx.client.topic_route(&a.topic)?;
    emit(ctx, &route, || {
        let mut b = Table::new(&["Cluster Name", "Broker Name", "BID", "Addr"]);
        for bd in &route.broker_datas {
            for (id, addr) in &bd.broker_addrs {
                b.row(vec![
                    bd.cluster.clone(),
                    bd.broker_name.clone(),
                    id.to_string(),
                    addr.clone(),
                ]);
            }
        }
        let mut q = Table::new(&["Broker Name", "Read Queues", "Write Queues", "Perm"]);
        for qd in &route.queue_datas {
            q.row(vec![
                qd.broker_name.clone(),
                qd.read_queue_nums.to_string(),
                qd.write_queue_nums.to_string(),
                perm_text(qd.perm),
            ]);
        }
        format!("{}\n{}", b.render(), q.render())
    })
}

/// A topic permission as mqadmin shows it: R, W, RW or -.
fn perm_text(perm: i32) -> String {
    let r = if perm & 4 != 0 { "R" } else { "" };
    let w = if perm & 2 != 0 { "W" } else { "" };
    let s = format!("{r}{w}");
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}

pub fn topic_status(ctx: &Ctx, a: &TopicArg) -> CliResult {
    let stats = ctx.client.topic_status(&a.topic)?;
    emit(ctx, &stats, || {
        let mut t = Table::new(&[
            "Broker Name",
            "QID",
            "Min Offset",
            "Max Offset",
            "Last Updated",
        ]);
        for q in &stats.offset_table {
            let last = if q.offset.last_update_timestamp > 0 {
                fmt_ms(q.offset.last_update_timestamp)
            } else {
                String::new()
            };
            t.row(vec![
                q.message_queue.broker_name.clone(),
                q.message_queue.queue_id.to_string(),
                q.offset.min_offset.to_string(),
                q.offset.max_offset.to_string(),
                last,
            ]);
        }
        t.render()
    })
}

/// `+a=b,+c=d` into a map; anything else is a usage error.
fn parse_attributes(s: &str) -> Result<BTreeMap<String, String>, CliError> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let kv = part.strip_prefix('+').and_then(|p| p.split_once('='));
        match kv {
            Some((k, v)) if !k.is_empty() => {
                out.insert(k.to_owned(), v.to_owned());
            }
            _ => {
                return Err(CliError::Usage(format!(
                    "attribute {part:?} is not +key=value"
                )))
            }
        }
    }
    Ok(out)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UpdateTopicReport {
    broker_addrs: Vec<String>,
    topic_config: TopicConfig,
}

pub fn update_topic(ctx: &Ctx, a: &UpdateTopicArgs) -> CliResult {
    if !matches!(a.perm, 2 | 4 | 6) {
        return Err(CliError::Usage(format!("perm {} is not 2, 4 or 6", a.perm)));
    }
    let config = TopicConfig {
        topic_name: a.topic.clone(),
        read_queue_nums: a.read_queue_nums,
        write_queue_nums: a.write_queue_nums,
        perm: a.perm,
        order: a.order.unwrap_or(false),
        attributes: match &a.attributes {
            Some(s) => parse_attributes(s)?,
            None => BTreeMap::new(),
        },
        ..TopicConfig::default()
    };
    let addrs = a.target.targets(ctx)?;
    for addr in &addrs {
        ctx.client.create_topic(addr, &config)?;
    }
    let report = UpdateTopicReport {
        broker_addrs: addrs,
        topic_config: config,
    };
    emit(ctx, &report, || {
        let mut s = String::new();
        for addr in &report.broker_addrs {
            s.push_str(&format!("create topic to {addr} success.\n"));
        }
        let c = &report.topic_config;
        s.push_str(&format!(
            "TopicConfig [topicName={}, readQueueNums={}, writeQueueNums={}, perm={}, order={}]\n",
            c.topic_name,
            c.read_queue_nums,
            c.write_queue_nums,
            perm_text(c.perm),
            c.order
        ));
        s
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeleteTopicReport {
    topic: String,
    broker_addrs: Vec<String>,
    namesrv_addrs: Vec<String>,
}

pub fn delete_topic(ctx: &Ctx, a: &DeleteTopicArgs) -> CliResult {
    let addrs: Vec<String> = match &a.cluster {
        Some(c) => masters_of(ctx, c)?,
        None => match ctx.client.route_masters(&a.topic) {
            Ok(b) => b.into_iter().map(|b| b.addr).collect(),
            Err(e) if e.is_not_found() => {
                return Err(
                    AdminError::NotFound(format!("topic {} does not exist", a.topic)).into(),
                )
            }
            Err(e) => return Err(e.into()),
        },
    };
    for addr in &addrs {
        ctx.client.delete_topic_in_broker(addr, &a.topic)?;
    }
    ctx.client.delete_topic_in_namesrv(&a.topic)?;
    let report = DeleteTopicReport {
        topic: a.topic.clone(),
        broker_addrs: addrs,
        namesrv_addrs: ctx.client.namesrv_addrs().to_vec(),
    };
    emit(ctx, &report, || {
        let mut s = String::new();
        for addr in &report.broker_addrs {
            s.push_str(&format!(
                "delete topic [{}] from broker [{addr}] success.\n",
                report.topic
            ));
        }
        s.push_str(&format!(
            "delete topic [{}] from NameServer success.\n",
            report.topic
        ));
        s
    })
}
