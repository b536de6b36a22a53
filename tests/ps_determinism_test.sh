#!/usr/bin/env bash
# Parameter server, BSP, is deterministic at any number of workers: the shards add a
# step's gradients in worker-id order whatever order they arrive in. For N in {3, 4, 8}
# workers (1 shard), 4 workers over 3 shards and 3 workers with small chunks (several
# per shard), two runs end with byte-identical checkpoints, which equal single-process
# training with batch N*b (max relative difference <= 1e-5). A 4-worker, 3-shard run
# stopped after 10 steps and resumed to 20 ends byte for byte where the straight run
# does. (Before the fixed order, repeats at 3+ workers differed by up to 3e-7.)
set -uo pipefail
RINGSIDE="$1"; COMPARE="$2"
PY=/usr/bin/python3
T="${TEST_TMPDIR:-$(mktemp -d)}"
B=8
common=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5
        --epochs=1 --lr=0.05 --momentum=0.9 --weight_decay=1e-4 --seed=3
        --threads=1 --eval_batch=240)
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

# ps NAME N S ARGS...: one PS job (launched locally) writing to $T/NAME.
ps() {
  local name=$1 n=$2 s=$3 rc; shift 3
  timeout 180 "$RINGSIDE" train --strategy=ps --workers="$n" --ps_shards="$s" --batch=$B \
    --timeout_s=60 --steps="${STEPS:-20}" "${common[@]}" "$@" --out="$T/$name" >"$T/$name.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: ps run with $n workers, $s shard(s) exited $rc"; tail -5 "$T/$name.log"; return 1; fi
  [ -s "$T/$name/checkpoint.bin" ] || { fail "$name: no checkpoint"; return 1; }
  return 0
}
single() {  # single NAME BATCH: the single-process reference.
  timeout 120 "$RINGSIDE" train --strategy=single --batch="$2" --steps=20 "${common[@]}" --out="$T/$1" >"$T/$1.log" 2>&1 \
    || { fail "$1: single-process run exited $?"; tail -3 "$T/$1.log"; return 1; }
}
# twice NAME N S ARGS...: two runs, byte-identical, and equal to the reference.
twice() {
  local name=$1 n=$2 s=$3; shift 3
  ps "${name}a" "$n" "$s" "$@" || return 1
  ps "${name}b" "$n" "$s" "$@" || return 1
  if cmp -s "$T/${name}a/checkpoint.bin" "$T/${name}b/checkpoint.bin"; then
    echo "ok   $name: two runs of $n workers x $s shard(s) $* are byte-identical"
  else
    fail "$name: two runs of $n workers x $s shard(s) differ"
    $PY "$COMPARE" 0 "$T/${name}a/checkpoint.bin" "$T/${name}b/checkpoint.bin"
  fi
  $PY "$COMPARE" 1e-5 "$T/ref$n/checkpoint.bin" "$T/${name}a/checkpoint.bin" \
    || fail "$name: differs by more than 1e-5 from single-process batch $((n * B))"
}

for N in 3 4 8; do single "ref$N" $((N * B)); done
twice ps3 3 1
twice ps4 4 1
twice ps8 8 1
twice ps4x3 4 3
twice ps3c8 3 2 --ps_chunk_kb=8

# Resume: 4 workers, 3 shards, 10 steps then 10 more, ends with the straight run's
# checkpoint byte for byte.
if STEPS=10 ps resume 4 3; then
  if ps resume 4 3 --resume; then
    if cmp -s "$T/resume/checkpoint.bin" "$T/ps4x3a/checkpoint.bin"; then
      echo "ok   resume: 4 workers x 3 shards, stopped at 10 and resumed, byte-identical"
    else
      fail "resumed 4-worker PS checkpoint differs from the straight run"
      $PY "$COMPARE" 0 "$T/ps4x3a/checkpoint.bin" "$T/resume/checkpoint.bin"
    fi
  fi
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
