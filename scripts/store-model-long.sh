#!/usr/bin/env bash
# Long run of the store's model-based property test and crash test.
# Usage: scripts/store-model-long.sh [cases] [crash-iterations]
set -euo pipefail
cd "$(dirname "$0")/.."
PROPTEST_CASES="${1:-500}" cargo test --release --test store model:: -- --nocapture
STORE_CRASH_ITERS="${2:-200}" cargo test --release --test store crash:: -- --nocapture
