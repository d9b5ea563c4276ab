#!/usr/bin/env bash
# Two ringmq builds side by side on the same load: shows whether a change moved throughput
# beyond run-to-run noise. For each workload and repeat it starts build A, then build B (the
# order alternates each repeat), each on a fresh store under /tmp with the name server on 9876
# and the broker on 10911, runs the same ringmq-bench command against it, and prints one line per
# run and the medians per build with B/A.
#
#   scripts/bench-ab.sh OLD_RINGMQ NEW_RINGMQ
#
# Knobs: WORKLOADS ["W2 W3"] (W2: sync sends, 16 in flight; W3: batches of 32, 16 in flight;
# W1: one at a time; W5: 10k msg/s fixed rate, end to end; W6: SYNC_FLUSH sends, 64 in flight,
# on a broker started with flushDiskType=SYNC_FLUSH; W4: drain a backlog of BACKLOG [1000000]
# messages with pulls, batches of 32, 16 in flight), REPEATS [3], DURATION [10], WARMUP [2],
# BENCH [ringmq-bench of the release target dir]. Medians of throughput and of p99 latency.
# B_OPTS: extra `serve` arguments for build B only (e.g. "-o metricsExporterType=PROM");
# SCRAPE_B: a URL fetched every second while build B runs (e.g. its metrics endpoint).
# BENCH_OPTS: extra ringmq-bench arguments for both builds' runs (e.g. "--no-uniq-key
# --access-key K --secret-key S" to sign every request).
# B_BENCH_OPTS: extra ringmq-bench arguments for build B's runs only (e.g. "--tls", with B_OPTS
# setting tls.server.mode and the certificate: the same binary measured plain and over TLS).
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: scripts/bench-ab.sh OLD_RINGMQ NEW_RINGMQ}
B=${2:?usage: scripts/bench-ab.sh OLD_RINGMQ NEW_RINGMQ}
TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ringmq/target}
BENCH=${BENCH:-$TARGET_DIR/release/ringmq-bench}
WORKLOADS=${WORKLOADS:-"W2 W3"}
REPEATS=${REPEATS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
NS=127.0.0.1:9876
OUT=$(mktemp -d /tmp/ringmq-ab.XXXXXX)
BROKER_PID=""
STORE=""

stop() {
  if [[ -n $BROKER_PID ]]; then
    kill "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=""
  fi
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

args_of() {
  local common="--namesrv $NS --warmup $WARMUP --duration $DURATION --json --quiet"
  case $1 in
    W1) echo "send --connections 1 --inflight 1 $common" ;;
    W2) echo "send --inflight 16 $common" ;;
    W3) echo "batch --batch 32 --inflight 16 $common" ;;
    W5) echo "e2e --rate 10000 $common" ;;
    W6) echo "send --inflight 64 $common" ;;
    W4) echo "pull --prefill ${BACKLOG:-1000000} --inflight 16 --batch 32 --namesrv $NS --json --quiet" ;;
    *) echo "unknown workload $1" >&2; exit 1 ;;
  esac
}

run_one() { # label binary workload
  STORE=$(mktemp -d /tmp/ringmq-ab-store.XXXXXX)
  local flush=ASYNC_FLUSH
  [[ $3 == W6 ]] && flush=SYNC_FLUSH
  local extra="" scraper="" bench_extra=""
  [[ $1 == B ]] && extra=${B_OPTS:-} && bench_extra=${B_BENCH_OPTS:-}
  # shellcheck disable=SC2086
  "$2" serve --store-dir "$STORE/store" -o brokerIP1=127.0.0.1 -o flushDiskType=$flush $extra \
    >"$OUT/$1-$3.log" 2>&1 &
  BROKER_PID=$!
  wait_port 9876 30 && wait_port 10911 30 || { echo "$1 did not open its ports" >&2; exit 1; }
  if [[ $1 == B && -n ${SCRAPE_B:-} ]]; then
    ( while sleep 1; do curl -sf -o /dev/null "$SCRAPE_B" || echo "scrape failed" >&2; done ) \
      2>>"$OUT/$1-$3.scrape.log" &
    scraper=$!
  fi
  # shellcheck disable=SC2046
  "$BENCH" $(args_of "$3") ${BENCH_OPTS:-} $bench_extra --broker-pid "$BROKER_PID" --label "$1" 2>>"$OUT/$1-$3.bench.log" \
    | tail -1 >>"$OUT/$3.jsonl"
  [[ -n $scraper ]] && { kill "$scraper" 2>/dev/null || true; wait "$scraper" 2>/dev/null || true; }
  stop
  sleep 1
}

for w in $WORKLOADS; do
  for r in $(seq 1 "$REPEATS"); do
    if (( r % 2 )); then run_one A "$A" "$w"; run_one B "$B" "$w"
    else run_one B "$B" "$w"; run_one A "$A" "$w"; fi
  done
done

python3 - "$OUT" $WORKLOADS <<'PY'
import json, statistics, sys
out, workloads = sys.argv[1], sys.argv[2:]
for w in workloads:
    runs = [json.loads(l) for l in open(f"{out}/{w}.jsonl") if l.strip()]
    med, med99 = {}, {}
    for label in ("A", "B"):
        mine = [r for r in runs if r.get("label") == label]
        rates = [r["throughput_msgs"] for r in mine]
        p99 = [r["latency_us"]["p99"] for r in mine]
        steal = [r.get("host_steal_pct") for r in mine]
        print(f"{w} {label}: msg/s {', '.join(f'{x:,.0f}' for x in rates)}; "
              f"p99 us {p99}; steal % {steal}")
        med[label] = statistics.median(rates)
        med99[label] = statistics.median(p99)
    print(f"{w} median B/A = {med['B'] / med['A']:.3f}; median p99 us A {med99['A']:.0f}, "
          f"B {med99['B']:.0f}")
PY
echo "raw lines: $OUT"
