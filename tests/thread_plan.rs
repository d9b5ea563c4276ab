//! A broker, name server and web console (and controller) started in this process as `ringmq
//! serve` starts them run exactly the threads the thread plan lists for their config, named and placed as it says; read from
//! `/proc/self/task`. Kernel io_uring workers (names starting "iou-") are the kernel's threads,
//! not ringmq's, and are left out of the comparison.

mod raw_support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use raw_support::controller::free_ports;
use raw_support::{create_topic_cmd, send_cmd, Conn};
use ringmq::broker::start_broker;
use ringmq::broker::threads::{planned_threads, thread_plan};
use ringmq::config::BrokerConfig;
use ringmq::console::start_console;
use ringmq::controller::{start_controller, ControllerConfig};
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

/// Starts the name server (and, with `controller`, a controller), a broker registered with it
/// and the web console, as `serve` does, on loopback ports in `dir`; stores one message; checks the threads
/// against the plan; stops them all.
fn check_serve(
    dir: &std::path::Path,
    flush: &str,
    controller: bool,
    pin: &str,
    before: &BTreeSet<u32>,
    all_cpus: &str,
) {
    let case = format!("{flush}, controller {controller}, pinCores={pin}");
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let ctl = controller.then(|| {
        let port = free_ports(1)[0];
        let conf = format!(
            "controllerDLegerGroup=solo\ncontrollerDLegerPeers=n0-127.0.0.1:{port}\n\
             controllerDLegerSelfId=n0\ncontrollerStorePath={}\n",
            dir.join("controller").display()
        );
        start_controller(ControllerConfig::from_properties(&conf).expect("controller config"))
            .expect("start controller")
    });
    let ns = start_namesrv(loopback, Some(dir.join("namesrv").join("kvConfig.json")))
        .expect("start name server");
    let mut cfg = BrokerConfig {
        listen_addr: loopback,
        fast_listen_port: 0,
        namesrv_addr: vec![ns.addr],
        ..BrokerConfig::default()
    };
    cfg.store.store_path_root_dir = dir.join("store");
    // Small segments, and appends refused only past 95% of a disk other work shares: the
    // threads do not depend on either.
    for (k, v) in [
        ("flushDiskType", flush),
        ("brokerIP1", "127.0.0.1"),
        ("mappedFileSizeCommitLog", "67108864"),
        ("diskMaxUsedSpaceRatio", "95"),
        ("pinCores", pin),
    ] {
        cfg.set(k, v).expect("config key");
    }
    if let Some(c) = &ctl {
        cfg.set("enableControllerMode", "true").expect("config key");
        cfg.set("controllerAddr", &c.addr.to_string())
            .expect("config key");
    }
    let want_cfg = cfg.clone();
    let console =
        start_console(&thread_plan(&cfg), loopback, vec![ns.addr], Vec::new()).expect("console");
    let b = start_broker(cfg).expect("start broker");
    assert!(
        b.wait_registered(Duration::from_secs(10)),
        "{case}: not registered"
    );
    let mut c = Conn::connect(b.listen_addr);
    assert_eq!(c.call(create_topic_cmd("PlanT", 4)).code, 0, "{case}");
    // In controller mode the broker takes sends once the controller made it the master.
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.call(send_cmd("PlanT", 1, b"x", "")).code != 0 {
        assert!(Instant::now() < deadline, "{case}: no send stored");
        std::thread::sleep(Duration::from_millis(100));
    }

    let mut want: Vec<(String, String)> = planned_threads(&want_cfg, true, controller, true, false)
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
    assert_eq!(got, want, "{case}: threads (name, CPUs) against the plan");

    drop(c);
    console.shutdown();
    b.shutdown().expect("broker shutdown");
    ns.shutdown();
    if let Some(c) = ctl {
        c.shutdown();
    }
}

/// Under ASYNC_FLUSH and SYNC_FLUSH, with an embedded controller, and with `pinCores=false`,
/// after a send, `serve`'s threads (its console's workers among them) are the plan's: the same names, as many of each, each pinned
/// thread on its planned core and every other one free to run wherever this process may.
#[test]
fn serve_runs_the_planned_threads() {
    let pid = std::process::id();
    let all_cpus = tasks()
        .into_iter()
        .find(|t| t.tid == pid)
        .map(|t| t.cpus)
        .expect("the main thread");
    for (flush, controller, pin) in [
        ("ASYNC_FLUSH", false, "true"),
        ("SYNC_FLUSH", false, "true"),
        ("ASYNC_FLUSH", true, "true"),
        ("SYNC_FLUSH", false, "false"),
    ] {
        // Taken again for each run: a shard's glommio blocking thread can outlive a stopped
        // broker in this process (its executor's reactor is not freed), and this test is about
        // the threads of a running one.
        let before: BTreeSet<u32> = tasks().into_iter().map(|t| t.tid).collect();
        let dir = tempfile::tempdir().expect("tempdir");
        check_serve(dir.path(), flush, controller, pin, &before, &all_cpus);
    }
}
