//! Where `ringmq serve` puts its threads with `pinCores` (the default): shards and their file
//! threads on the first cores, the writer and its segment allocator on the last one, and no
//! flush thread in either mode (the writer's fdatasyncs go through its own io_uring ring). Read
//! from the running broker's `/proc/<pid>/task/*/status`.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::RawBroker;

/// The CPUs each thread named `comm` of process `pid` may run on (`Cpus_allowed_list`).
fn placements(pid: u32, comm: &str) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| {
            let p = t.ok()?.path();
            let name = std::fs::read_to_string(p.join("comm")).ok()?;
            if name.trim() != comm {
                return None;
            }
            let status = std::fs::read_to_string(p.join("status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .collect()
}

/// Waits (the store starts some helpers lazily) until a thread named `comm` exists, and
/// returns where each such thread may run.
fn wait_for(pid: u32, comm: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = placements(pid, comm);
        if !got.is_empty() {
            return got;
        }
        assert!(Instant::now() < deadline, "no thread named {comm}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn pinned_threads_sit_where_the_broker_puts_them() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        // One core: the broker pins nothing and there is no placement to check; only that the
        // writer runs.
        let b = RawBroker::start(&["flushDiskType=ASYNC_FLUSH"]);
        wait_for(b.child.id(), "ringmq-writer");
        return;
    }
    let (first, last) = ("0".to_string(), (cores - 1).to_string());
    for flush in ["ASYNC_FLUSH", "SYNC_FLUSH"] {
        let b = RawBroker::start(&[&format!("flushDiskType={flush}")]);
        let pid = b.child.id();
        for (comm, want) in [
            ("ringmq-writer", &last),
            ("ringmq-prealloc", &last),
            ("ringmq-shard-0", &first),
            ("ringmq-files-0", &first),
        ] {
            let got = wait_for(pid, comm);
            // One thread of each name: a shard's file-work thread has a name of its own.
            assert_eq!(
                got,
                std::slice::from_ref(want),
                "{flush}: {comm} runs on {got:?}, expected {want}"
            );
        }
        for gone in ["ringmq-flush", "ringmq-sync-flu"] {
            assert!(
                placements(pid, gone).is_empty(),
                "{flush}: a {gone} thread runs"
            );
        }
    }
}
