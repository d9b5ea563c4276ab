#!/usr/bin/env bash
# What replication costs a producer: the same send load against three set-ups, alternated run
# by run, each on fresh stores under /tmp:
#   solo   an ASYNC_MASTER alone (`ringmq serve`)
#   async  an ASYNC_MASTER and a SLAVE (`ringmq broker`, its own process) following it
#   sync   a SYNC_MASTER with inSyncReplicas=2 and a SLAVE: each send waits for the slave
# It prints one line per run, the medians per set-up and the ratios async/solo and sync/async.
# With LAG=1 it also runs W2's load (sync sends, 16 in flight) on async with the replication-lag
# probe (`ringmq-bench send --lag-probe`: how long until the slave acknowledged the master's
# end of a moment, from GET_BROKER_HA_STATUS).
#
#   scripts/bench-replication.sh
#
# Knobs: INFLIGHT [64], REPEATS [3], DURATION [10], WARMUP [2], LAG [1],
# BENCH and RINGMQ [the release target dir's].
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ringmq/target}
BENCH=${BENCH:-$TARGET_DIR/release/ringmq-bench}
RINGMQ=${RINGMQ:-$TARGET_DIR/release/ringmq}
INFLIGHT=${INFLIGHT:-64}
REPEATS=${REPEATS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
LAG=${LAG:-1}
NS=127.0.0.1:9876
OUT=$(mktemp -d /tmp/ringmq-repl.XXXXXX)
PIDS=()
STORE=""

stop() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
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

cpu_ticks() { # pid: user + system clock ticks so far
  awk '{print $14 + $15}' "/proc/$1/stat"
}

host_busy() { # all CPUs: busy and total jiffies so far
  awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat
}

start() { # setup
  SLAVE_PID=""
  STORE=$(mktemp -d /tmp/ringmq-repl-store.XXXXXX)
  local role=ASYNC_MASTER extra=()
  [[ $1 == sync ]] && role=SYNC_MASTER && extra=(-o inSyncReplicas=2)
  "$RINGMQ" serve --store-dir "$STORE/master" -o brokerIP1=127.0.0.1 -o brokerRole=$role \
    "${extra[@]}" >"$OUT/$1.master.log" 2>&1 &
  PIDS+=($!)
  MASTER_PID=$!
  wait_port 9876 30 && wait_port 10911 30 && wait_port 10912 30 \
    || { echo "$1: the master did not open its ports" >&2; exit 1; }
  if [[ $1 != solo ]]; then
    # The slave shares the machine; it is left unpinned so it does not sit on the master's
    # shard and writer cores.
    "$RINGMQ" broker --namesrv-addr $NS --broker-listen 127.0.0.1:10931 \
      --store-dir "$STORE/slave" -o brokerIP1=127.0.0.1 -o brokerRole=SLAVE -o brokerId=1 \
      -o haMasterAddress=127.0.0.1:10912 -o slaveReadEnable=true -o pinCores=false \
      >"$OUT/$1.slave.log" 2>&1 &
    PIDS+=($!)
    SLAVE_PID=$!
    wait_port 10931 30 || { echo "$1: the slave did not open its port" >&2; exit 1; }
  fi
}

run_one() { # setup
  start "$1"
  local s0=0 t0 h0 line
  [[ -n $SLAVE_PID ]] && s0=$(cpu_ticks "$SLAVE_PID")
  t0=$(date +%s.%N)
  h0=$(host_busy)
  line=$("$BENCH" send --namesrv $NS --inflight "$INFLIGHT" --warmup "$WARMUP" \
    --duration "$DURATION" --json --quiet --broker-pid "$MASTER_PID" --label "$1" \
    2>>"$OUT/$1.bench.log" | tail -1)
  # The slave's CPU and the whole machine's busy share over the run (warm-up included).
  local wall slave_cpu host
  wall=$(python3 -c "print($(date +%s.%N) - $t0)")
  slave_cpu=None
  if [[ -n $SLAVE_PID ]]; then
    slave_cpu=$(python3 -c "print(($(cpu_ticks "$SLAVE_PID") - $s0) / $(getconf CLK_TCK) / $wall * 100)")
  fi
  host=$(echo "$h0 $(host_busy)" | awk '{printf "%.1f", ($3-$1)/($4-$2)*100}')
  echo "$line" | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); \
r['slave_cpu_pct']=$slave_cpu; r['host_busy_pct']=$host; print(json.dumps(r))" >>"$OUT/send.jsonl"
  stop
  sleep 1
}

for r in $(seq 1 "$REPEATS"); do
  if (( r % 2 )); then order="solo async sync"; else order="sync async solo"; fi
  for s in $order; do run_one "$s"; done
done

if [[ $LAG == 1 ]]; then
  for r in $(seq 1 "$REPEATS"); do
    start async
    "$BENCH" send --namesrv $NS --inflight 16 --lag-probe --warmup "$WARMUP" \
      --duration "$DURATION" --json --quiet --broker-pid "$MASTER_PID" --label lag \
      2>>"$OUT/lag.bench.log" | tail -1 >>"$OUT/lag.jsonl"
    stop
    sleep 1
  done
fi

python3 - "$OUT" <<'PY'
import json, os, statistics, sys
out = sys.argv[1]
runs = [json.loads(l) for l in open(f"{out}/send.jsonl") if l.strip()]
med = {}
for label in ("solo", "async", "sync"):
    mine = [r for r in runs if r.get("label") == label]
    rates = [r["throughput_msgs"] for r in mine]
    p99 = [r["latency_us"]["p99"] for r in mine]
    def pct(key):
        return [None if r.get(key) is None else round(r[key]) for r in mine]
    errors = [r.get("error_total") for r in mine]
    print(f"{label}: msg/s {', '.join(f'{x:,.0f}' for x in rates)}; p99 us {p99}; "
          f"CPU % master {pct('broker_cpu_pct')} slave {pct('slave_cpu_pct')} "
          f"client {pct('client_cpu_pct')} machine busy {pct('host_busy_pct')}; errors {errors}")
    # CPU microseconds (all processes on the machine) per acknowledged message.
    us = [r["host_busy_pct"] / 100 * os.cpu_count() * 1e6 / r["throughput_msgs"] for r in mine
          if r.get("host_busy_pct") and r["throughput_msgs"]]
    if us:
        print(f"{label}: machine CPU us per message {[round(x, 1) for x in us]}")
    med[label] = statistics.median(rates) if rates else float("nan")
print(f"async/solo = {med['async'] / med['solo']:.3f}; sync/async = {med['sync'] / med['async']:.3f}")
lag = f"{out}/lag.jsonl"
if os.path.exists(lag):
    for l in open(lag):
        if l.strip():
            r = json.loads(l)
            print(f"W2 on async with the lag probe: {r['throughput_msgs']:,.0f} msg/s; replication "
                  f"lag us {r['replication_lag_us']}; a thread's wake-up delay us "
                  f"{r['wake_delay_us']}; failure {r.get('failure')}")
PY
echo "raw lines: $OUT"
