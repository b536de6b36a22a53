#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and trains the MLP on
# Fashion-MNIST on one process, printing the test accuracy. Extra arguments are passed
# to `ringside train` (e.g. --model=cnn:lenet --batch=64 --lr=0.05).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
bazel build //:ringside
exec bazel-bin/experiments/ringside train --strategy=single --model=mlp:784-256-256-10 \
  --dataset=fashion-mnist --epochs=5 --batch=128 --lr=0.02 --momentum=0.9 --seed=1 \
  --out=runs/demo "$@"
