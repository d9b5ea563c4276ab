//! Controller mode end to end, every node its own process: three `ringmq controller`s elect a
//! master among three brokers in controller mode, which replicate with the AutoSwitch protocol
//! and answer sends only once the whole SyncStateSet holds them (`allAckInSyncStateSet`). A
//! master killed with SIGKILL under continuous sends (and, in some rounds, the controller
//! leader with it) is replaced within 10 s, no acknowledged message is lost or duplicated on the
//! survivors, and the old master, started again, rejoins as a slave whose commit log is a
//! prefix-identical copy of the new master's.

use crate::failover_support;
use crate::raw_support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use failover_support::{try_call, Cluster, Net};
use raw_support::{create_topic_cmd, pull_cmd, records, send_cmd};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

const TOPIC: &str = "FailoverTopic";
const QUEUES: i32 = 4;

/// Creates the topic on every broker (a slave copies it from the master too; this makes the
/// topic exist at once wherever the master moves).
fn create_topic(c: &Cluster) {
    for b in &c.brokers {
        if b.node.is_running() {
            let r = try_call(b.addr, create_topic_cmd(TOPIC, QUEUES));
            assert!(r.is_some(), "create topic on {}", b.addr);
        }
    }
}

/// Sends one message with key `key`; the answer's code (`None`: no answer).
fn send(addr: SocketAddr, key: &str) -> Option<i32> {
    let queue = (key.len() as i32) % QUEUES;
    let props = format!("KEYS\u{1}{key}\u{2}WAIT\u{1}true\u{2}");
    try_call(addr, send_cmd(TOPIC, queue, key.as_bytes(), &props)).map(|r| r.code)
}

/// Every message body in the broker's queues of the topic, with how often it appears.
fn bodies(addr: SocketAddr) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for q in 0..QUEUES {
        let mut offset = 0;
        loop {
            let Some(r) = try_call(addr, pull_cmd(TOPIC, q, offset, 0)) else {
                panic!("pull from {addr} failed");
            };
            if r.code != response_code::SUCCESS {
                break;
            }
            let recs = records(&r.body);
            if recs.is_empty() {
                break;
            }
            for rec in &recs {
                *out.entry(String::from_utf8_lossy(rec.body).into_owned())
                    .or_insert(0) += 1;
                offset = rec.queue_offset + 1;
            }
        }
    }
    out
}

/// The commit log of the store at `dir`, concatenated from its first segment to its end.
fn commit_log(dir: &Path) -> Vec<u8> {
    let mut names: Vec<_> = std::fs::read_dir(dir.join("commitlog"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.sort();
    let mut out = Vec::new();
    for n in names {
        out.extend(std::fs::read(n).unwrap_or_default());
    }
    out
}

fn max_phy(addr: SocketAddr) -> Option<i64> {
    let r = try_call(
        addr,
        RemotingCommand::new_request(request_code::GET_BROKER_RUNTIME_INFO),
    )?;
    let body = String::from_utf8_lossy(&r.body).into_owned();
    let at = body.find("\"commitLogMaxOffset\":\"")? + "\"commitLogMaxOffset\":\"".len();
    body[at..].split('"').next()?.parse().ok()
}

/// A master is elected, the two others follow it, and a send answered SUCCESS is on all three.
#[test]
fn a_group_elects_a_master_and_replicates() {
    let c = Cluster::start(3, &[], Net::Loopback);
    let m = c.wait_for_master(3, Duration::from_secs(30));
    create_topic(&c);
    let master = c.brokers[m].addr;
    for i in 0..50 {
        let code = send(master, &format!("smoke-{i}"));
        assert_eq!(code, Some(response_code::SUCCESS), "send {i}\n{}", c.logs());
    }
    let want = max_phy(master).expect("master's end");
    for b in &c.brokers {
        let deadline = Instant::now() + Duration::from_secs(5);
        while max_phy(b.addr) != Some(want) {
            assert!(
                Instant::now() < deadline,
                "{} lags: {:?} vs {want}",
                b.node.name,
                max_phy(b.addr)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // A slave refuses sends.
    let slave = c.brokers[(m + 1) % 3].addr;
    assert_ne!(send(slave, "to-a-slave"), Some(response_code::SUCCESS));
}

struct Sent {
    acked: Mutex<BTreeSet<String>>,
    stop: AtomicBool,
}

/// Sends continuously from 2 threads to whichever broker the controller names master.
fn senders(c: &Cluster, round: usize, sent: &Arc<Sent>) -> Vec<std::thread::JoinHandle<()>> {
    let addrs: Vec<SocketAddr> = c.brokers.iter().map(|b| b.addr).collect();
    (0..2)
        .map(|t| {
            let sent = Arc::clone(sent);
            let addrs = addrs.clone();
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !sent.stop.load(Ordering::Acquire) {
                    for a in &addrs {
                        // A key per attempt: a send that failed may still be stored.
                        let key = format!("r{round}-t{t}-{i}");
                        i += 1;
                        if send(*a, &key) == Some(response_code::SUCCESS) {
                            sent.acked.lock().unwrap().insert(key);
                        }
                    }
                }
            })
        })
        .collect()
}

/// SIGKILL the master (and in odd rounds the controller leader) under continuous sends, ten
/// times at random moments: a new master takes sends within 10 s each time, every message
/// answered SUCCESS is on the survivors exactly once, and the old master rejoins as a slave
/// with a commit log identical to the new master's up to its end.
#[test]
fn a_killed_master_is_replaced_and_loses_nothing() {
    let mut c = Cluster::start(3, &[], Net::Loopback);
    c.wait_for_master(3, Duration::from_secs(30));
    create_topic(&c);
    let sent = Arc::new(Sent {
        acked: Mutex::default(),
        stop: AtomicBool::new(false),
    });
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let rounds: usize = std::env::var("RINGMQ_FAILOVER_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    for round in 0..rounds {
        let m = c.wait_for_master(3, Duration::from_secs(30));
        let (_, _, epoch_before, _) = c.replica_info().expect("replica info");
        let threads = senders(&c, round, &sent);
        std::thread::sleep(Duration::from_millis(300 + rand(1200)));
        let killed_at = Instant::now();
        // The machine dies: its link first (what was on its way to the slaves is lost), then
        // the process.
        c.ha_proxies[m].cut();
        c.brokers[m].node.kill9();
        let with_leader = round % 2 == 1;
        if with_leader {
            if let Some(l) = c.controller_leader() {
                c.controllers.kill9(l);
            }
        }
        // A new master: named by the controller with a newer epoch, and taking a send.
        let mut probe = 0;
        let new_master = loop {
            let elapsed = killed_at.elapsed();
            assert!(
                elapsed < Duration::from_secs(10),
                "round {round}: no new master 10 s after the kill\n{}",
                c.logs()
            );
            if let Some((_, addr, epoch, _)) = c.replica_info() {
                if epoch > epoch_before && addr != c.brokers[m].addr.to_string() {
                    let a: SocketAddr = addr.parse().unwrap();
                    let key = format!("probe-{round}-{probe}");
                    probe += 1;
                    if send(a, &key) == Some(response_code::SUCCESS) {
                        sent.acked.lock().unwrap().insert(key);
                        break a;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        println!(
            "round {round}: new master {new_master} taking sends {} ms after the SIGKILL{}",
            killed_at.elapsed().as_millis(),
            if with_leader {
                " (controller leader killed too)"
            } else {
                ""
            }
        );
        std::thread::sleep(Duration::from_millis(300));
        sent.stop.store(true, Ordering::Release);
        for t in threads {
            t.join().unwrap();
        }
        sent.stop.store(false, Ordering::Release);
        // Every acknowledged message, once, on both survivors (the other one caught up first).
        let acked = sent.acked.lock().unwrap().clone();
        let want = max_phy(new_master).expect("new master's end");
        for b in c.brokers.iter().filter(|b| b.node.is_running()) {
            let deadline = Instant::now() + Duration::from_secs(10);
            while max_phy(b.addr) != Some(want) {
                assert!(
                    Instant::now() < deadline,
                    "round {round}: {} lags\n{}",
                    b.node.name,
                    c.logs()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            let have = bodies(b.addr);
            let missing: Vec<_> = acked
                .iter()
                .filter(|k| !have.contains_key(*k))
                .take(5)
                .collect();
            assert!(
                missing.is_empty(),
                "round {round}: acknowledged but not on {}: {missing:?}\n{}",
                b.node.name,
                c.logs()
            );
            let twice: Vec<_> = have.iter().filter(|(_, n)| **n > 1).take(5).collect();
            assert!(
                twice.is_empty(),
                "round {round}: stored twice on {}: {twice:?}",
                b.node.name
            );
        }
        println!(
            "round {round}: {} acknowledged so far, all on both survivors",
            acked.len()
        );
        // The dead rejoin: the old master as a slave, the controller too.
        for i in 0..c.controllers.ports.len() {
            if !c.controllers.is_running(i) {
                c.controllers.spawn(i);
            }
        }
        c.ha_proxies[m].restore();
        c.brokers[m].node.restart();
        c.wait_for_master(3, Duration::from_secs(30));
        let nm = c.brokers.iter().position(|b| b.addr == new_master).unwrap();
        let want = max_phy(new_master).expect("new master's end");
        let deadline = Instant::now() + Duration::from_secs(10);
        while max_phy(c.brokers[m].addr) != Some(want) {
            assert!(
                Instant::now() < deadline,
                "round {round}: the old master does not catch up\n{}",
                c.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let theirs = commit_log(&c.brokers[nm].store);
        let ours = commit_log(&c.brokers[m].store);
        let end = want as usize;
        assert!(
            ours.len() >= end && theirs.len() >= end,
            "round {round}: short commit logs"
        );
        assert!(
            ours[..end] == theirs[..end],
            "round {round}: the old master's commit log differs from the new master's"
        );
    }
}

/// A master cut off from the controllers and its slaves (its network namespace's link to the
/// bridge taken down) acknowledges nothing more: its sends time out, while the controller makes
/// one of the two others master in a newer epoch, which takes sends. Once the link is back the
/// old master follows the new one, cuts the unacknowledged records it stored alone, and ends
/// with a commit log identical to the new master's; every acknowledged message, before and
/// after the cut, is on the new master.
#[test]
fn a_partitioned_master_stops_acknowledging() {
    let c = Cluster::start(3, &[], Net::Namespaces);
    let m = c.wait_for_master(3, Duration::from_secs(30));
    create_topic(&c);
    let old = c.brokers[m].addr;
    let mut acked = Vec::new();
    for i in 0..30 {
        let key = format!("before-{i}");
        assert_eq!(
            send(old, &key),
            Some(response_code::SUCCESS),
            "{}",
            c.logs()
        );
        acked.push(key);
    }
    let (_, _, epoch_before, _) = c.replica_info().expect("replica info");
    let net = c.net.as_ref().expect("namespaces");
    net.link(m, false);
    let cut_at = Instant::now();
    // From inside its namespace the old master is still reachable: it must not acknowledge.
    let ns = net.name(m);
    let during = std::thread::spawn(move || {
        failover_support::in_namespace(&ns, move || {
            (0..3)
                .map(|i| (format!("during-{i}"), send(old, &format!("during-{i}"))))
                .collect::<Vec<_>>()
        })
    });
    let new_master = loop {
        assert!(
            cut_at.elapsed() < Duration::from_secs(15),
            "no new master after the cut\n{}",
            c.logs()
        );
        if let Some((_, addr, epoch, _)) = c.replica_info() {
            if epoch > epoch_before && addr != old.to_string() {
                break addr.parse::<SocketAddr>().unwrap();
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    println!(
        "new master {new_master} {} ms after the cut",
        cut_at.elapsed().as_millis()
    );
    let mut probe = 0;
    let mut after = 0;
    while after < 30 {
        let key = format!("after-{probe}");
        probe += 1;
        if send(new_master, &key) == Some(response_code::SUCCESS) {
            acked.push(key);
            after += 1;
        }
        assert!(
            probe < 3000,
            "the new master does not take sends\n{}",
            c.logs()
        );
    }
    let during = during.join().unwrap();
    for (key, code) in &during {
        assert_ne!(
            *code,
            Some(response_code::SUCCESS),
            "the cut-off master acknowledged {key}"
        );
    }
    net.link(m, true);
    let want = max_phy(new_master).expect("new master's end");
    let deadline = Instant::now() + Duration::from_secs(20);
    while max_phy(old) != Some(want) {
        assert!(
            Instant::now() < deadline,
            "the old master does not rejoin: {:?} vs {want}\n{}",
            max_phy(old),
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let have = bodies(new_master);
    for key in &acked {
        assert_eq!(
            have.get(key),
            Some(&1),
            "acknowledged {key} is not on the new master once"
        );
    }
    for (key, _) in &during {
        assert!(
            !have.contains_key(key),
            "{key}, never acknowledged, reached the new master"
        );
    }
    let nm = c.brokers.iter().position(|b| b.addr == new_master).unwrap();
    let end = want as usize;
    let (ours, theirs) = (
        commit_log(&c.brokers[m].store),
        commit_log(&c.brokers[nm].store),
    );
    assert!(ours.len() >= end && theirs.len() >= end && ours[..end] == theirs[..end]);
}

/// The SyncStateSet follows the slaves: one that dies leaves it (the master proposes the smaller
/// set, the controller records it in a new epoch); an `allAckInSyncStateSet` send made right
/// after the death is answered only once the smaller set is on record, never on the word of the
/// survivors alone while the dead slave still counts; restarted, the slave joins again.
#[test]
fn the_sync_state_set_shrinks_and_grows() {
    let mut c = Cluster::start(3, &[], Net::Loopback);
    let m = c.wait_for_master(3, Duration::from_secs(30));
    create_topic(&c);
    let master = c.brokers[m].addr;
    let gone = (m + 1) % 3;
    let (_, _, _, before) = c.replica_info().unwrap();
    assert_eq!(before.sync_state_set.len(), 3);
    c.brokers[gone].node.kill9();
    let killed = Instant::now();
    assert_eq!(
        send(master, "right-after"),
        Some(response_code::SUCCESS),
        "{}",
        c.logs()
    );
    let waited = killed.elapsed();
    let (_, _, _, after) = c.replica_info().unwrap();
    assert_eq!(
        after.sync_state_set.len(),
        2,
        "acknowledged before the set shrank: {after:?}"
    );
    assert!(after.sync_state_set_epoch > before.sync_state_set_epoch);
    println!(
        "the send after the kill waited {} ms for the set to shrink",
        waited.as_millis()
    );
    c.brokers[gone].node.restart();
    c.wait_for_master(3, Duration::from_secs(30));
    assert_eq!(send(master, "after-rejoin"), Some(response_code::SUCCESS));
}
