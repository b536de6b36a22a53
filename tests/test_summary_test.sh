#!/usr/bin/env bash
# scripts/test_summary.sh on a made-up `bazel test` output and test logs: a passed target
# that printed "SKIPPED: ..." (all of it or a part) or whose every GoogleTest case
# skipped is counted as skipped with its reason; one with some cases skipped, a cached
# one and one without a log stay passed; FAILED, TIMEOUT and NO STATUS are failed;
# Bazel's own "SKIPPED" (a target incompatible with the configuration) is no result; a
# reason holding a status word (FAILED_PRECONDITION) counts once; result lines with a
# "(...)" note (--config=cuda, scripts/fuzz.sh) count like the others.
set -uo pipefail
SUMMARY="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
# shellcheck source=tests/test_lib.sh
source "$(dirname "$0")/test_lib.sh"  # fail
L="$T/testlogs"

log() {  # log PACKAGE/NAME LINES...: a test.log
  mkdir -p "$L/$1"
  printf '%s\n' "${@:2}" >"$L/$1/test.log"
}
log tests/whole_test 'Executing tests from //tests:whole_test' \
  'SKIPPED: torchrun / python3-torch not installed (scripts/setup.sh installs python3-torch)'
log tests/part_test 'ok   one' 'SKIPPED: the viewer part: chromium is not installed' 'PASS'
log tests/plain_test 'ok   one' 'PASS'
log top_test 'PASS'
log common/gpu_test '[ RUN      ] GpuTest.One' 'common/gpu_test.cc:12: Skipped' \
  'no CUDA GPU: FAILED_PRECONDITION: no usable GPU' '[  SKIPPED ] GpuTest.One (0 ms)' \
  '[==========] 1 test from 1 test suite ran. (0 ms total)' '[  PASSED  ] 0 tests.' \
  '[  SKIPPED ] 1 test, listed below:' '[  SKIPPED ] GpuTest.One'
log ddp_ring/pair_test '[==========] 3 tests from 1 test suite ran. (0 ms total)' \
  '[  PASSED  ] 2 tests.' '[  SKIPPED ] 1 test, listed below:' '[  SKIPPED ] PairTest.OnGpu'

cat >"$T/bazel.out" <<'OUT'
INFO: Build completed successfully, 12 total actions
//common:cuda_check_test                                                SKIPPED
//tests:whole_test                                                       PASSED in 0.4s
//tests:part_test                                                        PASSED in 12.1s
//tests:plain_test                                              (cached) PASSED in 3.0s
//:top_test                                                              PASSED in 1.0s
//common:gpu_test (--config=cuda)                                        PASSED in 0.1s
//ddp_ring:pair_test                                                     PASSED in 0.2s
//tests:no_log_test                                                      PASSED in 1.0s
//tests:failed_test                                                      FAILED in 2.0s
  /root/.cache/bazel/x/testlogs/tests/failed_test/test.log
//tests:slow_test                                                       TIMEOUT in 300.0s
//tests:lost_test                                                     NO STATUS
Executed 10 out of 11 tests: 7 tests pass and 3 fail locally.
OUT
"$SUMMARY" mark "$L" <"$T/bazel.out" >"$T/marked.out" || fail "mark exited $?"
[ "$(wc -l <"$T/marked.out")" -eq "$(wc -l <"$T/bazel.out")" ] || fail "mark changed the number of lines"
expect_line() {  # expect_line LINE: marked.out holds LINE
  grep -qxF -- "$1" "$T/marked.out" || fail "no line '$1' in: $(cat "$T/marked.out")"
}
expect_line '//tests:whole_test                                                       SKIPPED in 0.4s: torchrun / python3-torch not installed (scripts/setup.sh installs python3-torch)'
expect_line '//tests:part_test                                                        SKIPPED in 12.1s: the viewer part: chromium is not installed'
expect_line '//common:gpu_test (--config=cuda)                                        SKIPPED in 0.1s: every case skipped: no CUDA GPU: FAILED_PRECONDITION: no usable GPU'
for kept in '//tests:plain_test ' '//:top_test ' '//ddp_ring:pair_test ' '//tests:no_log_test ' \
            '//common:cuda_check_test ' '//tests:failed_test ' 'Executed 10'; do
  [ "$(grep -F -- "$kept" "$T/marked.out")" = "$(grep -F -- "$kept" "$T/bazel.out")" ] || fail "mark changed the line of $kept"
done

printf '%s\n' '//tests/fuzz:idx_fuzzer (scripts/fuzz.sh, 20 s: 267378 runs, 12732 exec/s) PASSED' \
  '//tests/fuzz:spec_fuzzer (scripts/fuzz.sh, 20 s: 5 runs, 1 exec/s) FAILED' \
  '//:ringside (bazel build --config=cuda) SKIPPED: no CUDA toolkit at /usr/local/cuda/include (docs/build.md)' \
  >"$T/more.out"
"$SUMMARY" count "$T/marked.out" "$T/more.out" >"$T/summary.out" || fail "count exited $?"
cat "$T/summary.out"
[ "$(tail -n 1 "$T/summary.out")" = "tests: 5 passed, 4 failed, 4 skipped" ] || fail "summary line: $(tail -n 1 "$T/summary.out")"
for why in '  //tests:whole_test: torchrun / python3-torch not installed (scripts/setup.sh installs python3-torch)' \
           '  //tests:part_test: the viewer part: chromium is not installed' \
           '  //common:gpu_test (--config=cuda): every case skipped: no CUDA GPU: FAILED_PRECONDITION: no usable GPU' \
           '  //:ringside (bazel build --config=cuda): no CUDA toolkit at /usr/local/cuda/include (docs/build.md)'; do
  grep -qxF -- "$why" "$T/summary.out" || fail "the summary does not list: $why"
done

# Nothing skipped: the line still says so.
printf '%s\n' '//:a_test   PASSED in 1.0s' >"$T/one.out"
[ "$("$SUMMARY" count "$T/one.out")" = "tests: 1 passed, 0 failed, 0 skipped" ] || fail "one passed: $("$SUMMARY" count "$T/one.out")"

# GPU-only tests listed as not run (scripts/test.sh without a GPU): neither passed nor
# skipped, counted apart on the last line; a test named NOT RUN only in its text is not.
printf '%s\n' '//:a_test   PASSED in 1.0s' \
  '//common:cuda_ops_test (--config=cuda) NOT RUN: no GPU here (nvidia-smi -L found none)' \
  '//common:cuda_ops_test NOT RUN: no GPU here (nvidia-smi -L found none)' \
  'INFO: //tests:x NOT RUN: said in passing' >"$T/gpu.out"
[ "$("$SUMMARY" count "$T/gpu.out")" = "tests: 1 passed, 0 failed, 0 skipped; 2 GPU-only not run (no GPU; scripts/gpu_check.sh runs them)" ] \
  || fail "GPU-only not run: $("$SUMMARY" count "$T/gpu.out")"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
