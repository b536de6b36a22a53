#!/usr/bin/env bash
# The GPU check's stand-in mode (scripts/gpu_check.sh --stand-in: the CPU stands in for
# the GPU, cuda -> cpu, nccl -> gloo) runs the suite's ddp_equivalence_test from a
# bundle-shaped folder (bin/ringside, gpu_check.sh, sh/ with what `gpu_check.sh --files`
# lists): clean, it says STAND-IN on its first line and passes (exit 0); with a planted
# fault (RINGSIDE_GPU_CHECK_PLANT=ddp_lr: every DDP run trains at another learning rate)
# it fails (exit 1), its verdict naming the test.
set -uo pipefail
RINGSIDE="$1"; CHECK="$2"; TESTS=$(dirname "$3")
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail

mkdir -p "$T/bundle/bin" "$T/bundle/sh"
ln -s "$(realpath "$RINGSIDE")" "$T/bundle/bin/ringside"
cp "$CHECK" "$T/bundle/gpu_check.sh"
for f in $(bash "$CHECK" --files); do
  [ -e "$TESTS/$f" ] && ln -s "$(realpath "$TESTS/$f")" "$T/bundle/sh/$f"
done

bash "$T/bundle/gpu_check.sh" --stand-in --only ddp_equivalence_test --out "$T/clean" >"$T/clean.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { fail "clean: exit status $rc, expected 0"; cat "$T/clean.log"; }
head -n 1 "$T/clean.log" | grep -q '^gpu_check: STAND-IN mode: the CPU stands in for the GPU' \
  || fail "clean: the first line does not say stand-in: $(head -n 1 "$T/clean.log")"
grep -q '^| ddp_equivalence_test | PASS |' "$T/clean/gpu_report.md" \
  || fail "clean: the report has no PASS row for ddp_equivalence_test"

RINGSIDE_GPU_CHECK_PLANT=ddp_lr bash "$T/bundle/gpu_check.sh" --stand-in --only ddp_equivalence_test \
  --out "$T/planted" >"$T/planted.log" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { fail "planted: exit status $rc, expected 1"; cat "$T/planted.log"; }
grep -q '^---- FAIL: ddp_equivalence_test FAIL' "$T/planted.log" \
  || { fail "planted: the verdict does not name ddp_equivalence_test"; tail -n 3 "$T/planted.log"; }
grep -q '^| ddp_equivalence_test | FAIL |' "$T/planted/gpu_report.md" \
  || fail "planted: the report has no FAIL row for ddp_equivalence_test"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
