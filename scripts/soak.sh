#!/usr/bin/env bash
# Long soak: mixed produce/consume load against a release-built broker for SOAK_SECS (default
# 30 min) at SOAK_RATE msgs/s (default 2000), printing one sample line per 10 s
# (t_s rss_anon_kib vm_rss_kib fds acked consumed acked_per_s) and failing on any lost or
# corrupted acknowledged message, fd growth, or RssAnon beyond 10% of its warm-up value.
#
#   scripts/soak.sh                  # 30 minutes
#   SOAK_SECS=300 SOAK_RATE=5000 scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export RINGMQ_SOAK=1
export SOAK_SECS=${SOAK_SECS:-1800}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ringmq/target-soak}
log=${SOAK_LOG:-${TMPDIR:-/tmp}/ringmq-soak-$(date +%Y%m%d-%H%M%S).log}
echo "soak: ${SOAK_SECS}s, log $log"
cargo test --release --test cluster soak_short:: -- --nocapture --test-threads=1 2>&1 | tee "$log" |
    grep -E '^soak|test result|panicked|assert'
