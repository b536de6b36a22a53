#!/usr/bin/env bash
# All-reduce sweep (1 KB .. 64 MB, float32 sum), nccl-tests style, side by side:
# ringside's Gloo process group (ring, halving-doubling, recursive doubling) and PyTorch's gloo all_reduce, for
# each world size given (default 2 and 4), ranks on this machine.
#   scripts/bench_allreduce.sh [WORLD...]
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //:ringside >/dev/null 2>&1
R=bazel-bin/experiments/ringside
for w in "${@:-2 4}"; do
  for algo in ring halving-doubling recursive-doubling; do
    "$R" bench allreduce --workers="$w" --allreduce="$algo" | sed -n 's/^\[rank 0\] //p'
  done
  "$R" launch --nproc_per_node="$w" --master_port=0 -- /usr/bin/python3 \
    experiments/bench/torch_allreduce_bench.py | sed -n 's/^\[rank 0\] //p'
done
