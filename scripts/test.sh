#!/usr/bin/env bash
# Runs the whole test suite: format check, clippy, then every unit and integration test.
# Compiled dependencies are kept outside the clone (CARGO_TARGET_DIR, default
# ~/.cache/ringmq/target) so repeated runs and CI on this machine reuse them; a fresh machine
# builds them from scratch with the same command.
# RINGMQ_TEST_FLUSH_DISK_TYPE=SYNC_FLUSH runs every test broker under group commit instead of the
# default ASYNC_FLUSH (tests that choose a flush mode keep theirs). The protocol-level tests
# (tests/raw/) run a second time that way at the end: SYNC_FLUSH takes other paths through the
# writer (replies wait for the group commit's fdatasync on the writer's ring; keys are indexed
# later).
# The C++-client tests need python3 with venv and PyPI (scripts/python-env.sh, RINGMQ_VENV); the
# RocketMQ 5 SDK tests a second venv (scripts/python5-env.sh, RINGMQ_VENV5).
# The web console's browser test needs node and npm, Debian's chromium (installed with apt-get
# when missing) and the npm registry (scripts/browser-env.sh, RINGMQ_NODE_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ringmq/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
cargo fmt --all --check
# The whole workspace, so the bench package (load generator, benches) is compiled and linted too.
cargo clippy --workspace --all-targets --locked -- -D warnings
# The integration tests spawn the broker binary; build it once before they run in parallel.
cargo build --locked -p ringmq --bins
# tests/cluster/cpp_client.rs runs the C++ client through Python: make (or reuse) its venv
# outside the clone and hand its interpreter to the tests.
RINGMQ_PYTHON="$(scripts/python-env.sh)"
export RINGMQ_PYTHON
# tests/cluster/grpc_sdk.rs drives the gRPC endpoint with the RocketMQ 5 Python SDK, in a venv of
# its own (its package is also named `rocketmq`).
RINGMQ_PYTHON5="$(scripts/python5-env.sh)"
export RINGMQ_PYTHON5
# tests/tools/browser.rs drives the web console in Chromium with playwright-core: install (or
# reuse) them outside the clone and hand the node_modules path to the test.
RINGMQ_NODE_MODULES="$(scripts/browser-env.sh)"
export RINGMQ_NODE_MODULES
# Benchmarks are not tests: they run with `cargo bench` (see bench/RESULTS.md).
# Every crate's unit tests and the integration tests of the root package.
cargo test --locked --workspace --exclude ringmq-bench --lib --bins --tests -- --test-threads="${RINGMQ_TEST_THREADS:-4}"
# The bench package's own unit tests (the load generator's; its benches are not run here).
cargo test --locked -p ringmq-bench --bins
RINGMQ_TEST_FLUSH_DISK_TYPE=SYNC_FLUSH \
  cargo test --locked -p ringmq --test raw -- --test-threads="${RINGMQ_TEST_THREADS:-4}"
