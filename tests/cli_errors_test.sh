#!/usr/bin/env bash
# Bad input to `ringside train`: each case must end with exactly one error line
# ("ringside: error: ..." or absl's flag error), exit status 1, and no crash output.
set -uo pipefail
RINGSIDE="$1"
FMNIST=/usr/share/datasets/fashion-mnist
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

# expect_error NAME REGEX ARGS...: runs ringside ARGS, checks the error contract.
expect_error() {
  local name="$1" regex="$2"; shift 2
  local out="$T/$name.err" rc
  timeout 120 "$RINGSIDE" "$@" >"$T/$name.out" 2>"$out"; rc=$?
  local errors; errors=$(grep -ci 'error' "$out")
  if [ "$rc" -ne 1 ]; then
    echo "FAIL $name: exit status $rc, expected 1"; failures=$((failures + 1))
  elif [ "$errors" -ne 1 ] || ! tail -n 1 "$out" | grep -qi 'error'; then
    echo "FAIL $name: expected one error line, last; got:"; cat "$out"; failures=$((failures + 1))
  elif grep -qiE 'abort|terminate called|segmentation|core dumped|stack trace|\*\*\* ' "$out"; then
    echo "FAIL $name: crash output:"; cat "$out"; failures=$((failures + 1))
  elif ! tail -n 1 "$out" | grep -qE "$regex"; then
    echo "FAIL $name: message does not match /$regex/:"; tail -n 1 "$out"; failures=$((failures + 1))
  else
    echo "ok   $name: $(tail -n 1 "$out")"
  fi
}

common=(train --epochs=1 --steps=2 --threads=1)

# Datasets: missing, truncated, corrupt, bad magic, labels out of range.
mkdir -p "$T/missing" "$T/truncated" "$T/corrupt" "$T/magic"
expect_error missing_idx 'train-images-idx3-ubyte.*(not found|no such file|missing)' \
  "${common[@]}" --dataset="$T/missing"
for d in truncated corrupt magic; do cp "$FMNIST"/*.gz "$T/$d/"; done
zcat "$FMNIST/train-images-idx3-ubyte.gz" | head -c 100000 | gzip >"$T/truncated/train-images-idx3-ubyte.gz"
expect_error truncated_idx 'truncated' "${common[@]}" --dataset="$T/truncated"
head -c 200000 "$FMNIST/train-images-idx3-ubyte.gz" >"$T/corrupt/train-images-idx3-ubyte.gz"
dd if=/dev/urandom of="$T/corrupt/train-images-idx3-ubyte.gz" bs=1 seek=5000 count=3000 conv=notrunc status=none
expect_error corrupt_idx 'train-images-idx3-ubyte' "${common[@]}" --dataset="$T/corrupt"
printf 'not an idx file at all' | gzip >"$T/magic/t10k-labels-idx1-ubyte.gz"
expect_error bad_magic_idx 't10k-labels-idx1-ubyte' "${common[@]}" --dataset="$T/magic"
expect_error not_a_dataset 'not fashion-mnist' "${common[@]}" --dataset="$T/no-such-dir"

# Flags.
expect_error unknown_model "unknown model spec 'resnet:50'" "${common[@]}" --dataset=synthetic --model=resnet:50
expect_error mlp_wrong_input 'takes 100 inputs' "${common[@]}" --dataset=synthetic --model=mlp:100-10
expect_error batch_zero 'batch must be >= 1' "${common[@]}" --dataset=synthetic --batch=0
expect_error negative_lr 'lr must be >= 0' "${common[@]}" --dataset=synthetic --lr=-0.1
expect_error unknown_strategy "unknown strategy 'foo'" "${common[@]}" --dataset=synthetic --strategy=foo
expect_error unknown_flag 'Unknown command line flag' "${common[@]}" --no_such_flag=1
expect_error bad_flag_value "Illegal value|invalid" "${common[@]}" --batch=many
expect_error unknown_command "unknown command 'fly'" fly

# Checkpoints: unreadable, garbage, of another model.
mkdir -p "$T/ckpt-garbage" "$T/ckpt-unreadable" "$T/ckpt-other"
echo "garbage" >"$T/ckpt-garbage/checkpoint.bin"
expect_error garbage_checkpoint 'not a ringside checkpoint' "${common[@]}" --dataset=synthetic:train=64,test=16 --out="$T/ckpt-garbage" --resume
mkdir -p "$T/ckpt-unreadable/checkpoint.bin"  # A directory where the file should be.
expect_error unreadable_checkpoint 'checkpoint.bin is not a regular file' "${common[@]}" --dataset=synthetic:train=64,test=16 --out="$T/ckpt-unreadable" --resume
# No checkpoint yet is not an error: --resume starts from step 0 and says so.
timeout 120 "$RINGSIDE" "${common[@]}" --dataset=synthetic:train=64,test=16 --out="$T/ckpt-none" --resume >/dev/null 2>"$T/ckpt-none.err" \
  && grep -q 'no checkpoint in .* yet, starting from step 0' "$T/ckpt-none.err" \
  || { echo "FAIL missing_checkpoint: --resume without a checkpoint did not start fresh"; failures=$((failures + 1)); }
if ! timeout 120 "$RINGSIDE" "${common[@]}" --dataset=synthetic:train=64,test=16 --out="$T/ckpt-other" >/dev/null 2>&1; then
  echo "FAIL: could not write a checkpoint to resume from"; failures=$((failures + 1))
fi
expect_error other_model_checkpoint "holds model 'mlp:784-256-256-10'" "${common[@]}" --dataset=synthetic:train=64,test=16 --model=mlp:784-32-10 --out="$T/ckpt-other" --resume

if [ "$failures" -ne 0 ]; then echo "$failures case(s) failed"; exit 1; fi
echo "all cases passed"
