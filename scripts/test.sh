#!/usr/bin/env bash
# The README's test command: installs what is missing, then builds and runs every test
# (bazel test //...), and ends with one summary line "tests: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
bazel test //... "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
passed=$(grep -cE '^//[^ ]+ .*PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ .*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' "$log")
echo "tests: $passed passed, $failed failed"
exit "$rc"
