#!/usr/bin/env bash
# What issue #23's checks cost in step time (docs/benchmarks.md, "What the trust checks
# cost"): the same DDP job (2 ranks, Gloo) and PS job (1 shard, 2 workers, launched,
# so with the generated token) run by two builds, alternating, ROUNDS times: BASE built
# without the checks (e.g. b8360d3) and NEW. Prints, per job and build, the median
# step_ms of rank / worker 0's records over steps 20-299 of every round pooled, and the
# median update_ms (DDP: the fused SGD pass that holds the non-finite flag), the
# shard's aggregate_ms (PS: holds its non-finite read of each pushed chunk) and
# update_ms, and each round's median step_ms (the noise).
# Usage: scripts/trust_cost.sh BASE_RINGSIDE NEW_RINGSIDE [ROUNDS]
set -euo pipefail
BASE=$1; NEW=$2; ROUNDS=${3:-4}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
job=(--model=mlp:784-512-512-10 --dataset=synthetic:train=40000,test=100 --batch=128
     --steps=300 --threads=1 --eval_batch=100)
for round in $(seq "$ROUNDS"); do
  for build in base new; do
    bin=$([ $build = base ] && echo "$BASE" || echo "$NEW")
    "$bin" train --strategy=ddp --workers=2 "${job[@]}" --out="$T/ddp.$build.$round" >/dev/null 2>&1
    "$bin" train --strategy=ps --workers=2 --ps_shards=1 "${job[@]}" --out="$T/ps.$build.$round" >/dev/null 2>&1
  done
done
python3 - "$T" "$ROUNDS" <<'PY'
import json, statistics, sys
t, rounds = sys.argv[1], int(sys.argv[2])
def pooled(kind, build, field):
    v = []
    for r in range(1, rounds + 1):
        recs = [json.loads(l) for l in open(f"{t}/{kind}.{build}.{r}/metrics.rank0.jsonl")]
        v += [x.get(field, 0.0) for x in recs if 20 <= x["step"] < 300]
    return statistics.median(v)
def shard(build, field):
    v = []
    for r in range(1, rounds + 1):
        recs = [json.loads(l) for l in open(f"{t}/ps.{build}.{r}/metrics.shard0.jsonl")]
        v += [x.get(field, 0.0) for x in recs if 20 <= x["step"] < 300]
    return statistics.median(v)
def per_round(kind, build):
    out = []
    for r in range(1, rounds + 1):
        recs = [json.loads(l) for l in open(f"{t}/{kind}.{build}.{r}/metrics.rank0.jsonl")]
        out.append(statistics.median([x["step_ms"] for x in recs if 20 <= x["step"] < 300]))
    return " ".join("%.2f" % m for m in out)
print("%-4s %10s %10s %8s %12s %12s" % ("job", "base ms", "new ms", "change", "base upd ms", "new upd ms"))
for kind in ("ddp", "ps"):
    b, n = pooled(kind, "base", "step_ms"), pooled(kind, "new", "step_ms")
    ub, un = pooled(kind, "base", "update_ms"), pooled(kind, "new", "update_ms")
    print("%-4s %10.2f %10.2f %+7.1f%% %12.3f %12.3f" % (kind, b, n, 100 * (n - b) / b, ub, un))
print("shard 0 (PS): aggregate_ms base %.3f new %.3f; update_ms base %.3f new %.3f" % (
    shard("base", "aggregate_ms"), shard("new", "aggregate_ms"),
    shard("base", "update_ms"), shard("new", "update_ms")))
for kind in ("ddp", "ps"):
    for build in ("base", "new"):
        print("%s %s per-round medians: %s" % (kind, build, per_round(kind, build)))
PY
