#!/usr/bin/env bash
# The suite's result lines and its summary, for scripts/test.sh (docs/testing.md).
#
#   test_summary.sh mark TESTLOGS    copies stdin (the output of `bazel test`) to stdout,
#                                    rewriting the result line of each target that passed
#                                    but skipped into "LABEL ... SKIPPED in Ns: REASON"
#   test_summary.sh count LOG...     the summary of result lines: the skipped targets with
#                                    their reasons, then "tests: N passed, M failed, K skipped"
#                                    (and "; L GPU-only not run (...)" where scripts/test.sh
#                                    listed GPU-only tests as "LABEL NOT RUN: REASON")
#
# Skipped, never passed. Bazel 4 has no skip status, so a test whose precondition is
# missing passes (exit 0) and says so in its TESTLOGS/<package>/<name>/test.log:
#   - a shell test prints a line "SKIPPED: REASON" (tests/test_lib.sh: skip, skip_part);
#   - a GoogleTest binary whose every case skipped (GTEST_SKIP) ends with
#     "[  PASSED  ] 0 tests." and "[  SKIPPED ] N tests, listed below:"; its reason is
#     the first skip message. A binary with some cases skipped and others passed counts
#     as passed (its log lists the skipped cases): on a machine with a GPU or without,
#     one of each pair of device cases always skips.
# Run `mark` right after each `bazel test`: a later configuration (--config=cuda)
# writes the same test.log files again.
# Result lines counted: "//LABEL ... PASSED", "//LABEL ... SKIPPED in" or
# "//LABEL ... SKIPPED:" (ours), "//LABEL ... FAILED|TIMEOUT|NO STATUS|INCOMPLETE".
# Bazel's own "//LABEL  SKIPPED" (a target incompatible with the configuration, e.g. the
# cuda_only() tests of the default build) is not a result: scripts/test.sh runs those
# under --config=cuda, or reports them skipped where there is no CUDA toolkit.
set -uo pipefail

# skip_reason TEST_LOG: prints why the test skipped and returns 0, or returns 1 when it
# did not skip.
skip_reason() {
  local log=$1 line
  [ -f "$log" ] || return 1
  line=$(grep -m 1 '^SKIPPED: ' "$log") && { echo "${line#SKIPPED: }"; return 0; }
  if grep -q '^\[  PASSED  \] 0 tests\.$' "$log" && grep -qE '^\[  SKIPPED \] [0-9]+ tests?, listed below:$' "$log"; then
    line=$(grep -m 1 -A 1 ': Skipped$' "$log" | sed -n 2p)
    echo "every case skipped${line:+: $line}"
    return 0
  fi
  return 1
}

# mark TESTLOGS: stdin to stdout, PASSED lines of skipped targets rewritten.
mark() {
  local testlogs=$1 line path reason rest
  while IFS= read -r line; do
    if [[ "$line" =~ ^//([^ :]*):([^ ]+)\ .*PASSED ]]; then
      path="${BASH_REMATCH[1]:+${BASH_REMATCH[1]}/}${BASH_REMATCH[2]}"
      if reason=$(skip_reason "$testlogs/$path/test.log"); then
        rest=${line#*PASSED}
        line="${line%%PASSED*}SKIPPED${rest}: $reason"
      fi
    fi
    printf '%s\n' "$line"
  done
}

# RESULT: a result line; its groups: 1 the label (with its "(...)" note, 2), 4 the status,
# 6 ": REASON" on our lines of skipped targets (7 the reason).
RESULT='^(//[^ ]+( \([^)]*\))?) +(\(cached\) )?(PASSED|FAILED|TIMEOUT|NO STATUS|INCOMPLETE|SKIPPED)( in [0-9.]+s)?(: (.*))?'

# count LOG...: the skipped targets and the summary line.
count() {
  local statuses passed failed skipped not_run
  statuses=$(cat "$@" | sed -nE "s#${RESULT}\$#\4\6#p" | sed -E 's/^(SKIPPED): .*/\1:/')
  passed=$(grep -c '^PASSED' <<<"$statuses")
  failed=$(grep -cE '^(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' <<<"$statuses")
  skipped=$(grep -c '^SKIPPED:' <<<"$statuses")
  if [ "$skipped" -gt 0 ]; then
    echo "skipped (a precondition is missing here; docs/testing.md says which test needs what):"
    cat "$@" | sed -nE "s#${RESULT}\$#\4 \1: \7#p" | sed -n 's/^SKIPPED /  /p' | grep -v ': $'
  fi
  # The GPU-only tests of a run without a GPU (scripts/test.sh): neither passed nor
  # skipped, counted apart on the same line.
  not_run=$(cat "$@" | grep -cE '^//[^ ]+( \([^)]*\))? NOT RUN: ')
  local gpu=""
  [ "$not_run" -eq 0 ] || gpu="; $not_run GPU-only not run (no GPU; scripts/gpu_check.sh runs them)"
  echo "tests: $passed passed, $failed failed, $skipped skipped$gpu"
}

case "${1:-}" in
  mark) [ $# -eq 2 ] || { echo "usage: $0 mark TESTLOGS" >&2; exit 2; }; mark "$2" ;;
  count) [ $# -ge 2 ] || { echo "usage: $0 count LOG..." >&2; exit 2; }; shift; count "$@" ;;
  *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
