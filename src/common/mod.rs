//! Helpers that both the broker and the name server use, below both of them: the wall clock in
//! RocketMQ's unit, how a JSON config file is replaced on disk, and Java `Properties` text.

pub mod config_file;
pub mod properties_text;
pub mod time;

pub use time::now_ms;
