#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs `ringside demo`:
# single process vs a parameter server with one master vs DDP, on 1, 2 and 4 workers,
# training the Fashion-MNIST MLP. Prints the summary table and the report's path
# (runs/demo/report.html). Extra arguments go to `ringside demo` (e.g. --out=DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
bazel build //:ringside
exec bazel-bin/experiments/ringside demo --out=runs/demo "$@"
