//! Unit tests of the replicated state: every validation rule of `ReplicasInfo` and
//! `elect`, checked against Java's codes, and that a refusal changes nothing.

use std::collections::{BTreeSet, HashMap};

use super::elect::{ElectInfo, Liveness};
use super::error::ControllerError as E;
use super::replicas::{Event, Outcome, ReplicasInfo};

/// A liveness view the test sets by hand: id -> (epoch, maxOffset, priority).
#[derive(Default)]
struct Live(HashMap<i64, ElectInfo>);

impl Live {
    fn with(ids: &[(i64, i32, i64, i32)]) -> Self {
        Live(
            ids.iter()
                .map(|&(id, epoch, max_offset, election_priority)| {
                    (
                        id,
                        ElectInfo {
                            epoch,
                            max_offset,
                            election_priority,
                        },
                    )
                })
                .collect(),
        )
    }
    fn ids(ids: &[i64]) -> Self {
        Self::with(&ids.iter().map(|&i| (i, 0, 0, 0)).collect::<Vec<_>>())
    }
}

impl Liveness for Live {
    fn is_alive(&self, _: &str, _: &str, id: i64) -> bool {
        self.0.contains_key(&id)
    }
    fn elect_info(&self, _: &str, _: &str, id: i64) -> Option<ElectInfo> {
        self.0.get(&id).copied()
    }
}

fn commit<H>(s: &mut ReplicasInfo, o: Outcome<H>) -> H {
    assert_eq!(o.refusal, None);
    for e in &o.events {
        s.apply(e);
    }
    o.header
}

/// Validates with the expression, then applies its events to the state.
macro_rules! run {
    ($s:ident, $e:expr) => {{
        let o = $e;
        commit(&mut $s, o)
    }};
}

fn set(ids: &[i64]) -> BTreeSet<i64> {
    ids.iter().copied().collect()
}

/// A group "b" with ids 1..=n registered and 1 elected master (masterEpoch 1, set {1} epoch 1).
fn group(n: i64) -> ReplicasInfo {
    let mut s = ReplicasInfo::default();
    for id in 1..=n {
        assert_eq!(s.next_broker_id("b"), id);
        let code = format!("10.0.0.{id}:10911;1");
        run!(s, s.apply_broker_id("c", "b", id, &code));
    }
    let e = run!(
        s,
        s.elect_master("b", Some(1), false, false, &Live::ids(&[1]))
    );
    assert_eq!(e.master.master_broker_id, Some(1));
    assert_eq!(e.master.master_epoch, Some(1));
    s
}

/// Broker ids start at 1, each applied id advances the next one, and the address is the
/// check code's part before ';'.
#[test]
fn apply_broker_id_assigns_in_order() {
    let s = group(3);
    assert_eq!(s.next_broker_id("b"), 4);
    assert_eq!(s.next_broker_id("other"), 1);
    let r = s.replica_info("b").unwrap();
    assert_eq!(r.address(Some(2)), Some("10.0.0.2:10911"));
}

/// A first id other than 1, or an id taken with another check code, is BROKER_ID_INVALID;
/// the same check code may claim its id again.
#[test]
fn apply_broker_id_refusals() {
    let s = ReplicasInfo::default();
    let o = s.apply_broker_id("c", "b", 2, "a:1;1");
    assert!(matches!(o.refusal, Some(E::BrokerIdInvalid(_))));
    assert!(o.events.is_empty());
    let s = group(2);
    let o = s.apply_broker_id("c", "b", 2, "x:1;9");
    assert!(matches!(o.refusal, Some(E::BrokerIdInvalid(_))));
    let o = s.apply_broker_id("c", "b", 2, "10.0.0.2:10911;1");
    assert_eq!(o.refusal, None);
    let mut s2 = s.clone();
    commit(&mut s2, o);
    assert_eq!(s2, s, "re-applying its own id changes nothing");
}

/// The first election takes the requester even if it is not in the (empty) SyncStateSet;
/// the new master gets masterEpoch 1, syncStateSetEpoch 1 and a set of itself.
#[test]
fn first_election_picks_requester() {
    let s = group(2);
    let sync = s.sync_state_info("b").unwrap();
    assert_eq!(sync.master_broker_id, Some(1));
    assert_eq!((sync.master_epoch, sync.sync_state_set_epoch), (1, 1));
    assert_eq!(sync.sync_state_set, set(&[1]));
}

/// An election in an unknown group is BROKER_NEED_TO_BE_REGISTERED.
#[test]
fn elect_unknown_group() {
    let s = ReplicasInfo::default();
    let o = s.elect_master("nope", Some(1), false, false, &Live::ids(&[1]));
    assert!(matches!(o.refusal, Some(E::BrokerNeedToBeRegistered(_))));
}

/// A live old master is kept: MASTER_STILL_EXIST with the current master, no event.
#[test]
fn elect_keeps_valid_old_master() {
    let s = group(2);
    let o = s.elect_master("b", Some(2), false, false, &Live::ids(&[1, 2]));
    assert!(matches!(o.refusal, Some(E::MasterStillExist(_))));
    assert_eq!(o.header.master.master_broker_id, Some(1));
    assert!(o.events.is_empty());
}

/// After a master dies, the best alive SyncStateSet member wins by epoch desc, then
/// maxOffset desc, then priority asc; epochs bump by one and the set is the new master.
#[test]
fn elect_orders_candidates() {
    let mut s = group(4);
    let all = Live::ids(&[1, 2, 3, 4]);
    let sync = s.sync_state_info("b").unwrap().clone();
    let o = s.alter_sync_state_set(
        "b",
        1,
        1,
        &set(&[1, 2, 3, 4]),
        sync.sync_state_set_epoch,
        &all,
    );
    commit(&mut s, o);
    // 1 is dead; 2 has an older epoch, 3 and 4 tie on epoch and offset, 4 has the better priority.
    let live = Live::with(&[(2, 1, 900, 0), (3, 2, 100, 5), (4, 2, 100, 1)]);
    let e = run!(s, s.elect_master("b", None, false, false, &live));
    assert_eq!(e.master.master_broker_id, Some(4));
    assert_eq!(e.master.master_epoch, Some(2));
    assert_eq!(e.master.sync_state_set_epoch, Some(3));
    assert_eq!(e.sync_state_set, set(&[4]));
    assert_eq!(e.member_group.unwrap().broker_addrs.len(), 4);
    let sync = s.sync_state_info("b").unwrap();
    assert_eq!((sync.master_epoch, sync.sync_state_set_epoch), (2, 3));
    assert_eq!(sync.sync_state_set, set(&[4]));
    // A larger offset beats a better priority within one epoch.
    let live = Live::with(&[(2, 3, 50, 9), (3, 3, 60, 9), (4, 3, 10, 0)]);
    let mut s2 = group(4);
    let o = s2.alter_sync_state_set("b", 1, 1, &set(&[1, 2, 3, 4]), 1, &all);
    commit(&mut s2, o);
    let e = run!(s2, s2.elect_master("b", None, false, false, &live));
    assert_eq!(e.master.master_broker_id, Some(3));
}

/// With no alive SyncStateSet member, a controller-triggered election records that the
/// master is gone (MASTER_NOT_AVAILABLE, masterEpoch + 1, master cleared, set kept); a
/// broker-requested one is ELECT_MASTER_FAILED and changes nothing.
#[test]
fn elect_without_candidates() {
    let mut s = group(2);
    let live = Live::ids(&[2]);
    let before = s.clone();
    let o = s.elect_master("b", Some(2), false, false, &live);
    assert!(matches!(o.refusal, Some(E::ElectMasterFailed(_))));
    assert!(o.events.is_empty());
    let o = s.elect_master("b", None, false, false, &live);
    assert!(matches!(o.refusal, Some(E::MasterNotAvailable(_))));
    for e in &o.events {
        s.apply(e);
    }
    let sync = s.sync_state_info("b").unwrap();
    assert_eq!(sync.master_broker_id, None);
    assert_eq!(sync.master_epoch, 2);
    assert_eq!(
        sync.sync_state_set,
        before.sync_state_info("b").unwrap().sync_state_set
    );
    // Later, a live member of the set comes back and is elected on its own request.
    let e = run!(
        s,
        s.elect_master("b", Some(1), false, false, &Live::ids(&[1]))
    );
    assert_eq!(e.master.master_broker_id, Some(1));
    assert_eq!(e.master.master_epoch, Some(3));
}

/// An unclean election takes a live replica outside the SyncStateSet only when enabled.
#[test]
fn elect_unclean_only_when_enabled() {
    let s = group(2);
    let live = Live::ids(&[2]);
    let o = s.elect_master("b", None, false, false, &live);
    assert_eq!(o.header.master.master_broker_id, None);
    let o = s.elect_master("b", None, false, true, &live);
    assert_eq!(o.refusal, None);
    assert_eq!(o.header.master.master_broker_id, Some(2));
}

/// designateElect takes the named broker if it is a live candidate (even over a live old
/// master), and nobody otherwise.
#[test]
fn elect_designated() {
    let mut s = group(2);
    let o = s.alter_sync_state_set("b", 1, 1, &set(&[1, 2]), 1, &Live::ids(&[1, 2]));
    commit(&mut s, o);
    let o = s.elect_master("b", Some(2), true, false, &Live::ids(&[1, 2]));
    assert_eq!(o.refusal, None);
    assert_eq!(o.header.master.master_broker_id, Some(2));
    let o = s.elect_master("b", Some(3), true, false, &Live::ids(&[1, 2]));
    assert!(matches!(o.refusal, Some(E::ElectMasterFailed(_))));
}

/// brokerName, masterBrokerId, masterEpoch, proposed set, its epoch, the expected refusal.
type AlterCase = (&'static str, i64, i32, Vec<i64>, i32, fn(&E) -> bool);

/// Alter refusals, in Java's order, each with its code and no event.
#[test]
fn alter_refusals() {
    let mut s = group(3);
    let live = Live::ids(&[1, 2]);
    let o = s.alter_sync_state_set("b", 1, 1, &set(&[1, 2]), 1, &live);
    commit(&mut s, o);
    // now master 1, masterEpoch 1, set {1,2} epoch 2
    let cases: Vec<AlterCase> = vec![
        ("x", 1, 1, vec![1], 2, |e| {
            matches!(e, E::AlterSyncStateSetFailed(_))
        }),
        ("b", 1, 1, vec![1, 2], 2, |e| {
            matches!(e, E::AlterSyncStateSetFailed(_))
        }),
        ("b", 2, 1, vec![1], 2, |e| matches!(e, E::InvalidMaster(_))),
        ("b", 1, 0, vec![1], 2, |e| {
            matches!(e, E::FencedMasterEpoch(_))
        }),
        ("b", 1, 1, vec![1], 1, |e| {
            matches!(e, E::FencedSyncStateSetEpoch(_))
        }),
        ("b", 1, 1, vec![1, 9], 2, |e| {
            matches!(e, E::InvalidReplicas(_))
        }),
        ("b", 1, 1, vec![1, 2, 3], 2, |e| {
            matches!(e, E::BrokerNotAlive(_))
        }),
        ("b", 1, 1, vec![2], 2, |e| {
            matches!(e, E::AlterSyncStateSetFailed(_))
        }),
    ];
    for (name, master, epoch, ids, set_epoch, is) in cases {
        let o = s.alter_sync_state_set(name, master, epoch, &set(&ids), set_epoch, &live);
        let r = o.refusal.expect("refused");
        assert!(is(&r), "{name} {master} {epoch} {ids:?} {set_epoch}: {r:?}");
        assert!(o.events.is_empty());
    }
    let o = s.alter_sync_state_set("b", 1, 1, &set(&[1]), 2, &live);
    assert_eq!(commit(&mut s, o), 3);
    assert_eq!(s.sync_state_info("b").unwrap().sync_state_set, set(&[1]));
}

/// Register answers the master only if it is alive, and records a changed address.
#[test]
fn register_broker_reports_live_master() {
    let s = group(2);
    let o = s.register_broker("b", 2, "10.0.0.2:10911", &Live::ids(&[1, 2]));
    assert_eq!(o.refusal, None);
    assert!(o.events.is_empty());
    assert_eq!(o.header.0.master_broker_id, Some(1));
    assert_eq!(o.header.0.master_address.as_deref(), Some("10.0.0.1:10911"));
    let o = s.register_broker("b", 2, "10.0.0.2:10911", &Live::ids(&[2]));
    assert_eq!(o.header.0.master_broker_id, None);
    let mut s2 = s.clone();
    let o = s2.register_broker("b", 2, "10.9.9.9:1", &Live::ids(&[2]));
    commit(&mut s2, o);
    assert_eq!(
        s2.replica_info("b").unwrap().address(Some(2)),
        Some("10.9.9.9:1")
    );
    let o = s.register_broker("b", 7, "a:1", &Live::ids(&[2]));
    assert!(matches!(o.refusal, Some(E::BrokerNeedToBeRegistered(_))));
    let o = s.register_broker("zz", 1, "a:1", &Live::ids(&[2]));
    assert!(matches!(o.refusal, Some(E::BrokerNeedToBeRegistered(_))));
}

/// Clean refuses a live group or a live id unless told to clean living brokers, refuses bad
/// ids and unknown groups, and removes ids from the replicas and the SyncStateSet.
#[test]
fn clean_broker_data_rules() {
    let mut s = group(3);
    let o = s.alter_sync_state_set("b", 1, 1, &set(&[1, 2]), 1, &Live::ids(&[1, 2]));
    commit(&mut s, o);
    let live = Live::ids(&[1]);
    let refused = |o: Outcome<()>| {
        assert!(matches!(o.refusal, Some(E::InvalidCleanBrokerMetadata(_))));
        assert!(o.events.is_empty());
    };
    refused(s.clean_broker_data("c", "b", None, false, &live));
    refused(s.clean_broker_data("c", "b", Some("1"), false, &live));
    refused(s.clean_broker_data("c", "b", Some("2;x"), false, &live));
    refused(s.clean_broker_data("c", "zz", Some("2"), false, &live));
    let o = s.clean_broker_data("c", "b", Some("2;3"), false, &live);
    commit(&mut s, o);
    assert_eq!(s.replica_info("b").unwrap().broker_id_info.len(), 1);
    assert_eq!(s.sync_state_info("b").unwrap().sync_state_set, set(&[1]));
    let o = s.clean_broker_data("c", "b", None, true, &live);
    commit(&mut s, o);
    assert!(s.replica_info("b").is_none() && s.sync_state_info("b").is_none());
}

/// The re-election scan names a group whose master is dead while another member lives.
#[test]
fn need_reelect_scan() {
    let s = group(2);
    assert!(s.need_reelect(&Live::ids(&[1, 2])).is_empty());
    assert!(s.need_reelect(&Live::ids(&[])).is_empty());
    assert_eq!(s.need_reelect(&Live::ids(&[2])), vec!["b".to_string()]);
}

/// Replaying the same events on a fresh state gives the same state (what a follower and a
/// restart rely on), and a JSON round trip keeps it.
#[test]
fn events_replay_and_serde() {
    let mut log = Vec::new();
    let mut s = ReplicasInfo::default();
    for id in 1..=2 {
        let o = s.apply_broker_id("c", "b", id, &format!("h{id}:1;0"));
        log.extend(o.events.clone());
        commit(&mut s, o);
    }
    let o = s.elect_master("b", Some(1), false, false, &Live::ids(&[1]));
    log.extend(o.events.clone());
    commit(&mut s, o);
    let mut replay = ReplicasInfo::default();
    for e in &log {
        replay.apply(e);
    }
    assert_eq!(replay, s);
    let json = serde_json::to_vec(&s).unwrap();
    assert_eq!(serde_json::from_slice::<ReplicasInfo>(&json).unwrap(), s);
    let ev = Event::ElectMaster {
        broker_name: "b".into(),
        new_master: None,
    };
    let j = serde_json::to_vec(&ev).unwrap();
    assert_eq!(serde_json::from_slice::<Event>(&j).unwrap(), ev);
}
