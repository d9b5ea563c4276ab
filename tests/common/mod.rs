//! Shared harness for the `client_*` integration tests: it runs a real `ringmq` process over TCP
//! and drives it with the unmodified crates.io client `rocketmq-client-rust` 1.0.0.
//!
//! Owns the unique names every test uses and the flush-mode override; the rest is split by
//! subject and re-exported here, so tests use `common::...` whatever the file: `process`
//! (spawning `ringmq serve` / `ringmq broker` in a fresh temp store with ephemeral ports,
//! [`Broker`], [`SecondBroker`]), `runtime` (the tokio runtime every test body runs on,
//! [`run`], which also enforces the per-test time budget, and the client runtime with raised
//! blocking-lane limits, [`client_runtime`]) and `clients` (small factories for producers,
//! push / lite-pull consumers and the admin client, and collecting what they receive). Every
//! test file `mod common;`s this module and uses only part of it, hence the `dead_code`
//! allowance.
//!
//! Invariants: no helper waits without a deadline; a broker process never outlives its handle
//! (Drop kills it and removes its store); when a test panics, the tail of the broker's stderr is
//! printed so the failure can be read without rerunning.

#![allow(dead_code)]

mod clients;
mod process;
mod runtime;

// A test file may use nothing of one of them.
#[allow(unused_imports)]
pub use clients::*;
#[allow(unused_imports)]
pub use process::*;
#[allow(unused_imports)]
pub use runtime::*;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Tag of the message helpers send to make a topic exist; tests ignore it.
pub const WARMUP_TAG: &str = "Warmup";

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn next_id() -> usize {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// Wall-clock milliseconds since the Unix epoch (the unit of RocketMQ timestamps).
pub fn now_ms() -> u64 {
    ringmq::common::now_ms() as u64
}

/// A RocketMQ-legal name (letters, digits, '_' and '-') unique across tests and processes.
pub fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}_{}",
        std::process::id(),
        nanos() % 1_000_000_000_000,
        next_id()
    )
}

/// A topic name nobody else uses, so every test sees only its own messages.
pub fn unique_topic(prefix: &str) -> String {
    unique_name(&format!("T_{prefix}"))
}

/// A consumer / producer group name nobody else uses.
pub fn unique_group(prefix: &str) -> String {
    unique_name(&format!("G_{prefix}"))
}

/// `RINGMQ_TEST_FLUSH_DISK_TYPE=SYNC_FLUSH` runs every broker of the suite under that flush
/// mode; a test that sets `flushDiskType` itself keeps its own (later `-o` keys win).
pub fn flush_override() -> Option<String> {
    std::env::var("RINGMQ_TEST_FLUSH_DISK_TYPE")
        .ok()
        .filter(|s| !s.is_empty())
}

pub fn port_of(addr: &str) -> u16 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("not a host:port address: {addr:?}"))
}

pub fn temp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}
