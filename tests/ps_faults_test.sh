#!/usr/bin/env bash
# The parameter server never hangs: a worker killed (SIGKILL, from this script) mid-
# training under BSP (through the local launcher, and with the roles started by hand so
# that the survivors' own failure detection is what is tested), a shard killed
# mid-training, a worker whose flags differ from the servers', and bad flags all end
# with non-zero exits and one clear error line, within bounded time. Every process runs
# under timeout(1); faults are injected from outside, the binary has no test hooks.
set -uo pipefail
RINGSIDE="$1"
source "$(dirname "$0")/proc_util.sh"
T="${TEST_TMPDIR:-$(mktemp -d)}"
TIMEOUT=5
failures=0
# Whatever is left in the background (after a failed check) is stopped on the way out.
trap 'for j in $(jobs -p); do kill "$j" 2>/dev/null; done' EXIT
# Flags every process of a job shares (the shards compare the whole configuration).
job=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5 --epochs=50
     --batch=8 --lr=0.05 --momentum=0.9 --seed=3 --threads=1 --eval_batch=240)
server() {  # server SHARD PORT LOG ARGS...: one shard in the background.
  local s=$1 p=$2 log=$3; shift 3
  timeout 120 "$RINGSIDE" ps-server --shard="$s" --listen="127.0.0.1:$p" --timeout_s=$TIMEOUT \
    "${job[@]}" "$@" >"$log" 2>&1 &
}
worker() {  # worker ID SERVERS LOG ARGS...: one worker in the background.
  local w=$1 servers=$2 log=$3; shift 3
  timeout 120 "$RINGSIDE" ps-worker --worker_id="$w" --ps_servers="$servers" --timeout_s=$TIMEOUT \
    "${job[@]}" "$@" >"$log" 2>&1 &
}
within() {  # within NAME T0 SECONDS
  local e; e=$(elapsed_since "$2")
  (( $(echo "$e < $3" | bc) )) || fail "$1: took ${e}s, more than $3s"
  echo "     $1: ${e}s"
}

# a1. Through the launcher: worker 1 of 3 (rank 3 after shards 0 and 1) is killed once
#     worker 0 is past step 2 under BSP (its forward of step 2 had every worker's push
#     of step 1; the progress line says "step 3/..."); the job
#     fails within ~30 s, its one error line naming the killed process.
timeout 90 "$RINGSIDE" train --strategy=ps --workers=3 --ps_shards=2 --timeout_s=$TIMEOUT \
  "${job[@]}" >"$T/launch.out" 2>"$T/launch.err" &
launched=$!
if wait_for_step "$T/launch.out" 3 && victim=$(wait_for_rank "$launched" 3); then
  kill -KILL "$victim"; t0=$(now)
  bounded_wait "$launched" 30; rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$rc" -eq 254 ]; then
    fail "launched job with a killed worker: exit status $rc"; tail -n 5 "$T/launch.out" "$T/launch.err"
  elif [ "$(wc -l <"$T/launch.err")" -ne 1 ] || ! grep -qE '^ringside: error: worker 1 failed: killed by signal 9' "$T/launch.err"; then
    fail "launched job: stderr is not one line naming worker 1: $(cat "$T/launch.err")"
  else
    echo "ok   launched_kill (exit $rc): $(cat "$T/launch.err")"
  fi
  within launched_kill "$t0" 30
else
  fail "launched job: never saw worker 0 past step 2 with worker 1 (rank 3) running: $(tail -n 2 "$T/launch.out" "$T/launch.err")"
  kill "$launched" 2>/dev/null; wait "$launched" 2>/dev/null
fi

# a2. The same by hand: 2 shards, 3 workers, worker 1 killed (SIGKILL, no goodbye)
#     once worker 0 is past step 2 (as in a1). The other workers and both shards fail
#     within the timeout plus a margin; the workers and the shard they wait on name
#     worker 1.
P0=$(free_port); P1=$(free_port)
while [ "$P1" = "$P0" ]; do P1=$(free_port); done
SERVERS="127.0.0.1:$P0,127.0.0.1:$P1"
ps_job=(--workers=3 --ps_shards=2)
server 0 "$P0" "$T/a_s0.log" "${ps_job[@]}"; s0=$!
server 1 "$P1" "$T/a_s1.log" "${ps_job[@]}"; s1=$!
worker 0 "$SERVERS" "$T/a_w0.log" "${ps_job[@]}"; w0=$!
worker 1 "$SERVERS" "$T/a_w1.log" "${ps_job[@]}"; w1=$!
worker 2 "$SERVERS" "$T/a_w2.log" "${ps_job[@]}"; w2=$!
wait_for_step "$T/a_w0.log" 3 || fail "worker 0 never got past step 2: $(tail -n 2 "$T/a_w0.log")"
pkill -KILL -P "$w1"; t0=$(now)  # SIGKILL worker 1 itself (the child of timeout)
bounded_wait "$w1" 30; rc=$?
# timeout(1) reports its child's death by SIGKILL as 128 + 9.
[ "$rc" -eq 137 ] || { fail "killed worker 1 exited $rc, expected 137"; tail -n 3 "$T/a_w1.log"; }
# Shards list every worker that did not push: worker 0 may have stopped first because the
# other shard aborted ("worker(s) 0, 1 did not push").
lost='worker 1 lost|worker\(s\) ([0-9]+, )*1(, [0-9]+)* did not push'
expect_error crash_worker0 "$w0" "$T/a_w0.log" "^ringside: error: worker 0: .*($lost)"
expect_error crash_worker2 "$w2" "$T/a_w2.log" "^ringside: error: worker 2: .*($lost)"
# The kill lands anywhere in a step: a shard that worker 1 had already sent its step's
# chunks to has nobody waiting on it and gives up as idle, but the shard the others
# wait on names worker 1 (under BSP they cannot go on without it).
# A shard may also hear of the loss first from a worker that the other shard failed
# ("shard 0: worker 0 reports: shard 1 at ...: shard 1: worker 1 lost: ...").
idle='no worker has called for'
relayed='worker [0-9]+ reports: .*'
expect_error crash_shard0 "$s0" "$T/a_s0.log" "^ringside: error: shard 0: ($relayed)?($lost|$idle).*job aborted"
expect_error crash_shard1 "$s1" "$T/a_s1.log" "^ringside: error: shard 1: ($relayed)?($lost|$idle).*job aborted"
tail -q -n 1 "$T/a_s0.log" "$T/a_s1.log" | grep -qE "$lost" || fail "crash: no shard named worker 1"
within crash_survivors "$t0" $((TIMEOUT + 8))

# b. Shard 1 of 2 is killed (SIGKILL) mid-training, once worker 0 is past step 2 and
#    slowed down from here (SIGSTOP / SIGCONT, so that it is mostly between calls, as a
#    slow worker is): every worker fails within the timeout plus a margin, naming the
#    shard and its address.
P0=$(free_port); P1=$(free_port)
while [ "$P1" = "$P0" ]; do P1=$(free_port); done
SERVERS="127.0.0.1:$P0,127.0.0.1:$P1"
ps_job=(--workers=2 --ps_shards=2)
server 0 "$P0" "$T/b_s0.log" "${ps_job[@]}"; s0=$!
server 1 "$P1" "$T/b_s1.log" "${ps_job[@]}"; s1=$!
worker 0 "$SERVERS" "$T/b_w0.log" "${ps_job[@]}"; w0=$!
worker 1 "$SERVERS" "$T/b_w1.log" "${ps_job[@]}"; w1=$!
if wait_for_step "$T/b_w0.log" 3; then
  throttle "$(pgrep -P "$w0")" & slow=$!
  sleep 0.5
  pkill -KILL -P "$s1"; t0=$(now)  # SIGKILL the shard itself (the child of timeout)
  expect_error kill_worker0 "$w0" "$T/b_w0.log" "^ringside: error: worker 0: .*shard 1 at 127\.0\.0\.1:$P1"
  expect_error kill_worker1 "$w1" "$T/b_w1.log" "^ringside: error: worker 1: .*shard 1 at 127\.0\.0\.1:$P1"
  within kill_workers "$t0" $((TIMEOUT + 8))
  # The surviving shard hears of it too (its workers lost or late) and stops.
  expect_error kill_shard0 "$s0" "$T/b_s0.log" "^ringside: error: shard 0: .*job aborted" $((TIMEOUT + 8))
  bounded_wait "$slow" 10 || fail "throttling worker 0 did not end with it"
else
  fail "worker 0 never got past step 2: $(tail -n 2 "$T/b_w0.log")"
fi
for p in "$s0" "$s1" "$w0" "$w1"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done

# c. A worker whose --lr differs from the servers': one line, exit 1; the reply tells the
# worker nothing of the shard's configuration, the shard's log names the field.
P0=$(free_port)
ps_job=(--workers=1 --ps_shards=1)
server 0 "$P0" "$T/c_s0.log" "${ps_job[@]}"; s0=$!
t0=$(now)
timeout 60 "$RINGSIDE" ps-worker --worker_id=0 --ps_servers="127.0.0.1:$P0" --timeout_s=$TIMEOUT \
  "${job[@]}" "${ps_job[@]}" --lr=0.5 >"$T/c_w0.log" 2>&1 &
expect_error config_mismatch $! "$T/c_w0.log" \
  "^ringside: error: worker 0: shard 0 at 127\.0\.0\.1:$P0: .*register: configuration mismatch$"
within config_mismatch "$t0" $((TIMEOUT + 3))
grep -q "^ps: shard 0: refused a registration: worker 0 runs a different configuration than shard 0: modified: lr: 0\.05 -> 0\.5$" "$T/c_s0.log" \
  || fail "config_mismatch: the shard's log does not name the differing field: $(tail -n 2 "$T/c_s0.log")"
kill "$s0" 2>/dev/null; wait "$s0" 2>/dev/null

# c2. A shard whose port another program listens on: one line naming the address,
# exit 1, on both transports (it crashed once: the half-built server's teardown).
/usr/bin/python3 -c 'import socket,time; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' >"$T/busy.port" &
busy=$!
for i in $(seq 50); do [ -s "$T/busy.port" ] && break; sleep 0.1; done
P=$(cat "$T/busy.port")
for transport in grpc tcp; do
  server 0 "$P" "$T/busy_$transport.log" --workers=1 --ps_shards=1 --ps_transport=$transport
  expect_error "port_in_use_$transport" $! "$T/busy_$transport.log" \
    "^ringside: error: parameter-server shard 0 cannot listen on 127\.0\.0\.1:$P "
done
kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null

# d. Bad flags: exit 2 (a usage error; WANT=1: found while running) with exactly one
# line on stderr, "ringside: error: ...", at once.
bad_flags() {  # [WANT=STATUS] bad_flags NAME REGEX ARGS...
  local name=$1 regex=$2 rc want=${WANT:-2}; shift 2
  timeout 30 "$RINGSIDE" "$@" >"$T/$name.out" 2>"$T/$name.err"; rc=$?
  if [ "$rc" -ne "$want" ]; then fail "$name: exit status $rc, expected $want"; cat "$T/$name.err"; return; fi
  if [ "$(wc -l <"$T/$name.err")" -ne 1 ] || ! grep -qE "^ringside: error: .*$regex" "$T/$name.err"; then
    fail "$name: stderr is not one 'ringside: error:' line matching /$regex/:"; cat "$T/$name.err"; return
  fi
  echo "ok   $name: $(cat "$T/$name.err")"
}
bad_flags sync_foo "--ps_sync must be bsp, ssp:K \(K >= 0\) or asp, got 'foo'" train --strategy=ps --ps_sync=foo
bad_flags sync_neg "got 'ssp:-1'" train --strategy=ps --ps_sync=ssp:-1
bad_flags shards_0 "--ps_shards must be >= 1, got 0" train --strategy=ps --ps_shards=0
bad_flags chunk_0 "--ps_chunk_kb must be in \[1, 65536\], got 0" train --strategy=ps --ps_chunk_kb=0
bad_flags server_sync_foo "--ps_sync" ps-server --ps_sync=foo
bad_flags server_shard "--shard=2 is outside \[0, --ps_shards=2\)" ps-server --shard=2 --ps_shards=2
bad_flags worker_id "--worker_id=5 is outside \[0, --workers=2\)" ps-worker --worker_id=5 --workers=2 --ps_servers=127.0.0.1:5
for spec in localhost 127.0.0.1:99999 :5 127.0.0.1:0 127.0.0.1:x; do
  bad_flags "servers_${spec//[:.]/_}" "--ps_servers: '$spec' is not host:port" ps-worker --ps_servers="$spec"
done
bad_flags servers_empty "--ps_servers is empty" ps-worker --ps_servers=
bad_flags servers_count "--ps_servers lists 1 addresses for --ps_shards=2" ps-worker --ps_shards=2 --ps_servers=127.0.0.1:5
# More shards than parameters: a 10-parameter model (mlp:4-2 over 2x2 inputs, 2 classes).
# The shards' registration wait (--timeout_s) is long enough for the worker's refusal to
# come first even when 12 processes start at once on a loaded machine.
tiny=(--model=mlp:4-2 --dataset=synthetic:train=64,test=16,shape=1x2x2,classes=2 --workers=1 --timeout_s=20)
eleven=$(for i in $(seq 11); do echo -n "127.0.0.1:$((40000 + i)),"; done)
WANT=1 bad_flags shards_gt_params "--ps_shards=11 exceeds the model's 10 parameters" \
  ps-worker --ps_shards=11 --ps_servers="${eleven%,}" "${tiny[@]}"
# Through the launcher the reason is in the children's output; stderr names the process.
WANT=1 bad_flags train_shards_gt_params "worker 0 failed: exited with status 1" \
  train --strategy=ps --ps_shards=11 "${tiny[@]}"
grep -q "exceeds the model's 10 parameters" "$T/train_shards_gt_params.out" \
  || fail "train_shards_gt_params: the reason is not in the output: $(tail -n 3 "$T/train_shards_gt_params.out")"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
