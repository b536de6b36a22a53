#!/usr/bin/env bash
# Parameter server, BSP: N workers x per-worker batch b over S shards, SGD with momentum
# and weight decay, 20 steps, ends with the same parameters as single-process training
# with batch N*b over the same samples (max relative difference <= 1e-5), for N in {2,4}
# and S in {1,2,3} (3 does not divide the parameter count), for S=7 (more shards than
# layers: slices cut through tensors), for small stream chunks and for colocated shards
# (inside worker 0); over the TCP data plane bit for bit as over gRPC at 1, 2 and 4
# workers; under the whole-tensor placements (round-robin, greedy) within 1e-6 of
# balanced, a round-robin run stopped and resumed bit for bit as the straight one, too
# many shards for the tensors refused in one line; against summation servers bit for
# bit as the optimizer shards (resumed too), SSP with them refused in one line; and
# agrees with DDP. Every shard's per-step metrics count
# N * model bytes / S in and out (the master bottleneck is measured). A PS run stopped
# after 10 steps and resumed to 20 ends bit for bit where the straight run does.
set -uo pipefail
RINGSIDE="$1"; COMPARE="$2"; CHECK_BYTES="$3"
T="${TEST_TMPDIR:-$(mktemp -d)}"
B=8
MODEL=mlp:784-48-24-10
NUM_PARAMS=$((784 * 48 + 48 + 48 * 24 + 24 + 24 * 10 + 10))  # 39106 = 2 * 19553: odd for 3, 7
common=(--model=$MODEL --dataset=synthetic:train=2400,test=240,seed=5
        --epochs=1 --steps=20 --lr=0.05 --momentum=0.9 --weight_decay=1e-4 --seed=3
        --threads=1 --eval_batch=240)
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error, the device
PY=$TEST_PYTHON

# ps NAME N S ARGS...: one PS job (launched locally) writing to $T/NAME.
ps() {
  local name=$1 n=$2 s=$3 rc; shift 3
  timeout 120 "$RINGSIDE" train --strategy=ps --workers="$n" --ps_shards="$s" --batch=$B \
    --timeout_s=30 "${DEVICE_ARGS[@]}" "${common[@]}" "$@" --out="$T/$name" >"$T/$name.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: ps run with $n workers, $s shard(s) exited $rc"; tail -5 "$T/$name.log"; return 1; fi
  grep -q '^\[worker 0\] test accuracy: ' "$T/$name.log" || { fail "$name: no test accuracy line"; return 1; }
  [ -s "$T/$name/checkpoint.bin" ] || { fail "$name: no checkpoint"; return 1; }
  for w in $(seq 0 $((n - 1))); do
    local metrics="$T/$name/metrics.rank$w.jsonl"
    [ "$n" -gt 1 ] || metrics="$T/$name/metrics.jsonl"  # One worker: a single process's name.
    [ "$(wc -l <"$metrics")" -eq 20 ] || { fail "$name: worker $w metrics"; return 1; }
  done
  return 0
}
single() {  # single NAME BATCH: the single-process reference.
  timeout 120 "$RINGSIDE" train --strategy=single --batch="$2" "${DEVICE_ARGS[@]}" "${common[@]}" --out="$T/$1" >"$T/$1.log" 2>&1 \
    || { fail "$1: single-process run exited $?"; tail -3 "$T/$1.log"; return 1; }
}
compare() {  # compare REFERENCE OTHER...
  $PY "$COMPARE" 1e-5 "$@" || fail "checkpoints differ by more than 1e-5 from $1"
}
# same_floats A B: the checkpoints' parameters and optimizer state are the same bytes
# (their headers differ: each holds its own configuration). Layout: "RINGCKPT" | uint32
# version | uint32 header bytes | header | floats | uint32 crc32 (common/checkpoint.h).
same_floats() {
  $PY - "$1" "$2" <<'PY'
import struct, sys
def floats(path):
    b = open(path, "rb").read()
    header = struct.unpack_from("<I", b, 12)[0]
    return b[16 + header:-4]
a, b = floats(sys.argv[1]), floats(sys.argv[2])
sys.exit(0 if a and a == b else 1)
PY
}
# resumed_equals NAME STRAIGHT WHAT ARGS...: 4 workers x 2 shards with ARGS, stopped
# after 10 steps and resumed to 20 in $T/NAME, end bit for bit where the straight
# 20-step run $T/STRAIGHT does.
resumed_equals() {
  local name=$1 straight=$2 what=$3; shift 3
  local run=(train --strategy=ps --workers=4 --ps_shards=2 --batch=$B --timeout_s=30 "$@") rc
  timeout 120 "$RINGSIDE" "${run[@]}" "${DEVICE_ARGS[@]}" "${common[@]/--steps=20/--steps=10}" \
    --out="$T/$name" >"$T/${name}1.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then fail "$what first half exited $rc"; tail -3 "$T/${name}1.log"; return; fi
  timeout 120 "$RINGSIDE" "${run[@]}" "${DEVICE_ARGS[@]}" "${common[@]}" --resume --out="$T/$name" \
    >"$T/${name}2.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then fail "$what resumed half exited $rc"; tail -3 "$T/${name}2.log"; return; fi
  cmp -s "$T/$name/checkpoint.bin" "$T/$straight/checkpoint.bin" \
    || fail "$what resumed: the checkpoint differs from the straight run's"
}
shard_bytes() {  # shard_bytes NAME N S
  $PY "$CHECK_BYTES" "$2" "$NUM_PARAMS" "$3" --steps=20 "$T/$1"/metrics.shard*.jsonl \
    || fail "$1: shard byte counts"
}

for N in 2 4; do
  single "big$N" $((N * B)) || continue
  for S in 1 2 3; do
    ps "ps${N}x$S" "$N" "$S" || continue
    compare "$T/big$N/checkpoint.bin" "$T/ps${N}x$S/checkpoint.bin"
    shard_bytes "ps${N}x$S" "$N" "$S"
  done
done

# More shards (7) than layers (3) or tensors (6): slices split weight matrices.
if ps ps2x7 2 7; then
  compare "$T/big2/checkpoint.bin" "$T/ps2x7/checkpoint.bin"
  shard_bytes ps2x7 2 7
fi

# Small chunks (8 KiB: several per shard, pipelined push/pull) change nothing.
if ps ps4x3c8 4 3 --ps_chunk_kb=8; then
  compare "$T/big4/checkpoint.bin" "$T/ps4x3c8/checkpoint.bin"
  shard_bytes ps4x3c8 4 3
fi

# Colocated: every shard inside worker 0 (in-process channel for it, TCP for the others).
if ps ps2x2co 2 2 --ps_colocated; then
  compare "$T/big2/checkpoint.bin" "$T/ps2x2co/checkpoint.bin"
  grep -q 'shard(s) in worker 0' "$T/ps2x2co.log" || fail "colocated: worker 0 did not host the shards"
  shard_bytes ps2x2co 2 2
fi

# DDP with the same workers and data ends where the PS does.
if timeout 120 "$RINGSIDE" train --strategy=ddp --workers=2 --batch=$B --timeout_s=30 \
    "${DEVICE_ARGS[@]}" "${BACKEND_ARGS[@]}" "${common[@]}" --out="$T/ddp2" >"$T/ddp2.log" 2>&1; then
  compare "$T/ps2x2/checkpoint.bin" "$T/ddp2/checkpoint.bin"
else
  fail "ddp with 2 ranks exited $?"; tail -5 "$T/ddp2.log"
fi

# The two data planes (--ps_transport; issue 35) move the same floats in the same
# order: the gRPC runs' checkpoints are the TCP runs' (the default, above), byte for
# byte, at 1, 2 and 4 workers, and each shard's byte counts hold.
for N in 1 2 4; do
  if [ "$N" -eq 1 ]; then ps ps1x2 1 2 || continue; fi
  ps "ps${N}x2grpc" "$N" 2 --ps_transport=grpc || continue
  same_floats "$T/ps${N}x2/checkpoint.bin" "$T/ps${N}x2grpc/checkpoint.bin" \
    || fail "--ps_transport=grpc with $N worker(s): the parameters or momentum differ from TCP's"
  shard_bytes "ps${N}x2grpc" "$N" 2
done

# Placement (--ps_placement; issue 35): whole tensors dealt to the shards change where
# each float is summed and stepped, not how: the checkpoints are the balanced runs'
# within 1e-6 (not bit for bit: a float that falls in a vector kernel's tail on one
# shard and in its body on another may round differently in the last bit). Round-robin
# over 2 shards puts the 784x48 weight and two more on shard 0 (39024 of 39106 floats);
# greedy over 3, largest first, gives 96% / 3% / 1%. A run stopped after 10 steps and
# resumed to 20 under round-robin (its momentum saved and restored through the PS
# order) ends bit for bit where the straight run does.
if ps ps4x2rr 4 2 --ps_placement=tensor_round_robin; then
  $PY "$COMPARE" 1e-6 "$T/ps4x2/checkpoint.bin" "$T/ps4x2rr/checkpoint.bin" \
    || fail "tensor_round_robin: the checkpoint differs from the balanced run's by more than 1e-6"
  grep -q 'placement tensor_round_robin (shards hold 100% / 0%)' "$T/ps4x2rr.log" \
    || fail "tensor_round_robin: worker 0 did not report the shards' shares"
fi
if ps ps4x3greedy 4 3 --ps_placement=tensor_greedy; then
  $PY "$COMPARE" 1e-6 "$T/ps4x3/checkpoint.bin" "$T/ps4x3greedy/checkpoint.bin" \
    || fail "tensor_greedy: the checkpoint differs from the balanced run's by more than 1e-6"
  grep -q 'placement tensor_greedy (shards hold 96% / 3% / 1%)' "$T/ps4x3greedy.log" \
    || fail "tensor_greedy: worker 0 did not report the shards' shares"
fi
resumed_equals rr_half ps4x2rr "tensor_round_robin" --ps_placement=tensor_round_robin
# More shards than tensors: refused in one line before any process starts.
timeout 60 "$RINGSIDE" train --strategy=ps --workers=2 --ps_shards=7 --batch=$B --timeout_s=10 \
  --ps_placement=tensor_round_robin "${common[@]}" --out="$T/rr7" >"$T/rr7.log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] || fail "7 shards for 6 tensors: exit status $rc"
[ "$(wc -l <"$T/rr7.log")" -eq 1 ] && grep -q "^ringside: error: .*deals 6 whole tensors: 7 shards would leave one without a tensor" "$T/rr7.log" \
  || { fail "7 shards for 6 tensors: not one error line"; cat "$T/rr7.log"; }
[ ! -e "$T/rr7" ] || fail "7 shards for 6 tensors: $T/rr7 was created"

# Summation servers (--ps_mode=summation; issue 35): the shards only sum and serve the
# mean gradient, every worker steps SGD itself. The same ordered sums and the same SGD
# pass over each chunk: the checkpoint (parameters and momentum) is the optimizer
# shards' to the bit, hence within 1e-6 of one process at the global batch; the
# shards' byte counts are the same. A run stopped after 10 steps and resumed to 20
# (worker 0's own momentum saved and restored) ends bit for bit where the straight
# one does.
if ps ps4x2sum 4 2 --ps_mode=summation; then
  $PY "$COMPARE" 1e-6 "$T/big4/checkpoint.bin" "$T/ps4x2sum/checkpoint.bin" \
    || fail "summation: the checkpoint differs from one process at batch $((4 * B)) by more than 1e-6"
  same_floats "$T/ps4x2/checkpoint.bin" "$T/ps4x2sum/checkpoint.bin" \
    || fail "summation: the parameters or momentum differ from the optimizer shards'"
  grep -q 'ps: 4 workers, 2 summation server(s)' "$T/ps4x2sum.log" || fail "summation: worker 0 did not say so"
  shard_bytes ps4x2sum 4 2
fi
resumed_equals sum_half ps4x2sum "summation" --ps_mode=summation
# A summer in each worker (--ps_worker_summers, BytePS's colocated summation service)
# beside k dedicated servers, slices by BytePS's optimum (k = 1 of n = 4: 6/18 on the
# server, 3/18 in each worker), each worker hosting its own summer, over the TCP data
# plane: within 1e-6 of one process at the global batch (other slices round the SGD's
# unaligned ends their own way, so not to the bit); k = 0 at 2 workers likewise.
if ps ps4x1w 4 1 --ps_mode=summation --ps_worker_summers --ps_transport=tcp; then
  $PY "$COMPARE" 1e-6 "$T/big4/checkpoint.bin" "$T/ps4x1w/checkpoint.bin" \
    || fail "worker summers: the checkpoint differs from one process at batch $((4 * B)) by more than 1e-6"
  grep -q 'ps: 4 workers, 5 summation server(s) (1 dedicated, one in each worker).*shards hold 33% / 17% / 17% / 17% / 17%' \
    "$T/ps4x1w.log" || fail "worker summers: worker 0 did not report the layout: $(grep '^ps:' "$T/ps4x1w.log")"
  for s in 0 1 2 3 4; do
    [ "$(wc -l <"$T/ps4x1w/metrics.shard$s.jsonl")" -eq 20 ] || fail "worker summers: shard $s's records"
  done
fi
if ps ps2x0w 2 0 --ps_mode=summation --ps_worker_summers; then
  $PY "$COMPARE" 1e-6 "$T/big2/checkpoint.bin" "$T/ps2x0w/checkpoint.bin" \
    || fail "worker summers at k = 0: the checkpoint differs from one process at batch $((2 * B)) by more than 1e-6"
fi
# k = n: BytePS's optimum leaves the summers nothing; refused in one line.
timeout 60 "$RINGSIDE" train --strategy=ps --workers=2 --ps_shards=2 --ps_mode=summation --ps_worker_summers \
  --batch=$B "${common[@]}" --out="$T/sumkn" >"$T/sumkn.log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] || fail "worker summers at k = n: exit status $rc"
[ "$(wc -l <"$T/sumkn.log")" -eq 1 ] && grep -q "^ringside: error: --ps_worker_summers takes --ps_shards from 0 to --workers - 1 = 1, got 2" "$T/sumkn.log" \
  || { fail "worker summers at k = n: not one error line"; cat "$T/sumkn.log"; }
# Summation under SSP: refused in one line before any process starts.
timeout 60 "$RINGSIDE" train --strategy=ps --workers=2 --ps_shards=2 --ps_mode=summation --ps_sync=ssp:1 \
  --batch=$B "${common[@]}" --out="$T/sumssp" >"$T/sumssp.log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] || fail "summation with ssp: exit status $rc"
[ "$(wc -l <"$T/sumssp.log")" -eq 1 ] && grep -q "^ringside: error: --ps_mode=summation needs --ps_sync=bsp, got ssp" "$T/sumssp.log" \
  || { fail "summation with ssp: not one error line"; cat "$T/sumssp.log"; }

# Resume: 2 workers, 2 shards, stopped after 10 steps and resumed to 20, end with the
# checkpoint of the straight 20-step run, byte for byte.
if timeout 120 "$RINGSIDE" train --strategy=ps --workers=2 --ps_shards=2 --batch=$B --timeout_s=30 \
    "${DEVICE_ARGS[@]}" "${common[@]/--steps=20/--steps=10}" --out="$T/resume" >"$T/resume1.log" 2>&1; then
  if timeout 120 "$RINGSIDE" train --strategy=ps --workers=2 --ps_shards=2 --batch=$B --timeout_s=30 \
      "${DEVICE_ARGS[@]}" "${common[@]}" --resume --out="$T/resume" >"$T/resume2.log" 2>&1; then
    if ! cmp "$T/resume/checkpoint.bin" "$T/ps2x2/checkpoint.bin"; then
      fail "resumed PS checkpoint differs from the straight run"
      $PY "$COMPARE" 1e-6 "$T/ps2x2/checkpoint.bin" "$T/resume/checkpoint.bin"
    fi
    for w in 0 1; do  # worker metrics append on resume: 10 + 10 records
      [ "$(wc -l <"$T/resume/metrics.rank$w.jsonl")" -eq 20 ] || fail "resume: worker $w metrics"
    done
  else
    fail "resumed half exited $?"; tail -3 "$T/resume2.log"
  fi
else
  fail "first half exited $?"; tail -3 "$T/resume1.log"
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
