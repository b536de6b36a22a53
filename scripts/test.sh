#!/usr/bin/env bash
# The README's test command: installs what is missing, then builds and runs every test
# and ends with one summary line "tests: N passed, M failed, K skipped". Exits non-zero
# if anything failed. docs/testing.md says where the time goes and which test needs
# what; a test that cannot run here (a precondition is missing) is counted as skipped,
# never as passed (scripts/test_summary.sh).
# Phases, in this order:
#   1. where the CUDA toolkit is at /usr/local/cuda: the CUDA configuration
#      (--config=cuda: its tests and the ringside binary; docs/build.md). First, because
#      both configurations write to bazel-out/k8-opt: the default build after it leaves
#      the default ringside in place without a second rebuild of it.
#   2. bazel test //... but the tests tagged side_by_side (exclusive ones last, alone).
#   3. the side_by_side tests (they compare results, or wait on their own processes
#      with loose bounds; tests/BUILD), SIDE_BY_SIDE at a time (default: cores + 1).
#   4. hostile input: each fuzz target for 20 s, one per core (scripts/fuzz.sh).
# Extra arguments go to every bazel command (and to scripts/fuzz.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
rc=0

# run_tests NOTE BAZEL_TEST_ARGS...: one `bazel test`; its result lines labelled
# "(NOTE)" when NOTE is given (one target can pass in two configurations), the passed
# targets that skipped marked so (their test.log says it, and the next configuration
# overwrites it), all of it kept in the log for the summary.
run_tests() {
  local note=$1 status
  shift
  bazel test "$@" 2>&1 | sed -E "${note:+s#^(//[^ ]+) #\\1 ($note) #}" \
    | scripts/test_summary.sh mark bazel-testlogs | tee -a "$log"
  status=${PIPESTATUS[0]}
  # 4: the build passed and no test matched (an empty tag filter).
  [ "$status" -eq 0 ] || [ "$status" -eq 4 ] || rc=1
}

# The GPU-only tests (tagged gpu: every case needs a GPU) run where a GPU is present.
# Elsewhere they are built, so they still compile and link, and listed as not run: the
# GPU check (scripts/gpu_check.sh) runs them on a GPU machine. Neither passed nor
# skipped: they are not part of a run without a GPU.
GPU_TESTS=(//common:cuda_ops_test //common:cuda_model_test)
if [ -e /dev/nvidiactl ] && nvidia-smi -L >/dev/null 2>&1; then
  no_gpu=""
else
  no_gpu="no GPU here (nvidia-smi -L found none); scripts/gpu_check.sh runs it on one"
fi
gpu_filter=${no_gpu:+-gpu}
# not_run NOTE: the GPU-only tests' lines for a configuration without a GPU.
not_run() {
  [ -n "$no_gpu" ] || return 0
  local t
  for t in "${GPU_TESTS[@]}"; do echo "$t${1:+ ($1)} NOT RUN: $no_gpu"; done | tee -a "$log"
}

# 1. The CUDA configuration: what the default build leaves out (cuda_only() targets),
# and the factory and binary with the NCCL backend linked in.
CUDA_TESTS=(//common:cuda_check_test "${GPU_TESTS[@]}"
            //common:ops_factory_test //ddp_ring:nccl_process_group_test
            //ddp_ring:process_group_factory_test)
if [ -d /usr/local/cuda/include ]; then
  run_tests --config=cuda --config=cuda --test_tag_filters="$gpu_filter" "${CUDA_TESTS[@]}" "$@"
  not_run --config=cuda
  if bazel build --config=cuda //:ringside "$@"; then
    echo "//:ringside (bazel build --config=cuda) PASSED" | tee -a "$log"
  else
    echo "//:ringside (bazel build --config=cuda) FAILED" | tee -a "$log"
    rc=1
  fi
else
  why="no CUDA toolkit at /usr/local/cuda/include (docs/build.md)"
  {
    for t in "${CUDA_TESTS[@]}"; do echo "$t (--config=cuda) SKIPPED: $why"; done
    echo "//:ringside (bazel build --config=cuda) SKIPPED: $why"
  } | tee -a "$log"
fi

# 2. and 3. The default configuration: everything else (exclusive tests at the end, one
# at a time), then the tests tagged side_by_side, several at once.
# (--jobs too: Bazel runs no more tests at once than --jobs allows actions; everything
# is built by then.)
side_by_side=${SIDE_BY_SIDE:-$(($(nproc) + 1))}
run_tests "" //... --test_tag_filters=-side_by_side${gpu_filter:+,$gpu_filter} "$@"
not_run ""
run_tests "" //... --test_tag_filters=side_by_side --local_test_jobs="$side_by_side" \
  --jobs="$side_by_side" "$@"

# 4. Hostile input (issue #23): each fuzz target for a bounded time (scripts/fuzz.sh:
# 20 s each, one per core); its result lines are counted below like the tests'.
scripts/fuzz.sh --seconds=20 "$@" 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1

scripts/test_summary.sh count "$log"
exit "$rc"
