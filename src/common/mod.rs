//! Helpers that both the broker and the name server use, below both of them: the wall clock in
//! RocketMQ's unit, and how a JSON config file is replaced on disk.

pub mod config_file;
pub mod time;

pub use time::now_ms;
