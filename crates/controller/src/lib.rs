//! The ringmq controller (RocketMQ 5's controller, `ringmq controller -c controller.conf`):
//! the source of truth, for brokers in controller mode, of who is master of each broker group
//! and which replicas are in its SyncStateSet. docs/controller.md describes it for operators.
//!
//! - `replicas`: the replicated state and the validation of every write (Java's
//!   `ReplicasInfoManager`); `elect`: the election policy (`DefaultElectPolicy`);
//!   `heartbeat`: this controller's own view of broker liveness (never replicated);
//!   `error`: the one error enum and its mapping to response codes.
//! - `raft/`: the openraft group: the log on disk, the state machine and its snapshots, the
//!   transport between controllers.
//! - `service`: the controller's running state, the serial request scheduler, elections the
//!   controller triggers itself and role-change notifications; `answer`: responses built from
//!   validated outcomes; `processor`: the broker-facing requests; `server`: the thread, its
//!   tokio runtime, the listener and the periodic scans; `wire`: frames over tokio sockets;
//!   `config`: controller.conf.
//!
//! Nothing here imports the broker. The controller runs on its own thread with a tokio
//! `current_thread` runtime, never on a glommio shard; its state is owned by that thread.

// The lower crates, under the names this crate's modules use for them.
use ringmq_protocol as protocol;
use ringmq_protocol::common;
use ringmq_protocol::constants;
use ringmq_runtime as runtime;

pub mod answer;
pub mod config;
pub mod elect;
pub mod error;
pub mod heartbeat;
pub mod processor;
pub mod raft;
pub mod replicas;
pub mod server;
pub mod service;
pub mod wire;

pub use config::ControllerConfig;
pub use server::{start_controller, ControllerHandle};

#[cfg(test)]
mod replicas_tests;
