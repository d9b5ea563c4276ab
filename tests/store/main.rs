//! The store in this process and under SIGKILL: recovery, the model test, index checkpoints,
//! retention, the delay schedule.
//!
//! One test binary of several files (each a module below), so the suite links the broker once
//! per group instead of once per file.

#[path = "../raw_support/mod.rs"]
mod raw_support;

mod crash;
mod index_checkpoint;
mod model;
mod recovery_walk_back;
mod retention_deleter;
mod schedule_recovery;
