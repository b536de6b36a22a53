#!/usr/bin/env bash
# Parameter server, bounded staleness: 3 workers on 1 shard, 30 steps, worker 2 slowed
# from outside by this script (SIGSTOP / SIGCONT, stopped 40 ms of every 50 ms). From the workers' per-step start times: under --ps_sync=ssp:2 no fast
# worker ever starts step s before the slow one has started s - 2 (lead <= K), and the
# bound is reached (max lead K or K-1); under ssp:0 the lead never exceeds 0; under asp
# the lead exceeds 2 (the check can fail).
set -uo pipefail
RINGSIDE="$1"; CHECK="$2"
source "$(dirname "$0")/proc_util.sh"
PY=/usr/bin/python3
T="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5
        --epochs=1 --steps=30 --batch=8 --lr=0.05 --momentum=0.9 --seed=3 --threads=1
        --eval_batch=240 --workers=3 --ps_shards=1 --timeout_s=30)
# The launcher's ranks: shard 0 is rank 0, worker w is rank w + 1.
SLOW_WORKER=2
SLOW_RANK=3
failures=0
# Whatever is left in the background (after a failed check) is stopped on the way out.
trap 'for j in $(jobs -p); do kill "$j" 2>/dev/null; done' EXIT

# run NAME SYNC K EXPECT: one job, then the staleness check on its worker metrics. A job
# can end before the throttler finds its slow worker (an ASP job of 30 small steps takes
# well under a second; on a loaded host the search through /proc is slower than that),
# or find it after most of its steps ran (the check then says INCONCLUSIVE, exit 2): it
# proves nothing, so it runs again, up to 3 times.
run() {
  local name=$1 sync=$2 k=$3 expect=$4 rc
  local job slow throttle_rc attempt check_rc=2 w
  for attempt in 1 2 3; do
    rm -rf "${T:?}/$name"
    timeout 120 "$RINGSIDE" train --strategy=ps --ps_sync="$sync" "${common[@]}" --out="$T/$name" \
      >"$T/$name.log" 2>&1 &
    job=$!
    (pid=$(wait_for_rank "$job" "$SLOW_RANK" 2>/dev/null) && throttle "$pid") & slow=$!
    wait "$job"; rc=$?
    wait "$slow"; throttle_rc=$?
    if [ "$throttle_rc" -ne 0 ]; then
      echo "$name: attempt $attempt: the job ended before worker $SLOW_WORKER (rank $SLOW_RANK) was found to slow down"
      continue
    fi
    if [ "$rc" -ne 0 ]; then fail "$name: --ps_sync=$sync exited $rc"; tail -5 "$T/$name.log"; return; fi
    for w in 0 1 2; do
      [ "$(wc -l <"$T/$name/metrics.rank$w.jsonl")" -eq 30 ] || { fail "$name: worker $w metrics"; return; }
    done
    echo -n "$sync: "
    $PY "$CHECK" --slow="$SLOW_WORKER" --bound="$k" --expect="$expect" "$T/$name"/metrics.rank{0,1,2}.jsonl
    check_rc=$?
    [ "$check_rc" -eq 2 ] || break
    echo "$name: attempt $attempt: inconclusive, again"
  done
  if [ "$throttle_rc" -ne 0 ]; then fail "$name: worker $SLOW_WORKER (rank $SLOW_RANK) was never found to slow down (3 attempts)"; return; fi
  [ "$check_rc" -eq 0 ] || fail "$name: --ps_sync=$sync staleness check ($expect, K=$k)"
}

run ssp2 ssp:2 2 bounded
run ssp0 ssp:0 0 bounded
run asp asp 2 exceeded

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
