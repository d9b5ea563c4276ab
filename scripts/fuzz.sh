#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for a bounded number of executions or seconds and prints
# each target's exec count. New inputs go to a scratch corpus; the committed seeds stay as they are.
#
#   scripts/fuzz.sh                         # every target, 10M runs or 30 min each
#   FUZZ_RUNS=1000000 FUZZ_SECS=60 scripts/fuzz.sh frame_stream sql92
#   FUZZ_JOBS=2 ...                         # parallel libFuzzer workers per target
#   FUZZ_MAX_LEN=4096 ...                   # cap libFuzzer's input length (default: its own)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). On a stable toolchain the sanitizer
# flags need RUSTC_BOOTSTRAP=1, which this script sets. The targets are safe Rust, so the default
# is no sanitizer (-s none) with debug assertions on (-a): overflow and panics are what we hunt.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${FUZZ_RUNS:-10000000}
SECS=${FUZZ_SECS:-1800}
JOBS=${FUZZ_JOBS:-1}
MAX_LEN=${FUZZ_MAX_LEN:-}
SANITIZER=${FUZZ_SANITIZER:-none}
WORK=${FUZZ_WORK:-${TMPDIR:-/tmp}/ringmq-fuzz}
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ringmq/target-fuzz}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)
fi
cargo fuzz build --fuzz-dir fuzz -O -a -s "$SANITIZER"
status=0
# -jobs makes libFuzzer fork workers that log to ./fuzz-N.log; use it only when asked.
parallel=()
if [ "$JOBS" -gt 1 ]; then parallel=(-jobs="$JOBS" -workers="$JOBS"); fi
# A long-lived corpus drifts towards the largest inputs (properties_string reached 32 KiB strings
# and ~2.5k exec/s); a cap keeps a single run's exec rate up.
if [ -n "$MAX_LEN" ]; then parallel+=(-max_len="$MAX_LEN"); fi
for t in "${targets[@]}"; do
    mkdir -p "$WORK/corpus/$t" "$WORK/artifacts/$t"
    log="$WORK/$t.log"
    echo "== $t: up to $RUNS runs / ${SECS}s (log $log)"
    if ! cargo fuzz run --fuzz-dir fuzz -O -a -s "$SANITIZER" "$t" \
        "$WORK/corpus/$t" "fuzz/corpus/$t" -- \
        -runs="$RUNS" -max_total_time="$SECS" "${parallel[@]}" \
        -artifact_prefix="$WORK/artifacts/$t/" -print_final_stats=1 >"$log" 2>&1; then
        echo "!! $t FAILED: see $log and $WORK/artifacts/$t/"
        status=1
    fi
    execs=$(grep -h 'stat::number_of_executed_units' "$log" | awk '{s+=$2} END {print s+0}' || true)
    secs=$(grep -h 'Done [0-9]* runs in' "$log" | tail -1 | sed -E 's/.* in ([0-9]+) second.*/\1/' || true)
    echo "   $t: $execs executions in ${secs:-?} s"
done
exit $status
