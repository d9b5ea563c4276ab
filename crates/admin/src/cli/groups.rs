//! Group commands: updateSubGroup, deleteSubGroup, consumerProgress, consumerConnection,
//! producerConnection, resetOffsetByTime.

use clap::Args;
use serde::Serialize;

use super::output::{emit, fmt_ms, key_values, parse_timestamp, Table};
use super::{BrokerOrCluster, CliResult, Ctx};
use crate::bodies::{Connection, ConsumeStats, SubscriptionGroupConfig};
use crate::protocol::codes::response_code;
use crate::AdminError;

#[derive(Args, Debug)]
pub struct UpdateSubGroupArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    #[arg(short = 'g', long = "groupName")]
    pub group: String,
    #[arg(short = 's', long = "consumeEnable")]
    pub consume_enable: Option<bool>,
    #[arg(short = 'm', long = "consumeFromMinEnable")]
    pub consume_from_min_enable: Option<bool>,
    #[arg(short = 'd', long = "consumeBroadcastEnable")]
    pub consume_broadcast_enable: Option<bool>,
    #[arg(short = 'o', long = "consumeMessageOrderly")]
    pub consume_message_orderly: Option<bool>,
    #[arg(short = 'q', long = "retryQueueNums")]
    pub retry_queue_nums: Option<i32>,
    #[arg(short = 'r', long = "retryMaxTimes")]
    pub retry_max_times: Option<i32>,
    #[arg(short = 'i', long = "brokerId")]
    pub broker_id: Option<i64>,
    #[arg(short = 'w', long = "whichBrokerWhenConsumeSlowly")]
    pub which_broker_when_consume_slowly: Option<i64>,
    #[arg(short = 'a', long = "notifyConsumerIdsChanged")]
    pub notify_consumer_ids_changed: Option<bool>,
}

#[derive(Args, Debug)]
pub struct DeleteSubGroupArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    #[arg(short = 'g', long = "groupName")]
    pub group: String,
    /// Also remove the group's offsets (true|false).
    #[arg(short = 'r', long = "removeOffset")]
    pub remove_offset: Option<bool>,
}

#[derive(Args, Debug)]
pub struct ConsumerProgressArgs {
    #[arg(short = 'g', long = "groupName")]
    pub group: String,
    /// Only this topic.
    #[arg(short = 't', long = "topicName")]
    pub topic: Option<String>,
}

#[derive(Args, Debug)]
pub struct ConsumerConnectionArgs {
    #[arg(short = 'g', long = "consumerGroup")]
    pub group: String,
    /// Ask this broker (default: the first master that knows the group).
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker: Option<String>,
}

#[derive(Args, Debug)]
pub struct ProducerConnectionArgs {
    #[arg(short = 'g', long = "producerGroup")]
    pub group: String,
    /// A topic the group produces to (its broker is asked).
    #[arg(short = 't', long = "topic")]
    pub topic: String,
}

#[derive(Args, Debug)]
pub struct ResetOffsetByTimeArgs {
    #[arg(short = 'g', long = "group")]
    pub group: String,
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// now, epoch milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS (UTC).
    #[arg(short = 's', long = "timestamp")]
    pub timestamp: String,
    /// Move offsets forward too, not only back (true|false, default true).
    #[arg(short = 'f', long = "force")]
    pub force: Option<bool>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupReport<T: Serialize> {
    broker_addrs: Vec<String>,
    #[serde(flatten)]
    value: T,
}

/// Emits `report`: as JSON, or for people one `line` per broker address.
fn emit_per_broker<T: Serialize>(
    ctx: &Ctx,
    report: &GroupReport<T>,
    line: impl Fn(&str) -> String,
) -> CliResult {
    emit(ctx, report, || {
        report.broker_addrs.iter().map(|a| line(a)).collect()
    })
}

pub fn update_sub_group(ctx: &Ctx, a: &UpdateSubGroupArgs) -> CliResult {
    let d = SubscriptionGroupConfig::default();
    let config = SubscriptionGroupConfig {
        group_name: a.group.clone(),
        consume_enable: a.consume_enable.unwrap_or(d.consume_enable),
        // mqadmin's own defaults for these two differ from the config class's.
        consume_from_min_enable: a.consume_from_min_enable.unwrap_or(false),
        consume_broadcast_enable: a.consume_broadcast_enable.unwrap_or(false),
        consume_message_orderly: a
            .consume_message_orderly
            .unwrap_or(d.consume_message_orderly),
        retry_queue_nums: a.retry_queue_nums.unwrap_or(d.retry_queue_nums),
        retry_max_times: a.retry_max_times.unwrap_or(d.retry_max_times),
        broker_id: a.broker_id.unwrap_or(d.broker_id),
        which_broker_when_consume_slowly: a
            .which_broker_when_consume_slowly
            .unwrap_or(d.which_broker_when_consume_slowly),
        notify_consumer_ids_changed_enable: a
            .notify_consumer_ids_changed
            .unwrap_or(d.notify_consumer_ids_changed_enable),
        ..d
    };
    let addrs = a.target.targets(ctx)?;
    for addr in &addrs {
        ctx.client.create_subscription_group(addr, &config)?;
    }
    let report = GroupReport {
        broker_addrs: addrs,
        value: serde_json::json!({ "subscriptionGroupConfig": config }),
    };
    emit_per_broker(ctx, &report, |addr| {
        format!(
            "create subscription group [{}] to {addr} success.\n",
            a.group
        )
    })
}

pub fn delete_sub_group(ctx: &Ctx, a: &DeleteSubGroupArgs) -> CliResult {
    let addrs = a.target.targets(ctx)?;
    let clean = a.remove_offset.unwrap_or(false);
    for addr in &addrs {
        ctx.client
            .delete_subscription_group(addr, &a.group, clean)?;
    }
    // As mqadmin: the group's retry and dead-letter topics go too, where they exist.
    for topic in [format!("%RETRY%{}", a.group), format!("%DLQ%{}", a.group)] {
        for addr in &addrs {
            let _ = ctx.client.delete_topic_in_broker(addr, &topic);
        }
        let _ = ctx.client.delete_topic_in_namesrv(&topic);
    }
    let report = GroupReport {
        broker_addrs: addrs,
        value: serde_json::json!({ "groupName": a.group, "removeOffset": clean }),
    };
    emit_per_broker(ctx, &report, |addr| {
        format!(
            "delete subscription group [{}] from broker [{addr}] success.\n",
            a.group
        )
    })
}

pub fn consumer_progress(ctx: &Ctx, a: &ConsumerProgressArgs) -> CliResult {
    let mut all = ConsumeStats::default();
    let mut found = false;
    for b in ctx.client.masters(None)? {
        match ctx
            .client
            .consume_stats(&b.addr, &a.group, a.topic.as_deref())
        {
            Ok(s) => {
                found |= !s.offset_table.is_empty();
                all.consume_tps += s.consume_tps;
                all.offset_table.extend(s.offset_table);
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    if !found {
        return Err(AdminError::NotFound(format!(
            "consumer group {} has no progress on any broker (it does not exist or never committed an offset)",
            a.group
        ))
        .into());
    }
    all.offset_table
        .sort_by(|x, y| x.message_queue.cmp(&y.message_queue));
    emit(ctx, &all, || {
        let mut t = Table::new(&[
            "Topic",
            "Broker Name",
            "QID",
            "Broker Offset",
            "Consumer Offset",
            "Diff",
            "LastTime",
        ]);
        for q in &all.offset_table {
            t.row(vec![
                q.message_queue.topic.clone(),
                q.message_queue.broker_name.clone(),
                q.message_queue.queue_id.to_string(),
                q.offset.broker_offset.to_string(),
                q.offset.consumer_offset.to_string(),
                q.diff().to_string(),
                if q.offset.last_timestamp > 0 {
                    fmt_ms(q.offset.last_timestamp)
                } else {
                    "N/A".into()
                },
            ]);
        }
        format!(
            "{}\n{}",
            t.render(),
            key_values([
                ("Consume TPS", format!("{:.2}", all.consume_tps)),
                ("Consume Diff Total", all.diff_total().to_string()),
            ])
        )
    })
}

pub fn consumer_connection(ctx: &Ctx, a: &ConsumerConnectionArgs) -> CliResult {
    let addrs: Vec<String> = match &a.broker {
        Some(b) => vec![b.clone()],
        None => ctx
            .client
            .masters(None)?
            .into_iter()
            .map(|b| b.addr)
            .collect(),
    };
    let mut last = None;
    let mut conn = None;
    for addr in &addrs {
        match ctx.client.consumer_connection(addr, &a.group) {
            Ok(c) => {
                conn = Some(c);
                break;
            }
            Err(e) if e.is_not_found() => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    let conn = match (conn, last) {
        (Some(c), _) => c,
        (None, Some(e)) => return Err(e.into()),
        (None, None) => {
            return Err(
                AdminError::NotFound(format!("consumer group {} is not online", a.group)).into(),
            )
        }
    };
    emit(ctx, &conn, || {
        let t = connections_table(&conn.connection_set);
        let mut s = Table::new(&["Topic", "SubExpression"]);
        for (topic, sub) in &conn.subscription_table {
            s.row(vec![topic.clone(), sub.sub_string.clone()]);
        }
        let enum_name = |v: Option<serde_json::Value>| {
            v.and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        format!(
            "{}\nBelow is subscription:\n{}\n{}",
            t.render(),
            s.render(),
            key_values([
                (
                    "ConsumeType",
                    enum_name(conn.consume_type.and_then(|v| serde_json::to_value(v).ok()))
                ),
                (
                    "MessageModel",
                    enum_name(
                        conn.message_model
                            .and_then(|v| serde_json::to_value(v).ok())
                    )
                ),
                (
                    "ConsumeFromWhere",
                    enum_name(
                        conn.consume_from_where
                            .and_then(|v| serde_json::to_value(v).ok())
                    )
                ),
            ])
        )
    })
}

pub fn producer_connection(ctx: &Ctx, a: &ProducerConnectionArgs) -> CliResult {
    let broker = ctx
        .client
        .route_masters(&a.topic)?
        .into_iter()
        .next()
        .ok_or_else(|| AdminError::NotFound(format!("topic {} has no broker", a.topic)))?;
    let conn = ctx.client.producer_connection(&broker.addr, &a.group)?;
    if conn.connection_set.is_empty() {
        return Err(
            AdminError::NotFound(format!("producer group {} is not online", a.group)).into(),
        );
    }
    emit(ctx, &conn, || {
        connections_table(&conn.connection_set).render()
    })
}

pub fn reset_offset_by_time(ctx: &Ctx, a: &ResetOffsetByTimeArgs) -> CliResult {
    let ts = parse_timestamp(&a.timestamp)?;
    let force = a.force.unwrap_or(true);
    let body = ctx.client.reset_offset(&a.topic, &a.group, ts, force);
    let body = match body {
        Err(AdminError::Refused { code, .. }) if code == response_code::TOPIC_NOT_EXIST => {
            return Err(AdminError::NotFound(format!("topic {} does not exist", a.topic)).into())
        }
        other => other?,
    };
    if body.offset_table.is_empty() {
        return Err(AdminError::NotFound(format!(
            "consumer group {} has no offsets on topic {}",
            a.group, a.topic
        ))
        .into());
    }
    emit(ctx, &body, || {
        let mut t = Table::new(&["brokerName", "queueId", "offset"]);
        for q in &body.offset_table {
            t.row(vec![
                q.message_queue.broker_name.clone(),
                q.message_queue.queue_id.to_string(),
                q.offset.to_string(),
            ]);
        }
        format!(
            "rollback consumer offset by specified group[{}], topic[{}], force[{force}], timestamp(string)[{}], timestamp(long)[{ts}]\n{}",
            a.group,
            a.topic,
            a.timestamp,
            t.render()
        )
    })
}

/// A group's clients, as mqadmin's consumerConnection and producerConnection list them.
fn connections_table<'a>(set: impl IntoIterator<Item = &'a Connection>) -> Table {
    let mut t = Table::new(&["ClientId", "ClientAddr", "Language", "Version"]);
    for c in set {
        t.row(vec![
            c.client_id.clone(),
            c.client_addr.clone(),
            c.language.clone(),
            c.version.to_string(),
        ]);
    }
    t
}
