//! Message commands: queryMsgById, queryMsgByKey, queryMsgByOffset, sendMessage,
//! consumeMessage.

use clap::Args;

use super::output::{emit, fmt_ms, key_values, parse_timestamp, Table};
use super::{CliError, CliResult, Ctx};
use crate::{AdminError, MessageView, TOOLS_CONSUMER_GROUP};

#[derive(Args, Debug)]
pub struct QueryMsgByIdArgs {
    /// Message id(s), comma-separated: the producer's id (with -t) or the broker's offset id.
    #[arg(short = 'i', long = "msgId")]
    pub msg_id: String,
    /// The topic, to find a producer id by its UNIQ_KEY.
    #[arg(short = 't', long = "topic")]
    pub topic: Option<String>,
}

#[derive(Args, Debug)]
pub struct QueryMsgByKeyArgs {
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    #[arg(short = 'k', long = "msgKey")]
    pub key: String,
    /// Begin timestamp (ms), default 0.
    #[arg(short = 'b', long = "beginTimestamp", default_value_t = 0)]
    pub begin: i64,
    /// End timestamp (ms), default the largest.
    #[arg(short = 'e', long = "endTimestamp", default_value_t = i64::MAX)]
    pub end: i64,
    /// At most this many messages per broker.
    #[arg(short = 'm', long = "maxNum", default_value_t = 64)]
    pub max_num: i32,
}

#[derive(Args, Debug)]
pub struct QueryMsgByOffsetArgs {
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    #[arg(short = 'b', long = "brokerName")]
    pub broker_name: String,
    #[arg(short = 'i', long = "queueId")]
    pub queue_id: i32,
    #[arg(short = 'o', long = "offset")]
    pub offset: i64,
}

#[derive(Args, Debug)]
pub struct SendMessageArgs {
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// The body, UTF-8.
    #[arg(short = 'p', long = "body")]
    pub body: String,
    /// Message keys (space-separated).
    #[arg(short = 'k', long = "key")]
    pub keys: Option<String>,
    /// Message tag.
    #[arg(short = 'c', long = "tags")]
    pub tags: Option<String>,
    /// Send to this broker (name).
    #[arg(short = 'b', long = "broker")]
    pub broker: Option<String>,
    /// Send to this queue.
    #[arg(short = 'i', long = "qid")]
    pub queue_id: Option<i32>,
}

#[derive(Args, Debug)]
pub struct ConsumeMessageArgs {
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// Only this broker (name).
    #[arg(short = 'b', long = "brokerName")]
    pub broker_name: Option<String>,
    /// Only this queue.
    #[arg(short = 'i', long = "queueId")]
    pub queue_id: Option<i32>,
    /// Start at this queue offset (default: the first stored, or -s).
    #[arg(short = 'o', long = "offset")]
    pub offset: Option<i64>,
    /// The consumer group the pulls are made as.
    #[arg(short = 'g', long = "consumerGroup", default_value = TOOLS_CONSUMER_GROUP)]
    pub group: String,
    /// Start at the first message stored at or after this time.
    #[arg(short = 's', long = "beginTimestamp")]
    pub begin: Option<String>,
    /// Stop before the first message stored at or after this time.
    #[arg(short = 'e', long = "endTimestamp")]
    pub end: Option<String>,
    /// At most this many messages.
    #[arg(short = 'c', long = "MessageNumber", default_value_t = 128)]
    pub count: usize,
}

/// A message as mqadmin prints it.
fn detail(m: &MessageView) -> String {
    let props: Vec<String> = m
        .properties
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    key_values([
        ("Message ID", m.msg_id.clone()),
        ("OffsetID", m.offset_msg_id.clone()),
        ("Topic", m.topic.clone()),
        ("Tags", format!("[{}]", m.tags.clone().unwrap_or_default())),
        ("Keys", format!("[{}]", m.keys.clone().unwrap_or_default())),
        ("Queue ID", m.queue_id.to_string()),
        ("Queue Offset", m.queue_offset.to_string()),
        ("CommitLog Offset", m.commit_log_offset.to_string()),
        ("Reconsume Times", m.reconsume_times.to_string()),
        ("Born Timestamp", fmt_ms(m.born_timestamp)),
        ("Store Timestamp", fmt_ms(m.store_timestamp)),
        ("Born Host", m.born_host.clone()),
        ("Store Host", m.store_host.clone()),
        ("System Flag", m.sys_flag.to_string()),
        ("Properties", format!("{{{}}}", props.join(", "))),
        ("Message Body", m.body.clone()),
    ])
}

pub fn query_msg_by_id(ctx: &Ctx, a: &QueryMsgByIdArgs) -> CliResult {
    let mut found = Vec::new();
    for id in a.msg_id.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        found.push(ctx.client.view_message_by_id(a.topic.as_deref(), id)?);
    }
    if found.is_empty() {
        return Err(CliError::Usage("no message id given".into()));
    }
    if ctx.json && found.len() == 1 {
        return emit(ctx, &found[0], String::new);
    }
    emit(ctx, &found, || {
        found.iter().map(detail).collect::<Vec<_>>().join("\n")
    })
}

pub fn query_msg_by_key(ctx: &Ctx, a: &QueryMsgByKeyArgs) -> CliResult {
    let found = ctx
        .client
        .query_message_by_key(&a.topic, &a.key, a.max_num, a.begin, a.end)?;
    if found.is_empty() {
        return Err(AdminError::NotFound(format!(
            "no message of topic {} has key {}",
            a.topic, a.key
        ))
        .into());
    }
    emit(ctx, &found, || {
        let mut t = Table::new(&["Message ID", "QID", "Offset"]);
        for m in &found {
            t.row(vec![
                m.msg_id.clone(),
                m.queue_id.to_string(),
                m.queue_offset.to_string(),
            ]);
        }
        t.render()
    })
}

pub fn query_msg_by_offset(ctx: &Ctx, a: &QueryMsgByOffsetArgs) -> CliResult {
    let addr = ctx.client.master_addr_of(&a.broker_name)?;
    let pulled = ctx.client.pull(
        &addr,
        TOOLS_CONSUMER_GROUP,
        &a.topic,
        a.queue_id,
        a.offset,
        1,
    )?;
    let m = pulled
        .messages
        .into_iter()
        .find(|m| m.queue_offset == a.offset)
        .ok_or_else(|| {
            AdminError::NotFound(format!(
                "no message at offset {} of {} queue {} on {} ({})",
                a.offset, a.topic, a.queue_id, a.broker_name, pulled.pull_status
            ))
        })?;
    emit(ctx, &m, || detail(&m))
}

pub fn send_message(ctx: &Ctx, a: &SendMessageArgs) -> CliResult {
    let route = ctx.client.topic_route(&a.topic)?;
    let masters = ctx.client.route_masters(&a.topic)?;
    let broker = match &a.broker {
        Some(name) => masters
            .iter()
            .find(|b| &b.broker_name == name)
            .ok_or_else(|| {
                AdminError::NotFound(format!("broker {name} does not serve topic {}", a.topic))
            })?,
        None => masters
            .iter()
            .find(|b| {
                route.queue_datas.iter().any(|q| {
                    q.broker_name == b.broker_name && q.perm & 2 != 0 && q.write_queue_nums > 0
                })
            })
            .ok_or_else(|| {
                AdminError::NotFound(format!("no broker takes writes to topic {}", a.topic))
            })?,
    };
    let queues = route
        .queue_datas
        .iter()
        .find(|q| q.broker_name == broker.broker_name)
        .map(|q| q.write_queue_nums)
        .unwrap_or(0);
    let queue_id = match a.queue_id {
        Some(q) if q < 0 || q >= queues => {
            return Err(CliError::Usage(format!(
                "queue {q} is not one of the {queues} write queues of {} on {}",
                a.topic, broker.broker_name
            )))
        }
        Some(q) => q,
        None => (crate::common::now_ms() % i64::from(queues.max(1))) as i32,
    };
    let r = ctx.client.send_message(
        &broker.addr,
        &broker.broker_name,
        &a.topic,
        queue_id,
        a.body.as_bytes(),
        a.tags.as_deref(),
        a.keys.as_deref(),
    )?;
    emit(ctx, &r, || {
        let mut t = Table::new(&["Broker Name", "QID", "Send Result", "MsgId", "OffsetMsgId"]);
        t.row(vec![
            r.broker_name.clone(),
            r.queue_id.to_string(),
            r.send_status.clone(),
            r.msg_id.clone(),
            r.offset_msg_id.clone(),
        ]);
        t.render()
    })
}

pub fn consume_message(ctx: &Ctx, a: &ConsumeMessageArgs) -> CliResult {
    let begin = a.begin.as_deref().map(parse_timestamp).transpose()?;
    let end = a.end.as_deref().map(parse_timestamp).transpose()?;
    let route = ctx.client.topic_route(&a.topic)?;
    let mut out: Vec<MessageView> = Vec::new();
    'brokers: for b in ctx.client.route_masters(&a.topic)? {
        if a.broker_name.as_ref().is_some_and(|n| n != &b.broker_name) {
            continue;
        }
        let read = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == b.broker_name)
            .map(|q| q.read_queue_nums)
            .unwrap_or(0);
        for qid in 0..read {
            if a.queue_id.is_some_and(|q| q != qid) {
                continue;
            }
            let mut offset = match (a.offset, begin) {
                (Some(o), _) => o,
                (None, Some(ts)) => ctx.client.search_offset(&b.addr, &a.topic, qid, ts)?,
                (None, None) => ctx.client.min_offset(&b.addr, &a.topic, qid)?,
            };
            let stop = match end {
                Some(ts) => ctx.client.search_offset(&b.addr, &a.topic, qid, ts)?,
                None => ctx.client.max_offset(&b.addr, &a.topic, qid)?,
            };
            while offset < stop && out.len() < a.count {
                let want = (a.count - out.len()).min(32) as i32;
                let p = ctx
                    .client
                    .pull(&b.addr, &a.group, &a.topic, qid, offset, want)?;
                if p.messages.is_empty() || p.next_begin_offset <= offset {
                    break;
                }
                out.extend(p.messages.into_iter().filter(|m| m.queue_offset < stop));
                offset = p.next_begin_offset;
            }
            out.truncate(a.count);
            if out.len() >= a.count {
                break 'brokers;
            }
        }
    }
    emit(ctx, &out, || {
        let mut s: String = out
            .iter()
            .map(|m| format!("Consume ok\n{}\n", detail(m)))
            .collect();
        s.push_str(&format!("{} message(s) consumed\n", out.len()));
        s
    })
}
