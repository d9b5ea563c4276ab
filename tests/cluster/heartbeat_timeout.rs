//! A master that stops heartbeating while its connections stay open is expired by the
//! controllers' scan and replaced.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::controller::*;
use ringmq::protocol::headers::NotifyBrokerRoleChangedRequestHeader;

/// The master's heartbeats (2 s timeout) stop without a closed connection: within the timeout
/// plus a scan interval the leader elects the live SyncStateSet member with the higher
/// epoch, and tells it; the silent old master is not told (it is not alive).
#[test]
fn silent_master_is_expired_and_replaced() {
    let g = ControllerGroup::start(3, "scanNotActiveBrokerInterval=500");
    g.leader(Duration::from_secs(20));
    let mut lc = g.leader_conn();
    let (mut a, mut b, mut c) = (
        FakeBroker::new("b"),
        FakeBroker::new("b"),
        FakeBroker::new("b"),
    );
    a.register(&mut lc);
    b.register(&mut lc);
    c.register(&mut lc);
    a.start_heartbeats(g.addrs(), 1, 500);
    b.start_heartbeats(g.addrs(), 1, 400);
    // c has the larger offset but an older epoch: b wins.
    c.start_heartbeats(g.addrs(), 0, 900);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(lc.call(elect_cmd("b", a.id)).code, 0);
    let r = lc.call(alter_cmd("b", a.id, 1, &[a.id, b.id, c.id], 1));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    while b.pushed.try_recv().is_ok() {}
    while a.pushed.try_recv().is_ok() {}

    a.pause_heartbeats();
    let paused = Instant::now();
    let pushed = b
        .role_change(Duration::from_secs(10))
        .expect("broker 2 told it is the new master");
    let took = paused.elapsed();
    println!("heartbeats stopped -> new master announced in {took:?}");
    assert!(
        took >= Duration::from_millis(1500),
        "expired before its 2 s timeout: {took:?}"
    );
    let n = NotifyBrokerRoleChangedRequestHeader::from_command(&pushed).unwrap();
    assert_eq!(n.master_broker_id, Some(b.id));
    assert_eq!(n.master_epoch, Some(2));
    assert!(
        c.role_change(Duration::from_secs(3)).is_some(),
        "broker 3 told too"
    );
    assert!(
        a.role_change(Duration::from_millis(500)).is_none(),
        "the dead master was told"
    );
    let (m, epoch, set) = replica_info(&mut lc, "b");
    assert_eq!((m, epoch), (Some(b.id), Some(2)));
    assert_eq!(set.sync_state_set, [b.id].into());
    a.stop_heartbeats();
    b.stop_heartbeats();
    c.stop_heartbeats();
}
