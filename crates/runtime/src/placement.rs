//! The thread plan: every thread ringmq starts, its job ([`Role`]), its name and its core, in
//! one place. Every spawn of a ringmq thread goes through [`ThreadPlan::spawn`] (or
//! [`spawn_unpinned`] for the roles no plan pins), and [`ThreadPlan::threads`] lists what a
//! process runs, so a listing of `/proc/PID/task` can be checked against it. The benchmarks that
//! measure the writer and the shards place their threads with the same plan.
//!
//! The core rule, with pinning on (`pinCores`) and more than one core: the commit-log writer (its
//! fdatasyncs go through its own io_uring ring) and the segment allocator it waits for when it
//! catches up take the last core; shard `i` and its file-work thread (glommio's blocking pool
//! behind `spawn_blocking`) take core `i % (cores - 1)`. The checkpoint and file-deletion threads, the name server (and its file-work
//! thread), the controller and the web console's workers are left to the scheduler: they wait
//! on the disk or the network and are never on a hot path.
//! With pinning off or one core, nothing is pinned.
//!
//! Names are at most [`COMM_LEN_MAX`] bytes, as Linux keeps them (`/proc/PID/task/TID/comm`).

use std::io;
use std::thread::JoinHandle;

/// Bytes of a thread name Linux keeps (`TASK_COMM_LEN` less its NUL).
pub const COMM_LEN_MAX: usize = 15;

/// The job of one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Shard `i`'s executor: connections, requests, its queues.
    Shard(usize),
    /// Shard `i`'s file work off its executor (glommio's blocking pool: config files, consume
    /// queue and epoch-file syncs, IndexFile lookups, topic deletion).
    ShardFiles(usize),
    /// The commit-log writer.
    Writer,
    /// Next commit-log segment, prepared ahead of need (`store::allocator`).
    Prealloc,
    /// The checkpoint file and the index syncs it records (`writer::checkpointer`).
    Checkpoint,
    /// Unlinks the files retention detached (`store::deleter`).
    CleanFiles,
    /// The embedded name server's executor.
    Namesrv,
    /// The name server's file work off its executor (glommio's blocking pool: the KV config).
    NamesrvFiles,
    /// The controller's tokio runtime.
    Controller,
    /// The gRPC endpoint's tokio runtime (`ringmq-grpc`).
    Grpc,
    /// Worker `i` of the web console (`console`): accepts and answers browser requests with
    /// blocking admin calls.
    Console(usize),
}

impl Role {
    /// One role of each kind, in the order of the architecture's table (indexed roles as 0).
    pub const KINDS: [Role; 11] = [
        Role::Shard(0),
        Role::ShardFiles(0),
        Role::Writer,
        Role::Prealloc,
        Role::Checkpoint,
        Role::CleanFiles,
        Role::Namesrv,
        Role::NamesrvFiles,
        Role::Controller,
        Role::Grpc,
        Role::Console(0),
    ];

    /// The thread's name as Linux shows it (at most [`COMM_LEN_MAX`] bytes).
    pub fn name(self) -> String {
        let mut name = match self {
            Role::Shard(i) => format!("ringmq-shard-{i}"),
            Role::ShardFiles(i) => format!("ringmq-files-{i}"),
            Role::Console(i) => format!("ringmq-web-{i}"),
            other => other.kind_name().to_string(),
        };
        name.truncate(COMM_LEN_MAX);
        name
    }

    /// The name with `N` for a shard's index: the name of the kind, as the table gives it.
    pub fn kind_name(self) -> &'static str {
        match self {
            Role::Shard(_) => "ringmq-shard-N",
            Role::ShardFiles(_) => "ringmq-files-N",
            Role::Writer => "ringmq-writer",
            Role::Prealloc => "ringmq-prealloc",
            Role::Checkpoint => "ringmq-checkpt",
            Role::CleanFiles => "ringmq-clean",
            Role::Namesrv => "ringmq-namesrv",
            Role::NamesrvFiles => "ringmq-ns-files",
            Role::Controller => "ringmq-control",
            Role::Grpc => "ringmq-grpc",
            Role::Console(_) => "ringmq-web-N",
        }
    }

    /// Where a pinning plan puts the role, in words (the architecture's table says the same).
    pub fn core_rule(self) -> &'static str {
        match self {
            Role::Shard(_) | Role::ShardFiles(_) => "N % (cores - 1)",
            Role::Writer | Role::Prealloc => "last",
            Role::Checkpoint
            | Role::CleanFiles
            | Role::Namesrv
            | Role::NamesrvFiles
            | Role::Controller
            | Role::Grpc
            | Role::Console(_) => "any",
        }
    }

    /// True for the roles no plan pins: [`spawn_unpinned`] may start them without a plan.
    pub fn never_pinned(self) -> bool {
        matches!(
            self,
            Role::Checkpoint
                | Role::CleanFiles
                | Role::Namesrv
                | Role::NamesrvFiles
                | Role::Controller
                | Role::Grpc
                | Role::Console(_)
        )
    }
}

/// What one process runs, as far as the plan's thread list depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Broker shards (0: no broker, hence no writer either).
    pub shards: usize,
    /// The embedded name server (`serve`).
    pub namesrv: bool,
    /// A controller in this process.
    pub controller: bool,
    /// The gRPC endpoint.
    pub grpc: bool,
    /// Web-console workers (`serve`'s console, `ringmq console`; 0: none).
    pub console_workers: usize,
}

/// One planned thread: its job, its name, its core (`None` = left to the scheduler).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedThread {
    pub role: Role,
    pub name: String,
    pub core: Option<usize>,
}

/// Where one process's threads run; cheap to copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadPlan {
    cores: usize,
    pin: bool,
}

impl Default for ThreadPlan {
    /// Nothing pinned (what the store's own tests run with).
    fn default() -> Self {
        ThreadPlan::new(1, false)
    }
}

impl ThreadPlan {
    /// The plan for `cores` usable cores, pinning or not (`pinCores`).
    pub fn new(cores: usize, pin: bool) -> ThreadPlan {
        ThreadPlan { cores, pin }
    }

    /// The plan for this process's cores.
    pub fn for_this_process(pin: bool) -> ThreadPlan {
        ThreadPlan::new(super::available_cores(), pin)
    }

    fn pinning(&self) -> bool {
        self.pin && self.cores > 1
    }

    /// Where `role` runs; `None` = left to the scheduler.
    pub fn core(&self, role: Role) -> Option<usize> {
        if !self.pinning() || role.never_pinned() {
            return None;
        }
        let writer = self.cores - 1;
        Some(match role {
            Role::Shard(i) | Role::ShardFiles(i) => i % writer,
            Role::Writer | Role::Prealloc => writer,
            Role::Checkpoint
            | Role::CleanFiles
            | Role::Namesrv
            | Role::NamesrvFiles
            | Role::Controller
            | Role::Grpc
            | Role::Console(_) => unreachable!("never pinned"),
        })
    }

    /// Where the kernel's io-wq workers of the writer's ring run its fdatasyncs (`None`: where
    /// the kernel puts them, which follows the writer's affinity). Under SYNC_FLUSH on the
    /// writer's core: the writer waits for each sync, and the worker's hand-off back then wakes a
    /// thread on its own core. Under ASYNC_FLUSH on the shards' cores: a flush starts the
    /// writeback of up to several MiB, and that work stays off the writer's copies.
    pub fn ring_worker_cores(&self, sync_flush: bool) -> Option<Vec<usize>> {
        if !self.pinning() {
            return None;
        }
        let writer = self.cores - 1;
        Some(if sync_flush {
            vec![writer]
        } else {
            (0..writer).collect()
        })
    }

    /// The thread that does an executor's blocking file work (glommio gives every executor
    /// one). Only shards and the name server are executors.
    pub fn files_of(&self, executor: Role) -> Role {
        match executor {
            Role::Shard(i) => Role::ShardFiles(i),
            Role::Namesrv => Role::NamesrvFiles,
            other => panic!("{other:?} is not an executor"),
        }
    }

    /// Every thread a process running `w` starts, the main thread aside.
    pub fn threads(&self, w: &Workload) -> Vec<PlannedThread> {
        let mut roles = Vec::new();
        for i in 0..w.shards {
            roles.extend([Role::Shard(i), self.files_of(Role::Shard(i))]);
        }
        if w.shards > 0 {
            roles.extend([
                Role::Writer,
                Role::Prealloc,
                Role::Checkpoint,
                Role::CleanFiles,
            ]);
        }
        if w.namesrv {
            roles.extend([Role::Namesrv, self.files_of(Role::Namesrv)]);
        }
        if w.controller {
            roles.push(Role::Controller);
        }
        if w.grpc {
            roles.push(Role::Grpc);
        }
        roles.extend((0..w.console_workers).map(Role::Console));
        roles
            .into_iter()
            .map(|role| PlannedThread {
                role,
                name: role.name(),
                core: self.core(role),
            })
            .collect()
    }

    /// Starts `f` on a thread named for `role`, pinned to its core. A failed pin is logged and
    /// the thread runs unpinned: slower, never wrong.
    pub fn spawn<T: Send + 'static>(
        &self,
        role: Role,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        let core = self.core(role);
        std::thread::Builder::new()
            .name(role.name())
            .spawn(move || {
                super::pin_current_thread_to(core);
                f()
            })
    }
}

/// Starts `f` on a thread named for `role`, one of the roles no plan pins (asserted), where no
/// plan is at hand (the checkpoint and deletion threads the writer starts, the controller).
pub fn spawn_unpinned<T: Send + 'static>(
    role: Role,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<JoinHandle<T>> {
    assert!(role.never_pinned(), "{role:?} has a core in the plan");
    ThreadPlan::default().spawn(role, f)
}

#[cfg(test)]
mod tests;
