//! A broker master that dies together with the controller leader is still replaced: the new
//! leader scans for dead masters when it takes over.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::controller::*;
use raw_support::Conn;
use ringmq::protocol::headers::NotifyBrokerRoleChangedRequestHeader;

/// SIGKILL the controller leader, then close the master's connections: no controller that is
/// left saw the master go while leading, yet the new leader elects the live SyncStateSet
/// member and tells it with NOTIFY_BROKER_ROLE_CHANGED.
#[test]
fn new_leader_replaces_master_that_died_with_old_leader() {
    let mut g = ControllerGroup::start(
        3,
        "scanNotActiveBrokerInterval=500\nscanInactiveMasterInterval=1000",
    );
    let leader = g.leader(Duration::from_secs(20));
    let mut lc = g.leader_conn();
    let mut a = FakeBroker::new("b");
    let mut b = FakeBroker::new("b");
    a.register(&mut lc);
    b.register(&mut lc);
    a.start_heartbeats(g.addrs(), 0, 10);
    b.start_heartbeats(g.addrs(), 0, 10);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(lc.call(elect_cmd("b", a.id)).code, 0);
    assert_eq!(lc.call(alter_cmd("b", a.id, 1, &[a.id, b.id], 1)).code, 0);
    // Let the followers apply the new SyncStateSet before the leader goes.
    std::thread::sleep(Duration::from_millis(500));
    while b.pushed.try_recv().is_ok() {}

    g.kill9(leader);
    a.stop_heartbeats();
    let gone = Instant::now();
    let pushed = b
        .role_change(Duration::from_secs(20))
        .expect("the new leader elected broker 2 and told it");
    println!(
        "master and controller leader gone -> new master announced in {:?}",
        gone.elapsed()
    );
    let n = NotifyBrokerRoleChangedRequestHeader::from_command(&pushed).unwrap();
    assert_eq!(n.master_broker_id, Some(b.id));
    assert_eq!(n.master_epoch, Some(2));
    let leader2 = g.leader(Duration::from_secs(5));
    let (m, epoch, _) = replica_info(&mut Conn::connect(g.addr(leader2)), "b");
    assert_eq!((m, epoch), (Some(b.id), Some(2)));
    b.stop_heartbeats();
}
