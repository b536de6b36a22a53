#!/usr/bin/env bash
# DDP throughput, ringside vs PyTorch DDP (Debian's python3-torch, gloo), side by side:
# mlp:784-512-512-10 on Fashion-MNIST, batch 128 per rank, 1 thread per rank, WORLD
# ranks on this machine; ROUNDS alternating runs, each of both bucket layouts on both
# sides (PyTorch's default, a 1 MB first bucket then 25 MB ones, and one 25 MB bucket).
# ringside is timed over steps 20..219 from its per-step records (rank 0), PyTorch over
# 200 steps after 20 warm-up steps.
#   scripts/bench_ddp.sh [ROUNDS] [WORLD]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"; WORLD="${2:-2}"
bazel build //:ringside >/dev/null 2>&1
R=bazel-bin/experiments/ringside
out=$(mktemp -d)
summarise() {  # DIR LABEL
  /usr/bin/python3 - "$1" "$2" "$WORLD" <<'PY'
import json, sys
d, label, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
recs = [json.loads(l) for l in open(d + "/metrics.rank0.jsonl")][20:220]
ms = sum(r["step_ms"] for r in recs) / len(recs)
avg = lambda k: sum(r[k] for r in recs) / len(recs)
print("ringside %-28s %6.0f samples/s (%.2f ms/step: forward %.2f, backward %.2f, comm %.2f, update %.2f)"
      % (label, world * 128 / ms * 1e3, ms, avg("forward_ms"), avg("backward_ms"), avg("comm_ms"), avg("update_ms")))
PY
}
for r in $(seq "$ROUNDS"); do
  echo "== round $r"
  common=(train --strategy=ddp --workers="$WORLD" --model=mlp:784-512-512-10 --batch=128 --threads=1 --steps=220 --dataset=fashion-mnist)
  "$R" "${common[@]}" --out="$out/a" >/dev/null 2>&1 && summarise "$out/a" "(buckets 1 MB + 25 MB)"
  "$R" "${common[@]}" --first_bucket_mb=25 --out="$out/b" >/dev/null 2>&1 && summarise "$out/b" "(one 25 MB bucket)"
  "$R" launch --nproc_per_node="$WORLD" --master_port=0 -- /usr/bin/python3 experiments/bench/torch_ddp_bench.py | sed -n 's/^\[rank 0\] //p'
  "$R" launch --nproc_per_node="$WORLD" --master_port=0 -- /usr/bin/python3 experiments/bench/torch_ddp_bench.py --first_bucket_mb=25 | sed -n 's/^\[rank 0\] //p'
done
rm -rf "$out"
