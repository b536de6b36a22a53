#!/usr/bin/env bash
# The README's test command: installs what is missing, then builds and runs every test
# (bazel test //...), then, where the CUDA toolkit is at /usr/local/cuda, the CUDA
# configuration (--config=cuda: its tests and the ringside binary; docs/build.md), and
# ends with one summary line "tests: N passed, M failed" over both. Exits non-zero if
# anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
bazel test //... "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# The CUDA configuration: what the default build leaves out (cuda_only() targets), and
# the factory and binary with the NCCL backend linked in. Both configurations write to
# bazel-out/k8-opt, so the default ringside is rebuilt (relinked) at the end.
CUDA_TESTS=(//common:cuda_check_test //common:cuda_ops_test //common:cuda_model_test
            //common:ops_factory_test //ddp_ring:nccl_process_group_test
            //ddp_ring:process_group_factory_test)
if [ -d /usr/local/cuda/include ]; then
  # Result lines are labelled "(--config=cuda)": one target can pass in both.
  bazel test --config=cuda "${CUDA_TESTS[@]}" "$@" 2>&1 \
    | sed -E 's#^(//[^ ]+) #\1 (--config=cuda) #' | tee -a "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  if bazel build --config=cuda //:ringside; then
    echo "//:ringside (bazel build --config=cuda) PASSED" | tee -a "$log"
  else
    echo "//:ringside (bazel build --config=cuda) FAILED" | tee -a "$log"
    rc=1
  fi
  bazel build //:ringside || rc=1
else
  echo "test: note: no CUDA toolkit at /usr/local/cuda/include; the --config=cuda build was not checked"
fi

# Hostile input (issue #23): each fuzz target for a bounded time (scripts/fuzz.sh:
# 20 s each, about 1.5 minutes with the clang build from the cache); its result lines
# are counted below like the tests'.
scripts/fuzz.sh --seconds=20 "$@" 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1

passed=$(grep -cE '^//[^ ]+ .*PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ .*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' "$log")
echo "tests: $passed passed, $failed failed"
exit "$rc"
