//! A scrape's figures: each shard's copy of what it recorded (`record`) plus what it alone can
//! compute (consumer lag, inflight and ready messages over the queues, committed offsets and
//! pull offsets (`pulled`) it owns), and from shard 0 the metadata
//! figures (topics, groups, client connections); summed into one [`Snapshot`] by the scraping
//! shard.
//!
//! Why `Mesh::call` rather than shared atomics: the per-topic maps live in a shard's
//! thread-local (`RefCell`), which no other thread may read, and lag needs the owner's consume
//! queues and offsets anyway. A scrape therefore costs each shard one job in its mailbox and a
//! copy of its maps, and the message path keeps plain, unshared counters.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::common::now_ms;
use crate::error::BrokerError;
use crate::metadata::topic_validator::{is_system_topic, RETRY_GROUP_TOPIC_PREFIX};
use crate::metrics::pulled;
use crate::metrics::record::{self, Flow, Hist, MessageType, RpcKey, TopicIn};
use crate::offsets::store_timestamp;
use crate::protocol::body::ConsumeType;
use crate::protocol::codes::language_name;
use crate::shard::Shard;

/// One consumer group's progress on one topic, as Java's `ConsumerLagCalculator` computes it
/// per queue and sums: from the committed offset `c`, the pull offset `p` (`pulled`; `c` when
/// none was noted) and the queue's max offset `m`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Lag {
    /// Σ (m − c) over the queues with a committed offset.
    pub messages: u64,
    /// now − store time of the oldest unconsumed message, ms (0 when nothing is behind).
    pub latency_ms: i64,
    /// Σ (p − c): pulled but not yet committed.
    pub inflight: u64,
    /// Σ (m − p): stored but not yet pulled.
    pub ready: u64,
    /// now − store time of the oldest message not yet pulled, ms (0 when none waits).
    pub queueing_ms: i64,
}

/// Shard 0's metadata figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetaFigures {
    pub topics: u64,
    pub groups: u64,
    /// Producer connections by (language, version).
    pub producers: BTreeMap<(String, String), u64>,
    /// Consumer connections by (group, language, version, consume mode).
    pub consumers: BTreeMap<(String, String, String, &'static str), u64>,
}

/// Everything a scrape reports from the shards, summed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub topics_in: BTreeMap<String, TopicIn>,
    /// (topic, group) -> out.
    pub out: BTreeMap<(String, String), Flow>,
    pub rpc: BTreeMap<RpcKey, Hist>,
    pub dlq: BTreeMap<String, u64>,
    pub send_back: BTreeMap<String, u64>,
    /// POP redeliveries by `topic@group`.
    pub pop_retried: BTreeMap<String, u64>,
    pub decisions: BTreeMap<String, (u64, u64)>,
    pub half_adjust: BTreeMap<String, i64>,
    /// (group, topic) -> lag.
    pub lag: BTreeMap<(String, String), Lag>,
    /// Creation times, as `record::ShardFigures` keeps them.
    pub topic_creates: [[Hist; 2]; 2],
    pub group_creates: [Hist; 2],
    pub dropped: u64,
    pub meta: MetaFigures,
}

impl Snapshot {
    /// Half messages not yet decided, by real topic (Java's `TransactionMetrics` count): the
    /// transactional messages stored, plus those found open at start, minus the commits, the
    /// rollbacks and those the check discarded or skipped; never below 0.
    pub fn half_messages(&self) -> BTreeMap<&str, u64> {
        let mut open: BTreeMap<&str, i64> = BTreeMap::new();
        for (t, f) in &self.topics_in {
            let n = f.flow[MessageType::Transaction as usize].msgs;
            if n > 0 {
                *open.entry(t).or_default() += n as i64;
            }
        }
        for (t, n) in &self.half_adjust {
            *open.entry(t).or_default() += n;
        }
        for (t, (c, r)) in &self.decisions {
            *open.entry(t).or_default() -= (c + r) as i64;
        }
        open.into_iter()
            .map(|(t, n)| (t, n.max(0) as u64))
            .collect()
    }

    /// Adds another shard's figures: counts and message figures add, latencies are the largest.
    pub fn merge(&mut self, o: Snapshot) {
        for (k, v) in o.topics_in {
            let t = self.topics_in.entry(k).or_default();
            for i in 0..t.flow.len() {
                t.flow[i].add(&v.flow[i]);
                t.sizes[i].add(&v.sizes[i]);
            }
        }
        for (k, v) in o.out {
            self.out.entry(k).or_default().add(&v);
        }
        for (k, v) in o.rpc {
            self.rpc.entry(k).or_default().add(&v);
        }
        for (k, v) in o.dlq {
            *self.dlq.entry(k).or_default() += v;
        }
        for (k, v) in o.pop_retried {
            *self.pop_retried.entry(k).or_default() += v;
        }
        for (k, v) in o.send_back {
            *self.send_back.entry(k).or_default() += v;
        }
        for (k, (c, r)) in o.decisions {
            let d = self.decisions.entry(k).or_default();
            d.0 += c;
            d.1 += r;
        }
        for (k, v) in o.half_adjust {
            *self.half_adjust.entry(k).or_default() += v;
        }
        for (k, v) in o.lag {
            let l = self.lag.entry(k).or_default();
            l.messages += v.messages;
            l.latency_ms = l.latency_ms.max(v.latency_ms);
            l.inflight += v.inflight;
            l.ready += v.ready;
            l.queueing_ms = l.queueing_ms.max(v.queueing_ms);
        }
        for (a, b) in self.topic_creates.iter_mut().zip(&o.topic_creates) {
            for (a, b) in a.iter_mut().zip(b) {
                a.add(b);
            }
        }
        for (a, b) in self.group_creates.iter_mut().zip(&o.group_creates) {
            a.add(b);
        }
        self.dropped += o.dropped;
        if o.meta != MetaFigures::default() {
            self.meta = o.meta;
        }
    }
}

/// Java's `isSystemGroup`: the `CID_RMQ_SYS_` prefix and the built-in groups of `MixAll`.
pub fn is_system_group(group: &str) -> bool {
    const SYSTEM_GROUPS: [&str; 8] = [
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
    ];
    group.starts_with("CID_RMQ_SYS_") || SYSTEM_GROUPS.contains(&group)
}

/// Java's `is_system` label: a system topic or a system group.
pub fn is_system(topic: &str, group: &str) -> bool {
    is_system_topic(topic) || is_system_group(group)
}

pub fn is_retry(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
}

/// Java's `ConsumeType.getTypeCN()`, lower-cased.
fn consume_mode(t: Option<ConsumeType>) -> &'static str {
    match t {
        Some(ConsumeType::ConsumeActively) => "pull",
        Some(ConsumeType::ConsumePop) => "pop",
        Some(ConsumeType::ConsumePassively | ConsumeType::Unknown) | None => "push",
    }
}

/// Store reads one scrape may spend on a shard for the latency figures (one per queue behind):
/// past it the oldest message of further queues is not looked up, and the latencies are those
/// of the queues read.
pub const LATENCY_READS_MAX: usize = 4096;

/// One queue's offsets: committed (None: the group never committed on it), pulled, max.
/// The pull offset is kept within [committed, max] so that inflight never exceeds the lag: a
/// commit or a reset past the last pull, or a log cut back below it, moves it along.
fn queue_progress(committed: Option<u64>, pulled: Option<u64>, max: u64) -> (u64, u64, u64) {
    match committed {
        // Java: without a committed offset the queue has neither lag nor inflight.
        None => {
            let p = pulled.unwrap_or(max).min(max);
            (0, 0, max - p)
        }
        Some(c) => {
            let c = c.min(max);
            let p = pulled.unwrap_or(c).clamp(c, max);
            (max - c, p - c, max - p)
        }
    }
}

/// Lag, inflight and ready messages of every (group, topic) over the queues this shard owns:
/// the groups with a committed offset here, and those that only pulled.
fn lag_of(s: &Shard) -> BTreeMap<(String, String), Lag> {
    let now = now_ms();
    let mut reads = LATENCY_READS_MAX;
    let mut age_at = |topic: &str, qid: u32, offset: u64| -> Option<i64> {
        reads = reads.checked_sub(1)?;
        let u = s.unit_at(topic, qid, offset)?;
        store_timestamp(s, u.phy_offset, u.size).map(|t| now - t)
    };
    let mut out: BTreeMap<(String, String), Lag> = BTreeMap::new();
    // (group, topic) -> queue id -> (committed, pulled).
    type Offsets = (Option<u64>, Option<u64>);
    let mut queues_of: BTreeMap<(String, String), BTreeMap<u32, Offsets>> = BTreeMap::new();
    for (key, queues) in s.offsets().iter() {
        let Some((topic, group)) = key.split_once('@') else {
            continue;
        };
        let q = queues_of
            .entry((group.to_string(), topic.to_string()))
            .or_default();
        for (&qid, &committed) in queues {
            if committed >= 0 {
                q.insert(qid, (Some(committed as u64), None));
            }
        }
    }
    for (topic, group, qid, off) in pulled::all() {
        let q = queues_of.entry((group, topic)).or_default();
        q.entry(qid).or_insert((None, None)).1 = Some(off);
    }
    for ((group, topic), queues) in queues_of {
        let mut lag = Lag::default();
        for (qid, (committed, pulled)) in queues {
            if s.owner(&topic, qid) != s.id {
                continue;
            }
            let max = s.queue_bounds(&topic, qid).1;
            let (behind, inflight, ready) = queue_progress(committed, pulled, max);
            lag.messages += behind;
            lag.inflight += inflight;
            lag.ready += ready;
            if behind > 0 {
                if let Some(age) = age_at(&topic, qid, max - behind) {
                    lag.latency_ms = lag.latency_ms.max(age);
                }
            }
            if ready > 0 {
                if let Some(age) = age_at(&topic, qid, max - ready) {
                    lag.queueing_ms = lag.queueing_ms.max(age);
                }
            }
        }
        out.insert((group, topic), lag);
    }
    // POP groups: the consumer offset is already past what is in flight (Java's POP lag is
    // the messages not popped plus those in flight).
    for (key, q) in s.pop().iter() {
        let lag = out
            .entry((key.group.clone(), key.topic.clone()))
            .or_default();
        let n = q.inflight_len() as u64
            + q.order
                .as_ref()
                .map_or(0, |b| (b.offsets.len() - b.acked.len()) as u64);
        lag.inflight += n;
        lag.messages += n;
    }
    out
}

fn meta_of(s0: &Shard) -> MetaFigures {
    let m = s0.meta();
    let mut f = MetaFigures {
        topics: m.topics.len() as u64,
        groups: m.groups.len() as u64,
        ..MetaFigures::default()
    };
    for channels in m.producers.values() {
        for c in channels.values() {
            let k = (
                language_name(c.language).to_ascii_lowercase(),
                c.version.to_string(),
            );
            *f.producers.entry(k).or_default() += 1;
        }
    }
    for (group, info) in &m.consumers {
        for c in info.clients.values() {
            let k = (
                group.clone(),
                language_name(c.language).to_ascii_lowercase(),
                c.version.to_string(),
                consume_mode(info.consume_type),
            );
            *f.consumers.entry(k).or_default() += 1;
        }
    }
    f
}

/// This shard's figures, copied; with `full`, also its consumer lag and (shard 0) metadata.
pub fn shard_snapshot(s: &Shard, full: bool) -> Snapshot {
    let mut snap = record::with(|f| Snapshot {
        topics_in: f
            .topics_in
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        out: f
            .out
            .iter()
            .flat_map(|(t, gs)| {
                gs.iter()
                    .map(move |(g, v)| ((t.to_string(), g.to_string()), *v))
            })
            .collect(),
        rpc: f.rpc.iter().map(|(k, v)| (*k, *v)).collect(),
        dlq: f.dlq.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        send_back: f
            .send_back
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        pop_retried: f
            .pop_retried
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        decisions: f
            .decisions
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        half_adjust: f
            .half_adjust
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        topic_creates: f.topic_creates,
        group_creates: f.group_creates,
        dropped: f.dropped,
        ..Snapshot::default()
    });
    snap.dropped += pulled::dropped();
    if full {
        snap.lag = lag_of(s);
        if s.id == 0 {
            snap.meta = meta_of(s);
        }
    }
    snap
}

/// Every shard's figures, summed: this shard's own, and one `Mesh::call` to each other shard.
pub async fn gather(shard: &Rc<Shard>) -> Result<Snapshot, BrokerError> {
    gather_with(shard, true).await
}

/// Every shard's recorded counts only (no lag, no metadata), summed.
pub async fn gather_counts(shard: &Rc<Shard>) -> Result<Snapshot, BrokerError> {
    gather_with(shard, false).await
}

async fn gather_with(shard: &Rc<Shard>, full: bool) -> Result<Snapshot, BrokerError> {
    let mut all = Snapshot::default();
    for i in 0..shard.mesh.len() {
        let snap = if i == shard.id {
            shard_snapshot(shard, full)
        } else {
            shard
                .mesh
                .call(i, move |s| async move { shard_snapshot(&s, full) })
                .await?
        };
        all.merge(snap);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merging adds counts and lag messages, keeps the largest lag latency and shard 0's
    /// metadata figures.
    #[test]
    fn merge_sums_shards() {
        let mut a = Snapshot::default();
        a.out
            .insert(("T".into(), "G".into()), Flow { msgs: 2, bytes: 20 });
        a.lag.insert(
            ("G".into(), "T".into()),
            Lag {
                messages: 3,
                latency_ms: 50,
                inflight: 1,
                ready: 2,
                queueing_ms: 40,
            },
        );
        a.meta.topics = 4;
        let mut b = Snapshot::default();
        b.out
            .insert(("T".into(), "G".into()), Flow { msgs: 1, bytes: 5 });
        b.lag.insert(
            ("G".into(), "T".into()),
            Lag {
                messages: 4,
                latency_ms: 10,
                inflight: 2,
                ready: 2,
                queueing_ms: 60,
            },
        );
        b.decisions.insert("T".into(), (1, 0));
        let mut all = Snapshot::default();
        all.merge(a);
        all.merge(b);
        assert_eq!(
            all.out[&("T".into(), "G".into())],
            Flow { msgs: 3, bytes: 25 }
        );
        assert_eq!(
            all.lag[&("G".into(), "T".into())],
            Lag {
                messages: 7,
                latency_ms: 50,
                inflight: 3,
                ready: 4,
                queueing_ms: 60,
            }
        );
        assert_eq!(all.meta.topics, 4);
        assert_eq!(all.decisions["T"], (1, 0));
    }

    /// Per queue: lag m − c, inflight p − c, ready m − p; the pull offset stands at the
    /// committed one when none was noted and stays within [c, m]; a queue the group never
    /// committed on has only ready messages (Java's rule).
    #[test]
    fn queue_progress_follows_java() {
        assert_eq!(queue_progress(Some(2), Some(7), 10), (8, 5, 3));
        assert_eq!(queue_progress(Some(2), None, 10), (8, 0, 8));
        // A commit past the last pull (an admin's update, a reset forward).
        assert_eq!(queue_progress(Some(9), Some(4), 10), (1, 0, 1));
        // A log cut back below both.
        assert_eq!(queue_progress(Some(12), Some(15), 10), (0, 0, 0));
        assert_eq!(queue_progress(None, Some(6), 10), (0, 0, 4));
        assert_eq!(queue_progress(None, None, 10), (0, 0, 0));
    }

    /// Half messages: stored transactional messages plus those found open at start, minus
    /// decisions and messages closed otherwise, per topic, never below 0.
    #[test]
    fn half_messages_per_topic() {
        let mut s = Snapshot::default();
        let mut t = TopicIn::default();
        t.flow[MessageType::Transaction as usize].msgs = 5;
        t.flow[MessageType::Normal as usize].msgs = 9;
        s.topics_in.insert("T".into(), t);
        s.half_adjust.insert("T".into(), 2 - 1);
        s.decisions.insert("T".into(), (2, 1));
        s.half_adjust.insert("U".into(), 1);
        s.decisions.insert("V".into(), (1, 0));
        let half = s.half_messages();
        assert_eq!(half["T"], 3);
        assert_eq!(half["U"], 1);
        assert_eq!(half["V"], 0, "a decision of a message not counted");
    }

    /// System topics and groups are Java's: the `rmq_sys_` topics and the `CID_RMQ_SYS_` groups.
    #[test]
    fn system_labels() {
        assert!(is_system("rmq_sys_wheel_timer", "G"));
        assert!(is_system("T", "CID_RMQ_SYS_X"));
        assert!(is_system("T", "TOOLS_CONSUMER"));
        assert!(!is_system("T", "G"));
        assert!(is_retry("%RETRY%G"));
    }
}
