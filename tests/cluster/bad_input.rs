//! Bad requests to a controller group are refused with Java's codes and change nothing.

use crate::raw_support;

use std::time::Duration;

use raw_support::controller::*;
use raw_support::Conn;
use ringmq::protocol::body::{from_json, BrokerReplicasInfo};
use ringmq::protocol::codes::{request_code as rq, response_code as rc};
use ringmq::protocol::headers::*;
use ringmq::protocol::RemotingCommand;

fn clean_cmd(broker_name: &str, ids: Option<&str>) -> RemotingCommand {
    let mut c = RemotingCommand::new_request(rq::CLEAN_BROKER_DATA);
    CleanControllerBrokerDataRequestHeader {
        cluster_name: Some("c".into()),
        broker_name: broker_name.into(),
        broker_controller_ids_to_clean: ids.map(str::to_owned),
        is_clean_living_broker: false,
        invoke_time: None,
    }
    .write_to(&mut c);
    c
}

fn config(c: &mut impl Call) -> String {
    let r = c.call(RemotingCommand::new_request(rq::GET_CONTROLLER_CONFIG));
    assert_eq!(r.code, 0);
    String::from_utf8(r.body.to_vec()).unwrap()
}

/// Unknown brokers, stale epochs, an alter from a non-master, a set without the master, a
/// member that is unregistered or dead, undecodable headers and bodies, unknown codes and
/// config keys that may not change: each gets Java's code, and 1004/1006 show the state
/// as it was.
#[test]
fn bad_requests_are_refused_and_change_nothing() {
    let g = ControllerGroup::start(3, "");
    let leader = g.leader(Duration::from_secs(20));
    let mut lc = g.leader_conn();
    let (mut a, mut b, mut c) = (
        FakeBroker::new("b"),
        FakeBroker::new("b"),
        FakeBroker::new("b"),
    );
    a.register(&mut lc);
    b.register(&mut lc);
    c.register(&mut lc);
    a.start_heartbeats(g.addrs(), 0, 10);
    b.start_heartbeats(g.addrs(), 0, 10);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(lc.call(elect_cmd("b", 1)).code, 0);
    let before = replica_info(&mut lc, "b");
    assert_eq!((before.0, before.1), (Some(1), Some(1)));
    assert_eq!(before.2.sync_state_set, [1].into());

    let mut garbage_alter = alter_cmd("b", 1, 1, &[1, 2], 1);
    garbage_alter.body = bytes::Bytes::from_static(b"{not json");
    let mut no_name = replica_info_cmd("b");
    no_name.ext_fields = Default::default();
    let mut beat_without_id = RemotingCommand::new_request(rq::BROKER_HEARTBEAT);
    BrokerHeartbeatRequestHeader {
        cluster_name: "c".into(),
        broker_addr: "x:1".into(),
        broker_name: "b".into(),
        ..Default::default()
    }
    .write_to(&mut beat_without_id);
    let cases: Vec<(&str, RemotingCommand, i32)> = vec![
        (
            "1004 unknown group",
            replica_info_cmd("nope"),
            rc::CONTROLLER_BROKER_METADATA_NOT_EXIST,
        ),
        (
            "1001 unknown group",
            alter_cmd("nope", 1, 1, &[1], 1),
            rc::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        ),
        (
            "1002 unknown group",
            elect_cmd("nope", 1),
            rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        ),
        (
            "1003 unknown id",
            register_cmd("b", 9, "x:1"),
            rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        ),
        (
            "1013 first id not 1",
            apply_id_cmd("nope", 5, "x:1;1"),
            rc::CONTROLLER_BROKER_ID_INVALID,
        ),
        (
            "1013 id taken",
            apply_id_cmd("b", 2, "y:1;1"),
            rc::CONTROLLER_BROKER_ID_INVALID,
        ),
        (
            "1001 stale master epoch",
            alter_cmd("b", 1, 0, &[1, 2], 1),
            rc::CONTROLLER_FENCED_MASTER_EPOCH,
        ),
        (
            "1001 from a non-master",
            alter_cmd("b", 2, 1, &[1, 2], 1),
            rc::CONTROLLER_INVALID_MASTER,
        ),
        (
            "1001 stale set epoch",
            alter_cmd("b", 1, 1, &[1, 2], 0),
            rc::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        ),
        (
            "1001 without the master",
            alter_cmd("b", 1, 1, &[2], 1),
            rc::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        ),
        (
            "1001 unregistered member",
            alter_cmd("b", 1, 1, &[1, 7], 1),
            rc::CONTROLLER_INVALID_REPLICAS,
        ),
        (
            "1001 dead member",
            alter_cmd("b", 1, 1, &[1, 3], 1),
            rc::CONTROLLER_BROKER_NOT_ALIVE,
        ),
        ("1001 garbage body", garbage_alter, rc::SYSTEM_ERROR),
        ("1004 header without brokerName", no_name, rc::SYSTEM_ERROR),
        (
            "1006 garbage body",
            RemotingCommand::new_request(rq::CONTROLLER_GET_SYNC_STATE_DATA).with_body(&b"[1,"[..]),
            rc::SYSTEM_ERROR,
        ),
        (
            "1002 master still alive",
            elect_cmd("b", 2),
            rc::CONTROLLER_MASTER_STILL_EXIST,
        ),
        (
            "1011 live group",
            clean_cmd("b", None),
            rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        ),
        (
            "1011 live id",
            clean_cmd("b", Some("2")),
            rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        ),
        (
            "1011 bad ids",
            clean_cmd("b", Some("3;x")),
            rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        ),
        (
            "904 without brokerId",
            beat_without_id,
            rc::CONTROLLER_INVALID_REQUEST,
        ),
        (
            "unknown code",
            RemotingCommand::new_request(1014),
            rc::REQUEST_CODE_NOT_SUPPORTED,
        ),
        (
            "1009 fixed key",
            RemotingCommand::new_request(rq::UPDATE_CONTROLLER_CONFIG)
                .with_body(&b"controllerDLegerSelfId=n9"[..]),
            rc::NO_PERMISSION,
        ),
        (
            "1009 bad value",
            RemotingCommand::new_request(rq::UPDATE_CONTROLLER_CONFIG)
                .with_body(&b"notifyBrokerRoleChanged=maybe"[..]),
            rc::CONTROLLER_INVALID_REQUEST,
        ),
    ];
    let config_before = config(&mut lc);
    for (what, cmd, want) in cases {
        let r = lc.call(cmd);
        assert_eq!(r.code, want, "{what}: {:?}", r.remark);
    }
    assert_eq!(config(&mut lc), config_before);

    // A frame with a hostile length closes that connection only.
    let mut bad = Conn::connect(g.addr(leader));
    bad.write_raw(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])
        .unwrap();
    assert!(bad.read().is_none(), "the controller closed the connection");

    let after = replica_info(&mut lc, "b");
    assert_eq!(after, before, "the refused requests changed the state");
    let r = lc.call(sync_state_data_cmd(&["b", "nope"]));
    assert_eq!(r.code, 0);
    let data: BrokerReplicasInfo = from_json(&r.body).unwrap();
    assert_eq!(data.replicas_info_table.len(), 1);
    let info = &data.replicas_info_table["b"];
    assert_eq!(info.master_broker_id, Some(1));
    assert_eq!(info.master_epoch, Some(1));
    let ids = |v: &Vec<ringmq::protocol::body::ReplicaIdentity>| -> Vec<(i64, bool)> {
        v.iter().map(|r| (r.broker_id, r.alive)).collect()
    };
    assert_eq!(ids(&info.in_sync_replicas), vec![(1, true)]);
    assert_eq!(ids(&info.not_in_sync_replicas), vec![(2, true), (3, false)]);

    // An allowed config change sticks.
    let r = lc.call(
        RemotingCommand::new_request(rq::UPDATE_CONTROLLER_CONFIG)
            .with_body(&b"enableElectUncleanMaster=true"[..]),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert!(config(&mut lc).contains("enableElectUncleanMaster=true"));
    a.stop_heartbeats();
    b.stop_heartbeats();
}
