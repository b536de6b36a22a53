#!/usr/bin/env bash
# DDP with 2, 3 and 4 ranks (processes, through the launcher), per-rank batch b, SGD
# with momentum, 20 steps, ends with the same parameters as single-process training
# with batch N*b over the same samples, and as single-process gradient accumulation
# over N micro-batches of b: max relative difference <= 1e-5. Then a DDP run stopped
# and resumed ends where the straight run does, bit for bit.
set -uo pipefail
RINGSIDE="$1"; COMPARE="$2"
T="${TEST_TMPDIR:-$(mktemp -d)}"
B=8
common=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5
        --epochs=1 --steps=20 --lr=0.05 --momentum=0.9 --weight_decay=1e-4 --seed=3
        --threads=1 --eval_batch=240)
failures=0
source "$(dirname "$0")/test_lib.sh"  # the device and backend (RINGSIDE_TEST_DEVICE, ..._BACKEND)
for N in 2 3 4; do
  timeout 300 "$RINGSIDE" train --strategy=ddp --workers=$N --batch=$B --timeout_s=60 \
    "${DEVICE_ARGS[@]}" "${BACKEND_ARGS[@]}" "${common[@]}" --out="$T/ddp$N" >"$T/ddp$N.log" 2>&1 \
    || { echo "FAIL: ddp with $N ranks exited $?"; tail -5 "$T/ddp$N.log"; failures=$((failures+1)); continue; }
  "$RINGSIDE" train --strategy=single --batch=$((N * B)) "${DEVICE_ARGS[@]}" "${common[@]}" --out="$T/big$N" >/dev/null 2>&1 \
    || { echo "FAIL: single big batch"; failures=$((failures+1)); continue; }
  "$RINGSIDE" train --strategy=single --batch=$B --grad_accum=$N "${DEVICE_ARGS[@]}" "${common[@]}" --out="$T/acc$N" >/dev/null 2>&1 \
    || { echo "FAIL: single accumulation"; failures=$((failures+1)); continue; }
  "$TEST_PYTHON" "$COMPARE" 1e-5 "$T/big$N/checkpoint.bin" "$T/ddp$N/checkpoint.bin" \
    "$T/acc$N/checkpoint.bin" || failures=$((failures+1))
  # Every rank wrote its own metrics; rank 0 alone wrote the checkpoint.
  for r in $(seq 0 $((N - 1))); do
    [ "$(wc -l <"$T/ddp$N/metrics.rank$r.jsonl")" -eq 20 ] || { echo "FAIL: rank $r metrics"; failures=$((failures+1)); }
    # Labelled: the CPU, not an emulation (ranks sharing a GPU say emulated).
    [ "$(grep -c "$(device_records "$N")" "$T/ddp$N/metrics.rank$r.jsonl")" -eq 20 ] \
      || { echo "FAIL: rank $r records not labelled $(device_records "$N"): $(head -c 400 "$T/ddp$N/metrics.rank$r.jsonl")"; failures=$((failures+1)); }
  done
done
# Resume on every rank: 2 ranks stopped after 10 steps and resumed to 20 end with the
# checkpoint (rank 0 writes it) byte-identical to the 20-step run above.
timeout 300 "$RINGSIDE" train --strategy=ddp --workers=2 --batch=$B --timeout_s=60 \
  "${DEVICE_ARGS[@]}" "${BACKEND_ARGS[@]}" "${common[@]/--steps=20/--steps=10}" --out="$T/resume" >"$T/resume1.log" 2>&1 \
  || { echo "FAIL: first half"; failures=$((failures+1)); }
timeout 300 "$RINGSIDE" train --strategy=ddp --workers=2 --batch=$B --timeout_s=60 \
  "${DEVICE_ARGS[@]}" "${BACKEND_ARGS[@]}" "${common[@]}" --resume --out="$T/resume" >"$T/resume2.log" 2>&1 \
  || { echo "FAIL: resumed half"; tail -3 "$T/resume2.log"; failures=$((failures+1)); }
cmp "$T/resume/checkpoint.bin" "$T/ddp2/checkpoint.bin" \
  || { echo "FAIL: resumed DDP checkpoint differs from the straight run"; failures=$((failures+1)); }
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
