#!/usr/bin/env bash
# Training-step benchmark, ringside vs PyTorch (Debian's python3-torch), side by side:
# for each configuration, ROUNDS alternating runs of both, 1 thread each; prints every
# run's median step time. Quote the medians of the rounds (docs/benchmarks.md).
#   scripts/bench_step.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"
bazel build //:ringside >/dev/null 2>&1
R=bazel-bin/experiments/ringside
for cfg in "mlp:784-512-512-10 128" "mlp:784-512-512-10 512" "cnn:lenet 64"; do
  set -- $cfg
  echo "== $1 batch $2, 1 thread"
  for r in $(seq "$ROUNDS"); do
    "$R" bench step --model="$1" --batch="$2" --threads=1 --steps=200 | sed -n '2,3p'
    /usr/bin/python3 experiments/bench/torch_step_bench.py --model="$1" --batch="$2" --threads=1 --steps=200
  done
done
