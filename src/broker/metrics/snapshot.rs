//! A scrape's figures: each shard's copy of what it recorded (`record`) plus what it alone can
//! compute (consumer lag over the queues and offsets it owns), and from shard 0 the metadata
//! figures (topics, groups, client connections); summed into one [`Snapshot`] by the scraping
//! shard.
//!
//! Why `Mesh::call` rather than shared atomics: the per-topic maps live in a shard's
//! thread-local (`RefCell`), which no other thread may read, and lag needs the owner's consume
//! queues and offsets anyway. A scrape therefore costs each shard one job in its mailbox and a
//! copy of its maps, and the message path keeps plain, unshared counters.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::broker::error::BrokerError;
use crate::broker::metadata::topic_validator::{is_system_topic, RETRY_GROUP_TOPIC_PREFIX};
use crate::broker::metrics::record::{self, Flow, Hist, RpcKey, TopicIn};
use crate::broker::offsets::store_timestamp;
use crate::broker::shard::Shard;
use crate::common::now_ms;
use crate::protocol::body::ConsumeType;
use crate::protocol::codes::language_name;

/// One consumer group's lag on one topic.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Lag {
    /// Σ (queue max offset − committed offset) over the queues with a committed offset.
    pub messages: u64,
    /// now − store time of the oldest unconsumed message, ms (0 when nothing is behind).
    pub latency_ms: i64,
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
    pub decisions: BTreeMap<String, (u64, u64)>,
    /// (group, topic) -> lag.
    pub lag: BTreeMap<(String, String), Lag>,
    pub dropped: u64,
    pub meta: MetaFigures,
}

impl Snapshot {
    /// Adds another shard's figures: counts add, lag messages add, lag latency is the largest.
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
        for (k, v) in o.send_back {
            *self.send_back.entry(k).or_default() += v;
        }
        for (k, (c, r)) in o.decisions {
            let d = self.decisions.entry(k).or_default();
            d.0 += c;
            d.1 += r;
        }
        for (k, v) in o.lag {
            let l = self.lag.entry(k).or_default();
            l.messages += v.messages;
            l.latency_ms = l.latency_ms.max(v.latency_ms);
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

/// Lag of every (group, topic) over the queues this shard owns.
fn lag_of(s: &Shard) -> BTreeMap<(String, String), Lag> {
    let now = now_ms();
    let mut out: BTreeMap<(String, String), Lag> = BTreeMap::new();
    let offsets = s.offsets();
    for (key, queues) in offsets.iter() {
        let Some((topic, group)) = key.split_once('@') else {
            continue;
        };
        let mut lag = Lag::default();
        for (&qid, &committed) in queues {
            if committed < 0 || s.owner(topic, qid) != s.id {
                continue;
            }
            let max = s.queue_bounds(topic, qid).1;
            let committed = committed as u64;
            if max <= committed {
                continue;
            }
            lag.messages += max - committed;
            let first = s
                .unit_at(topic, qid, committed)
                .and_then(|u| store_timestamp(s, u.phy_offset, u.size));
            if let Some(t) = first {
                lag.latency_ms = lag.latency_ms.max(now - t);
            }
        }
        out.insert((group.to_string(), topic.to_string()), lag);
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
        decisions: f
            .decisions
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        dropped: f.dropped,
        ..Snapshot::default()
    });
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
                latency_ms: 50
            }
        );
        assert_eq!(all.meta.topics, 4);
        assert_eq!(all.decisions["T"], (1, 0));
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
