//! POP_MESSAGE (200050) and PEEK_MESSAGE (200052) on the connection's shard: the checks in
//! Java's order, the queues to read (one, or every readable queue of the topic from a rotating
//! start, with the group's retry topics read first `popFromRetryProbability` percent of the
//! time and after the topic otherwise), each read on its owner (`queue::pop`), the parking when
//! nothing was found, and the answer: POP's header with its info strings, and the records as a
//! pull's body (zero-copy, unless a message of a retry topic has to be rewritten: its topic set
//! back to the one asked for and its handle put in `POP_CK`, as Java does).

use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::common::now_ms;
use crate::error::BrokerError;
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::{
    PeekMessageRequestHeader, PopMessageRequestHeader, PopMessageResponseHeader,
};
use crate::protocol::message;
use crate::protocol::pop::{self as wire, ExtraInfo, InfoEntry, RetryFlag, POP_ORDER_REVIVE_QUEUE};
use crate::protocol::properties;
use crate::protocol::RemotingCommand;
use crate::pull::MsgFilter;
use crate::remoting::{encode_frame, Outbound};
use crate::shard::Shard;

use super::queue::{self, PopRequest, Popped};
use super::state::PopKey;
use super::{readable, refuse_on_slave, REVIVE_QUEUE_NUM};

/// Java's limit on one pop's messages.
const MAX_POP_MSGS: i32 = 32;
/// A request older than its poll time by more than this is answered POLLING_TIMEOUT at once.
const LATE_MS: i64 = 500;

/// What was read from one queue.
struct QueueRead {
    retry: RetryFlag,
    queue_id: u32,
    popped: Popped,
}

/// The checked request, shared by pops and peeks.
struct Plan {
    group: String,
    topic: String,
    /// (topic, retry flag, queue id) in the order they are read.
    queues: Vec<(String, RetryFlag, u32)>,
    filter: MsgFilter,
    max: usize,
    order: bool,
}

pub async fn pop_message(shard: Rc<Shard>, cmd: &RemotingCommand) -> Result<Outbound, BrokerError> {
    let h = PopMessageRequestHeader::from_command(cmd)?;
    let born = if h.born_time == 0 {
        now_ms()
    } else {
        h.born_time
    };
    if now_ms() - born - h.poll_time > LATE_MS {
        return Err(BrokerError::PollingTimeout(format!(
            "the broker[{}] pop message is timeout too much",
            shard.ctx.cfg.broker_ip1()
        )));
    }
    refuse_on_slave(&shard)?;
    if h.max_msg_nums > MAX_POP_MSGS || h.max_msg_nums <= 0 {
        return Err(BrokerError::InvalidParameter(format!(
            "the broker only supports 1..={MAX_POP_MSGS} messages a pop, not {}",
            h.max_msg_nums
        )));
    }
    if h.invisible_time < 0 {
        return Err(BrokerError::InvalidParameter(format!(
            "invisibleTime {} is negative",
            h.invisible_time
        )));
    }
    let exp = h.exp.clone().unwrap_or_else(|| "*".into());
    let ask = Ask {
        group: &h.consumer_group,
        topic: &h.topic,
        queue_id: h.queue_id,
        exp: &exp,
        exp_type: h.exp_type.as_deref(),
        max: h.max_msg_nums,
        order: h.order,
    };
    let mut plan = plan(&shard, ask).await?;
    let deadline = born + h.poll_time;
    let pop_time = now_ms();
    let order = plan.order;
    let how = |pop_time| Read {
        pop_time,
        invisible_time: h.invisible_time,
        init_mode: h.init_mode,
        attempt: order.then(|| h.attempt_id.clone().unwrap_or_default()),
        peek: false,
    };
    let mut reads = read_all(&shard, &plan, &how(pop_time)).await?;
    while total(&reads) == 0 {
        let left = deadline - now_ms();
        if left <= 0 {
            return Err(BrokerError::PollingTimeout("NO_MESSAGE_IN_QUEUE".into()));
        }
        if !park(&shard, &plan, Duration::from_millis(left as u64)).await? {
            return Err(BrokerError::PollingFull(
                "the pop polling queue is full".into(),
            ));
        }
        if now_ms() >= deadline {
            return Err(BrokerError::PollingTimeout("NO_MESSAGE_IN_QUEUE".into()));
        }
        // Planned again: a retry topic the revive created meanwhile is read too.
        plan = self::plan(&shard, ask).await?;
        reads = read_all(&shard, &plan, &how(now_ms())).await?;
    }
    let pop_time = reads
        .iter()
        .find(|r| !r.popped.msgs.is_empty())
        .map_or(pop_time, |r| r.popped.pop_time);
    answer(&shard, cmd, &plan, reads, pop_time, h.invisible_time)
}

/// What a pop or peek asks for, before the checks.
#[derive(Clone, Copy)]
struct Ask<'a> {
    group: &'a str,
    topic: &'a str,
    queue_id: i32,
    exp: &'a str,
    exp_type: Option<&'a str>,
    max: i32,
    order: bool,
}

/// The checks of Java's PopMessageProcessor after the request's own fields, and the queues.
async fn plan(shard: &Rc<Shard>, ask: Ask<'_>) -> Result<Plan, BrokerError> {
    let Ask {
        group,
        topic,
        queue_id,
        exp,
        exp_type,
        max,
        order,
    } = ask;
    let (_, all) = readable(shard, group, topic, queue_id).await?;
    let filter = MsgFilter::build(exp, exp_type, shard.settings().enable_property_filter)?;
    // Every queue: from a random start, as Java's `randomQ`.
    let start = (roll(shard) as usize) % all.len().max(1);
    let mut queues: Vec<(String, RetryFlag, u32)> = (0..all.len())
        .map(|i| {
            (
                topic.to_string(),
                RetryFlag::Normal,
                all[(start + i) % all.len()],
            )
        })
        .collect();
    if !order {
        let mut retry = Vec::new();
        for t in super::retry_topics_read(shard, group, topic) {
            let Some(rtc) = shard.topics().get(&t).cloned() else {
                continue;
            };
            let flag = RetryFlag::of_topic(&t);
            retry.extend((0..rtc.read_queue_nums.max(0) as u32).map(|q| (t.clone(), flag, q)));
        }
        if roll(shard) < shard.ctx.cfg.pop.from_retry_probability {
            retry.append(&mut queues);
            queues = retry;
        } else {
            queues.append(&mut retry);
        }
    }
    Ok(Plan {
        group: group.to_string(),
        topic: topic.to_string(),
        queues,
        filter,
        max: max as usize,
        order,
    })
}

/// A number in 0..100, different at every call.
fn roll(shard: &Shard) -> u32 {
    let mut x = shard.next_round_robin() ^ (crate::common::now_ms() as u64).rotate_left(17);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((x ^ (x >> 31)) % 100) as u32
}

/// How each queue of a plan is read: a pop's times and modes, or a peek.
struct Read {
    pop_time: i64,
    invisible_time: i64,
    init_mode: i32,
    attempt: Option<String>,
    peek: bool,
}

/// Reads the plan's queues one after the other until the pop has its messages.
async fn read_all(
    shard: &Rc<Shard>,
    plan: &Plan,
    how: &Read,
) -> Result<Vec<QueueRead>, BrokerError> {
    let mut reads = Vec::new();
    let mut left = plan.max;
    for (topic, retry, qid) in &plan.queues {
        if left == 0 {
            break;
        }
        let r = PopRequest {
            key: PopKey {
                group: plan.group.clone(),
                topic: topic.clone(),
                queue_id: *qid,
            },
            max: left,
            filter: plan.filter.clone(),
            pop_time: how.pop_time,
            invisible_time: how.invisible_time,
            init_mode: how.init_mode,
            order: how.attempt.clone(),
            peek: how.peek,
        };
        let popped = on_owner(shard, topic, *qid, r).await?;
        left -= popped.msgs.len().min(left);
        reads.push(QueueRead {
            retry: *retry,
            queue_id: *qid,
            popped,
        });
    }
    Ok(reads)
}

async fn on_owner(
    shard: &Rc<Shard>,
    topic: &str,
    qid: u32,
    r: PopRequest,
) -> Result<Popped, BrokerError> {
    let owner = shard.owner(topic, qid);
    if owner == shard.id {
        return queue::pop(shard.clone(), r).await;
    }
    shard.mesh.call(owner, move |s| queue::pop(s, r)).await?
}

fn total(reads: &[QueueRead]) -> usize {
    reads.iter().map(|r| r.popped.msgs.len()).sum()
}

/// Parks the request on every queue of the plan until one of them gets a message or `wait`
/// passes. False when a queue or this shard has as many parked pops as allowed.
async fn park(shard: &Rc<Shard>, plan: &Plan, wait: Duration) -> Result<bool, BrokerError> {
    let pop = &shard.ctx.cfg.pop;
    let limit = (pop.max_polling_size / shard.ctx.shard_count).max(1);
    let parked = shard.pop_parked();
    if parked.get() >= limit {
        return Ok(false);
    }
    let _slot = ParkedSlot::take(parked);
    let queues: Vec<(String, u32)> = plan
        .queues
        .iter()
        .map(|(t, _, q)| (t.clone(), *q))
        .collect();
    Ok(super::park_on_queues(shard, &queues, wait).await)
}

/// One parked pop counted on its shard for as long as it waits (also when its connection
/// closes and the request is dropped).
struct ParkedSlot<'a>(&'a std::cell::Cell<usize>);

impl<'a> ParkedSlot<'a> {
    fn take(count: &'a std::cell::Cell<usize>) -> Self {
        count.set(count.get() + 1);
        ParkedSlot(count)
    }
}

impl Drop for ParkedSlot<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// POP's answer: the header, and the records as the body.
fn answer(
    shard: &Rc<Shard>,
    cmd: &RemotingCommand,
    plan: &Plan,
    reads: Vec<QueueRead>,
    pop_time: i64,
    invisible_time: i64,
) -> Result<Outbound, BrokerError> {
    let revive_qid = if plan.order {
        POP_ORDER_REVIVE_QUEUE
    } else {
        (shard.next_round_robin() % REVIVE_QUEUE_NUM) as i32
    };
    let found: Vec<&QueueRead> = reads.iter().filter(|r| !r.popped.msgs.is_empty()).collect();
    let start: Vec<InfoEntry<i64>> = found
        .iter()
        .map(|r| InfoEntry {
            retry: r.retry,
            queue_id: r.queue_id as i32,
            value: r.popped.start as i64,
        })
        .collect();
    let offsets: Vec<InfoEntry<Vec<i64>>> = found
        .iter()
        .map(|r| InfoEntry {
            retry: r.retry,
            queue_id: r.queue_id as i32,
            value: r.popped.msgs.iter().map(|m| m.offset as i64).collect(),
        })
        .collect();
    let mut resp = RemotingCommand::response_for(cmd, rc::SUCCESS, Some("FOUND".into()));
    PopMessageResponseHeader {
        pop_time,
        invisible_time,
        revive_qid,
        rest_num: reads.iter().map(|r| r.popped.rest).sum(),
        start_offset_info: Some(wire::start_offset_info(&start)),
        msg_offset_info: Some(wire::msg_offset_info(&offsets)),
        order_count_info: plan.order.then(|| order_count_info(&found)),
    }
    .write_to(&mut resp);
    let body_len: usize = found
        .iter()
        .flat_map(|r| &r.popped.msgs)
        .map(|m| m.size as usize)
        .sum();
    let count = found.iter().map(|r| r.popped.msgs.len()).sum::<usize>();
    crate::metrics::record::message_out(&plan.topic, &plan.group, count as u64, body_len as u64);
    if found.iter().all(|r| r.retry == RetryFlag::Normal) {
        let ranges = found
            .iter()
            .flat_map(|r| r.popped.msgs.iter().map(|m| (m.phy, m.size)))
            .collect();
        let mut prefix = BytesMut::with_capacity(256);
        resp.encode_prefix(body_len, &mut prefix)?;
        return Ok(Outbound::ZeroCopy {
            prefix: prefix.freeze(),
            ranges,
        });
    }
    resp.body = heap_body(shard, plan, &found, pop_time, invisible_time, revive_qid)?;
    encode_frame(&resp).ok_or_else(|| BrokerError::System("cannot encode pop response".into()))
}

/// `orderCountInfo`: per message its delivery count, and per queue the least of them.
fn order_count_info(found: &[&QueueRead]) -> String {
    let mut parts = Vec::new();
    for r in found {
        let flag = r.retry.as_str();
        for m in &r.popped.msgs {
            parts.push(format!("{flag} qo{}%{} {}", r.queue_id, m.offset, m.count));
        }
        let least = r.popped.msgs.iter().map(|m| m.count).min().unwrap_or(0);
        parts.push(format!("{flag} {} {least}", r.queue_id));
    }
    parts.join(";")
}

/// The body copied, with each retry-topic message rewritten as Java rewrites it.
fn heap_body(
    shard: &Shard,
    plan: &Plan,
    found: &[&QueueRead],
    pop_time: i64,
    invisible_time: i64,
    revive_qid: i32,
) -> Result<Bytes, BrokerError> {
    let mut body = BytesMut::new();
    let mut reader = shard.reader();
    for r in found {
        for m in &r.popped.msgs {
            let bytes = reader.read(m.phy, m.size)?;
            if r.retry == RetryFlag::Normal {
                body.extend_from_slice(bytes);
                continue;
            }
            let handle = ExtraInfo {
                ck_queue_offset: r.popped.start as i64,
                pop_time,
                invisible_time,
                revive_qid,
                retry: r.retry,
                broker_name: shard.ctx.cfg.broker_name.clone(),
                queue_id: r.queue_id as i32,
                queue_offset: Some(m.offset as i64),
                commit_log_offset: None,
            };
            rewrite_retry(bytes, &plan.topic, &handle.to_string(), &mut body)
                .map_err(|e| BrokerError::System(format!("stored record at {}: {e}", m.phy)))?;
        }
    }
    Ok(body.freeze())
}

/// A retry-topic record as a client must see it: the topic it subscribed to, and its handle.
fn rewrite_retry(
    stored: &[u8],
    topic: &str,
    handle: &str,
    out: &mut BytesMut,
) -> Result<(), message::RecordError> {
    let r = message::decode(stored, true)?;
    let mut props = properties::parse(r.properties);
    props.retain(|(k, _)| k != wire::PROPERTY_POP_CK);
    props.push((wire::PROPERTY_POP_CK.into(), handle.into()));
    let props = properties::encode(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let msg = r.to_store(topic, r.queue_id, &props);
    let at = out.len();
    message::encode(&msg, out)?;
    message::patch(
        &mut out[at..],
        r.queue_offset,
        r.phy_offset,
        r.store_timestamp,
    );
    Ok(())
}

/// PEEK_MESSAGE: the messages after the group's pop offset, nothing changed.
pub async fn peek_message(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<Outbound, BrokerError> {
    let h = PeekMessageRequestHeader::from_command(cmd)?;
    refuse_on_slave(&shard)?;
    if h.max_msg_nums > MAX_POP_MSGS || h.max_msg_nums <= 0 {
        return Err(BrokerError::InvalidParameter(format!(
            "the broker only supports 1..={MAX_POP_MSGS} messages a peek, not {}",
            h.max_msg_nums
        )));
    }
    let ask = Ask {
        group: &h.consumer_group,
        topic: &h.topic,
        queue_id: h.queue_id,
        exp: "*",
        exp_type: None,
        max: h.max_msg_nums,
        order: true,
    };
    let mut plan = plan(&shard, ask).await?;
    plan.order = false;
    let now = now_ms();
    let how = Read {
        pop_time: now,
        invisible_time: 0,
        init_mode: queue::INIT_MODE_MIN,
        attempt: None,
        peek: true,
    };
    let reads = read_all(&shard, &plan, &how).await?;
    if total(&reads) == 0 {
        return Err(BrokerError::NoMessage("no message to peek".into()));
    }
    answer(&shard, cmd, &plan, reads, now, 0)
}
