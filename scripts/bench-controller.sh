#!/usr/bin/env bash
# What controller mode costs a producer, and how long a failover takes.
#
# 1. Heartbeat cost: the same send load against three set-ups, alternated run by run, each on
#    fresh stores under /tmp:
#      plain   `ringmq serve`, an ASYNC_MASTER alone
#      ctl     `ringmq serve --controller-config`: a controller in the same process and the
#              broker in controller mode with it (master, heartbeats every 1 s, the default)
#      ctl100  as ctl with brokerHeartbeatInterval=100 (ten times the default)
#    It prints one line per run, the medians, and ctl/plain and ctl100/plain.
# 2. Failover time (FAILOVER=1): the controller-mode failover test with release binaries and
#    FAILOVER_ROUNDS rounds (SIGKILL of the master under sends; every other round the controller
#    leader too), and the time from each kill to the first send the new master acknowledged.
#
#   scripts/bench-controller.sh
#
# Knobs: INFLIGHT [64], REPEATS [3], DURATION [10], WARMUP [2], FAILOVER [1],
# FAILOVER_ROUNDS [20], BENCH and RINGMQ [the release target dir's].
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ringmq/target}
BENCH=${BENCH:-$TARGET_DIR/release/ringmq-bench}
RINGMQ=${RINGMQ:-$TARGET_DIR/release/ringmq}
INFLIGHT=${INFLIGHT:-64}
REPEATS=${REPEATS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
FAILOVER=${FAILOVER:-1}
FAILOVER_ROUNDS=${FAILOVER_ROUNDS:-20}
NS=127.0.0.1:9876
OUT=$(mktemp -d /tmp/ringmq-ctl.XXXXXX)
PID=""
STORE=""

stop() {
  [[ -n $PID ]] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
  PID=""
  [[ -n $STORE ]] && rm -rf "$STORE"
  STORE=""
}
trap stop EXIT

wait_port() { # port seconds
  for _ in $(seq 1 $(($2 * 10))); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

run_one() { # setup
  STORE=$(mktemp -d /tmp/ringmq-ctl-store.XXXXXX)
  local extra=()
  if [[ $1 != plain ]]; then
    printf 'controllerDLegerGroup=bench\ncontrollerDLegerPeers=n0-127.0.0.1:9878\ncontrollerDLegerSelfId=n0\ncontrollerStorePath=%s\n' \
      "$STORE/controller" >"$STORE/controller.conf"
    extra=(--controller-config "$STORE/controller.conf")
    [[ $1 == ctl100 ]] && extra+=(-o brokerHeartbeatInterval=100)
  fi
  "$RINGMQ" serve --store-dir "$STORE/broker" -o brokerIP1=127.0.0.1 "${extra[@]}" \
    >"$OUT/$1.log" 2>&1 &
  PID=$!
  wait_port 9876 30 && wait_port 10911 30 || { echo "$1: no ports" >&2; exit 1; }
  # In controller mode the broker takes sends once the controller elected it.
  sleep 2
  "$BENCH" send --namesrv $NS --inflight "$INFLIGHT" --warmup "$WARMUP" \
    --duration "$DURATION" --json --quiet --broker-pid "$PID" --label "$1" \
    2>>"$OUT/$1.bench.log" | tail -1 >>"$OUT/send.jsonl"
  stop
  sleep 1
}

for r in $(seq 1 "$REPEATS"); do
  if (( r % 2 )); then order="plain ctl ctl100"; else order="ctl100 ctl plain"; fi
  for s in $order; do run_one "$s"; done
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
runs = [json.loads(l) for l in open(f"{out}/send.jsonl") if l.strip()]
med = {}
for label in ("plain", "ctl", "ctl100"):
    mine = [r for r in runs if r.get("label") == label]
    rates = [r["throughput_msgs"] for r in mine]
    p99 = [r["latency_us"]["p99"] for r in mine]
    cpu = [None if r.get("broker_cpu_pct") is None else round(r["broker_cpu_pct"]) for r in mine]
    errors = [r.get("error_total") for r in mine]
    print(f"{label}: msg/s {', '.join(f'{x:,.0f}' for x in rates)}; p99 us {p99}; "
          f"broker CPU % {cpu}; errors {errors}")
    med[label] = statistics.median(rates) if rates else float("nan")
print(f"ctl/plain = {med['ctl'] / med['plain']:.3f}; ctl100/plain = {med['ctl100'] / med['plain']:.3f}")
PY

if [[ $FAILOVER == 1 ]]; then
  RINGMQ_TEST_BIN="$RINGMQ" RINGMQ_FAILOVER_ROUNDS="$FAILOVER_ROUNDS" \
    cargo test --locked --test cluster failover_controller::a_killed_master -- --nocapture \
    >"$OUT/failover.log" 2>&1 || { echo "the failover run failed: $OUT/failover.log" >&2; exit 1; }
  python3 - "$OUT/failover.log" <<'PY'
import re, statistics, sys
alone, with_leader = [], []
for line in open(sys.argv[1]):
    m = re.search(r"taking sends (\d+) ms after the SIGKILL( \(controller leader killed too\))?", line)
    if m:
        (with_leader if m.group(2) else alone).append(int(m.group(1)))
for name, xs in (("master killed", alone), ("master and controller leader killed", with_leader)):
    if xs:
        print(f"{name}: {len(xs)} rounds, ms to the first acknowledged send: median "
              f"{statistics.median(xs):.0f}, min {min(xs)}, max {max(xs)}; all {xs}")
PY
fi
echo "raw lines: $OUT"
