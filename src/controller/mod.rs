//! The ringmq controller (RocketMQ 5's controller, `ringmq controller -c controller.conf`):
//! the source of truth for who is master of each broker group in controller mode, and which
//! replicas are in its SyncStateSet.
//!
//! - `replicas`: the replicated state and the validation of every write (Java's
//!   `ReplicasInfoManager`), `elect`: the election policy, `heartbeat`: this controller's own
//!   view of broker liveness (never replicated), `error`: the one error enum.
//!
//! Nothing here imports the broker; the controller runs on its own thread, never on a shard.

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
