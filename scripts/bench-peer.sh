#!/usr/bin/env bash
# Side-by-side benchmark: ringmq against the rocketmq-rust 1.0.0 peer (its crates.io name server
# and broker, installed outside the repository by build_peer below), driven by the same load
# generator (ringmq-bench) with the same settings, alternating, REPEATS times.
# Opt-in workloads C1/C2/C4 drive both brokers with the real client rocketmq-client-rust 1.0.0
# instead (bench/client_workloads.rs: sync send 1 and 16 in flight, push-consumer drain).
#
# For each workload and repeat it starts one system on fresh store dirs under /tmp (name server
# 9876, broker 10911), waits for the ports, runs ringmq-bench --json, stops the processes it
# started (by pid) and wipes the store; then the other system. Prints one markdown table of
# medians and the ratio ringmq/peer, keeps raw JSON lines and logs in $RESULTS, and draws PNG
# charts of them into $RESULTS/plots (ringmq-bench plot; skipped if the font is missing).
#
# Environment knobs (defaults in brackets):
#   DURATION [10]  measured seconds per run     WARMUP [2]     unmeasured seconds first
#   REPEATS  [3]   pairs per workload           BACKLOG [1000000] W4 prefill/drain size
#   QUEUES   [8]   topic queues                 WORKLOADS ["W1 W2 W3 W4 W4s W5 W6 W7"]; also C1 C2 C4
#   SYSTEMS  ["ringmq peer"]                    RESULTS [bench/results/<timestamp>]
#   PEER [~/.cache/ringmq-peer]  SKIP_BUILD [0] (1 = use existing binaries)
#   PEER_BUILD_WAIT [3600] seconds  BENCH, RINGMQ: binaries (default: $CARGO_TARGET_DIR/release/)
#   CARGO_TARGET_DIR [./target]  where ringmq and ringmq-bench are built
#   RUN_TIMEOUT [1200] seconds one ringmq-bench run may take before it is killed
#   CLIENT_BENCH: the client_workloads binary (default: built by
#     `cargo bench -p ringmq-bench --bench client_workloads --no-run`, or with
#     SKIP_BUILD=1 the newest $CARGO_TARGET_DIR/release/deps/client_workloads-*)
#   PLOT_FONT [/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf] (Debian: fonts-dejavu-core)
#   MAX_STEAL [unset = off] a pair in which either run saw more host CPU steal than this many
#     percent (ringmq-bench's host_steal_pct) is run again, up to STEAL_RETRIES [3] more times;
#     the runs it replaces stay in raw.jsonl marked "discarded" and count in no median. The same
#     gate applies to both systems: it keeps a neighbour's load on a shared VM out of the ratio.
# Quick pass: DURATION=3 WARMUP=1 REPEATS=1 BACKLOG=100000 scripts/bench-peer.sh
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PEER=${PEER:-$HOME/.cache/ringmq-peer}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
REPEATS=${REPEATS:-3}
BACKLOG=${BACKLOG:-1000000}
QUEUES=${QUEUES:-8}
WORKLOADS=${WORKLOADS:-"W1 W2 W3 W4 W4s W5 W6 W7"}
SYSTEMS=${SYSTEMS:-"ringmq peer"}
RESULTS=${RESULTS:-$REPO/bench/results/$(date +%Y%m%d-%H%M%S)}
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
BENCH=${BENCH:-$TARGET_DIR/release/ringmq-bench}
RINGMQ=${RINGMQ:-$TARGET_DIR/release/ringmq}
PLOT_FONT=${PLOT_FONT:-/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf}
CLIENT_BENCH=${CLIENT_BENCH:-}
NS_PORT=9876
BROKER_PORT=10911

mkdir -p "$RESULTS/logs"
RAW=$RESULTS/raw.jsonl
: >"$RAW"
log() { echo "[bench-peer $(date +%H:%M:%S)] $*" >&2; }

# ---------------------------------------------------------------- builds
build_ringmq() {
  if [[ ${SKIP_BUILD:-0} == 1 ]]; then return; fi
  log "building ringmq and ringmq-bench (release)"
  (cd "$REPO" &&
    cargo build --locked --release -p ringmq --bin ringmq -p ringmq-bench --bin ringmq-bench)
}

# The C workloads' binary is a `[[bench]]` target of the ringmq-bench package (it needs the
# client, a dev-dependency); its file name carries a hash, so ask cargo for it, or take the
# newest one with SKIP_BUILD=1.
build_client() {
  [[ -n $CLIENT_BENCH ]] && return
  if [[ ${SKIP_BUILD:-0} == 1 ]]; then
    CLIENT_BENCH=$(find "$TARGET_DIR/release/deps" -maxdepth 1 -type f -executable \
      -name 'client_workloads-*' -printf '%T@ %p\n' 2>/dev/null | sort -n | tail -n1 | cut -d' ' -f2-)
  else
    log "building the client workloads (cargo bench --no-run, release)"
    CLIENT_BENCH=$(cd "$REPO" && cargo bench --locked -p ringmq-bench --bench client_workloads --no-run \
      --message-format=json | jq -r 'select(.executable != null) | .executable' | tail -n1)
  fi
  [[ -n $CLIENT_BENCH && -x $CLIENT_BENCH ]] || {
    log "no client_workloads binary; build it with cargo bench -p ringmq-bench --bench client_workloads --no-run"
    exit 1
  }
}

peer_ready() { [[ -x $PEER/bin/rocketmq-namesrv-rust && -x $PEER/bin/rocketmq-broker-rust ]]; }

build_peer() {
  peer_ready && return
  mkdir -p "$PEER/conf" "$PEER/store" "$PEER/home"
  if pgrep -f "cargo install.*--root $PEER" >/dev/null; then
    log "a peer build is already running in $PEER; waiting for it (up to ${PEER_BUILD_WAIT:-3600} s)"
    local waited=0
    while ! peer_ready; do
      if ! pgrep -f "cargo install.*--root $PEER" >/dev/null; then
        peer_ready || { log "background peer build ended without both binaries"; break; }
      fi
      sleep 10
      waited=$((waited + 10))
      ((waited < ${PEER_BUILD_WAIT:-3600})) || { log "peer build still running; giving up"; exit 1; }
    done
  fi
  peer_ready && return
  log "building the peer (cargo install rocketmq-namesrv/rocketmq-broker 1.0.0) into $PEER (~15 min on 2 cores)"
  CARGO_TARGET_DIR=$PEER/target cargo install --locked --root "$PEER" rocketmq-namesrv@1.0.0 \
    >"$PEER/build-namesrv.log" 2>&1
  CARGO_TARGET_DIR=$PEER/target cargo install --locked --root "$PEER" rocketmq-broker@1.0.0 \
    >"$PEER/build-broker.log" 2>&1
  peer_ready || { log "peer build failed, see $PEER/build-*.log"; exit 1; }
}

# ---------------------------------------------------------------- processes
PIDS=()
STORE=""
BROKER_PID=""

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # port seconds
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    port_open "$1" && return 0
    sleep 0.1
  done
  return 1
}

wait_ports_free() {
  local i
  for ((i = 0; i < 600; i++)); do
    if ! port_open $NS_PORT && ! port_open $BROKER_PORT; then return 0; fi
    sleep 0.1
  done
  log "ports $NS_PORT/$BROKER_PORT are still in use by something this script did not start"
  exit 1
}

stop_all() {
  local p i
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  PIDS=()
  BROKER_PID=""
  if [[ -n $STORE && $STORE == /tmp/ringmq-bench-* ]]; then rm -rf "$STORE"; fi
  STORE=""
}
trap stop_all EXIT
trap 'exit 130' INT TERM

start_peer() { # flush tag
  local flush=$1 tag=$2
  wait_ports_free
  STORE=$(mktemp -d /tmp/ringmq-bench-peer.XXXXXX)
  local conf=$STORE/broker.toml
  {
    echo '[broker]'
    echo "namesrvAddr = \"127.0.0.1:$NS_PORT\""
    echo 'brokerIp1 = "127.0.0.1"'
    echo "listenPort = $BROKER_PORT"
    echo "storePathRootDir = \"$STORE/store\""
    echo '[broker.brokerServerConfig]'
    echo 'bindAddress = "127.0.0.1"'
    echo '[broker.brokerIdentity]'
    echo 'brokerName = "broker-a"'
    echo 'brokerClusterName = "DefaultCluster"'
    echo 'brokerId = 0'
    echo '[store]'
    echo 'storeType = "LocalFile"'
    echo 'brokerRole = "ASYNC_MASTER"'
    echo "storePathRootDir = \"$STORE/store\""
    echo 'commitLogMicroBatchEnabled = false'
    echo "flushDiskType = \"$flush\""
    # With ROCKETMQ_SECURITY_PROFILE=development-insecure-loopback the broker refuses to start
    # while its HA listener binds 0.0.0.0.
    echo 'haListenAddress = "127.0.0.1"'
    # The peer counts 1 - avail/total; on this shared VM disk that sits near its 90% warning
    # level, where it stops accepting writes (SYSTEM_BUSY store_not_writeable). Raise the
    # thresholds so disk headroom elsewhere does not decide the result.
    echo 'diskSpaceWarningLevelRatio = 98'
    echo 'diskSpaceCleanForciblyRatio = 97'
    echo 'diskMaxUsedSpaceRatio = 95'
  } >"$conf"
  cp "$conf" "$PEER/conf/broker.toml"
  mkdir -p "$STORE/home"
  (
    export ROCKETMQ_HOME=$STORE/home ROCKETMQ_SECURITY_PROFILE=development-insecure-loopback
    unset NAMESRV_ADDR
    exec "$PEER/bin/rocketmq-namesrv-rust" --bindAddress 127.0.0.1 --listenPort $NS_PORT
  ) >"$RESULTS/logs/$tag-namesrv.log" 2>&1 &
  PIDS+=($!)
  wait_port $NS_PORT 30 || { log "peer name server did not open $NS_PORT"; return 1; }
  (
    export ROCKETMQ_HOME=$STORE/home ROCKETMQ_SECURITY_PROFILE=development-insecure-loopback
    unset NAMESRV_ADDR
    exec "$PEER/bin/rocketmq-broker-rust" -c "$conf" -n 127.0.0.1:$NS_PORT
  ) >"$RESULTS/logs/$tag-broker.log" 2>&1 &
  BROKER_PID=$!
  PIDS+=($BROKER_PID)
  wait_port $BROKER_PORT 60 || { log "peer broker did not open $BROKER_PORT"; return 1; }
}

start_ringmq() { # flush tag
  local flush=$1 tag=$2
  wait_ports_free
  STORE=$(mktemp -d /tmp/ringmq-bench-ringmq.XXXXXX)
  # Same disk threshold as the peer's toml (see start_peer).
  # brokerIP1: the routes name loopback, where the load generator connects (the default is
  # the host's address).
  local opts=(-o diskMaxUsedSpaceRatio=95 -o brokerIP1=127.0.0.1)
  [[ $flush == SYNC_FLUSH ]] && opts+=(-o flushDiskType=SYNC_FLUSH)
  "$RINGMQ" serve --store-dir "$STORE/store" "${opts[@]}" >"$RESULTS/logs/$tag-ringmq.log" 2>&1 &
  BROKER_PID=$!
  PIDS+=($BROKER_PID)
  wait_port $NS_PORT 30 && wait_port $BROKER_PORT 30 || { log "ringmq did not open its ports"; return 1; }
}

# ---------------------------------------------------------------- workloads
# workload -> "flush|arguments"; W* run ringmq-bench, C* run client_workloads (is_client)
case_of() {
  local common="--warmup $WARMUP --duration $DURATION"
  case $1 in
    W1) echo "ASYNC_FLUSH|send --connections 1 --inflight 1 $common" ;;
    W2) echo "ASYNC_FLUSH|send --inflight 16 $common" ;;
    W3) echo "ASYNC_FLUSH|batch --batch 32 --inflight 16 $common" ;;
    W4) echo "ASYNC_FLUSH|pull --prefill $BACKLOG --inflight 16 --batch 32" ;;
    # W4 with the backlog written by single sends over all queues: each queue's records lie
    # apart in the commit log, as producers that spread messages over queues leave them.
    W4s) echo "ASYNC_FLUSH|pull --prefill $BACKLOG --prefill-batch 1 --inflight 16 --batch 32" ;;
    W5-1k) echo "ASYNC_FLUSH|e2e --rate 1000 $common" ;;
    W5-10k) echo "ASYNC_FLUSH|e2e --rate 10000 $common" ;;
    W5-50k) echo "ASYNC_FLUSH|e2e --rate 50000 $common" ;;
    W6) echo "SYNC_FLUSH|send --inflight 64 $common" ;;
    W7-128) echo "ASYNC_FLUSH|send --inflight 16 --size 128 $common" ;;
    W7-16k) echo "ASYNC_FLUSH|send --inflight 16 --size 16384 $common" ;;
    C1) echo "ASYNC_FLUSH|c1 --inflight 1 $common" ;;
    C2) echo "ASYNC_FLUSH|c2 --inflight 16 $common" ;;
    C4) echo "ASYNC_FLUSH|c4 --backlog $BACKLOG" ;;
    *) log "unknown workload $1"; exit 1 ;;
  esac
}

is_client() { [[ $1 == C* ]]; }

expand() {
  local w
  for w in $WORKLOADS; do
    case $w in
      W5) echo W5-1k W5-10k W5-50k ;;
      W7) echo W7-128 W7-16k ;;
      *) echo "$w" ;;
    esac
  done
}

run_one() { # system workload repeat
  local sys=$1 w=$2 r=$3 spec flush args tag out rc
  spec=$(case_of "$w")
  flush=${spec%%|*}
  args=${spec#*|}
  tag="$w-$sys-$r"
  if ! "start_$sys" "$flush" "$tag"; then
    stop_all
    echo "{\"workload\":\"$w\",\"system\":\"$sys\",\"repeat\":$r,\"failure\":\"start failed\"}" >>"$RAW"
    return
  fi
  local cmd=("$BENCH")
  if is_client "$w"; then
    cmd=("$CLIENT_BENCH" --broker "127.0.0.1:$BROKER_PORT")
  else
    args+=" --quiet"
  fi
  log "$tag: $(basename "${cmd[0]}") $args"
  set +e
  # shellcheck disable=SC2086
  out=$(timeout "${RUN_TIMEOUT:-1200}" "${cmd[@]}" $args --namesrv 127.0.0.1:$NS_PORT --queues "$QUEUES" --json \
    --broker-pid "$BROKER_PID" --label "$sys" --flush-mode "$flush" 2>"$RESULTS/logs/$tag-bench.log")
  rc=$?
  set -e
  stop_all
  if [[ -n $out ]]; then
    jq -c --arg w "$w" --arg s "$sys" --argjson r "$r" '{workload: $w, system: $s, repeat: $r} + .' \
      <<<"$out" >>"$RAW"
  else
    echo "{\"workload\":\"$w\",\"system\":\"$sys\",\"repeat\":$r,\"failure\":\"exit $rc, see logs/$tag-bench.log\"}" >>"$RAW"
  fi
  log "$tag: $(jq -r '"\(.throughput_msgs // "-") msg/s p50 \(.latency_us.p50 // "-") us p99 \(.latency_us.p99 // "-") us, host steal \(.host_steal_pct // "-" | if type == "number" then (. * 10 | round / 10 | tostring) + " %" else . end)" + (if .failure then " FAILED: \(.failure)" else "" end)' <<<"$(tail -n1 "$RAW")")"
}

# ---------------------------------------------------------------- main
build_ringmq
[[ $SYSTEMS == *peer* ]] && build_peer
for w in $WORKLOADS; do if is_client "$w"; then build_client; break; fi; done
[[ -x $BENCH ]] || { log "missing $BENCH"; exit 1; }
[[ $SYSTEMS != *ringmq* || -x $RINGMQ ]] || { log "missing $RINGMQ"; exit 1; }
log "results in $RESULTS (DURATION=$DURATION WARMUP=$WARMUP REPEATS=$REPEATS BACKLOG=$BACKLOG)"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -srm), $(nproc) cpus"
  echo "ringmq: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "settings: DURATION=$DURATION WARMUP=$WARMUP REPEATS=$REPEATS BACKLOG=$BACKLOG QUEUES=$QUEUES"
} >"$RESULTS/meta.txt"

read -r -a systems <<<"$SYSTEMS"
for w in $(expand); do
  for ((r = 1; r <= REPEATS; r++)); do
    # Alternate which system goes first so drift on the shared host does not favour one.
    if ((r % 2 == 1)); then order=("${systems[@]}"); else order=(); for ((i = ${#systems[@]} - 1; i >= 0; i--)); do order+=("${systems[i]}"); done; fi
    for ((attempt = 0; ; attempt++)); do
      mark=$(wc -l <"$RAW")
      for sys in "${order[@]}"; do run_one "$sys" "$w" "$r"; done
      [[ -n ${MAX_STEAL:-} ]] || break
      worst=$(tail -n +"$((mark + 1))" "$RAW" | jq -s 'map(.host_steal_pct // 0) | max | . * 10 | round / 10')
      jq -en --argjson w "$worst" --argjson m "$MAX_STEAL" '$w <= $m' >/dev/null && break
      if ((attempt >= ${STEAL_RETRIES:-3})); then
        log "$w pair $r: host steal $worst % > MAX_STEAL=$MAX_STEAL after $attempt retries; kept"
        break
      fi
      log "$w pair $r: host steal $worst % > MAX_STEAL=$MAX_STEAL; running the pair again"
      tmp=$(mktemp)
      head -n "$mark" "$RAW" >"$tmp"
      tail -n +"$((mark + 1))" "$RAW" |
        jq -c --argjson w "$worst" '. + {discarded: "host steal \($w) % over MAX_STEAL"}' >>"$tmp"
      mv "$tmp" "$RAW"
    done
  done
done

python3 - "$RAW" "$SYSTEMS" >"$RESULTS/table.md" <<'PY'
import json, statistics, sys
raw, systems = sys.argv[1], sys.argv[2].split()
rows = {}
discarded = 0  # runs replaced under MAX_STEAL
for line in open(raw):
    d = json.loads(line)
    if d.get("discarded"):
        discarded += 1
        continue
    rows.setdefault(d["workload"], {}).setdefault(d["system"], []).append(d)

def med(runs, f):
    vals = [f(r) for r in runs if not r.get("failure") and f(r) is not None]
    return statistics.median(vals) if vals else None

def lat(r, k):
    # No samples (C4's push consumer hides its pulls) is "no latency", not 0 us.
    l = r.get("latency_us")
    return l[k] if l and l.get("samples", 1) else None

def fmt(v, nd=0):
    return "-" if v is None else f"{v:,.{nd}f}"

a = systems[0]
b = systems[1] if len(systems) > 1 else None
head = ["workload"]
for s in systems:
    head += [f"{s} msg/s", f"{s} MB/s", f"{s} p50/p99/p99.9 us", f"{s} CPU%"]
if b:
    head += [f"{a}/{b} msg/s", f"{a}/{b} p99"]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for w, by in rows.items():
    cells = [w]
    meds = {}
    for s in systems:
        runs = by.get(s, [])
        m = {
            "tp": med(runs, lambda r: r.get("throughput_msgs")),
            "mb": med(runs, lambda r: r.get("throughput_mb_s")),
            "p50": med(runs, lambda r: lat(r, "p50")),
            "p99": med(runs, lambda r: lat(r, "p99")),
            "p999": med(runs, lambda r: lat(r, "p999")),
            "cpu": med(runs, lambda r: r.get("broker_cpu_pct")),
        }
        fails = sum(1 for r in runs if r.get("failure"))
        meds[s] = m
        note = f" ({fails}/{len(runs)} failed)" if fails else ""
        cells += [fmt(m["tp"]) + note, fmt(m["mb"], 1),
                  f'{fmt(m["p50"], 1)} / {fmt(m["p99"], 1)} / {fmt(m["p999"], 1)}', fmt(m["cpu"])]
    if b:
        def ratio(k):
            x, y = meds[a][k], meds[b][k]
            return f"{x / y:.2f}x" if x is not None and y else "-"
        cells += [ratio("tp"), ratio("p99")]
    print("| " + " | ".join(cells) + " |")

# Host CPU steal over the measured runs (ringmq-bench's host_steal_pct): how loaded the host was.
steal = [r["host_steal_pct"] for by in rows.values() for runs in by.values() for r in runs
         if r.get("host_steal_pct") is not None]
if steal:
    print()
    note = f"; {discarded} runs discarded and run again (MAX_STEAL)" if discarded else ""
    print(f"Host CPU steal over the measured runs: median {statistics.median(steal):.1f} %, "
          f"max {max(steal):.1f} % ({len(steal)} runs{note}).")
PY
cat "$RESULTS/table.md"
log "raw JSON lines: $RAW; table: $RESULTS/table.md"
if [[ ! -r $PLOT_FONT ]]; then
  log "plots skipped: font $PLOT_FONT not found (apt-get install fonts-dejavu-core, or set PLOT_FONT)"
elif "$BENCH" plot --input "$RAW" --out-dir "$RESULTS/plots" --prefix results --font "$PLOT_FONT" >/dev/null; then
  log "plots: $RESULTS/plots/results-throughput.png, results-latency.png"
else
  log "plots failed (the table and raw JSON lines above are complete)"
fi
