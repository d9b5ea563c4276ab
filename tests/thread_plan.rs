//! A broker and name server started in this process as `ringmq serve` starts them run exactly the
//! threads the thread plan lists for their config, named and placed as it says; read from
//! `/proc/self/task`. Kernel io_uring workers (names starting "iou-") are the kernel's threads,
//! not ringmq's, and are left out of the comparison.

mod raw_support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use raw_support::{create_topic_cmd, send_cmd, Conn};
use ringmq::broker::start_broker;
use ringmq::broker::threads::planned_threads;
use ringmq::config::BrokerConfig;
use ringmq::namesrv_server::start_namesrv;

/// A thread of this process: id, name, the CPUs it may run on (`Cpus_allowed_list`).
#[derive(Debug)]
struct Task {
    tid: u32,
    name: String,
    cpus: String,
}

fn tasks() -> Vec<Task> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let path = entry.expect("task entry").path();
        let Some(tid) = path.file_name().and_then(|n| n.to_str()?.parse().ok()) else {
            continue;
        };
        // A thread that ended between the listing and the read is gone: skip it.
        let (Ok(comm), Ok(status)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("status")),
        ) else {
            continue;
        };
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_string())
            .unwrap_or_default();
        out.push(Task {
            tid,
            name: comm.trim().to_string(),
            cpus,
        });
    }
    out
}

/// This process's threads that are not in `before` and not the kernel's io_uring workers, as
/// sorted (name, CPUs) pairs.
fn new_threads(before: &BTreeSet<u32>) -> Vec<(String, String)> {
    let mut got: Vec<_> = tasks()
        .into_iter()
        .filter(|t| !before.contains(&t.tid) && !t.name.starts_with("iou-"))
        .map(|t| (t.name, t.cpus))
        .collect();
    got.sort();
    got
}

/// Waits up to 10 s for `want`; the last listing otherwise.
fn wait_for(before: &BTreeSet<u32>, want: &[(String, String)]) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = new_threads(before);
        if got == want || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts the name server and a broker registered with it, as `serve` does, on ephemeral
/// loopback ports in `dir`; stores one message; checks the threads against the plan; stops both.
fn check_serve(dir: &std::path::Path, flush: &str, before: &BTreeSet<u32>, all_cpus: &str) {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let ns = start_namesrv(loopback, Some(dir.join("namesrv").join("kvConfig.json")))
        .expect("start name server");
    let mut cfg = BrokerConfig {
        listen_addr: loopback,
        fast_listen_port: 0,
        namesrv_addr: vec![ns.addr],
        ..BrokerConfig::default()
    };
    cfg.store.store_path_root_dir = dir.to_path_buf();
    for (k, v) in [("flushDiskType", flush), ("brokerIP1", "127.0.0.1")] {
        cfg.set(k, v).expect("config key");
    }
    let want_cfg = cfg.clone();
    let b = start_broker(cfg).expect("start broker");
    assert!(
        b.wait_registered(Duration::from_secs(10)),
        "{flush}: not registered"
    );
    let mut c = Conn::connect(b.listen_addr);
    assert_eq!(c.call(create_topic_cmd("PlanT", 4)).code, 0, "{flush}");
    assert_eq!(c.call(send_cmd("PlanT", 1, b"x", "")).code, 0, "{flush}");

    let mut want: Vec<(String, String)> = planned_threads(&want_cfg, true, false)
        .into_iter()
        .map(|t| {
            let cpus = t
                .core
                .map_or_else(|| all_cpus.to_string(), |c| c.to_string());
            (t.name, cpus)
        })
        .collect();
    want.sort();
    let got = wait_for(before, &want);
    assert_eq!(got, want, "{flush}: threads (name, CPUs) against the plan");

    drop(c);
    b.shutdown().expect("broker shutdown");
    ns.shutdown();
}

/// Under ASYNC_FLUSH and SYNC_FLUSH, after a send, `serve`'s threads are the plan's: the same
/// names, as many of each, each pinned thread on its planned core and every other one free to
/// run wherever this process may.
#[test]
fn serve_runs_the_planned_threads() {
    let pid = std::process::id();
    let all_cpus = tasks()
        .into_iter()
        .find(|t| t.tid == pid)
        .map(|t| t.cpus)
        .expect("the main thread");
    for flush in ["ASYNC_FLUSH", "SYNC_FLUSH"] {
        // Taken again for each run: a shard's glommio blocking thread can outlive a stopped
        // broker in this process (its executor's reactor is not freed), and this test is about
        // the threads of a running one.
        let before: BTreeSet<u32> = tasks().into_iter().map(|t| t.tid).collect();
        let dir = tempfile::tempdir().expect("tempdir");
        check_serve(dir.path(), flush, &before, &all_cpus);
    }
}
