#!/usr/bin/env bash
# `ringside launch`: environment (torchrun's variables, the run id every launcher of a
# job shares, one BLAS thread per rank), torchrun's flags and their refusals, output
# prefixes, failure handling (one rank fails -> the others are stopped, the exit status
# is non-zero and names the rank), and --max_restarts: a DDP rank, then a PS worker,
# killed from outside mid-run, the group restarted from the last checkpoint, ends where
# an undisturbed run does.
set -uo pipefail
RINGSIDE="$1"; COMPARE="$2"
source "$(dirname "$0")/proc_util.sh"
T="${TEST_TMPDIR:-$(mktemp -d)}"
FAIL_FAST=1  # fail ends the test: later steps build on earlier ones.
# Runs the launcher without inherited job or thread variables.
launch() {
  env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u RINGSIDE_RUN_ID -u TORCHELASTIC_RUN_ID -u NCCL_ASYNC_ERROR_HANDLING \
    timeout 60 "$RINGSIDE" launch "$@"
}

# 1. Every rank gets torchrun's variables; every line carries its rank's prefix.
out="$(launch --nproc_per_node=3 --master_port=0 -- \
  sh -c 'echo "env $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR"; echo second line
         echo "group $GROUP_RANK $GROUP_WORLD_SIZE role $ROLE_NAME $ROLE_RANK $ROLE_WORLD_SIZE"
         echo "elastic $TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_MAX_RESTARTS $TORCHELASTIC_USE_AGENT_STORE $NCCL_ASYNC_ERROR_HANDLING"
         echo "run ${TORCHELASTIC_RUN_ID:-unset} ${RINGSIDE_RUN_ID:-unset} port $MASTER_PORT"')"
rc=$?
[ "$rc" -eq 0 ] || fail "clean launch exited $rc: $out"
for r in 0 1 2; do
  grep -qx "\[rank $r\] env $r $r 3 3 127.0.0.1" <<<"$out" || fail "rank $r env line missing: $out"
  grep -qx "\[rank $r\] second line" <<<"$out" || fail "rank $r second line missing"
  grep -qx "\[rank $r\] group 0 1 role default $r 3" <<<"$out" || fail "rank $r group/role: $out"
  grep -qx "\[rank $r\] elastic 0 0 False 1" <<<"$out" || fail "rank $r TORCHELASTIC_*: $out"
done
# One run id for all, derived from the endpoint (RINGSIDE_RUN_ID == TORCHELASTIC_RUN_ID).
port=$(echo "$out" | sed -n 's/^\[rank 0\] run .* port //p')
[ "$(echo "$out" | grep -c "^\[rank [012]\] run ringside-127.0.0.1:$port ringside-127.0.0.1:$port port $port\$")" -eq 3 ] \
  || fail "run id not shared or not derived from the endpoint: $out"
port=$(launch --nproc_per_node=2 --master_port=0 -- sh -c 'echo $MASTER_PORT' | sed -n 's/^\[rank 0\] //p')
[ "$port" -gt 0 ] 2>/dev/null || fail "no master port picked: '$port'"

# 2. Multi-node placement: node 1 of 2 with 2 processes each holds ranks 2 and 3, and
# derives the run id node 0 derives from the same endpoint; torchrun's spellings.
out="$(launch --nproc_per_node=2 --nnodes=2 --node_rank=1 --master_port=12345 -- \
  sh -c 'echo "$RANK/$WORLD_SIZE local $LOCAL_RANK port $MASTER_PORT group $GROUP_RANK/$GROUP_WORLD_SIZE $RINGSIDE_RUN_ID"')"
grep -qx "\[rank 2\] 2/4 local 0 port 12345 group 1/2 ringside-127.0.0.1:12345" <<<"$out" || fail "node_rank placement: $out"
grep -qx "\[rank 3\] 3/4 local 1 port 12345 group 1/2 ringside-127.0.0.1:12345" <<<"$out" || fail "node_rank placement: $out"
out="$(launch --nnodes=2:2 --node_rank=1 --rdzv_backend=c10d --rdzv_endpoint=10.1.2.3:4567 -- sh -c 'echo "$MASTER_ADDR:$MASTER_PORT $RINGSIDE_RUN_ID $WORLD_SIZE"')"
[ "$out" = "[rank 1] 10.1.2.3:4567 ringside-10.1.2.3:4567 2" ] || fail "--rdzv_endpoint: $out"
out="$(launch --rdzv_endpoint=node0 --rdzv_id=job7 -- sh -c 'echo "$MASTER_ADDR:$MASTER_PORT $RINGSIDE_RUN_ID $TORCHELASTIC_RUN_ID"')"
[ "$out" = "[rank 0] node0:29400 job7 job7" ] || fail "--rdzv_endpoint without port, --rdzv_id: $out"
out="$(TORCHELASTIC_RUN_ID=outer timeout 60 "$RINGSIDE" launch --master_port=0 -- sh -c 'echo "$RINGSIDE_RUN_ID"')"
[ "$out" = "[rank 0] outer" ] || fail "inherited TORCHELASTIC_RUN_ID: $out"
a="$(launch --standalone -- sh -c 'echo "$MASTER_ADDR $RINGSIDE_RUN_ID"')"
b="$(launch --standalone -- sh -c 'echo "$MASTER_ADDR $RINGSIDE_RUN_ID"')"
case "$a" in "[rank 0] 127.0.0.1 standalone-"*) ;; *) fail "--standalone: $a" ;; esac
[ "$a" != "$b" ] || fail "--standalone: two jobs share the run id $a"

# One BLAS thread per rank when ranks share the node, said once; the user's choice kept.
blas='echo "${OMP_NUM_THREADS:-unset} ${OPENBLAS_NUM_THREADS:-unset}"'
out="$(launch --nproc_per_node=2 --master_port=0 -- sh -c "$blas" 2>"$T/blas.err")"
[ "$(echo "$out" | grep -c '\] 1 1$')" -eq 2 ] || fail "2 ranks: not one BLAS thread each: $out"
[ "$(grep -c 'OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 for each' "$T/blas.err")" -eq 1 ] \
  || fail "one BLAS thread not announced once: $(cat "$T/blas.err")"
out="$(OMP_NUM_THREADS=3 timeout 60 "$RINGSIDE" launch --nproc_per_node=2 --master_port=0 -- sh -c "$blas" 2>"$T/blas.err")"
[ "$(echo "$out" | grep -c '\] 3 unset$')" -eq 2 ] || fail "OMP_NUM_THREADS=3 not kept: $out"
[ ! -s "$T/blas.err" ] || fail "announced although OMP_NUM_THREADS was set: $(cat "$T/blas.err")"
[ "$(launch --master_port=0 -- sh -c "$blas")" = "[rank 0] unset unset" ] || fail "1 rank: BLAS threads set"

# 3. One rank fails: the others (sleeping 60 s) are stopped at once.
start=$(date +%s)
launch --nproc_per_node=3 --master_port=0 -- \
  sh -c 'if [ "$RANK" = 1 ]; then sleep 0.3; echo dying; exit 3; fi; sleep 60' >"$T/o" 2>"$T/e"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] || fail "a failed rank gave exit status 0"
[ "$rc" -ne 124 ] || fail "launcher hung"
[ "$elapsed" -lt 20 ] || fail "took ${elapsed}s to stop the others"
grep -q "rank 1 failed: exited with status 3" "$T/e" || fail "error does not name rank 1: $(cat "$T/e")"
grep -q "\[rank 1\] dying" "$T/o" || fail "output of the failed rank lost"

# 4. A rank killed by a signal is reported as such.
launch --nproc_per_node=2 --master_port=0 -- \
  sh -c 'if [ "$RANK" = 0 ]; then kill -9 $$; fi; sleep 60' >/dev/null 2>"$T/e2"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "killed rank: exit $rc"
grep -q "rank 0 failed: killed by signal 9" "$T/e2" || fail "signal not reported: $(cat "$T/e2")"

# A rank killed by a signal and a lower rank that exits with an error on noticing it
# (as a peer does on losing its partner): often both are reaped in one pass (the killed
# rank's output stays open in a child of its own, so its end wakes nobody), and the
# error names the killed rank, the cause, not its echo. Rank 0 exits only once rank 1
# is dead (a zombie the launcher has not reaped yet, or gone), as a peer notices a
# death only after it: never before, whatever the host's pace.
launch --nproc_per_node=2 --master_port=0 -- sh -c \
  'if [ "$RANK" = 1 ]; then sleep 0.3; sleep 1 & echo $$ >"$0/p.tmp"; mv "$0/p.tmp" "$0/p"; kill -9 $$; fi
   until [ -e "$0/p" ]; do sleep 0.01; done; p=$(cat "$0/p")
   while s=$(cut -d" " -f3 "/proc/$p/stat" 2>/dev/null) && [ "$s" != Z ]; do sleep 0.01; done
   exit 1' "$T" >/dev/null 2>"$T/e2b"
grep -q "rank 1 failed: killed by signal 9" "$T/e2b" || fail "the echo named, not the cause: $(cat "$T/e2b")"

# 5. A command that does not exist fails cleanly.
launch --nproc_per_node=2 --master_port=0 -- /nonexistent/program >"$T/o3" 2>"$T/e3"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "missing program: exit $rc"
grep -q "launch: /nonexistent/program: not found" "$T/e3" || fail "missing program: $(cat "$T/e3")"

# 6. Bad flags.
"$RINGSIDE" launch --nproc_per_node=0 -- true 2>"$T/e4" && fail "nproc 0 accepted"
grep -q "nproc_per_node >= 1" "$T/e4" || fail "nproc 0 message: $(cat "$T/e4")"
"$RINGSIDE" launch --nproc_per_node=2 2>"$T/e5" && fail "missing command accepted"
grep -q "needs a command" "$T/e5" || fail "missing command message: $(cat "$T/e5")"
# refused FLAGS... -- MESSAGE: one error line naming the problem, non-zero exit.
refused() {
  local args=() message
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  message=$2
  "$RINGSIDE" launch "${args[@]}" -- true >/dev/null 2>"$T/e6" && fail "accepted: ${args[*]}"
  [ "$(wc -l <"$T/e6")" -eq 1 ] && grep -q "^ringside: error: .*$message" "$T/e6" \
    || fail "${args[*]}: expected one error line with '$message', got: $(cat "$T/e6")"
}
refused --nnodes=1:4 -- "elastic node counts are not supported"
refused --nnodes=two -- "--nnodes must be N or MIN:MAX"
refused --rdzv_backend=etcd -- "--rdzv_backend=etcd is not supported"
refused --rdzv_endpoint=host:99999 -- "--rdzv_endpoint must be HOST or HOST:PORT"
refused --rdzv_endpoint=a:1 --master_port=7 -- "either --rdzv_endpoint or --master_addr"
refused --standalone --nnodes=2 -- "--standalone picks its own endpoint"
refused --max_restarts=-1 -- "--max_restarts must be >= 0"

# 7. --max_restarts: a rank that fails in the first attempt only; the job succeeds in the
# second, which sees TORCHELASTIC_RESTART_COUNT=1.
out="$(launch --nproc_per_node=2 --master_port=0 --max_restarts=2 -- sh -c \
  'if [ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exit 3; fi
   echo "attempt $TORCHELASTIC_RESTART_COUNT of $TORCHELASTIC_MAX_RESTARTS"' 2>"$T/r1.err")"
rc=$?
[ "$rc" -eq 0 ] || fail "restarted job exited $rc: $(cat "$T/r1.err")"
# (Rank 0 of the first attempt may print before it is stopped.)
grep -qx '\[rank 0\] attempt 1 of 2' <<<"$out" && grep -qx '\[rank 1\] attempt 1 of 2' <<<"$out" \
  && ! grep -q 'attempt 2' <<<"$out" || fail "second attempt's output: $out"
grep -q "rank 1 failed: exited with status 3 .*restarting the group (restart 1 of 2)" "$T/r1.err" \
  || fail "restart not announced: $(cat "$T/r1.err")"
# A rank that always fails: K restarts, then the error says so.
launch --nproc_per_node=2 --master_port=0 --max_restarts=2 -- sh -c '[ "$RANK" = 0 ] || exit 4; sleep 60' \
  >/dev/null 2>"$T/r2.err"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "always failing: exit $rc"
[ "$(grep -c 'restarting the group' "$T/r2.err")" -eq 2 ] || fail "not 2 restarts: $(cat "$T/r2.err")"
grep -q "rank 1 failed: exited with status 4 (the others were stopped) (after 2 restarts)" "$T/r2.err" \
  || fail "final error: $(cat "$T/r2.err")"
# SIGTERM to the launcher ends the job: forwarded, no restart.
launch --nproc_per_node=2 --master_port=0 --max_restarts=3 -- sleep 60 >/dev/null 2>"$T/r3.err" &
l=$!
wait_for_rank "$l" 1 >/dev/null || fail "ranks never started"
pkill -TERM -P "$l"  # timeout(1), which passes it on to the launcher and its ranks.
wait "$l"; rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "terminated launcher: exit $rc"
! grep -q 'restarting' "$T/r3.err" || fail "restarted after SIGTERM: $(cat "$T/r3.err")"

# 8. Training under --max_restarts: a rank killed from outside after the first
# checkpoint; the group restarts from it (--resume; the first attempt found no
# checkpoint and started from step 0) and ends with the parameters of an undisturbed
# run, bit for bit.
# restart_case NAME NPROC VICTIM REPORTER STEPS TRAIN_ARGS...: REPORTER is the rank that
# prints progress (DDP's rank 0, PS's worker 0).
restart_case() {
  local name=$1 nproc=$2 victim_rank=$3 reporter=$4 steps=$5 l rc victim deadline; shift 5
  env -u RINGSIDE_RUN_ID -u TORCHELASTIC_RUN_ID timeout 120 "$RINGSIDE" launch --standalone \
    --nproc_per_node="$nproc" -- "$RINGSIDE" "$@" --out="$T/$name.undisturbed" >"$T/$name.u.out" 2>&1 \
    || fail "$name: undisturbed run exited $?: $(tail -n 5 "$T/$name.u.out")"
  env -u RINGSIDE_RUN_ID -u TORCHELASTIC_RUN_ID timeout 120 "$RINGSIDE" launch --standalone \
    --nproc_per_node="$nproc" --max_restarts=2 -- "$RINGSIDE" "$@" --out="$T/$name.restarted" --resume \
    >"$T/$name.k.out" 2>"$T/$name.k.err" &
  l=$!
  deadline=$(($(date +%s) + 60))
  until [ -s "$T/$name.restarted/checkpoint.bin" ] || [ "$(date +%s)" -ge "$deadline" ]; do sleep 0.01; done
  victim=$(pid_of_rank "$l" "$victim_rank") || fail "$name: no rank $victim_rank to kill"
  kill -KILL "$victim"
  wait "$l"; rc=$?
  [ "$rc" -eq 0 ] || fail "$name: restarted run exited $rc: $(tail -n 5 "$T/$name.k.out" "$T/$name.k.err")"
  [ "$(grep -c 'restarting the group' "$T/$name.k.err")" -eq 1 ] &&
    grep -q "rank $victim_rank failed: killed by signal 9 .*restarting the group (restart 1 of 2)" "$T/$name.k.err" \
    || fail "$name: the kill did not restart the group once: $(cat "$T/$name.k.err")"
  [ "$(grep -c "^\[rank $reporter\] resume: no checkpoint in .* yet, starting from step 0" "$T/$name.k.out")" -eq 1 ] \
    || fail "$name: not exactly one fresh start: $(grep resume "$T/$name.k.out")"
  # The second attempt went on from the checkpoint: its first progress line is past step 1.
  [ "$(grep -c "^\[rank $reporter\] epoch .* step 1/$steps " "$T/$name.k.out")" -eq 1 ] \
    || fail "$name: the restarted group began again at step 1: $(grep ' step ' "$T/$name.k.out")"
  /usr/bin/python3 "$COMPARE" 0 "$T/$name.undisturbed/checkpoint.bin" "$T/$name.restarted/checkpoint.bin" \
    || fail "$name: the restarted run does not end where the undisturbed one does"
}
short=(--model=mlp:784-64-10 --dataset=synthetic:train=4000,test=100,seed=5 --epochs=100
       --batch=16 --seed=3 --checkpoint_every=100 --timeout_s=20)
# DDP, 2 ranks: rank 1 killed (rank 0 hosts the store, so it reports second).
restart_case ddp 2 1 0 3000 train --strategy=ddp --steps=3000 "${short[@]}"
# PS, shard 0 = rank 0, workers = ranks 1-2: worker 1 killed; the shard's momentum
# comes back from the checkpoint too.
q=$(free_port)
restart_case ps 3 2 1 2000 train --strategy=ps --workers=2 --ps_servers=127.0.0.1:"$q" --steps=2000 "${short[@]}"
echo PASS
