use super::{Role, ThreadPlan, Workload, COMM_LEN_MAX};

/// The writer and its allocator on the last core, shards and their file threads round the
/// others, and nothing pinned with one core or pinning off.
#[test]
fn writer_last_shards_round_the_rest() {
    let p = ThreadPlan::new(4, true);
    for role in [Role::Writer, Role::Prealloc] {
        assert_eq!(p.core(role), Some(3), "{role:?}");
    }
    let shards: Vec<_> = (0..5).map(|i| p.core(Role::Shard(i))).collect();
    assert_eq!(shards, vec![Some(0), Some(1), Some(2), Some(0), Some(1)]);
    assert_eq!(p.core(Role::ShardFiles(4)), Some(1));
    for role in [
        Role::Checkpoint,
        Role::CleanFiles,
        Role::Namesrv,
        Role::Controller,
        Role::Console(1),
    ] {
        assert_eq!(p.core(role), None, "{role:?}");
    }
    for p in [ThreadPlan::new(1, true), ThreadPlan::new(8, false)] {
        assert!(Role::KINDS.iter().all(|&r| p.core(r).is_none()), "{p:?}");
    }
}

/// Every name fits what Linux keeps, and no two kinds of thread share a name.
#[test]
fn names_fit_and_differ() {
    let mut names: Vec<String> = Role::KINDS.iter().map(|r| r.name()).collect();
    names.extend([
        Role::Shard(99).name(),
        Role::ShardFiles(99).name(),
        Role::Console(99).name(),
    ]);
    for n in &names {
        assert!(n.len() <= COMM_LEN_MAX && n.starts_with("ringmq-"), "{n}");
    }
    let kinds: std::collections::HashSet<_> = Role::KINDS.iter().map(|r| r.kind_name()).collect();
    assert_eq!(kinds.len(), Role::KINDS.len());
    names.sort();
    names.dedup();
    assert_eq!(names.len(), Role::KINDS.len() + 3);
}

/// `serve` with two shards runs the shards with their file threads, the writer with its
/// allocator, checkpoint and deletion threads, the name server with its file thread and the
/// console's workers; a name server alone has those two threads, a controller one more.
#[test]
fn threads_follow_the_workload() {
    let p = ThreadPlan::new(3, true);
    let serve = Workload {
        shards: 2,
        namesrv: true,
        controller: false,
        grpc: false,
        console_workers: 2,
    };
    let got: Vec<(String, Option<usize>)> = p
        .threads(&serve)
        .into_iter()
        .map(|t| (t.name, t.core))
        .collect();
    let want: Vec<(String, Option<usize>)> = [
        ("ringmq-shard-0", Some(0)),
        ("ringmq-files-0", Some(0)),
        ("ringmq-shard-1", Some(1)),
        ("ringmq-files-1", Some(1)),
        ("ringmq-writer", Some(2)),
        ("ringmq-prealloc", Some(2)),
        ("ringmq-checkpt", None),
        ("ringmq-clean", None),
        ("ringmq-namesrv", None),
        ("ringmq-ns-files", None),
        ("ringmq-web-0", None),
        ("ringmq-web-1", None),
    ]
    .into_iter()
    .map(|(n, c)| (n.to_string(), c))
    .collect();
    assert_eq!(got, want);
    let namesrv_alone = Workload {
        shards: 0,
        namesrv: true,
        controller: false,
        grpc: false,
        console_workers: 0,
    };
    assert_eq!(p.threads(&namesrv_alone).len(), 2);
    let with_controller = Workload {
        controller: true,
        ..namesrv_alone
    };
    let last = p.threads(&with_controller).pop().unwrap();
    assert_eq!(
        (last.role, last.name, last.core),
        (Role::Controller, "ringmq-control".into(), None)
    );
    let with_grpc = Workload {
        grpc: true,
        ..namesrv_alone
    };
    let last = p.threads(&with_grpc).pop().unwrap();
    assert_eq!(
        (last.role, last.name, last.core),
        (Role::Grpc, "ringmq-grpc".into(), None)
    );
}

/// A thread started through the plan carries its role's name and runs on its planned core.
#[test]
fn spawn_names_and_pins() {
    let p = ThreadPlan::for_this_process(true);
    let role = Role::Writer;
    let (name, allowed) = p
        .spawn(role, || {
            let me = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
            let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            let allowed = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
                .unwrap();
            (me.trim().to_string(), allowed)
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(name, "ringmq-writer");
    if let Some(core) = p.core(role) {
        assert_eq!(allowed, core.to_string());
    }
}

/// The workspace's root: this crate is `crates/runtime`.
fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Nothing in the workspace's sources (`src/`, `crates/*/src/`) starts a thread except through
/// the plan: no `std::thread::Builder`, `thread::spawn` or `thread::scope` outside this module
/// and tests. Excepted: `src/bin/`'s test tools, whose load threads are not ringmq's.
#[test]
fn threads_start_only_through_the_plan() {
    let root = workspace_root();
    let excepted = ["crates/runtime/src/placement.rs"];
    let mut found = Vec::new();
    let mut stack = vec![root.join("src"), root.join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .to_string();
            if path.is_dir() {
                if rel != "src/bin" {
                    stack.push(path);
                }
                continue;
            }
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            if !file.ends_with(".rs") || file.starts_with("tests") || excepted.contains(&&*rel) {
                continue;
            }
            let src = std::fs::read_to_string(&path).unwrap();
            // Tests sit after the first `#[cfg(test)]`.
            for (n, line) in src
                .lines()
                .take_while(|l| l.trim() != "#[cfg(test)]")
                .enumerate()
            {
                let code = line.split("//").next().unwrap_or("");
                if ["thread::Builder", "thread::spawn", "thread::scope"]
                    .iter()
                    .any(|p| code.contains(p))
                {
                    found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "threads started outside the plan:\n{}",
        found.join("\n")
    );
}

/// Each role's rule in words says what `core` does: "last" is the last core, "N % (cores - 1)"
/// shard N's, "any" unpinned.
#[test]
fn core_rules_say_what_core_does() {
    let p = ThreadPlan::new(4, true);
    for kind in Role::KINDS {
        let role = match kind {
            Role::Shard(_) => Role::Shard(5),
            Role::ShardFiles(_) => Role::ShardFiles(5),
            other => other,
        };
        let want = match kind.core_rule() {
            "last" => Some(3),
            "N % (cores - 1)" => Some(5 % 3),
            "any" => None,
            other => panic!("{kind:?}: unknown rule {other}"),
        };
        assert_eq!(p.core(role), want, "{kind:?}");
    }
}

/// ARCHITECTURE.md's "Threads" table is the plan: one row per kind of thread (the main thread
/// aside), named as the plan names it, with the plan's core rule.
#[test]
fn architecture_table_is_the_plan() {
    let path = workspace_root().join("ARCHITECTURE.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Threads\n"))
        .expect("a Threads section");
    let mut rows: Vec<(String, String)> = section
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            // | `name` | job | core |
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((
                name.to_string(),
                cells.get(3)?.trim_matches('`').to_string(),
            ))
        })
        .filter(|(name, _)| name != "ringmq")
        .collect();
    rows.sort();
    let mut want: Vec<(String, String)> = Role::KINDS
        .iter()
        .map(|r| (r.kind_name().to_string(), r.core_rule().to_string()))
        .collect();
    want.sort();
    assert_eq!(rows, want);
}

/// The writer ring's kernel workers: on the writer's core under SYNC_FLUSH, on the shards'
/// cores under ASYNC_FLUSH, nowhere in particular without pinning.
#[test]
fn ring_workers_follow_the_flush_mode() {
    let p = ThreadPlan::new(4, true);
    assert_eq!(p.ring_worker_cores(true), Some(vec![3]));
    assert_eq!(p.ring_worker_cores(false), Some(vec![0, 1, 2]));
    for p in [ThreadPlan::new(1, true), ThreadPlan::new(4, false)] {
        assert_eq!(p.ring_worker_cores(true), None);
        assert_eq!(p.ring_worker_cores(false), None);
    }
}
