//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), with long polling and a zero-copy body.
//!
//! The connection's shard checks the request and resolves the subscription, then the queue's owner
//! shard looks units up in its ConsumeQueue (parking the pull until a unit is dispatched or the
//! suspend timeout passes). The owner answers with commit-log ranges only; the connection's shard
//! sends them with sendfile straight from the segment files. No message byte is copied in user
//! space on this path.
//!
//! It also answers which broker of the group the consumer should pull from next
//! (`suggestWhichBrokerId`, Java's reading from slaves): the group's `whichBrokerWhenConsumeSlowly`
//! when the consumer reads far behind the end of the commit log and `slaveReadEnable` is on,
//! else the group's `brokerId`; a slave sends its consumers back to the master.

use std::collections::HashSet;
use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;

use crate::constants::{MAX_PULL_BYTES, MAX_PULL_MSGS};
use crate::error::BrokerError;
use crate::long_poll::Waiter;
use crate::metadata::PERM_READ;
use crate::offsets;
use crate::protocol::body::SubscriptionData;
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::{PullMessageRequestHeader, PullMessageResponseHeader};
use crate::protocol::java_hash::java_string_hash;
use crate::protocol::RemotingCommand;
use crate::remoting::{encode_frame, Outbound};
use crate::runtime;
use crate::shard::Shard;

/// PullSysFlag bits.
pub const FLAG_COMMIT_OFFSET: i32 = 0x1;
pub const FLAG_SUSPEND: i32 = 0x2;
pub const FLAG_SUBSCRIPTION: i32 = 0x4;

/// How many ConsumeQueue units one pull may scan past filtered-out entries.
const MAX_SCAN_UNITS: u64 = 800;

/// `MixAll.MASTER_ID`.
const MASTER_ID: i64 = 0;

/// Which tags a pull accepts; `None` = every message. The hash set screens ConsumeQueue units;
/// the names confirm the exact tag of a candidate before it is sent (hash collisions).
#[derive(Clone, Debug, PartialEq)]
pub struct TagFilter(pub Option<(HashSet<i32>, HashSet<String>)>);

impl TagFilter {
    /// From a TAG expression: `*`/empty = all, else `a || b` (whitespace trimmed).
    pub fn parse(expr: &str) -> TagFilter {
        let expr = expr.trim();
        if expr.is_empty() || expr == "*" {
            return TagFilter(None);
        }
        let names = expr
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(String::from)
            .collect::<HashSet<_>>();
        if names.is_empty() {
            return TagFilter(None);
        }
        let codes = names.iter().map(|t| java_string_hash(t)).collect();
        TagFilter(Some((codes, names)))
    }

    fn from_subscription(s: &SubscriptionData) -> TagFilter {
        if s.sub_string.trim() == "*" || s.sub_string.trim().is_empty() {
            return TagFilter(None);
        }
        if !s.tags_set.is_empty() {
            let names: HashSet<String> = s.tags_set.iter().cloned().collect();
            let codes = names.iter().map(|t| java_string_hash(t)).collect();
            return TagFilter(Some((codes, names)));
        }
        TagFilter::parse(&s.sub_string)
    }

    /// Screens a ConsumeQueue unit by its tag hash.
    pub fn accepts(&self, tags_code: i64) -> bool {
        match &self.0 {
            None => true,
            Some((codes, _)) => codes.contains(&(tags_code as i32)),
        }
    }

    /// True when the exact tag must be read from the record to confirm a hash match.
    pub fn needs_exact_check(&self) -> bool {
        self.0.is_some()
    }

    /// Confirms the record's TAGS property is one of the subscribed names.
    pub fn accepts_tag(&self, tag: Option<&str>) -> bool {
        match (&self.0, tag) {
            (None, _) => true,
            (Some((_, names)), Some(t)) => names.contains(t),
            (Some(_), None) => false,
        }
    }
}

/// A pull's filter: tags (by ConsumeQueue hash, confirmed on the record) or an SQL92 selector
/// evaluated over the record's properties.
#[derive(Clone, Debug)]
pub enum MsgFilter {
    Tag(TagFilter),
    Sql(crate::filter::Sql92Filter),
}

impl MsgFilter {
    /// Builds the filter for an expression of `expression_type` (TAG when absent).
    pub fn build(
        expr: &str,
        expression_type: Option<&str>,
        sql_enabled: bool,
    ) -> Result<MsgFilter, BrokerError> {
        let is_sql = expression_type.map(|t| t.eq_ignore_ascii_case("SQL92")) == Some(true);
        if !is_sql {
            return Ok(MsgFilter::Tag(TagFilter::parse(expr)));
        }
        if !sql_enabled {
            return Err(sql92_unsupported());
        }
        let e = expr.trim();
        if e.is_empty() || e == "*" {
            return Ok(MsgFilter::Tag(TagFilter(None)));
        }
        crate::filter::Sql92Filter::compile(e)
            .map(MsgFilter::Sql)
            .map_err(|err| BrokerError::SubscriptionParseFailed(format!("{e}: {err}")))
    }

    pub(crate) fn accepts_unit(&self, tags_code: i64) -> bool {
        match self {
            MsgFilter::Tag(t) => t.accepts(tags_code),
            MsgFilter::Sql(_) => true,
        }
    }

    pub(crate) fn needs_record(&self) -> bool {
        match self {
            MsgFilter::Tag(t) => t.needs_exact_check(),
            MsgFilter::Sql(_) => true,
        }
    }

    /// Checks the decoded properties of a candidate record.
    fn accepts_properties(&self, props: &str) -> bool {
        match self {
            MsgFilter::Tag(t) => t.accepts_tag(crate::protocol::properties::get(props, "TAGS")),
            MsgFilter::Sql(f) => {
                let parsed = crate::protocol::properties::parse(props);
                f.matches(&|k| {
                    parsed
                        .iter()
                        .rev()
                        .find(|(n, _)| n == k)
                        .map(|(_, v)| v.as_str())
                })
            }
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
    pub filter: MsgFilter,
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
    /// Java's `isSuggestPullingFromSlave`: the last unit looked at lies further behind the end
    /// of the commit log than the share of memory `accessMessageInMemoryMaxRatio` allows, so it
    /// is probably no longer in the page cache.
    pub behind: bool,
    /// The pull was parked (long polling) before this answer: the `is_long_polling` label.
    pub suspended: bool,
}

/// Serves a pull request; returns the response frame (zero-copy when messages were found).
pub async fn pull(shard: Rc<Shard>, cmd: &RemotingCommand) -> Result<Outbound, BrokerError> {
    // As Java 5's PullMessageProcessor.rejectRequest: a slave serves pulls only when told to.
    let ha = &shard.ctx.cfg.ha;
    let slave = shard.ctx.role.is_slave();
    if slave && !ha.slave_read_enable {
        return Err(BrokerError::Busy);
    }
    let h = PullMessageRequestHeader::from_command(cmd)?;
    let tc = shard
        .topics()
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
    // A slave answers every miss with PULL_RETRY_IMMEDIATELY (see `suggest`), so it never parks
    // a pull, as in Java where that rule runs before the pull is suspended.
    let on_slave = shard.ctx.role.is_slave();
    let suspend = if on_slave {
        None
    } else if h.sys_flag & FLAG_SUSPEND != 0 {
        let settings = shard.settings();
        let ms = if settings.long_polling_enable {
            h.suspend_timeout_millis.clamp(0, 60_000) as u64
        } else {
            settings.short_polling_time_mills
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
        // As Java, a slave keeps no offset a pull carries (UPDATE_CONSUMER_OFFSET still lands).
        commit_offset: (h.sys_flag & FLAG_COMMIT_OFFSET != 0 && !slave).then_some(h.commit_offset),
        suspend,
    };
    let owner = shard.owner(&q.topic, q.queue_id);
    let ans = if owner == shard.id {
        pull_on_owner(shard.clone(), q).await
    } else {
        shard.mesh.call(owner, move |s| pull_on_owner(s, q)).await?
    };
    let (code, suggest_which_broker_id) = suggest(&shard, &h.consumer_group, &ans).await?;
    if ans.suspended {
        crate::metrics::record::mark_long_polled();
    }
    let mut resp = RemotingCommand::response_for(cmd, code, Some(ans.remark.to_string()));
    PullMessageResponseHeader {
        suggest_which_broker_id,
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
    crate::metrics::record::message_out(
        &h.topic,
        &h.consumer_group,
        ans.ranges.len() as u64,
        body_len as u64,
    );
    let mut prefix = BytesMut::with_capacity(256);
    resp.encode_prefix(body_len, &mut prefix)?;
    Ok(Outbound::ZeroCopy {
        prefix: prefix.freeze(),
        ranges: ans.ranges,
    })
}

/// The response code and `suggestWhichBrokerId` of an answer, by Java's rules
/// (`PullMessageProcessor.composeResponseHeader`):
/// - `slaveReadEnable` off: the master (0);
/// - on: the group's `whichBrokerWhenConsumeSlowly` when the consumer reads far behind, else the
///   group's `brokerId` (Java's defaults, 1 and 0, for a group without a config);
/// - on a slave, unless it suggests a slave itself: the master, and anything but FOUND becomes
///   PULL_RETRY_IMMEDIATELY. Java applies this while the lowest broker id it knows in its group
///   is the master's; that id only changes in acting-master mode, which ringmq does not run, so
///   here it always applies (a consumer whose master is gone falls back to the slave anyway:
///   the client picks any address of the group when the suggested one is missing).
async fn suggest(
    shard: &Rc<Shard>,
    group: &str,
    ans: &PullAnswer,
) -> Result<(i32, i64), BrokerError> {
    let cfg = &shard.ctx.cfg;
    let mut code = ans.code;
    let mut which = MASTER_ID;
    if cfg.ha.slave_read_enable {
        let g = group.to_string();
        let ids = shard.mesh.call(0, move |s0| async move {
            s0.meta()
                .groups
                .get(&g)
                .map(|c| (c.broker_id, c.which_broker_when_consume_slowly))
        });
        let defaults = crate::protocol::body::SubscriptionGroupConfig::default();
        let (broker_id, slowly) = ids.await?.unwrap_or((
            defaults.broker_id,
            defaults.which_broker_when_consume_slowly,
        ));
        which = if ans.behind { slowly } else { broker_id };
    }
    if shard.ctx.role.is_slave() && !ans.behind {
        which = MASTER_ID;
        if code != rc::SUCCESS {
            code = rc::PULL_RETRY_IMMEDIATELY;
        }
    }
    Ok((code, which))
}

/// The tag filter from the request (SUBSCRIPTION flag) or from the group's heartbeat.
async fn resolve_filter(
    shard: &Rc<Shard>,
    h: &PullMessageRequestHeader,
) -> Result<MsgFilter, BrokerError> {
    let sql_enabled = shard.settings().enable_property_filter;
    if h.sys_flag & FLAG_SUBSCRIPTION != 0 {
        return MsgFilter::build(
            h.subscription.as_deref().unwrap_or("*"),
            h.expression_type.as_deref(),
            sql_enabled,
        );
    }
    let local = shard
        .subscriptions()
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
                        .consumers
                        .get(&g)
                        .and_then(|i| i.subscriptions.get(&t).cloned())
                })
                .await?
        }
    };
    match sub {
        Some(s) if s.expression_type.eq_ignore_ascii_case("SQL92") => {
            MsgFilter::build(&s.sub_string, Some("SQL92"), sql_enabled)
        }
        Some(s) => Ok(MsgFilter::Tag(TagFilter::from_subscription(&s))),
        None => Err(BrokerError::SubscriptionNotExist(h.consumer_group.clone())),
    }
}

fn sql92_unsupported() -> BrokerError {
    BrokerError::System("The broker does not support consumer to filter message by SQL92".into())
}

/// Runs on the queue's owner: commit the consumer offset, look up, park if nothing yet, and
/// note where the group's next pull starts (Java's `commitPullOffset`, done for every answer
/// whatever its code).
pub async fn pull_on_owner(s: Rc<Shard>, q: PullQuery) -> PullAnswer {
    if let Some(off) = q.commit_offset {
        if off >= 0 {
            offsets::commit_local(&s, &q.topic, &q.group, q.queue_id, off);
        }
    }
    let ans = serve_on_owner(&s, &q).await;
    let next = u64::try_from(ans.next_begin_offset).unwrap_or(0);
    crate::metrics::pulled::note(&q.topic, &q.group, q.queue_id, next);
    ans
}

async fn serve_on_owner(s: &Shard, q: &PullQuery) -> PullAnswer {
    let first = lookup(s, q);
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
    PullAnswer {
        suspended: true,
        ..lookup(s, q)
    }
}

/// A store lookup, counted for GET_BROKER_RUNTIME_INFO (found with its messages, or missed).
fn lookup(s: &Shard, q: &PullQuery) -> PullAnswer {
    let ans = lookup_uncounted(s, q);
    s.ctx.stats.shard(s.id).add_get(ans.ranges.len() as u64);
    ans
}

/// The store lookup and its outcome (the GetMessageStatus cases of Java's
/// DefaultMessageStore.getMessage).
fn lookup_uncounted(s: &Shard, q: &PullQuery) -> PullAnswer {
    let (min, max) = s.queue_bounds(&q.topic, q.queue_id);
    let (min, max) = (min as i64, max as i64);
    let mut ans = PullAnswer {
        code: rc::PULL_NOT_FOUND,
        remark: "NO_MESSAGE_IN_QUEUE",
        next_begin_offset: 0,
        min_offset: min,
        max_offset: max,
        ranges: Vec::new(),
        behind: false,
        suspended: false,
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
    let queues = s.read_queues();
    let Some(state) = queues.get(&crate::shard::QueueKey(&q.topic, q.queue_id)) else {
        return ans;
    };
    let mut offset = q.offset as u64;
    let end = (max as u64).min(offset + MAX_SCAN_UNITS);
    let mut bytes = 0usize;
    // Units whose segment retention already deleted, before this queue is trimmed (clean.rs),
    // are skipped like RocketMQ's MESSAGE_WAS_REMOVING: the client retries past them.
    let min_phy = s.ctx.writer.min_phy_offset();
    let max_phy = s.ctx.writer.max_phy_offset();
    let mut last_phy = 0u64;
    while offset < end && ans.ranges.len() < q.max_msgs {
        let Some(unit) = state.cq.get(offset).filter(|u| u.phy_offset >= min_phy) else {
            offset += 1;
            continue;
        };
        if !ans.ranges.is_empty() && bytes + unit.size as usize > q.max_bytes {
            break;
        }
        // Java's maxPhyOffsetPulling: the last unit looked at, matched by the filter or not.
        last_phy = unit.phy_offset;
        offset += 1;
        if !q.filter.accepts_unit(unit.tags_code) {
            continue;
        }
        if q.filter.needs_record() && !record_matches(s, &q.filter, unit) {
            continue;
        }
        bytes += unit.size as usize;
        ans.ranges.push((unit.phy_offset, unit.size));
    }
    ans.next_begin_offset = offset as i64;
    let window = offsets::in_memory_budget(s.ctx.cfg.access_message_in_memory_max_ratio);
    ans.behind = max_phy.saturating_sub(last_phy) > window;
    if ans.ranges.is_empty() {
        ans.code = rc::PULL_RETRY_IMMEDIATELY;
        ans.remark = "NO_MATCHED_MESSAGE";
    } else {
        ans.code = rc::SUCCESS;
        ans.remark = "FOUND";
    }
    ans
}

/// Reads a candidate record's properties: the exact tag (ruling out a hash collision) or the
/// SQL92 selector. An unreadable record is skipped, never sent.
pub(crate) fn record_matches(
    s: &Shard,
    filter: &MsgFilter,
    unit: crate::store::consume_queue::CqUnit,
) -> bool {
    let mut reader = s.reader();
    let Ok(bytes) = reader.read(unit.phy_offset, unit.size) else {
        return false;
    };
    match crate::protocol::message::decode(bytes, false) {
        Ok(r) => filter.accepts_properties(r.properties),
        Err(_) => false,
    }
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
        // "Aa" and "BB" share a Java hash: the hash screen passes, the exact check does not.
        let f = TagFilter::parse("Aa");
        assert!(f.accepts(java_string_hash("BB") as i64));
        assert!(!f.accepts_tag(Some("BB")));
        assert!(f.accepts_tag(Some("Aa")));
        assert!(!f.accepts_tag(None));
    }
}
