#!/usr/bin/env bash
# Transactions benchmark, through rocketmq-client-rust 1.0.0 (bench/client_workloads.rs):
#   1. committed transactions (C5: prepare + commit, INFLIGHT in flight) against plain sync sends
#      (C2, the same in flight) on one broker, alternating REPEATS times: the ratio C5/C2;
#   2. plain sends on a fresh broker (C2) against plain sends while BACKLOG undecided half
#      messages wait and the check-back checks them every CHECK_INTERVAL ms (C6, its producer
#      answers UNKNOW), each measured for WAIT_DURATION seconds so that check runs fall inside:
#      the ratio C6/C2;
#   3. the same with the half messages inside their transactionTimeOut (not due for a check).
# Each phase starts `ringmq serve` on a fresh store under /tmp (name server 9876, broker 10911)
# and stops it by pid. Prints one line per run and the ratios; raw JSON lines go to $RESULTS.
#
# Environment knobs (defaults in brackets): DURATION [10] measured seconds per run in phase 1,
# WAIT_DURATION [30] in phase 2, WARMUP [2],
# REPEATS [3], INFLIGHT [16], BACKLOG [100000], CHECK_INTERVAL [10000] (ms; RocketMQ's default
# is 30000, shorter so that scans fall inside the measured run), FLUSH [ASYNC_FLUSH],
# RESULTS [bench/results/tx-<timestamp>], CARGO_TARGET_DIR [./target], SKIP_BUILD [0],
# PHASES ["1 2 3"].
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-10}
WAIT_DURATION=${WAIT_DURATION:-30}
WARMUP=${WARMUP:-2}
REPEATS=${REPEATS:-3}
INFLIGHT=${INFLIGHT:-16}
BACKLOG=${BACKLOG:-100000}
CHECK_INTERVAL=${CHECK_INTERVAL:-10000}
FLUSH=${FLUSH:-ASYNC_FLUSH}
PHASES=${PHASES:-"1 2 3"}
RESULTS=${RESULTS:-$REPO/bench/results/tx-$(date +%Y%m%d-%H%M%S)}
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
RINGMQ=$TARGET_DIR/release/ringmq
NS=127.0.0.1:9876
BROKER=127.0.0.1:10911

mkdir -p "$RESULTS"
RAW=$RESULTS/raw.jsonl
: >"$RAW"
log() { echo "[bench-tx $(date +%H:%M:%S)] $*" >&2; }

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  log "building ringmq and the client workloads (release)"
  (cd "$REPO" && cargo build --locked --release -p ringmq --bin ringmq)
fi
CLIENT_BENCH=$(cd "$REPO" && cargo bench --locked -p ringmq-bench --bench client_workloads --no-run \
  --message-format=json 2>/dev/null | grep -o '"executable":"[^"]*client_workloads[^"]*"' |
  tail -n1 | cut -d'"' -f4)
[[ -x $CLIENT_BENCH ]] || { log "no client_workloads binary"; exit 1; }

PID=""
STORE=""
start_broker() {
  STORE=$(mktemp -d /tmp/ringmq-bench-tx.XXXXXX)
  "$RINGMQ" serve --namesrv-listen "$NS" --broker-listen "$BROKER" --store-dir "$STORE" \
    -o "flushDiskType=$FLUSH" -o brokerIP1=127.0.0.1 \
    -o "transactionCheckInterval=$CHECK_INTERVAL" "$@" >"$RESULTS/broker.log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do
    if grep -q "broker listening on" "$RESULTS/broker.log"; then return; fi
    sleep 0.1
  done
  log "ringmq did not start"; cat "$RESULTS/broker.log" >&2; exit 1
}
stop_broker() {
  [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  PID=""
  [[ -n $STORE ]] && rm -rf "$STORE"
  STORE=""
}
trap stop_broker EXIT

# run WORKLOAD TOPIC [extra args]: one client_workloads run; prints msg/s and appends the JSON.
run() {
  local w=$1 topic=$2
  shift 2
  local line
  line=$("$CLIENT_BENCH" "$w" --namesrv "$NS" --broker "$BROKER" --topic "$topic" \
    --inflight "$INFLIGHT" --duration "$DURATION" --warmup "$WARMUP" --flush-mode "$FLUSH" \
    --broker-pid "$PID" --json "$@" 2>>"$RESULTS/client.log")
  echo "$line" >>"$RAW"
  echo "$line" | grep -o '"throughput_msgs":[0-9.]*' | cut -d: -f2
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }

want() { [[ " $PHASES " == *" $1 "* ]]; }

if want 1; then
log "phase 1: committed transactions against plain sends, $REPEATS pairs, $INFLIGHT in flight"
start_broker
for r in $(seq "$REPEATS"); do
  plain=$(run c2 TxBenchPlain)
  tx=$(run c5 TxBenchTx)
  log "pair $r: plain $plain msg/s, committed transactions $tx msg/s, ratio $(ratio "$tx" "$plain")"
done
stop_broker
fi

# phase NAME [broker options]: plain sends, then plain sends with BACKLOG half messages waiting.
phase() {
  local name=$1
  shift
  start_broker "$@"
  local base waiting
  base=$(DURATION=$WAIT_DURATION run c2 "TxBenchBase$name")
  waiting=$(DURATION=$WAIT_DURATION run c6 "TxBenchWait$name" --backlog "$BACKLOG")
  log "$name: plain $base msg/s; with $BACKLOG waiting $waiting msg/s; ratio $(ratio "$waiting" "$base")"
  grep "transaction check run" "$RESULTS/broker.log" >&2 || log "$name: no check run put anything back"
  stop_broker
}
if want 2; then
  log "phase 2: $BACKLOG undecided half messages due for checks (answered UNKNOW) every $CHECK_INTERVAL ms"
  phase Due
fi
if want 3; then
  log "phase 3: $BACKLOG undecided half messages inside their transactionTimeOut (not due)"
  phase NotDue -o transactionTimeOut=3600000
fi
log "raw JSON lines: $RAW"
