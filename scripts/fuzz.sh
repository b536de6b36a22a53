#!/usr/bin/env bash
# Fuzzes the parsers of hostile input for a bounded time: builds the libFuzzer targets of
# tests/fuzz/ (bazel build --config=fuzz: clang, ASan, UBSan; .bazelrc) and runs each
# for --seconds=N (default 20), seeded with tests/fuzz/corpus/<target>/ and
# tests/fuzz/regressions/<target>/, --jobs=J targets at a time (default: one per core,
# nproc; each fuzzer is one process on one core, so side by side each still gets its N
# seconds of a core). Prints, per target in order, the executions, executions per
# second and whether a crash, hang (over --timeout_s, default 10) or allocation over
# --rss_mb (default 2048) was found, as one result line in the form the suite counts:
#   //tests/fuzz:idx_fuzzer (scripts/fuzz.sh, 20 s: 412345 runs, 20617 exec/s) PASSED
# A crashing input is saved under the work directory (--dir=DIR, default
# /tmp/ringside-fuzz; also the grown corpus, kept between runs) and its path printed;
# copy it into tests/fuzz/regressions/<target>/ once fixed, so that
# //tests/fuzz:<target>_regression_test replays it in every build.
# Usage: scripts/fuzz.sh [--seconds=N] [--timeout_s=S] [--rss_mb=M] [--dir=DIR]
#                        [--jobs=J] [--targets=idx,checkpoint,...] [bazel flags...]
# Exit status: 0 when no target crashed; 1 on a crash or a failed build; 2 for bad
# arguments.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=20
timeout_s=10
rss_mb=2048
dir=/tmp/ringside-fuzz
jobs=$(nproc)
targets=(idx checkpoint wire_chunk ps_tcp spec)
bazel_flags=()
for arg in "$@"; do
  case "$arg" in
    --seconds=*) seconds="${arg#*=}" ;;
    --timeout_s=*) timeout_s="${arg#*=}" ;;
    --rss_mb=*) rss_mb="${arg#*=}" ;;
    --dir=*) dir="${arg#*=}" ;;
    --jobs=*) jobs="${arg#*=}" ;;
    --targets=*) IFS=, read -r -a targets <<<"${arg#*=}" ;;
    # Flags of `bazel test` that `bazel build` refuses (scripts/test.sh passes its own).
    --test_*|--notest_*|--runs_per_test=*|--flaky_test_attempts=*|--cache_test_results*|--nocache_test_results) ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) bazel_flags+=("$arg") ;;
  esac
done
for n in "$seconds" "$timeout_s" "$rss_mb" "$jobs"; do
  if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz: error: --seconds, --timeout_s, --rss_mb and --jobs take positive integers, got '$n'" >&2
    exit 2
  fi
done
if ! command -v clang >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz: error: needs clang and libFuzzer (Debian packages clang, libclang-rt-14-dev: scripts/setup.sh)" >&2
  exit 1
fi

labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:${t}_fuzzer"); done
if ! bazel build --config=fuzz "${bazel_flags[@]}" "${labels[@]}"; then
  for l in "${labels[@]}"; do echo "$l (scripts/fuzz.sh: bazel build --config=fuzz) FAILED"; done
  exit 1
fi
bin="$(bazel info --config=fuzz "${bazel_flags[@]}" bazel-bin 2>/dev/null)/tests/fuzz"

# fuzz_one TARGET: runs one fuzzer; its result line (and, on a finding, where it is) goes
# to $dir/TARGET/result.txt; returns 1 on a finding.
fuzz_one() {
  local t=$1 work log seeds before status runs speed summary found
  work="$dir/$t"
  mkdir -p "$work/corpus" "$work/crashes"
  log="$work/last_run.log"
  seeds=("tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && seeds+=("tests/fuzz/regressions/$t")
  before=$(ls "$work/crashes" | wc -l)
  # The first directory collects what the run finds new (kept between runs); the
  # seeds are only read. -timeout: one input longer than that is a hang;
  # -rss_limit_mb / -malloc_limit_mb: more memory than that is a finding too.
  "$bin/${t}_fuzzer" -max_total_time="$seconds" -timeout="$timeout_s" \
    -rss_limit_mb="$rss_mb" -malloc_limit_mb="$rss_mb" -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$work/crashes/" \
    "$work/corpus" "${seeds[@]}" >"$log" 2>&1
  status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  summary="scripts/fuzz.sh, $seconds s: ${runs:-?} runs, ${speed:-?} exec/s"
  found=$(ls -t "$work/crashes" | head -n $(( $(ls "$work/crashes" | wc -l) - before )) 2>/dev/null | head -n 1)
  if [ "$status" -eq 0 ] && [ -z "$found" ]; then
    echo "//tests/fuzz:${t}_fuzzer ($summary) PASSED" >"$work/result.txt"
    return 0
  fi
  {
    echo "//tests/fuzz:${t}_fuzzer ($summary) FAILED"
    grep -m 3 -E '^==[0-9]+==ERROR|runtime error|fuzz invariant broken|^SUMMARY' "$log" | sed 's/^/  /'
    if [ -n "$found" ]; then
      echo "  input saved as $work/crashes/$found (replay: $bin/${t}_fuzzer $work/crashes/$found)"
    fi
    echo "  log: $log"
  } >"$work/result.txt"
  return 1
}

# --jobs targets at a time; the result lines in the order of --targets.
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  rm -f "$dir/$t/result.txt"
  fuzz_one "$t" &
done
wait
rc=0
for t in "${targets[@]}"; do
  if [ -s "$dir/$t/result.txt" ]; then cat "$dir/$t/result.txt"; else
    echo "//tests/fuzz:${t}_fuzzer (scripts/fuzz.sh: no result) FAILED"
  fi
  head -n 1 "$dir/$t/result.txt" 2>/dev/null | grep -q ' PASSED$' || rc=1
done
exit "$rc"
