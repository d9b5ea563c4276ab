//! Helpers that both the broker and the name server use, below both of them: the wall clock in
//! RocketMQ's unit, how a JSON config file is replaced on disk, Java `Properties` text, and the
//! parsing of one configuration value.

pub mod config_file;
pub mod config_key;
pub mod properties_text;
pub mod time;

pub use time::now_ms;
