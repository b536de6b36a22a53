#!/usr/bin/env bash
# A launcher killed outright (SIGKILL: it cannot forward anything) takes every process
# it started with it (SpawnOptions::die_with_parent): within 5 s none of them is
# still running, for `ringside launch` of a plain program, a DDP job and a PS job
# (server and workers), and for `ringside compare` (its running cell and that cell's
# ranks). Each case also checks that the children existed and ran before the kill.
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
# shellcheck source=tests/proc_util.sh
source "$(dirname "$0")/proc_util.sh"
failures=0

# alive PID: PID exists and is not a zombie (a dead child nobody reaped yet).
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# kill_and_check NAME PID WANT: waits (up to 60 s) until PID has at least WANT
# descendants, SIGKILLs PID alone, then requires every one of them gone within 5 s.
kill_and_check() {
  local name=$1 root=$2 want=$3 deadline kids=() p left
  deadline=$(($(date +%s) + 60))
  while :; do
    mapfile -t kids < <(descendants "$root")
    [ "${#kids[@]}" -ge "$want" ] && break
    if ! kill -0 "$root" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
      fail "$name: only ${#kids[@]} of $want processes started"
      kill -9 "$root" 2>/dev/null
      return
    fi
    sleep 0.1
  done
  sleep 1  # Let them run (and, for training jobs, connect) first.
  kill -9 "$root"
  wait "$root" 2>/dev/null
  deadline=$(($(date +%s) + 5))
  while :; do
    left=()
    for p in "${kids[@]}"; do alive "$p" && left+=("$p"); done
    [ "${#left[@]}" -eq 0 ] && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      fail "$name: ${#left[@]} of ${#kids[@]} processes still running 5 s after the launcher was killed: $(for p in "${left[@]}"; do tr '\0' ' ' <"/proc/$p/cmdline"; echo; done)"
      kill -9 "${left[@]}" 2>/dev/null
      return
    fi
    sleep 0.1
  done
  echo "ok: $name (${#kids[@]} processes)"
}

TRAIN=(--model=mlp:784-32-10 --dataset=synthetic:train=200000,test=100,seed=1 --epochs=50
       --batch=8 --threads=1 --timeout_s=30)

"$RINGSIDE" launch --nproc_per_node=2 -- sleep 300 >"$T/launch.log" 2>&1 &
kill_and_check "launch of sleep" $! 2

"$RINGSIDE" train --strategy=ddp --workers=2 "${TRAIN[@]}" --out="$T/ddp" >"$T/ddp.log" 2>&1 &
kill_and_check "ddp job" $! 2

"$RINGSIDE" train --strategy=ps --workers=2 "${TRAIN[@]}" --out="$T/ps" >"$T/ps.log" 2>&1 &
kill_and_check "ps job" $! 3

cat >"$T/spec.textproto" <<SPEC
name: "kill"
dataset: "synthetic:train=200000,test=100,seed=1"
model: "mlp:784-32-10"
steps: 1000000
batch_per_worker: 8
strategies { kind: "ddp" }
workers: 2
SPEC
"$RINGSIDE" compare --spec="$T/spec.textproto" --out="$T/compare" >"$T/compare.log" 2>&1 &
# compare, its cell's launcher and the cell's 2 ranks.
kill_and_check "compare" $! 3

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
