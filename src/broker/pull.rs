//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), with long polling and a zero-copy body.
//!
//! The connection's shard checks the request and resolves the subscription, then the queue's owner
//! shard looks units up in its ConsumeQueue (parking the pull until a unit is dispatched or the
//! suspend timeout passes). The owner answers with commit-log ranges only; the connection's shard
//! sends them with sendfile straight from the segment files. No message byte is copied in user
//! space on this path.

use std::collections::HashSet;
use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;

use crate::broker::long_poll::Waiter;
use crate::broker::metadata::PERM_READ;
use crate::broker::{offsets, BrokerError, Shard};
use crate::constants::{MAX_PULL_BYTES, MAX_PULL_MSGS};
use crate::protocol::body::SubscriptionData;
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::{PullMessageRequestHeader, PullMessageResponseHeader};
use crate::protocol::java_hash::java_string_hash;
use crate::protocol::RemotingCommand;
use crate::remoting::{encode_frame, Outbound};
use crate::runtime;

/// PullSysFlag bits.
pub const FLAG_COMMIT_OFFSET: i32 = 0x1;
pub const FLAG_SUSPEND: i32 = 0x2;
pub const FLAG_SUBSCRIPTION: i32 = 0x4;

/// How many ConsumeQueue units one pull may scan past filtered-out entries.
const MAX_SCAN_UNITS: u64 = 800;

/// Which tag hashes a pull accepts; `None` = every message.
#[derive(Clone, Debug, PartialEq)]
pub struct TagFilter(pub Option<HashSet<i32>>);

impl TagFilter {
    /// From a TAG expression: `*`/empty = all, else `a || b` (whitespace trimmed).
    pub fn parse(expr: &str) -> TagFilter {
        let expr = expr.trim();
        if expr.is_empty() || expr == "*" {
            return TagFilter(None);
        }
        let set = expr
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(java_string_hash)
            .collect::<HashSet<_>>();
        if set.is_empty() {
            TagFilter(None)
        } else {
            TagFilter(Some(set))
        }
    }

    fn from_subscription(s: &SubscriptionData) -> TagFilter {
        if s.sub_string.trim() == "*" || s.sub_string.trim().is_empty() {
            return TagFilter(None);
        }
        if !s.code_set.is_empty() {
            return TagFilter(Some(s.code_set.iter().copied().collect()));
        }
        TagFilter::parse(&s.sub_string)
    }

    pub fn accepts(&self, tags_code: i64) -> bool {
        match &self.0 {
            None => true,
            Some(set) => set.contains(&(tags_code as i32)),
        }
    }
}

/// What the owner shard needs to serve a pull.
pub struct PullQuery {
    pub topic: String,
    pub group: String,
    pub queue_id: u32,
    pub offset: i64,
    pub max_msgs: usize,
    pub max_bytes: usize,
    pub filter: TagFilter,
    pub commit_offset: Option<i64>,
    pub suspend: Option<Duration>,
}

/// The owner's answer.
pub struct PullAnswer {
    pub code: i32,
    pub remark: &'static str,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub ranges: Vec<(u64, u32)>,
}

/// Serves a pull request; returns the response frame (zero-copy when messages were found).
pub async fn pull(shard: Rc<Shard>, cmd: &RemotingCommand) -> Result<Outbound, BrokerError> {
    let h = PullMessageRequestHeader::from_command(cmd)?;
    let tc = shard
        .topics
        .borrow()
        .get(&h.topic)
        .cloned()
        .ok_or_else(|| BrokerError::TopicNotExist(h.topic.clone()))?;
    if tc.perm & PERM_READ == 0 {
        return Err(BrokerError::NoPermission(format!(
            "the topic[{}] pulling message is forbidden",
            h.topic
        )));
    }
    if h.queue_id < 0 || h.queue_id >= tc.read_queue_nums {
        return Err(BrokerError::InvalidParameter(format!(
            "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}]",
            h.queue_id, h.topic, tc.read_queue_nums
        )));
    }
    let filter = resolve_filter(&shard, &h).await?;
    let cfg = &shard.ctx.cfg;
    let suspend = if h.sys_flag & FLAG_SUSPEND != 0 {
        let ms = if cfg.long_polling_enable {
            h.suspend_timeout_millis.clamp(0, 60_000) as u64
        } else {
            cfg.short_polling_time_mills
        };
        Some(Duration::from_millis(ms))
    } else {
        None
    };
    let q = PullQuery {
        topic: h.topic.clone(),
        group: h.consumer_group.clone(),
        queue_id: h.queue_id as u32,
        offset: h.queue_offset,
        max_msgs: (h.max_msg_nums.max(1) as usize).min(MAX_PULL_MSGS),
        max_bytes: h
            .max_msg_bytes
            .map(|b| (b.max(1) as usize).min(MAX_PULL_BYTES))
            .unwrap_or(MAX_PULL_BYTES),
        filter,
        commit_offset: (h.sys_flag & FLAG_COMMIT_OFFSET != 0).then_some(h.commit_offset),
        suspend,
    };
    let owner = shard.owner(&q.topic, q.queue_id);
    let ans = if owner == shard.id {
        pull_on_owner(shard.clone(), q).await
    } else {
        shard.mesh.call(owner, move |s| pull_on_owner(s, q)).await?
    };
    let mut resp = RemotingCommand::response_for(cmd, ans.code, Some(ans.remark.to_string()));
    PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: ans.next_begin_offset,
        min_offset: ans.min_offset,
        max_offset: ans.max_offset,
    }
    .write_to(&mut resp);
    if ans.ranges.is_empty() {
        return encode_frame(&resp)
            .ok_or_else(|| BrokerError::System("cannot encode pull response".into()));
    }
    let body_len: usize = ans.ranges.iter().map(|r| r.1 as usize).sum();
    let mut prefix = BytesMut::with_capacity(256);
    resp.encode_prefix(body_len, &mut prefix)?;
    Ok(Outbound::ZeroCopy {
        prefix: prefix.freeze(),
        ranges: ans.ranges,
    })
}

/// The tag filter from the request (SUBSCRIPTION flag) or from the group's heartbeat.
async fn resolve_filter(
    shard: &Rc<Shard>,
    h: &PullMessageRequestHeader,
) -> Result<TagFilter, BrokerError> {
    let is_sql = |t: Option<&str>| t.map(|t| t.eq_ignore_ascii_case("SQL92")) == Some(true);
    if h.sys_flag & FLAG_SUBSCRIPTION != 0 {
        if is_sql(h.expression_type.as_deref()) {
            return Err(sql92_unsupported());
        }
        return Ok(TagFilter::parse(h.subscription.as_deref().unwrap_or("*")));
    }
    let local = shard
        .subs
        .borrow()
        .get(&h.consumer_group)
        .and_then(|m| m.get(&h.topic).cloned());
    let sub = match local {
        Some(s) => Some(s),
        None => {
            // The snapshot may lag the heartbeat that just registered the group: ask the owner.
            let (g, t) = (h.consumer_group.clone(), h.topic.clone());
            shard
                .mesh
                .call(0, move |s0| async move {
                    s0.meta()
                        .borrow()
                        .consumers
                        .get(&g)
                        .and_then(|i| i.subscriptions.get(&t).cloned())
                })
                .await?
        }
    };
    match sub {
        Some(s) if is_sql(Some(&s.expression_type)) => Err(sql92_unsupported()),
        Some(s) => Ok(TagFilter::from_subscription(&s)),
        None => Err(BrokerError::SubscriptionNotExist(h.consumer_group.clone())),
    }
}

fn sql92_unsupported() -> BrokerError {
    BrokerError::System("The broker does not support consumer to filter message by SQL92".into())
}

/// Runs on the queue's owner: commit the consumer offset, look up, park if nothing yet.
pub async fn pull_on_owner(s: Rc<Shard>, q: PullQuery) -> PullAnswer {
    if let Some(off) = q.commit_offset {
        if off >= 0 {
            offsets::commit_local(&s, &q.topic, &q.group, q.queue_id, off);
        }
    }
    let first = lookup(&s, &q);
    let Some(wait) = q.suspend else {
        return first;
    };
    if first.code != rc::PULL_NOT_FOUND || wait.is_zero() {
        return first;
    }
    let waiter = Waiter::new();
    if !s.park(&q.topic, q.queue_id, waiter.clone()) {
        return first;
    }
    let _ = runtime::timeout(wait, waiter.notified()).await;
    lookup(&s, &q)
}

/// The store lookup outcome table of PROTOCOL.md 2.4.
fn lookup(s: &Shard, q: &PullQuery) -> PullAnswer {
    let (min, max) = s.queue_bounds(&q.topic, q.queue_id);
    let (min, max) = (min as i64, max as i64);
    let mut ans = PullAnswer {
        code: rc::PULL_NOT_FOUND,
        remark: "NO_MESSAGE_IN_QUEUE",
        next_begin_offset: 0,
        min_offset: min,
        max_offset: max,
        ranges: Vec::new(),
    };
    if max == 0 {
        if q.offset != 0 {
            ans.code = rc::PULL_OFFSET_MOVED;
        }
        return ans;
    }
    if q.offset < min {
        ans.code = rc::PULL_OFFSET_MOVED;
        ans.remark = "OFFSET_TOO_SMALL";
        ans.next_begin_offset = min;
        return ans;
    }
    if q.offset == max {
        ans.remark = "OFFSET_OVERFLOW_ONE";
        ans.next_begin_offset = q.offset;
        return ans;
    }
    if q.offset > max {
        ans.code = rc::PULL_OFFSET_MOVED;
        ans.remark = "OFFSET_OVERFLOW_BADLY";
        ans.next_begin_offset = max;
        return ans;
    }
    let queues = s.queues.borrow();
    let Some(state) = queues.get(&(q.topic.clone(), q.queue_id)) else {
        return ans;
    };
    let mut offset = q.offset as u64;
    let end = (max as u64).min(offset + MAX_SCAN_UNITS);
    let mut bytes = 0usize;
    while offset < end && ans.ranges.len() < q.max_msgs {
        let Some(unit) = state.cq.get(offset) else {
            offset += 1;
            continue;
        };
        if !ans.ranges.is_empty() && bytes + unit.size as usize > q.max_bytes {
            break;
        }
        offset += 1;
        if !q.filter.accepts(unit.tags_code) {
            continue;
        }
        bytes += unit.size as usize;
        ans.ranges.push((unit.phy_offset, unit.size));
    }
    ans.next_begin_offset = offset as i64;
    if ans.ranges.is_empty() {
        ans.code = rc::PULL_RETRY_IMMEDIATELY;
        ans.remark = "NO_MATCHED_MESSAGE";
    } else {
        ans.code = rc::SUCCESS;
        ans.remark = "FOUND";
    }
    ans
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `TagA || TagB` accepts exactly those tag hashes; `*` accepts all.
    #[test]
    fn tag_filter_expression() {
        let f = TagFilter::parse(" TagA || TagB ");
        assert!(f.accepts(java_string_hash("TagA") as i64));
        assert!(f.accepts(java_string_hash("TagB") as i64));
        assert!(!f.accepts(java_string_hash("TagC") as i64));
        assert!(TagFilter::parse("*").accepts(12345));
        assert!(TagFilter::parse("").accepts(0));
    }
}
