#!/usr/bin/env bash
# The teaching bug switches (`ringside train --bug=NAME`): each small DDP run shows its
# bug's symptom line, naming the bug, and the same run without the bug shows none.
# uneven_shards must end every process (no hang) with a non-zero status and the line
# that names the rank that ran out of data. Bad names are one usage error (status 2).
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

# 401 training samples do not divide by 2 ranks: padded, every rank gets 201 (5 steps
# of 50); without padding rank 0 gets 201 (5 steps) and rank 1 200 (4 steps).
common=(train --strategy=ddp --workers=2 --threads=1 --model=mlp:784-32-10 --batch=50
        --lr=0.05 --seed=3 --timeout_s=3 --dataset=synthetic:train=401,test=100,seed=2)

# run NAME ARGS...: runs one job (bounded), its stdout and stderr in $T/NAME.log; sets rc.
run() {
  local name=$1; shift
  local t0; t0=$(date +%s)
  timeout 90 "$RINGSIDE" "${common[@]}" "$@" >"$T/$name.log" 2>&1; rc=$?
  echo "--- $name: exit $rc in $(( $(date +%s) - t0 )) s"
  cat "$T/$name.log"
}
has() { grep -qE -- "$2" "$T/$1.log"; }
expect() { has "$1" "$2" || fail "$1: no line matching /$2/"; }
expect_not() { ! has "$1" "$2" || fail "$1: unexpected line matching /$2/: $(grep -E -- "$2" "$T/$1.log" | head -n 1)"; }
expect_rc() { [ "$rc" -eq "$2" ] || fail "$1: exit status $rc, expected $2"; }

# The control: no bug, two epochs. No order lines, no checks' lines, exit 0.
run none --epochs=2
expect_rc none 0
expect_not none 'visits samples|replicas diverged|ranks visited|ran out of data|bug '

# 1. no_set_epoch: epoch 2 repeats epoch 1's order. The replica and visit checks run
# and find nothing wrong (the healthy lines).
run no_set_epoch --epochs=2 --bug=no_set_epoch
expect_rc no_set_epoch 0
expect no_set_epoch '^\[rank 0\] epoch 1/2: rank 0 visits samples [0-9]+, [0-9]+, '
expect no_set_epoch '^\[rank 0\] epoch 2/2: rank 0 visits samples [0-9, .]+ \(the same order as epoch 1: set_epoch not called: bug no_set_epoch\)$'
expect no_set_epoch '^\[rank 0\] epoch 1/2: 2 ranks visited all 401 samples; 1 of them twice or more \(padding evens out the shards\)$'
expect_not no_set_epoch 'replicas diverged'

# 2. no_broadcast: the replicas differ from the first step on; training goes on, and
# their distance never shrinks: plain SGD applies the same averaged update to every
# replica, so p1 - p0 stays what it was at step 0 (up to float rounding). The trained
# model is not the control's.
run no_broadcast --epochs=2 --bug=no_broadcast
expect_rc no_broadcast 0
expect no_broadcast "^\[rank 0\] step 0: replicas diverged: rank 1's parameters differ from rank 0's \(.*; distance [0-9.]+\); the initial broadcast was skipped \(bug no_broadcast\)$"
[ "$(grep -c 'replicas diverged' "$T/no_broadcast.log")" -eq 1 ] || fail "no_broadcast: not exactly one divergence line"
expect no_broadcast "^\[rank 0\] epoch 2/2: replicas still apart: rank 1's parameters are [0-9.]+ from rank 0's \([0-9.]+ at step 0\): .* \(bug no_broadcast\)$"
apart=$(sed -nE "s/.*epoch 2\/2: replicas still apart: rank 1's parameters are ([0-9.]+) from rank 0's \(([0-9.]+) at step 0.*/\1 \2/p" "$T/no_broadcast.log")
awk -v a="${apart% *}" -v b="${apart#* }" 'BEGIN { exit !(b > 0 && (a - b) / b < 1e-3 && (b - a) / b < 1e-3) }' \
  || fail "no_broadcast: the replicas' distance changed: '$apart' (now, at step 0)"
final() { sed -nE 's/^\[rank 0\] test loss: ([0-9.]+)$/\1/p' "$T/$1.log"; }
[ -n "$(final no_broadcast)" ] && [ "$(final no_broadcast)" != "$(final none)" ] \
  || fail "no_broadcast: the final test loss '$(final no_broadcast)' is the control's '$(final none)'"

# 3. rank_seeds: the ranks' shards overlap; some samples are never seen. Without
# no_set_epoch, epoch 2 has a new order.
run rank_seeds --epochs=2 --bug=rank_seeds
expect_rc rank_seeds 0
expect rank_seeds '^\[rank 0\] epoch 1/2: 2 ranks visited [0-9]+ distinct samples of 401; [1-9][0-9]* were seen twice or more, [1-9][0-9]* never \(ranks shuffle with different seeds: bug rank_seeds\)$'
expect rank_seeds '^\[rank 0\] epoch 2/2: rank 0 visits samples .* \(a new order\)$'
expect_not rank_seeds 'replicas diverged|same order'

# 4. uneven_shards: rank 0 has a 5th step, rank 1 waits at the epoch's end; rank 0's
# all-reduce times out (3 s) and names rank 1. Every process ends; the job fails.
t0=$(date +%s)
run uneven --epochs=2 --bug=uneven_shards
e=$(( $(date +%s) - t0 ))
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "uneven: exit status $rc, expected a failure"
[ "$e" -lt 40 ] || fail "uneven: took $e s"
expect uneven 'bug uneven_shards: 401 training samples over 2 ranks without padding: steps per epoch by rank: 5, 4$'
expect uneven '^\[rank 0\] ringside: error: rank 0: step 4: all-reduce waited [0-9]+\.[0-9] s \(its timeout: 3s, then naming the lost rank\) for rank 1, which ran out of data after step 3 \(uneven shards without padding: bug uneven_shards\)$'
# The launcher names whichever rank it saw exit first: rank 0 (the named error above)
# or rank 1, whose wait at the epoch's end ends when rank 0's store goes away.
expect uneven '^ringside: error: rank [01] failed: exited with status 1'

# Bad names: one usage error line, status 2.
run unknown --bug=no_set_epoch,nope
expect_rc unknown 2
expect unknown "^ringside: error: unknown --bug 'nope' \(expected no_set_epoch, no_broadcast, rank_seeds or uneven_shards\)$"
[ "$(grep -ci error "$T/unknown.log")" -eq 1 ] || fail "unknown: not one error line"
run single --strategy=single --bug=rank_seeds
expect_rc single 2
expect single '^ringside: error: --bug=rank_seeds needs --strategy=ddp, got --strategy=single$'

# no_set_epoch works with every strategy (the trainer's order line).
run single_epoch --strategy=single --epochs=2 --bug=no_set_epoch
expect_rc single_epoch 0
expect single_epoch '^epoch 2/2: rank 0 visits samples .* \(the same order as epoch 1: set_epoch not called: bug no_set_epoch\)$'

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all bug switches show their symptoms"
