//! Three `ringmq controller` processes and raw-protocol fake brokers: Java's broker start-up
//! sequence, SyncStateSet changes, a master's failover with NOTIFY_BROKER_ROLE_CHANGED, the
//! loss of the controller leader, and a restart of the whole controller group.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::controller::*;
use raw_support::Conn;
use ringmq::protocol::body::{from_json, SyncStateSet};
use ringmq::protocol::codes::response_code as rc;
use ringmq::protocol::headers::*;

/// A leader is found through 1005 on any controller; three brokers register (ids 1, 2, 3),
/// the first is elected master with masterEpoch 1 and the others are told it; 1001 grows
/// the SyncStateSet; when the master's connections close a new master from the SyncStateSet
/// is elected and pushed to a live broker with 1008; after SIGKILL of the controller leader a
/// new leader has the same state, and after a restart of all three the state is read back
/// from disk.
#[test]
fn controller_group_failover_and_recovery() {
    let mut g = ControllerGroup::start(3, "scanNotActiveBrokerInterval=500");
    let leader = g.leader(Duration::from_secs(20));
    // Every controller names the leader.
    for i in 0..3 {
        let m = metadata(g.addr(i)).expect("1005");
        assert_eq!(m.group.as_deref(), Some("test"));
        assert_eq!(
            m.controller_leader_id.as_deref(),
            Some(format!("n{leader}").as_str())
        );
        assert_eq!(
            m.controller_leader_address,
            Some(g.addr(leader).to_string())
        );
        assert_eq!(m.is_leader, i == leader);
        assert_eq!(m.peers.as_deref().map(|p| p.matches(';').count()), Some(3));
    }
    // A follower refuses leader-only requests with CONTROLLER_NOT_LEADER.
    let follower = (leader + 1) % 3;
    let r = Conn::connect(g.addr(follower)).call(next_id_cmd("b"));
    assert_eq!(r.code, rc::CONTROLLER_NOT_LEADER);

    let mut lc = g.leader_conn();
    let mut a = FakeBroker::new("b");
    let h = a.register(&mut lc);
    assert_eq!(a.id, 1);
    assert_eq!(h.master_broker_id, None);
    a.start_heartbeats(g.addrs(), 0, 100);
    std::thread::sleep(Duration::from_millis(700));
    let r = lc.call(elect_cmd("b", 1));
    assert_eq!(r.code, 0, "1002: {:?}", r.remark);
    let e = ElectMasterResponseHeader::from_command(&r).unwrap();
    assert_eq!(e.master_broker_id, Some(1));
    assert_eq!(e.master_epoch, Some(1));
    assert_eq!(e.master_address, Some(a.addr_str()));

    let mut b = FakeBroker::new("b");
    let mut c = FakeBroker::new("b");
    for (fb, want) in [(&mut b, 2), (&mut c, 3)] {
        let h = fb.register(&mut lc);
        assert_eq!(fb.id, want);
        assert_eq!(h.master_broker_id, Some(1));
        assert_eq!(h.master_address, Some(a.addr_str()));
        assert_eq!(h.master_epoch, Some(1));
    }
    b.start_heartbeats(g.addrs(), 1, 100);
    c.start_heartbeats(g.addrs(), 1, 90);
    std::thread::sleep(Duration::from_millis(700));

    // The master grows its SyncStateSet.
    let r = lc.call(alter_cmd("b", 1, 1, &[1, 2, 3], 1));
    assert_eq!(r.code, 0, "1001: {:?}", r.remark);
    let h = AlterSyncStateSetResponseHeader::from_command(&r).unwrap();
    assert_eq!(h.new_sync_state_set_epoch, 2);
    let (m, epoch, set) = replica_info(&mut lc, "b");
    assert_eq!((m, epoch), (Some(1), Some(1)));
    assert_eq!(set.sync_state_set, [1, 2, 3].into());
    assert_eq!(set.sync_state_set_epoch, 2);

    // The master goes away: its connections close. 2 has the larger maxOffset in epoch 1.
    let killed = Instant::now();
    a.stop_heartbeats();
    let pushed = b
        .role_change(Duration::from_secs(10))
        .expect("broker 2 was told the new master");
    let took = killed.elapsed();
    println!("failover: master gone -> new master announced in {took:?}");
    let n = NotifyBrokerRoleChangedRequestHeader::from_command(&pushed).unwrap();
    assert_eq!(n.master_broker_id, Some(2));
    assert_eq!(n.master_epoch, Some(2));
    assert_eq!(n.master_address, Some(b.addr_str()));
    let s: SyncStateSet = from_json(&pushed.body).unwrap();
    assert_eq!(s.sync_state_set, [2].into());
    assert!(
        c.role_change(Duration::from_secs(5)).is_some(),
        "broker 3 told too"
    );
    let (m, epoch, set) = replica_info(&mut lc, "b");
    assert_eq!((m, epoch), (Some(2), Some(2)));
    assert_eq!(set.sync_state_set_epoch, 3);

    // The controller leader dies; a new leader answers with the replicated state.
    g.kill9(leader);
    let started = Instant::now();
    let leader2 = g.leader(Duration::from_secs(20));
    println!(
        "controller leader n{leader} killed -> n{leader2} leads after {:?}",
        started.elapsed()
    );
    assert_ne!(leader2, leader);
    let mut lc2 = Conn::connect(g.addr(leader2));
    let (m, epoch, set) = replica_info(&mut lc2, "b");
    assert_eq!((m, epoch), (Some(2), Some(2)));
    assert_eq!(set.sync_state_set, [2].into());

    // The whole group restarts: the state comes back from disk.
    for i in 0..3 {
        g.kill9(i);
    }
    for i in 0..3 {
        g.spawn(i);
    }
    let leader3 = g.leader(Duration::from_secs(30));
    let mut lc3 = Conn::connect(g.addr(leader3));
    let (m, epoch, set) = replica_info(&mut lc3, "b");
    assert_eq!((m, epoch), (Some(2), Some(2)), "{}", g.log(leader3));
    assert_eq!(set.sync_state_set, [2].into());
    assert_eq!(set.sync_state_set_epoch, 3);
    let r = lc3.call(next_id_cmd("b"));
    let h = GetNextBrokerIdResponseHeader::from_command(&r).unwrap();
    assert_eq!(h.next_broker_id, Some(4));
    b.stop_heartbeats();
    c.stop_heartbeats();
}
