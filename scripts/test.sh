#!/usr/bin/env bash
# The README's test command: installs what is missing, then builds and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
bazel test //... "$@"
