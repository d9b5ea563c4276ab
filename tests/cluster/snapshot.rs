//! A controller that was down while the others wrote and compacted more than a snapshot's worth
//! of log catches up through InstallSnapshot.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::controller::*;
use raw_support::Conn;
use ringmq::protocol::body::{from_json, BrokerReplicasInfo};

/// With one follower killed, 1,200 address changes are committed (the leader snapshots
/// every 1,000 entries and then drops the log before them). The follower, restarted on its
/// old store, receives the snapshot; then a write commits with only the leader and it alive,
/// and after the leader dies it leads (its log is the newest) and reports the last address.
#[test]
fn lagging_follower_catches_up_by_snapshot() {
    let mut g = ControllerGroup::start(3, "");
    let leader = g.leader(Duration::from_secs(20));
    let lagging = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    g.kill9(lagging);
    let mut lc = g.leader_conn();
    let mut a = FakeBroker::new("b");
    a.register(&mut lc);
    let started = Instant::now();
    for i in 0..1200 {
        let r = lc.call(register_cmd(
            "b",
            a.id,
            &format!("10.0.0.{}:10911", i % 2 + 1),
        ));
        assert_eq!(r.code, 0, "write {i}: {:?}", r.remark);
    }
    println!("1,200 committed writes in {:?}", started.elapsed());

    g.spawn(lagging);
    let snapshot = g
        .dir
        .path()
        .join(format!("store{lagging}"))
        .join("snapshot.json");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !snapshot.exists() {
        assert!(Instant::now() < deadline, "no snapshot on n{lagging}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = std::fs::read_to_string(&snapshot).unwrap();
    assert!(
        text.contains("10.0.0."),
        "the installed snapshot holds the group"
    );

    // Only the leader and the caught-up follower are left: a write still commits.
    g.kill9(other);
    let r = lc.call(register_cmd("b", a.id, "10.9.9.9:10911"));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    g.kill9(leader);
    g.spawn(other);
    let leader2 = g.leader(Duration::from_secs(20));
    assert_eq!(leader2, lagging, "only its log has the last write");
    let r = Conn::connect(g.addr(leader2)).call(sync_state_data_cmd(&["b"]));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let data: BrokerReplicasInfo = from_json(&r.body).unwrap();
    let replica = &data.replicas_info_table["b"].not_in_sync_replicas[0];
    assert_eq!(replica.broker_address, "10.9.9.9:10911");
}
