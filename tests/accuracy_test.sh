#!/usr/bin/env bash
# Trains a model on the real Fashion-MNIST with the settings through the
# ringside binary and asserts the final test accuracy.
#   accuracy_test.sh RINGSIDE MIN_ACCURACY TRAIN_FLAGS...
set -euo pipefail
RINGSIDE="$1"; MIN="$2"; shift 2
OUT="${TEST_TMPDIR:-$(mktemp -d)}/run"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "FAIL: Fashion-MNIST is missing; run scripts/setup.sh"; exit 1
fi
"$RINGSIDE" train --strategy=single --dataset=fashion-mnist --epochs=5 --seed=1 \
  --out="$OUT" "$@" 2>"$OUT.log" | tee "$OUT.stdout"
grep 'done' "$OUT.log" || true
acc=$(sed -n 's/^test accuracy: //p' "$OUT.stdout")
[ -n "$acc" ] || { echo "FAIL: no 'test accuracy:' line"; cat "$OUT.log"; exit 1; }
if awk -v a="$acc" -v m="$MIN" 'BEGIN { exit !(a >= m) }'; then
  echo "PASS: test accuracy $acc >= $MIN"
else
  echo "FAIL: test accuracy $acc < $MIN"; exit 1
fi
