//! Who becomes master (Java's `DefaultElectPolicy`), and the liveness view it reads.
//!
//! Candidates are first the alive members of the SyncStateSet, then, only with
//! `enableElectUncleanMaster`, every alive replica. Within a candidate set: an old master that
//! is still a candidate stays (unless another broker is designated); a designated broker is
//! taken if it is a candidate, else nobody; otherwise the best by (epoch desc, maxOffset desc,
//! electionPriority asc), ties to the lowest id. Pure: the caller passes what it knows.

use std::cmp::Ordering;
use std::collections::BTreeSet;

/// What a controller knows of a replica from its heartbeats (not replicated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElectInfo {
    pub epoch: i32,
    pub max_offset: i64,
    pub election_priority: i32,
}

/// A controller's own view of which brokers are alive.
pub trait Liveness {
    fn is_alive(&self, cluster_name: &str, broker_name: &str, broker_id: i64) -> bool;
    /// The last heartbeat's epoch, offset and priority; None if never heard from.
    fn elect_info(
        &self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: i64,
    ) -> Option<ElectInfo>;
}

/// The better candidate first: epoch desc, maxOffset desc, electionPriority asc.
fn better(a: &ElectInfo, b: &ElectInfo) -> Ordering {
    b.epoch
        .cmp(&a.epoch)
        .then(b.max_offset.cmp(&a.max_offset))
        .then(a.election_priority.cmp(&b.election_priority))
}

fn try_elect(
    live: &dyn Liveness,
    cluster: &str,
    name: &str,
    brokers: &BTreeSet<i64>,
    old_master: Option<i64>,
    prefer: Option<i64>,
) -> Option<i64> {
    let alive: Vec<i64> = brokers
        .iter()
        .copied()
        .filter(|id| live.is_alive(cluster, name, *id))
        .collect();
    if alive.is_empty() {
        return None;
    }
    if let Some(old) = old_master {
        if alive.contains(&old) && prefer.is_none_or(|p| p == old) {
            return Some(old);
        }
    }
    if let Some(p) = prefer {
        return alive.contains(&p).then_some(p);
    }
    let ranked = alive
        .iter()
        .filter_map(|id| live.elect_info(cluster, name, *id).map(|i| (*id, i)))
        .min_by(|(ia, a), (ib, b)| better(a, b).then(ia.cmp(ib)));
    Some(ranked.map_or(alive[0], |(id, _)| id))
}

/// The new master, or None if no candidate is alive.
pub fn elect(
    live: &dyn Liveness,
    cluster: &str,
    name: &str,
    sync_state_set: &BTreeSet<i64>,
    all_replicas: Option<&BTreeSet<i64>>,
    old_master: Option<i64>,
    prefer: Option<i64>,
) -> Option<i64> {
    try_elect(live, cluster, name, sync_state_set, old_master, prefer)
        .or_else(|| try_elect(live, cluster, name, all_replicas?, old_master, prefer))
}
