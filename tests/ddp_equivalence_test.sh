#!/usr/bin/env bash
# DDP with 2, 3 and 4 ranks (processes, through the launcher), per-rank batch b, SGD
# with momentum, 20 steps, ends with the same parameters as single-process training
# with batch N*b over the same samples, and as single-process gradient accumulation
# over N micro-batches of b: max relative difference <= 1e-5.
set -uo pipefail
RINGSIDE="$1"; COMPARE="$2"
T="${TEST_TMPDIR:-$(mktemp -d)}"
B=8
common=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5
        --epochs=1 --steps=20 --lr=0.05 --momentum=0.9 --weight_decay=1e-4 --seed=3
        --threads=1 --eval_batch=240)
failures=0
for N in 2 3 4; do
  timeout 300 "$RINGSIDE" train --strategy=ddp --workers=$N --batch=$B --timeout_s=60 \
    "${common[@]}" --out="$T/ddp$N" >"$T/ddp$N.log" 2>&1 \
    || { echo "FAIL: ddp with $N ranks exited $?"; tail -5 "$T/ddp$N.log"; failures=$((failures+1)); continue; }
  "$RINGSIDE" train --strategy=single --batch=$((N * B)) "${common[@]}" --out="$T/big$N" >/dev/null 2>&1 \
    || { echo "FAIL: single big batch"; failures=$((failures+1)); continue; }
  "$RINGSIDE" train --strategy=single --batch=$B --grad_accum=$N "${common[@]}" --out="$T/acc$N" >/dev/null 2>&1 \
    || { echo "FAIL: single accumulation"; failures=$((failures+1)); continue; }
  /usr/bin/python3 "$COMPARE" 1e-5 "$T/big$N/checkpoint.bin" "$T/ddp$N/checkpoint.bin" \
    "$T/acc$N/checkpoint.bin" || failures=$((failures+1))
  # Every rank wrote its own metrics; rank 0 alone wrote the checkpoint.
  for r in $(seq 0 $((N - 1))); do
    [ "$(wc -l <"$T/ddp$N/metrics.jsonl.rank$r")" -eq 20 ] || { echo "FAIL: rank $r metrics"; failures=$((failures+1)); }
  done
done
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
