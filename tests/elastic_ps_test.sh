#!/usr/bin/env bash
# Elastic PS (issue 23, --ps_min_workers=M), with the roles started by hand so that the
# shard's own failure handling is what is tested; faults come from outside (SIGKILL,
# SIGSTOP), the binary has no test hooks. Every process runs under timeout(1) and every
# wait is bounded; every child's exit status is checked.
#   a. 3 workers, M=2: worker 2 SIGKILLed mid-run -> the shard goes on (its records say
#      live_workers 2); worker 2 started again with the same command rejoins
#      (live_workers back to 3); everybody finishes with exit 0.
#   b. 3 workers, M=2: worker 2 SIGSTOPped -> dropped within 2x --timeout_s; the others
#      finish with exit 0.
#   c. 3 workers, M=3: worker 2 SIGKILLed -> one error line naming it and the minimum,
#      non-zero exits, within 2x --timeout_s (plus start-up slack).
#   d. Flag validation: one error line, exit 2.
set -uo pipefail
RINGSIDE="$1"
source "$(dirname "$0")/proc_util.sh"
T="${TEST_TMPDIR:-$(mktemp -d)}"
TIMEOUT=3
failures=0
# Parts a, b and c run at once (parts, tests/test_lib.sh: each mostly waits on a
# time-out); each kills what it started when it ends.
PART_TRAP='for j in $(jobs -p); do kill "$j" 2>/dev/null; done'
trap "$PART_TRAP" EXIT
# Flags every process of a job shares; --steps bounds the run (a few seconds here).
job=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5 --epochs=50
     --batch=8 --lr=0.05 --momentum=0.9 --seed=3 --threads=1 --eval_batch=240
     --workers=3 --ps_shards=1 --timeout_s=$TIMEOUT)
server() {  # server PORT OUT LOG ARGS...
  local p=$1 out=$2 log=$3; shift 3
  timeout 150 "$RINGSIDE" ps-server --shard=0 --listen="127.0.0.1:$p" --out="$out" \
    "${job[@]}" "$@" >"$log" 2>&1 &
}
worker() {  # worker ID PORT LOG ARGS...
  local w=$1 p=$2 log=$3; shift 3
  timeout 150 "$RINGSIDE" ps-worker --worker_id="$w" --ps_servers="127.0.0.1:$p" \
    "${job[@]}" "$@" >"$log" 2>&1 &
}
expect_ok() {  # expect_ok NAME PID LOG [SECONDS]
  local rc; bounded_wait "$2" "${4:-90}"; rc=$?
  if [ "$rc" -ne 0 ]; then fail "$1: exit status $rc"; tail -n 3 "$3"; else echo "ok   $1 (exit 0)"; fi
}
# wait_for_record FILE REGEX SECONDS: until a line of FILE matches REGEX; 1 on time-out.
wait_for_record() {
  local deadline; deadline=$(echo "$(now) + $3" | bc)
  until grep -qE "$2" "$1" 2>/dev/null; do
    (( $(echo "$(now) < $deadline" | bc) )) || return 1
    sleep 0.05
  done
}
kill_child() { pkill "-$1" -P "$2"; }  # The worker itself, the child of timeout(1).

# a. SIGKILL worker 2, then start it again: it rejoins.
part_rejoin() {
  local P s w w0 w1 w2 w2b slow t0 t1 rc steps
  P=$(free_port)
  server "$P" "$T/a" "$T/a_s.log" --ps_min_workers=2 --steps=3000; s=$!
  for w in 0 1 2; do worker $w "$P" "$T/a_w$w.log" --ps_min_workers=2 --steps=3000; eval "w$w=\$!"; done
  if wait_for_step "$T/a_w0.log" 20; then
    # Worker 0 (so the job) runs slowly until worker 2 is back, so that the job cannot
    # end first on a fast machine.
    ( throttle "$(pgrep -P "$w0")" ) & slow=$!
    kill_child KILL "$w2"; t0=$(now)
    bounded_wait "$w2" 10; rc=$?
    [ "$rc" -eq 137 ] || fail "killed worker 2 exited $rc, expected 137"
    if wait_for_record "$T/a/metrics.shard0.jsonl" '"live_workers":2' $((2 * TIMEOUT + 5)); then
      echo "     kill detected (live_workers 2) after $(elapsed_since "$t0")s"
    else
      fail "no shard record with live_workers 2 within $((2 * TIMEOUT + 5))s of the kill"
    fi
    worker 2 "$P" "$T/a_w2b.log" --ps_min_workers=2 --steps=3000; w2b=$!; t1=$(now)
    # A record of 3 live workers after one of 2: the rejoin.
    if timeout 60 bash -c "until awk '/\"live_workers\":2/{two=1} two && /\"live_workers\":3/{found=1} END{exit !found}' '$T/a/metrics.shard0.jsonl'; do sleep 0.1; done"; then
      echo "     rejoined (live_workers 3) $(elapsed_since "$t1")s after the restart"
    else
      fail "worker 2 never counted again after its restart: $(tail -n 2 "$T/a_w2b.log" "$T/a_s.log")"
    fi
    kill "$slow" 2>/dev/null; wait "$slow" 2>/dev/null
    expect_ok rejoin_worker0 "$w0" "$T/a_w0.log"
    expect_ok rejoin_worker1 "$w1" "$T/a_w1.log"
    expect_ok rejoin_worker2_again "$w2b" "$T/a_w2b.log"
    expect_ok rejoin_shard "$s" "$T/a_s.log"
    grep -q 'worker(s) 2 dropped' "$T/a_s.log" || fail "the shard did not say it dropped worker 2"
    grep -qE 'worker 2 rejoins at step [0-9]+' "$T/a_s.log" || fail "the shard did not say worker 2 rejoined"
    grep -qE 'rejoined the job at step [0-9]+' "$T/a_w2b.log" || fail "worker 2 did not say it rejoined"
    # Every step of the shard is recorded once, the last one included.
    steps=$(grep -oE '"step":[0-9]+' "$T/a/metrics.shard0.jsonl" | cut -d: -f2)
    [ "$(echo "$steps" | sort -n | uniq | wc -l)" -eq "$(echo "$steps" | wc -l)" ] || fail "a step recorded twice"
    [ "$(echo "$steps" | sort -n | tail -n 1)" -eq 2999 ] || fail "last shard record is step $(echo "$steps" | sort -n | tail -n 1), not 2999"
    echo "     live_workers per record: $(grep -oE '"live_workers":[0-9]+' "$T/a/metrics.shard0.jsonl" | sort | uniq -c | tr '\n' ' ')"
  else
    fail "worker 0 never got past step 20: $(tail -n 2 "$T/a_w0.log")"
  fi
}

# b. SIGSTOP worker 2: dropped within 2x the timeout, the others finish.
part_stop() {
  local P s w w0 w1 w2 t0 rc
  P=$(free_port)
  server "$P" "$T/b" "$T/b_s.log" --ps_min_workers=2 --steps=3000; s=$!
  for w in 0 1 2; do worker $w "$P" "$T/b_w$w.log" --ps_min_workers=2 --steps=3000; eval "w$w=\$!"; done
  if wait_for_step "$T/b_w0.log" 20; then
    kill_child STOP "$w2"; t0=$(now)
    if wait_for_record "$T/b_s.log" 'worker\(s\) 2 dropped' $((2 * TIMEOUT)); then
      echo "     stopped worker dropped after $(elapsed_since "$t0")s (timeout ${TIMEOUT}s)"
    else
      fail "stopped worker 2 not dropped within $((2 * TIMEOUT))s: $(tail -n 2 "$T/b_s.log")"
    fi
    expect_ok stop_worker0 "$w0" "$T/b_w0.log"
    expect_ok stop_worker1 "$w1" "$T/b_w1.log"
    expect_ok stop_shard "$s" "$T/b_s.log"
    grep -q '"live_workers":2' "$T/b/metrics.shard0.jsonl" || fail "no shard record with live_workers 2"
    kill_child KILL "$w2"; bounded_wait "$w2" 10; rc=$?
    [ "$rc" -eq 137 ] || fail "stopped worker 2 exited $rc after SIGKILL, expected 137"
  else
    fail "b: worker 0 never got past step 20: $(tail -n 2 "$T/b_w0.log")"
  fi
}

# c. M=3: losing worker 2 aborts the job, naming it and the minimum.
part_minimum() {
  local P s w w0 w1 w2 t0 rc below e
  P=$(free_port)
  server "$P" "$T/c" "$T/c_s.log" --ps_min_workers=3; s=$!
  for w in 0 1 2; do worker $w "$P" "$T/c_w$w.log" --ps_min_workers=3; eval "w$w=\$!"; done
  if wait_for_step "$T/c_w0.log" 20; then
    kill_child KILL "$w2"; t0=$(now)
    bounded_wait "$w2" 10; rc=$?
    [ "$rc" -eq 137 ] || fail "killed worker 2 exited $rc, expected 137"
    below='lost worker\(s\) 2: 2 live worker\(s\) left, fewer than --ps_min_workers=3'
    expect_error min_shard "$s" "$T/c_s.log" "^ringside: error: shard 0: .*$below" $((2 * TIMEOUT + 5))
    expect_error min_worker0 "$w0" "$T/c_w0.log" "^ringside: error: worker 0: .*$below" $((2 * TIMEOUT + 5))
    expect_error min_worker1 "$w1" "$T/c_w1.log" "^ringside: error: worker 1: .*$below" $((2 * TIMEOUT + 5))
    e=$(elapsed_since "$t0")
    (( $(echo "$e < $((2 * TIMEOUT + 5))" | bc) )) || fail "M=3: survivors took ${e}s"
    echo "     M=3 abort: ${e}s after the kill"
  else
    fail "c: worker 0 never got past step 20: $(tail -n 2 "$T/c_w0.log")"
  fi
}
part_start "a. worker 2 killed and started again" part_rejoin
part_start "b. worker 2 stopped" part_stop
part_start "c. M=3, worker 2 killed" part_minimum
parts_wait

# d. Flag validation: one error line, exit 2, nothing started.
check_flag() {  # check_flag NAME REGEX ARGS...
  local name=$1 regex=$2 rc; shift 2
  timeout 30 "$RINGSIDE" "$@" >"$T/d.log" 2>&1; rc=$?
  if [ "$rc" -ne 2 ]; then fail "$name: exit $rc, expected 2: $(cat "$T/d.log")"; return; fi
  [ "$(wc -l <"$T/d.log")" -eq 1 ] && grep -qE "^ringside: error: .*$regex" "$T/d.log" ||
    { fail "$name: $(cat "$T/d.log")"; return; }
  echo "ok   $name: $(cat "$T/d.log")"
}
check_flag flag_above_workers 'ps_min_workers must be in \[1, --workers=3\], got 4' \
  ps-worker --worker_id=1 --ps_servers=127.0.0.1:1 "${job[@]}" --ps_min_workers=4
check_flag flag_negative 'ps_min_workers must be in \[1, --workers=3\], got -1' \
  ps-server --listen=127.0.0.1:0 "${job[@]}" --ps_min_workers=-1
check_flag flag_asp 'ps_min_workers needs --ps_sync=bsp' \
  train --strategy=ps "${job[@]}" --ps_sync=asp --ps_min_workers=2
check_flag flag_ddp 'ps_min_workers needs --strategy=ps' \
  train --strategy=ddp --workers=2 --ps_min_workers=1

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all elastic PS checks passed"
