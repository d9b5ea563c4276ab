//! The threads a process running a broker with this config starts: the thread plan
//! (`runtime::placement`) applied to the broker's shard count and `pinCores`, with
//! or without the embedded name server, controller and web console (`ringmq serve`). Start-up spawns every
//! one of them through the same plan, so a listing of a running broker's `/proc/PID/task` is
//! this list (tests/thread_plan.rs checks it).

use crate::config::BrokerConfig;
use crate::constants::CONSOLE_WORKERS;
use crate::runtime::placement::{PlannedThread, ThreadPlan, Workload};

/// The broker's shards: `shardCount`, or one per core less the writer's.
pub fn shard_count(cfg: &BrokerConfig) -> usize {
    if cfg.shard_count > 0 {
        return cfg.shard_count;
    }
    crate::runtime::default_shard_count()
}

/// Where this broker's threads run.
pub fn thread_plan(cfg: &BrokerConfig) -> ThreadPlan {
    ThreadPlan::for_this_process(cfg.pin_cores)
}

/// Every thread of a process that runs this broker, plus the name server (`namesrv`), a
/// controller (`controller`), the web console (`console`) and the gRPC endpoint (`grpc`) when
/// it embeds them; the main thread aside.
pub fn planned_threads(
    cfg: &BrokerConfig,
    namesrv: bool,
    controller: bool,
    console: bool,
    grpc: bool,
) -> Vec<PlannedThread> {
    thread_plan(cfg).threads(&Workload {
        shards: shard_count(cfg),
        namesrv,
        controller,
        grpc,
        console_workers: if console { CONSOLE_WORKERS } else { 0 },
    })
}
