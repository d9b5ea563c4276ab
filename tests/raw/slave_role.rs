//! A broker started with `brokerRole=SLAVE` takes its place in the group as Java's slaves do: it
//! registers with its brokerId next to the master, refuses what only a master may do (sends with
//! SERVICE_NOT_AVAILABLE, END_TRANSACTION with SLAVE_NOT_AVAILABLE, pops with NO_PERMISSION),
//! answers pulls SYSTEM_BUSY
//! unless `slaveReadEnable`, reports its role in GET_BROKER_CONFIG, and a SLAVE configured with
//! brokerId 0 does not start.

use crate::raw_support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use raw_support::{pull_cmd, send_cmd, Conn, RawBroker};
use ringmq::protocol::body::{from_json, ClusterInfo};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

fn broker_cmd(namesrv: SocketAddr, store: &std::path::Path, opts: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    cmd.args(["broker", "--namesrv-addr"])
        .arg(namesrv.to_string())
        .args(["--broker-listen", "127.0.0.1:0", "--store-dir"])
        .arg(store)
        .args(["-o", "brokerIP1=127.0.0.1"]);
    for o in opts {
        cmd.args(["-o", o]);
    }
    cmd
}

/// broker id -> address of group `broker-a`, as the name server has it.
fn group_addrs(namesrv: SocketAddr) -> std::collections::BTreeMap<i64, String> {
    let mut c = Conn::connect(namesrv);
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_BROKER_CLUSTER_INFO,
    ));
    assert_eq!(r.code, response_code::SUCCESS);
    let info: ClusterInfo = from_json(&r.body).expect("cluster info body");
    info.broker_addr_table
        .get("broker-a")
        .map(|b| b.broker_addrs.clone())
        .unwrap_or_default()
}

fn end_cmd() -> RemotingCommand {
    RemotingCommand::new_request(request_code::END_TRANSACTION)
        .with_ext("producerGroup", "G")
        .with_ext("tranStateTableOffset", 0)
        .with_ext("commitLogOffset", 0)
        .with_ext("commitOrRollback", 8)
        .with_ext("fromTransactionCheck", false)
        .with_ext("msgId", "U")
}

/// Two slaves register next to the master under their ids; both refuse writes; only the one
/// with `slaveReadEnable` serves pulls. The master is unaffected.
#[test]
fn slaves_register_and_refuse_writes() {
    let master = RawBroker::start(&[]);
    let slave = RawBroker::start_broker(master.namesrv, &["brokerRole=SLAVE", "brokerId=1"]);
    let reader = RawBroker::start_broker(
        master.namesrv,
        &["brokerRole=SLAVE", "brokerId=2", "slaveReadEnable=true"],
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    let addrs = loop {
        let a = group_addrs(master.namesrv);
        if a.len() == 3 || Instant::now() > deadline {
            break a;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(addrs.get(&0), Some(&master.broker.to_string()), "{addrs:?}");
    assert_eq!(addrs.get(&1), Some(&slave.broker.to_string()), "{addrs:?}");
    assert_eq!(addrs.get(&2), Some(&reader.broker.to_string()), "{addrs:?}");

    for addr in [slave.broker, reader.broker] {
        let mut c = Conn::connect(addr);
        let r = c.call(send_cmd("SlaveTopic", 0, b"body", ""));
        assert_eq!(
            r.code,
            response_code::SERVICE_NOT_AVAILABLE,
            "{:?}",
            r.remark
        );
        assert!(
            r.remark.as_deref().unwrap_or("").contains("SLAVE"),
            "{:?}",
            r.remark
        );
        let r = c.call(end_cmd());
        assert_eq!(r.code, response_code::SLAVE_NOT_AVAILABLE, "{:?}", r.remark);
        // POP state is the master's: a slave refuses pops (and the acks of their handles).
        let r = c.call(raw_support::pop::pop_cmd("SlaveTopic", -1, 1, 60_000, 0));
        assert_eq!(r.code, response_code::NO_PERMISSION, "{:?}", r.remark);
        assert!(
            r.remark.as_deref().unwrap_or("").contains("master"),
            "{:?}",
            r.remark
        );
    }
    let r = Conn::connect(slave.broker).call(pull_cmd("SlaveTopic", 0, 0, 0));
    assert_eq!(r.code, response_code::SYSTEM_BUSY, "{:?}", r.remark);
    let r = Conn::connect(reader.broker).call(pull_cmd("SlaveTopic", 0, 0, 0));
    assert_ne!(r.code, response_code::SYSTEM_BUSY, "{:?}", r.remark);

    let r = Conn::connect(master.broker).call(send_cmd("SlaveTopic", 0, b"body", ""));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    // GET_BROKER_CONFIG reports each role with Java's names and the HA port: the master's
    // actual one (the OS chose it, as it chose the broker's), listenPort + 1 on the slave.
    let master_ha = master.ha.expect("a master listens for slaves").port();
    for (addr, expect, ha_port) in [
        (
            master.broker,
            ["brokerRole=ASYNC_MASTER", "brokerId=0"],
            master_ha,
        ),
        (
            slave.broker,
            ["brokerRole=SLAVE", "brokerId=1"],
            slave.broker.port() + 1,
        ),
    ] {
        let r = Conn::connect(addr).call(RemotingCommand::new_request(
            request_code::GET_BROKER_CONFIG,
        ));
        let text = String::from_utf8_lossy(&r.body).into_owned();
        for line in expect {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        let ha = format!("haListenPort={ha_port}");
        assert!(text.lines().any(|l| l == ha), "{ha} in:\n{text}");
    }
}

/// As Java's start-up: "Slave's brokerId must be > 0".
#[test]
fn a_slave_with_broker_id_0_does_not_start() {
    let store = tempfile::tempdir().unwrap();
    let ns: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let out = broker_cmd(ns, store.path(), &["brokerRole=SLAVE"])
        .output()
        .expect("run ringmq broker");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("brokerId must be > 0"), "{stderr}");
}
