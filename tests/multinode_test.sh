#!/usr/bin/env bash
# Two launchers as two nodes form one job: the README's multi-node command lines (DDP,
# 2 nodes x 2 ranks; PS, 1 shard + 3 workers over the same nodes, the shard's address
# found through the job's store), run as written there
# with the addresses, ports, binary and output directory substituted and a short
# training appended, end with the parameters of the same job under one launcher
# (compare_checkpoints.py: DDP bit for bit, PS within 1e-6). Run on 127.0.0.1 always,
# and on two network namespaces joined by a veth pair, each with its own address,
# where root allows. The README's DDP pair with --max_restarts survives a rank of node
# 1 killed mid-run and ends where an undisturbed run does; an interrupted launcher ends
# both nodes' groups without a restart.
set -uo pipefail
RINGSIDE="$1"; COMPARE="$2"; README="$3"
source "$(dirname "$0")/proc_util.sh"
PY=/usr/bin/python3
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
# A short training run that every command below ends with (later flags win), and a
# longer one (3000 steps of about a millisecond) for the restarts, long enough to kill
# a rank after the first checkpoint and before the end.
SHORT=(--model=mlp:784-32-10 --dataset=synthetic:train=512,test=64,seed=5 --epochs=1
       --steps=12 --batch=8 --lr=0.05 --seed=3 --timeout_s=30)
LONG=(--model=mlp:784-64-10 --dataset=synthetic:train=4000,test=100,seed=5 --epochs=100
      --steps=3000 --batch=16 --seed=3 --timeout_s=20)

# The README's commands: the launcher lines between its markers, continuations joined.
mapfile -t COMMANDS < <(sed -n '/<!-- begin: commands run by tests\/multinode_test.sh -->/,/<!-- end: commands run by tests\/multinode_test.sh -->/p' "$README" \
  | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep -E '^ringside launch ' | tr -s ' ')
[ "${#COMMANDS[@]}" -eq 6 ] || { echo "FAIL: expected 6 launcher lines in the README, got ${#COMMANDS[@]}"; exit 1; }

# readme_command STRATEGY NODE_RANK: the README's line for that strategy and node
# (STRATEGY "ddp-restarts": the DDP line with --max_restarts).
readme_command() {
  local c want=no has
  [[ "$1" == *-restarts ]] && want=yes
  for c in "${COMMANDS[@]}"; do
    has=no; [[ "$c" == *--max_restarts=* ]] && has=yes
    if [[ "$c" == *"--node_rank=$2 "* && "$c" == *"--strategy=${1%-restarts} "* && "$has" == "$want" ]]; then
      echo "$c"; return 0
    fi
  done
  return 1
}
# flags_for WHICH: sets FLAGS to the training that WHICH's commands end with (LONG
# for "restarts" and "ddp-restarts", else SHORT).
flags_for() { if [[ "$1" == *restarts ]]; then FLAGS=("${LONG[@]}"); else FLAGS=("${SHORT[@]}"); fi; }

# run_node VARIANT WHICH NODE_RANK ADDR P PREFIX...: runs the README's launcher line for
# that node (WHICH: ddp, ps or ddp-restarts) with 10.0.0.1 -> ADDR, 29400 -> P, runs/ ->
# $T/VARIANT/, in the background after the words PREFIX (e.g. ip netns exec NS env
# RINGSIDE_HOSTNAME=...). Output: $T/VARIANT.WHICH.nodeN.log.
run_node() {
  local variant=$1 strategy=$2 node_rank=$3 addr=$4 p=$5 line word; shift 5
  line=$(readme_command "$strategy" "$node_rank") || { fail "no README line for $strategy node $node_rank"; return 1; }
  flags_for "$strategy"
  line=${line//10.0.0.1/$addr}; line=${line//29400/$p}
  line=${line//runs\//$T/$variant/}
  local argv=()
  for word in $line; do
    if [ "$word" = ringside ]; then argv+=("$RINGSIDE"); else argv+=("$word"); fi
  done
  timeout 120 "$@" "${argv[@]}" "${FLAGS[@]}" >"$T/$variant.$strategy.node$node_rank.log" 2>&1 &
}

# reference WHICH STRATEGY OUT ARGS...: the same job under one launcher (4 ranks,
# 127.0.0.1), with WHICH's training.
reference() {
  local strategy=$2 out=$3
  flags_for "$1"; shift 3
  timeout 120 "$RINGSIDE" launch --standalone --nproc_per_node=4 -- "$RINGSIDE" train \
    --strategy="$strategy" "$@" --out="$out" "${FLAGS[@]}" >"$out.log" 2>&1 \
    || { fail "$strategy: one-launcher reference exited $?"; tail -n 5 "$out.log"; return 1; }
}

# two_nodes VARIANT ADDR0 NETNS0 NETNS1: each README pair on two launchers (in the
# namespaces if given, "" for none), each launcher's exit status checked, the result
# compared with the reference.
two_nodes() {
  local variant=$1 addr=$2 ns0=$3 ns1=$4 strategy p pid0 pid1 rc0 rc1
  local pre0=() pre1=()
  [ -n "$ns0" ] && pre0=(ip netns exec "$ns0" env "RINGSIDE_HOSTNAME=$addr")
  [ -n "$ns1" ] && pre1=(ip netns exec "$ns1" env "RINGSIDE_HOSTNAME=$ADDR1")
  for strategy in ddp ps; do
    p=$(free_port "$ns0")
    run_node "$variant" "$strategy" 0 "$addr" "$p" "${pre0[@]}"; pid0=$!
    run_node "$variant" "$strategy" 1 "$addr" "$p" "${pre1[@]}"; pid1=$!
    wait "$pid0"; rc0=$?
    wait "$pid1"; rc1=$?
    local log0="$T/$variant.$strategy.node0.log" log1="$T/$variant.$strategy.node1.log"
    if [ "$rc0" -ne 0 ] || [ "$rc1" -ne 0 ]; then
      fail "$variant $strategy: launchers exited $rc0 (node 0) and $rc1 (node 1)"
      tail -n 5 "$log0" "$log1"; continue
    fi
    # The result line comes from DDP's rank 0, or PS's worker 0 (rank 1; rank 0 is the shard).
    local out="$T/$variant/ddp2x2" who='rank 0'
    [ "$strategy" = ps ] && out="$T/$variant/ps3" who='rank 1'
    grep -q "^\[$who\] test accuracy: " "$log0" || fail "$variant $strategy: no test accuracy from $who"
    # DDP reduces in a fixed order: bit for bit. A PS shard sums the workers' gradients
    # in arrival order, so the rounding may differ in the last bits.
    local tolerance=0
    [ "$strategy" = ps ] && tolerance=1e-6
    if $PY "$COMPARE" "$tolerance" "$T/ref_$strategy/checkpoint.bin" "$out/checkpoint.bin"; then
      echo "ok   $variant $strategy: two launchers end where one does"
    else
      fail "$variant $strategy: two launchers do not end where one does"
    fi
  done
}

# restarts: the README's DDP pair with --max_restarts on 127.0.0.1; rank 3 (node 1)
# killed from outside after the first checkpoint. Node 1's launcher sees it, node 0's
# learns it through their rendezvous, both restart from the checkpoint (which the first
# attempt had to write: it found none and started from step 0) and end where an
# undisturbed run does.
restarts() {
  local p l0 l1 rc0 rc1 victim deadline log0="$T/loopback.ddp-restarts.node0.log"
  local log1="$T/loopback.ddp-restarts.node1.log"
  p=$(free_port)
  run_node loopback ddp-restarts 0 127.0.0.1 "$p"; l0=$!
  run_node loopback ddp-restarts 1 127.0.0.1 "$p"; l1=$!
  deadline=$(($(date +%s) + 60))
  until [ -s "$T/loopback/ddp2x2r/checkpoint.bin" ] || [ "$(date +%s)" -ge "$deadline" ]; do sleep 0.01; done
  victim=$(pid_of_rank "$l1" 3) && kill -KILL "$victim" || fail "restarts: no rank 3 to kill"
  wait "$l0"; rc0=$?
  wait "$l1"; rc1=$?
  if [ "$rc0" -ne 0 ] || [ "$rc1" -ne 0 ]; then
    fail "restarts: launchers exited $rc0 (node 0) and $rc1 (node 1)"; tail -n 5 "$log0" "$log1"; return
  fi
  # Each launcher restarted once. Node 1 names its rank that failed first: rank 3, or
  # rank 2 if it noticed its lost peer and exited first. Node 0 names that, or its own
  # rank that noticed first.
  [ "$(grep -c '^ringside: .*restarting the group' "$log0")" -eq 1 ] \
    && grep -q '^ringside: .*restarting the group (restart 1 of 3)' "$log0" \
    || fail "restarts: node 0 did not restart once: $(grep ringside: "$log0")"
  [ "$(grep -c '^ringside: .*restarting the group' "$log1")" -eq 1 ] \
    && grep -qE '^ringside: rank [23] failed: .*restarting the group \(restart 1 of 3\)' "$log1" \
    || fail "restarts: node 1 did not restart once for its rank: $(grep ringside: "$log1")"
  [ "$(grep -c '^\[rank 0\] resume: no checkpoint in .* yet, starting from step 0' "$log0")" -eq 1 ] \
    || fail "restarts: not exactly one fresh start"
  [ "$(grep -c '^\[rank 0\] epoch .* step 1/3000 ' "$log0")" -eq 1 ] \
    || fail "restarts: the second round began again at step 1: $(grep ' step ' "$log0")"
  if $PY "$COMPARE" 0 "$T/ref_long/checkpoint.bin" "$T/loopback/ddp2x2r/checkpoint.bin"; then
    echo "ok   restarts: two restarted launchers end where an undisturbed run does"
  else
    fail "restarts: the restarted job does not end where an undisturbed run does"
  fi
}

# interrupt: SIGTERM to node 1's launcher (with restarts left) ends the job on both
# nodes, promptly and without a restart; node 0's error names node 1's rank.
interrupt() {
  local p l0 l1 rc0 rc1
  p=$(free_port)
  timeout 60 "$RINGSIDE" launch --nnodes=2 --node_rank=0 --master_port="$p" --max_restarts=2 -- sleep 60 >"$T/int0.log" 2>&1 &
  l0=$!
  timeout 60 "$RINGSIDE" launch --nnodes=2 --node_rank=1 --master_port="$p" --max_restarts=2 -- sleep 60 >"$T/int1.log" 2>&1 &
  l1=$!
  wait_for_rank "$l0" 0 >/dev/null && wait_for_rank "$l1" 1 >/dev/null || fail "interrupt: ranks never started"
  pkill -TERM -P "$l1"  # Node 1's launcher (the child of timeout).
  wait "$l0"; rc0=$?
  wait "$l1"; rc1=$?
  [ "$rc0" -ne 0 ] && [ "$rc0" -ne 124 ] && [ "$rc1" -ne 0 ] && [ "$rc1" -ne 124 ] \
    || fail "interrupt: launchers exited $rc0 (node 0) and $rc1 (node 1)"
  ! grep -q restarting "$T/int0.log" "$T/int1.log" || fail "interrupt: restarted: $(cat "$T/int0.log" "$T/int1.log")"
  grep -q "^ringside: error: node 1: rank 1 failed: killed by signal 15" "$T/int0.log" \
    || fail "interrupt: node 0's error: $(cat "$T/int0.log")"
}

# unshared_out: two nodes resuming with --out on different disks (node 0's has a
# checkpoint, node 1's none) are refused on both, naming the remedy, instead of node 1
# silently starting over.
unshared_out() {
  local p rc0 rc1 n
  p=$(free_port)
  mkdir -p "$T/disk0" "$T/disk1"
  cp "$T/ref_ddp/checkpoint.bin" "$T/disk0/"
  for n in 0 1; do
    timeout 60 "$RINGSIDE" launch --nnodes=2 --node_rank="$n" --master_port="$p" -- \
      "$RINGSIDE" train --strategy=ddp "${SHORT[@]}" --resume --out="$T/disk$n" >"$T/unshared$n.log" 2>&1 &
    eval "l$n=\$!"
  done
  wait "$l0"; rc0=$?
  wait "$l1"; rc1=$?
  [ "$rc0" -eq 1 ] && [ "$rc1" -eq 1 ] || fail "unshared out: launchers exited $rc0 and $rc1, expected 1 and 1"
  for n in 0 1; do
    grep -q "rank 1 starts from step 0 (no checkpoint) but rank 0 resumes from step 12: with --resume every rank reads .*, so --out must be a directory every node shares" \
      "$T/unshared$n.log" || fail "unshared out: node $n's log: $(tail -3 "$T/unshared$n.log")"
  done
  echo "ok   unshared out: both nodes refuse to resume from different checkpoints"
}

# The references, once.
reference short ddp "$T/ref_ddp"
reference short ps "$T/ref_ps" --workers=3
reference restarts ddp "$T/ref_long"

# 1. Both launchers on 127.0.0.1, then the restarts there.
two_nodes loopback 127.0.0.1 "" ""
restarts
interrupt
unshared_out

# 2. Two network namespaces, 10.213.0.1 and 10.213.0.2, joined by a veth pair.
NS0="mn$$a"; NS1="mn$$b"; ADDR1=10.213.0.2
cleanup() { ip netns del "$NS0" 2>/dev/null; ip netns del "$NS1" 2>/dev/null; }
trap cleanup EXIT
if [ "$(id -u)" -eq 0 ] && ip netns add "$NS0" 2>/dev/null && ip netns add "$NS1" 2>/dev/null; then
  if ip link add "mnv$$a" type veth peer name "mnv$$b" &&
     ip link set "mnv$$a" netns "$NS0" && ip link set "mnv$$b" netns "$NS1" &&
     ip -n "$NS0" addr add 10.213.0.1/24 dev "mnv$$a" && ip -n "$NS1" addr add "$ADDR1/24" dev "mnv$$b" &&
     ip -n "$NS0" link set lo up && ip -n "$NS1" link set lo up &&
     ip -n "$NS0" link set "mnv$$a" up && ip -n "$NS1" link set "mnv$$b" up; then
    two_nodes netns 10.213.0.1 "$NS0" "$NS1"
  else
    fail "netns: could not join the namespaces with a veth pair"
  fi
else
  skip_part "the netns variant: needs root and ip netns (ran the 127.0.0.1 variant only)"
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
