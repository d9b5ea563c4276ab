#!/usr/bin/env bash
# Two builds of the commit_log_append bench side by side, alternating: shows what a change to
# the writer did to SYNC_FLUSH (64 appends in flight) as a share of the disk's own group-commit
# ceiling and to ASYNC_FLUSH as a share of raw sequential write, each ratio taken within one
# pair so the disk's minute-to-minute drift cancels. Each pair measures, in this order: the
# ceiling (64 KiB write + fdatasync at a time, written blocks), then A and B SYNC runs (order
# alternating), then the raw rate, then A and B ASYNC runs (order alternating).
#
#   scripts/bench-writer-ab.sh OLD_BENCH NEW_BENCH
#
# OLD_BENCH/NEW_BENCH: commit_log_append bench binaries (`cargo bench --no-run` prints their
# path). The ceiling and raw rate come from NEW_BENCH. Knobs: PAIRS [6], SYNC_SECS [5],
# MB [1024] (raw and ASYNC volume), OUT [a new directory under /tmp].
set -euo pipefail
A=${1:?usage: scripts/bench-writer-ab.sh OLD_BENCH NEW_BENCH}
B=${2:?usage: scripts/bench-writer-ab.sh OLD_BENCH NEW_BENCH}
PAIRS=${PAIRS:-6}
SYNC_SECS=${SYNC_SECS:-5}
MB=${MB:-1024}
OUT=${OUT:-$(mktemp -d /tmp/ringmq-writer-ab.XXXXXX)}
mkdir -p "$OUT"
LOG=$OUT/runs.tsv
: >"$LOG"

run() { # label binary mode -> prints the MB/s figure of its line
  local line
  line=$(RINGMQ_BENCH_ONLY=$3 RINGMQ_BENCH_SYNC_SECS=$SYNC_SECS RINGMQ_BENCH_MB=$MB "$2" --bench 2>/dev/null |
    grep -E "MB/s" | head -1)
  local mbs
  mbs=$(sed -E 's/.*: ([0-9.]+) MB\/s.*/\1/' <<<"$line")
  printf '%s\t%s\t%s\t%s\n' "$pair" "$1" "$3" "$mbs" >>"$LOG"
  echo "pair $pair $1 $3: $line"
}

for pair in $(seq 1 "$PAIRS"); do
  run ceiling "$B" ceiling
  if ((pair % 2)); then order="A B"; else order="B A"; fi
  for who in $order; do
    if [[ $who == A ]]; then run A "$A" sync; else run B "$B" sync; fi
  done
  run raw "$B" raw
  for who in $order; do
    if [[ $who == A ]]; then run A "$A" async; else run B "$B" async; fi
  done
done

python3 - "$LOG" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
by = {}
for pair, who, mode, mbs in rows:
    by.setdefault(pair, {})[(who, mode)] = float(mbs)
def series(who, mode, base):
    out = []
    for p in sorted(by, key=int):
        d = by[p]
        if (who, mode) in d and base in d and d[base] > 0:
            out.append(100.0 * d[(who, mode)] / d[base])
    return out
def show(name, xs):
    if xs:
        print(f"{name}: median {st.median(xs):.1f} %, range {min(xs):.1f}-{max(xs):.1f} % "
              f"({len(xs)} pairs: {', '.join(f'{x:.1f}' for x in xs)})")
print("SYNC_FLUSH 64 in flight, share of the group-commit ceiling (written blocks, one ceiling per pair; 'ceiling' rows are 64 KiB write + fdatasync at a time):")
show("  A", series("A", "sync", ("ceiling", "ceiling")))
show("  B", series("B", "sync", ("ceiling", "ceiling")))
print("ASYNC_FLUSH, share of raw sequential write (one raw rate per pair):")
show("  A", series("A", "async", ("raw", "raw")))
show("  B", series("B", "async", ("raw", "raw")))
c = [by[p][("ceiling","ceiling")] for p in sorted(by, key=int) if ("ceiling","ceiling") in by[p]]
r = [by[p][("raw","raw")] for p in sorted(by, key=int) if ("raw","raw") in by[p]]
if c: print(f"ceiling MB/s: median {st.median(c):.0f}, range {min(c):.0f}-{max(c):.0f}")
if r: print(f"raw MB/s: median {st.median(r):.0f}, range {min(r):.0f}-{max(r):.0f}")
PY
echo "runs: $LOG"
