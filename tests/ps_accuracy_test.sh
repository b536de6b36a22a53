#!/usr/bin/env bash
# Parameter server on the real Fashion-MNIST: 4 workers, 1 shard, the MLP
# mlp:784-256-256-10, 3 epochs (per-worker batch 128 unless a run's flags say
# otherwise), OpenBLAS on 1 thread, under
# asynchronous (ASP) and bounded-staleness (SSP) consistency. Each run must end with
# "test accuracy: X", and the better of its last two epoch-end test accuracies must be
# >= MIN: asynchronous runs are not reproducible (the updates' order follows the
# machine's load), and under load one epoch-end evaluation was seen to dip 1.3 points
# below its neighbours (0.862, then 0.849) while typical runs end at 0.86-0.87.
#   ps_accuracy_test.sh RINGSIDE MIN --sync=MODE FLAGS... [--sync=MODE FLAGS...]...
# Each --sync=MODE starts one run (--ps_sync=MODE) with the flags that follow it
# (the optimizer settings tuned for that mode; --epochs=E there overrides the 3).
set -uo pipefail
RINGSIDE="$1"; MIN="$2"; shift 2
T="${TEST_TMPDIR:-$(mktemp -d)}"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "FAIL: Fashion-MNIST is missing; run scripts/setup.sh"; exit 1
fi
issue=(--strategy=ps --dataset=fashion-mnist --model=mlp:784-256-256-10 --workers=4
       --ps_shards=1 --epochs=3 --batch=128 --threads=1 --seed=1 --timeout_s=60)
modes=(); flags=()
for a in "$@"; do
  case "$a" in
    --sync=*) modes+=("${a#--sync=}"); flags+=("") ;;
    *) [ "${#modes[@]}" -gt 0 ] || { echo "FAIL: '$a' before any --sync=MODE"; exit 1; }
       flags[$((${#modes[@]} - 1))]+=" $a" ;;
  esac
done
[ "${#modes[@]}" -gt 0 ] || { echo "FAIL: no --sync=MODE given"; exit 1; }
failures=0
for i in "${!modes[@]}"; do
  mode=${modes[$i]}; name=run$i
  read -r -a extra <<<"${flags[$i]}"
  start=$(date +%s)
  timeout 900 "$RINGSIDE" train "${issue[@]}" --ps_sync="$mode" "${extra[@]}" --out="$T/$name" \
    >"$T/$name.log" 2>&1
  rc=$?
  grep 'done  train loss' "$T/$name.log" || true
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: --ps_sync=$mode${flags[$i]}: exited $rc"; tail -n 5 "$T/$name.log"
    failures=$((failures + 1)); continue
  fi
  acc=$(sed -n 's/^\[worker 0\] test accuracy: //p' "$T/$name.log")
  if [ -z "$acc" ]; then
    echo "FAIL: --ps_sync=$mode: no 'test accuracy:' line"; tail -n 5 "$T/$name.log"
    failures=$((failures + 1))
    continue
  fi
  best=$(sed -n 's/^\[worker 0\] epoch .* test accuracy \([0-9.]*\)$/\1/p' "$T/$name.log" | tail -n 2 | sort -g | tail -n 1)
  if [ -z "$best" ]; then
    echo "FAIL: --ps_sync=$mode: no epoch-end test accuracy"; failures=$((failures + 1))
  elif awk -v a="$best" -v m="$MIN" 'BEGIN { exit !(a >= m) }'; then
    echo "ok   --ps_sync=$mode${flags[$i]}: test accuracy $acc at the end, best of the last two epochs $best >= $MIN ($(( $(date +%s) - start )) s)"
  else
    echo "FAIL: --ps_sync=$mode${flags[$i]}: best of the last two epochs' test accuracy $best < $MIN (end: $acc)"
    failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
