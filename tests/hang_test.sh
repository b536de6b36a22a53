#!/usr/bin/env bash
# Liveness (issue 23): a hung (SIGSTOPped, not dead) process of any role is found and
# named. For each role (PS shard, PS worker, PS worker 0, DDP rank, DDP rank 0 which
# hosts the store), started by hand and through the launcher, the process is stopped
# mid-training and every survivor must exit non-zero within 2 x --timeout_s of the
# stop, with one error line that names the stopped process (role and index, address
# where the survivor knows it, and the step); the launcher's summary names the stopped
# process, not the survivor that exited first. Faults come from outside (kill -STOP);
# every process runs under timeout(1) and every wait is bounded. The cases run at once.
set -uo pipefail
RINGSIDE="$1"
source "$(dirname "$0")/proc_util.sh"
T="${TEST_TMPDIR:-$(mktemp -d)}"
TIMEOUT=5
BOUND=$((2 * TIMEOUT))
failures=0
# The cases run at once (parts, tests/test_lib.sh): each waits about a time-out after
# its stop, so together they take about as long as one. A part's processes and the
# ones it stopped (their pids in its own file, $STOPPED: stop runs in a command
# substitution) are killed, and continued, when the part ends; the test's own trap does
# the same for every part.
STOPPED=$T/main.stopped
cleanup() {
  local p
  for p in $(cat "$@" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; kill -CONT "$p" 2>/dev/null; done
  for p in $(jobs -p); do kill "$p" 2>/dev/null; done
}
PART_TRAP='cleanup "$STOPPED"'
trap 'cleanup "$T"/*.stopped' EXIT
# A job that trains long enough (50 epochs) to be stopped mid-run, on one thread each.
job=(--model=mlp:784-48-24-10 --dataset=synthetic:train=24000,test=240,seed=5 --epochs=50
     --batch=8 --lr=0.05 --seed=3 --threads=1 --eval_batch=240 --timeout_s=$TIMEOUT)
printf '%s\n' "hang-test-token-0123456789abcdef" >"$T/token"
chmod 600 "$T/token"

# stop PID: SIGSTOP, remembered for the clean-up (in $STOPPED); prints the time of the stop.
stop() { kill -STOP "$1"; echo "$1" >>"$STOPPED"; now; }

# survivor NAME PID LOG T0 REGEX: PID (a timeout(1) wrapper) exits within BOUND
# seconds of T0, non-zero and not by timeout(1), and LOG has one error line, which
# matches REGEX. When it exited is when its log was last written (its error line, or
# the launcher's note after it): a case looks at its survivors one after another, and
# beside the other cases the later ones are looked at seconds after they ended.
survivor() {
  local name=$1 pid=$2 log=$3 t0=$4 regex=$5 rc deadline e line
  deadline=$(echo "$t0 + $BOUND + 5" | bc)
  while kill -0 "$pid" 2>/dev/null && (( $(echo "$(now) < $deadline" | bc) )); do sleep 0.05; done
  e=$(echo "$(stat -c %.9Y "$log") - $t0" | bc)
  if kill -0 "$pid" 2>/dev/null; then
    e=$(elapsed_since "$t0")
    fail "$name: still running ${e}s after the stop: $(tail -n 1 "$log")"
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; return
  fi
  wait "$pid"; rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then fail "$name: exit status $rc"; tail -n 3 "$log"; return; fi
  (( $(echo "$e <= $BOUND" | bc) )) || fail "$name: exited ${e}s after the stop (bound ${BOUND}s)"
  # (A launcher's log also holds its ranks' lines, prefixed "[rank R] ", and the
  # timeline's note after its own error line.)
  [ "$(grep -c '^ringside: error:' "$log")" -eq 1 ] || { fail "$name: not exactly one error line"; grep 'error' "$log"; return; }
  line=$(grep '^ringside: error:' "$log")
  grep -qE "$regex" <<<"$line" || { fail "$name: /$regex/ not in: $line"; return; }
  printf 'ok   %s (exit %d, %.1fs): %s\n' "$name" "$rc" "$e" "$(echo "$line" | cut -c1-200)"
}

# --- PS, roles started by hand: 2 shards, 2 workers.
# ps_by_hand NAME VICTIM: VICTIM is s0, s1, w0 or w1. Sets the pids (S0 S1 W0 W1), the
# ports (P0 P1), the logs ($T/NAME.<role>.log) and T0 (the stop).
ps_by_hand() {
  local name=$1 victim=$2 servers s w p
  P0=$(free_port); P1=$(free_port)
  servers="127.0.0.1:$P0,127.0.0.1:$P1"
  for s in 0 1; do
    p=$([ $s -eq 0 ] && echo "$P0" || echo "$P1")
    timeout 120 "$RINGSIDE" ps-server --shard=$s --listen="127.0.0.1:$p" --token_file="$T/token" \
      --workers=2 --ps_shards=2 "${job[@]}" >"$T/$name.s$s.log" 2>&1 &
    eval "S$s=$!"
  done
  for w in 0 1; do
    timeout 120 "$RINGSIDE" ps-worker --worker_id=$w --ps_servers="$servers" --token_file="$T/token" \
      --workers=2 --ps_shards=2 "${job[@]}" >"$T/$name.w$w.log" 2>&1 &
    eval "W$w=$!"
  done
  wait_for_step "$T/$name.w0.log" 50 || { fail "$name: training never started: $(tail -n 2 "$T/$name.w0.log")"; return 1; }
  local wrapper; wrapper=$(eval echo "\$${victim^^}")
  T0=$(stop "$(pgrep -P "$wrapper")")
}

# 1. A stopped shard: the workers' keepalive pings go unanswered; the other shard hears
#    it from the workers (their AbortRequest).
case_ps_shard() {
  STOPPED=$T/ps_s1.stopped
  ps_by_hand ps_s1 s1 || return
  at="shard 1 at 127.0.0.1:$P1: push-pull of step [0-9]+: stopped answering"
  # A worker names it from its own keepalive, or hears it first through shard 0 ("shard
  # 0 at ...: shard 0: worker W reports: shard 1 at ...": a race); either names shard 1,
  # its address and the step.
  survivor "by hand, shard 1 stopped: worker 0" "$W0" "$T/ps_s1.w0.log" "$T0" "worker 0: (.*reports: )?$at"
  survivor "by hand, shard 1 stopped: worker 1" "$W1" "$T/ps_s1.w1.log" "$T0" "worker 1: (.*reports: )?$at"
  survivor "by hand, shard 1 stopped: shard 0" "$S0" "$T/ps_s1.s0.log" "$T0" "shard 0: worker [01] reports: $at"
}

# 2. A stopped worker (1, then 0, which writes the checkpoints): the shards time out
#    on its push and name it with its address; the other worker hears that reason.
case_ps_worker() {
  local w=$1 o=$((1 - $1)) late
  STOPPED=$T/ps_w$w.stopped
  if ps_by_hand "ps_w$w" "w$w"; then
    # The shard names it when its push is late, or when the worker's stream breaks first
    # (its keepalive pings unanswered): a race; both name the worker, its address and
    # the step.
    late="(worker\(s\) $w did not push step [0-9]+ within ${TIMEOUT}s \(worker $w at ipv4:127\.0\.0\.1:[0-9]+\)"
    late+="|worker $w lost: its stream from ipv4:127\.0\.0\.1:[0-9]+ broke during step [0-9]+)"
    # A shard may also hear it first from the other worker ("worker W reports: ...").
    survivor "by hand, worker $w stopped: shard 0" "$S0" "$T/ps_w$w.s0.log" "$T0" "shard 0: .*$late"
    survivor "by hand, worker $w stopped: shard 1" "$S1" "$T/ps_w$w.s1.log" "$T0" "shard 1: .*$late"
    survivor "by hand, worker $w stopped: worker $o" "$(eval echo "\$W$o")" "$T/ps_w$w.w$o.log" "$T0" \
      "worker $o: shard [01] at 127\.0\.0\.1:[0-9]+: push-pull of step [0-9]+: .*$late"
  fi
}

# --- DDP, ranks started by hand: 3 ranks, rank 0 hosts the store.
# ddp_by_hand NAME VICTIM: sets R0 R1 R2 (timeout(1) wrappers) and T0.
ddp_by_hand() {
  local name=$1 victim=$2 port r
  port=$(free_port)
  for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      RINGSIDE_RUN_ID=hang RINGSIDE_TOKEN=hang-test-token-0123456789abcdef \
      timeout 120 "$RINGSIDE" train --strategy=ddp "${job[@]}" --out="$T/$name.out$r" \
      >"$T/$name.r$r.log" 2>&1 &
    eval "R$r=$!"
  done
  wait_for_step "$T/$name.r0.log" 50 || { fail "$name: training never started: $(tail -n 2 "$T/$name.r0.log")"; return 1; }
  T0=$(stop "$(pgrep -P "$(eval echo "\$R$victim")")")
}

# 3. A stopped rank: the survivors' collective makes no progress; they name it with
#    its address (the ranks that check in at the store are alive).
case_ddp_rank2() {
  local lost="step [0-9]+: .*peer rank 2 \(at [^)]+\): timed out after ${TIMEOUT}s"
  STOPPED=$T/ddp_r2.stopped
  ddp_by_hand ddp_r2 2 || return
  survivor "by hand, rank 2 stopped: rank 0" "$R0" "$T/ddp_r2.r0.log" "$T0" "rank 0: $lost"
  survivor "by hand, rank 2 stopped: rank 1" "$R1" "$T/ddp_r2.r1.log" "$T0" "rank 1: $lost"
}

# 4. A stopped store host (rank 0): the store does not answer within its deadline.
case_ddp_rank0() {
  local lost="step [0-9]+: .*peer rank 0 \(it hosts the store, which does not answer: stopped or gone\)"
  STOPPED=$T/ddp_r0.stopped
  ddp_by_hand ddp_r0 0 || return
  survivor "by hand, rank 0 stopped: rank 1" "$R1" "$T/ddp_r0.r1.log" "$T0" "rank 1: $lost"
  survivor "by hand, rank 0 stopped: rank 2" "$R2" "$T/ddp_r0.r2.log" "$T0" "rank 2: $lost"
}

# --- Through the launcher: its summary names the stopped process.
# launched NAME STRATEGY WORKERS VICTIM_RANK LABEL: one local job; stops the process
# with RANK=VICTIM_RANK (PS: shards are ranks 0..S-1, then the workers).
launched() {
  local name=$1 strategy=$2 workers=$3 victim=$4 label=$5 extra=() pid
  STOPPED=$T/$name.stopped
  [ "$strategy" = ps ] && extra=(--ps_shards=2)
  timeout 120 "$RINGSIDE" train --strategy="$strategy" --workers="$workers" "${extra[@]}" \
    "${job[@]}" --out="$T/$name" >"$T/$name.log" 2>&1 &
  local launcher=$!
  wait_for_step "$T/$name.log" 50 || { fail "$name: training never started: $(tail -n 2 "$T/$name.log")"; return; }
  pid=$(pid_of_rank "$launcher" "$victim") || { fail "$name: no process with RANK=$victim"; return; }
  local t0; t0=$(stop "$pid")
  survivor "launched $strategy, $label stopped: the launcher" "$launcher" "$T/$name.log" "$t0" \
    "^ringside: error: $label hung \(its process was stopped"
}
part_start "by hand, shard 1 stopped" case_ps_shard
part_start "by hand, worker 1 stopped" case_ps_worker 1
part_start "by hand, worker 0 stopped" case_ps_worker 0
part_start "launched ps, shard 1 stopped" launched l_ps_s1 ps 2 1 "shard 1"
part_start "launched ps, worker 0 stopped" launched l_ps_w0 ps 2 2 "worker 0"
if not_ps_part "DDP, rank 2 and rank 0 stopped, by hand and launched"; then
  part_start "by hand, rank 2 stopped" case_ddp_rank2
  part_start "by hand, rank 0 stopped" case_ddp_rank0
  part_start "launched ddp, rank 2 stopped" launched l_ddp_r2 ddp 3 2 "rank 2"
  part_start "launched ddp, rank 0 stopped" launched l_ddp_r0 ddp 3 0 "rank 0"
fi
parts_wait

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
