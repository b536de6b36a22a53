#!/usr/bin/env bash
# DDP's "bytes through the busiest node" in `ringside compare` is what the process
# group counted, not a formula: the summary's busiest_bytes_in/out for a DDP cell equal
# the largest per-rank traffic in the ranks' own step records (metrics.rankR.jsonl,
# written from the group's per-collective counts), both directions, and those counts
# are the algorithm's known traffic:
#   - 4 ranks under the default --allreduce=auto, a model of one bucket below 4 MiB:
#     recursive doubling, lg 4 x M = 2 M each way on every rank (the ring formula,
#     1.5 M, would be 25% short);
#   - 3 ranks under auto: recursive doubling with rank 2 folded into rank 0;
#   - 3 ranks under --allreduce=ring: chunk sizes differ by one float, so rank 2, not
#     rank 0, is the busiest: the summary must look at every rank.
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"

cat >"$T/spec.textproto" <<'SPEC'
name: "bytes"
strategies { kind: "ddp" }
strategies { kind: "ddp" allreduce: "ring" label: "ddp-ring" }
workers: 3
workers: 4
model: "mlp:784-32-18-10"
dataset: "synthetic:train=1024,test=64"
batch_per_worker: 16
steps: 8
SPEC
if ! timeout 300 "$RINGSIDE" compare --spec="$T/spec.textproto" --out="$T/out" >"$T/log" 2>&1; then
  echo "FAIL: compare exited non-zero: $(tail -5 "$T/log")"
  exit 1
fi

exec /usr/bin/python3 - "$T/out" <<'PY'
import csv, json, os, sys

out = sys.argv[1]
failures = []
def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)

# Parameters of mlp:784-32-18-10: one bucket (< 1 MiB); n % 3 == 2, so the ring's
# chunks at 3 ranks are (q, q + 1, q + 1) floats and rank 2 moves 4 bytes more than
# rank 0.
n = 784 * 32 + 32 + 32 * 18 + 18 + 18 * 10 + 10
M = 4 * n
rows = {r["cell"]: r for r in csv.DictReader(open(os.path.join(out, "summary.csv")))}

def rank_traffic(cell):
    """Per rank: (received, sent) of every step, from the rank's own records."""
    ranks = []
    d = os.path.join(out, "cells", cell)
    r = 0
    while os.path.exists(os.path.join(d, "metrics.rank%d.jsonl" % r)):
        steps = [json.loads(l) for l in open(os.path.join(d, "metrics.rank%d.jsonl" % r)) if l.strip()]
        ranks.append([(s["bytes_received"], s["bytes_sent"]) for s in steps])
        r += 1
    return ranks

def check(cell, workers, expected_per_rank):
    row = rows.get(cell)
    if row is None or row["status"] != "ok":
        fail("%s: no ok row in summary.csv: %s" % (cell, row))
        return
    ranks = rank_traffic(cell)
    if len(ranks) != workers:
        fail("%s: %d ranks' records, expected %d" % (cell, len(ranks), workers))
        return
    for r, steps in enumerate(ranks):
        if not steps:
            fail("%s: rank %d wrote no steps" % (cell, r))
            return
        # The same buckets every step: the counts must not vary.
        if len(set(steps)) != 1:
            fail("%s: rank %d's per-step bytes vary: %s" % (cell, r, sorted(set(steps))))
        if steps[0] != expected_per_rank[r]:
            fail("%s: rank %d counted %s (in, out), the algorithm moves %s"
                 % (cell, r, steps[0], expected_per_rank[r]))
    busiest = max((s[0] for s in ranks), key=lambda io: io[0] + io[1])
    summary = (float(row["busiest_bytes_in"]), float(row["busiest_bytes_out"]))
    if summary != (float(busiest[0]), float(busiest[1])):
        fail("%s: summary's busiest (in, out) = %s, the ranks' own counters say %s"
             % (cell, summary, busiest))
    print("%s: busiest (in, out) = %s, per rank %s" % (cell, summary, [s[0] for s in ranks]))

# Recursive doubling at 4 ranks: 2 M each way on every rank.
check("ddp-n4-r0", 4, [(2 * M, 2 * M)] * 4)
# Recursive doubling at 3 ranks: rank 0 also takes rank 2's fold-in (M) and hands the
# result back (M); ranks 1 and 2 move M each way.
check("ddp-n3-r0", 3, [(2 * M, 2 * M), (M, M), (M, M)])
# Ring at 3 ranks, chunks c = [n c / 3, n (c + 1) / 3): rank r sends all chunks but r + 1
# and r + 2 once each, receives all but r and r + 1.
c = [n * (k + 1) // 3 - n * k // 3 for k in range(3)]
ring = [(4 * (2 * n - c[r] - c[(r + 1) % 3]), 4 * (2 * n - c[(r + 1) % 3] - c[(r + 2) % 3]))
        for r in range(3)]
if sum(ring[2]) <= sum(ring[0]):
    fail("test set-up: rank 0 should not be the ring's busiest here: %s" % ring)
check("ddp-ring-n3-r0", 3, ring)
sys.exit(1 if failures else 0)
PY
