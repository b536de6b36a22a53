#!/usr/bin/env bash
# The train loss a job prints at each epoch's end is the global batch's: DDP and a
# parameter server (BSP, one master and two shards) with N = 2 and 4 workers of batch b,
# over 2 epochs, print the same train loss as one process with batch N*b, within 1e-4
# (printed to 4 decimals: at most one unit of the last digit apart). It is the last
# step's loss summed over every worker's samples and divided by their count, reduced
# with the test evaluation; before, rank 0 printed its own shard's loss.
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
B=8
common=(--model=mlp:784-48-24-10 --dataset=synthetic:train=960,test=240,seed=5
        --epochs=2 --lr=0.05 --momentum=0.9 --seed=3 --threads=1 --eval_batch=240)
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, the device and backend

# losses LOG: "EPOCH LOSS" for every epoch line in LOG, whoever printed it.
losses() {
  sed -nE 's#^(\[[a-z]+ [0-9]+\] )?epoch ([0-9]+)/[0-9]+ done  train loss ([0-9.]+) .*#\2 \3#p' "$1"
}

# check NAME N LOG REFERENCE: the epoch lines in LOG (rank or worker 0 prints them; any
# other that did counts too) within 1e-4 of REFERENCE's.
check() {
  local name=$1 n=$2 log=$3 ref=$4 epoch want got lines
  for epoch in 1 2; do
    want=$(losses "$ref" | awk -v e="$epoch" '$1 == e { print $2 }')
    [ -n "$want" ] || { fail "single process, batch $((n * B)): no epoch $epoch line"; continue; }
    lines=$(losses "$log" | awk -v e="$epoch" '$1 == e { print $2 }')
    [ -n "$lines" ] || { fail "$name: no epoch $epoch line: $(grep 'epoch' "$log" | head -8)"; continue; }
    for got in $lines; do
      awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; exit !(d <= 1.0001e-4 && d >= -1.0001e-4) }' \
        || fail "$name: epoch $epoch train loss $got, the single process at batch $((n * B)) $want"
    done
    echo "$name: epoch $epoch train loss $(tr '\n' ' ' <<<"$lines")against $want"
  done
}

# run NAME N ARGS...: one job of N ranks or workers, then its epoch lines checked.
run() {
  local name=$1 n=$2 rc; shift 2
  timeout 180 "$RINGSIDE" train --workers="$n" --batch=$B --timeout_s=60 "${DEVICE_ARGS[@]}" \
    "${common[@]}" "$@" --out="$T/$name" >"$T/$name.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name exited $rc: $(tail -3 "$T/$name.log")"; return; fi
  check "$name" "$n" "$T/$name.log" "$T/single$n.log"
}

for N in 2 4; do
  timeout 120 "$RINGSIDE" train --strategy=single --batch=$((N * B)) "${DEVICE_ARGS[@]}" "${common[@]}" \
    --out="$T/single$N" >"$T/single$N.log" 2>&1 || { fail "single, batch $((N * B)), exited $?"; continue; }
  run "ddp$N" "$N" --strategy=ddp "${BACKEND_ARGS[@]}"
  run "ps$N-1" "$N" --strategy=ps --ps_shards=1
  run "ps$N-2" "$N" --strategy=ps --ps_shards=2
done

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
