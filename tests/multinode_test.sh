#!/usr/bin/env bash
# Two launchers as two nodes form one job: the README's multi-node command lines (DDP,
# 2 nodes x 2 ranks; PS, 1 shard + 3 workers over the same nodes), run as written there
# with the addresses, ports, binary and output directory substituted and a short
# training appended, end with the parameters of the same job under one launcher
# (compare_checkpoints.py: DDP bit for bit, PS within 1e-6). Run on 127.0.0.1 always, and on two network
# namespaces joined by a veth pair, each with its own address, where root allows.
set -uo pipefail
RINGSIDE="$1"; COMPARE="$2"; README="$3"
PY=/usr/bin/python3
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
free_port() {  # free_port [NETNS]: a TCP port free a moment ago (in NETNS if given).
  ${1:+ip netns exec "$1"} $PY -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'
}
# A short training run that every command below ends with (later flags win).
SHORT=(--model=mlp:784-32-10 --dataset=synthetic:train=512,test=64,seed=5 --epochs=1
       --steps=12 --batch=8 --lr=0.05 --seed=3 --timeout_s=30)

# The README's commands: the launcher lines between its markers, continuations joined.
mapfile -t COMMANDS < <(sed -n '/<!-- begin: commands run by tests\/multinode_test.sh -->/,/<!-- end: commands run by tests\/multinode_test.sh -->/p' "$README" \
  | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep -E '^ringside launch ' | tr -s ' ')
[ "${#COMMANDS[@]}" -eq 4 ] || { echo "FAIL: expected 4 launcher lines in the README, got ${#COMMANDS[@]}"; exit 1; }

# readme_command STRATEGY NODE_RANK: the README's line for that strategy and node.
readme_command() {
  local c
  for c in "${COMMANDS[@]}"; do
    if [[ "$c" == *"--node_rank=$2 "* && "$c" == *"--strategy=$1 "* ]]; then echo "$c"; return 0; fi
  done
  return 1
}

# run_node VARIANT STRATEGY NODE_RANK ADDR P Q PREFIX...: runs the README's launcher line for
# that node with 10.0.0.1 -> ADDR, 29400 -> P, 29401 -> Q, runs/ -> $T/VARIANT/, in the
# background after the words PREFIX (e.g. ip netns exec NS env RINGSIDE_HOSTNAME=...).
run_node() {
  local variant=$1 strategy=$2 node_rank=$3 addr=$4 p=$5 q=$6 line word; shift 6
  line=$(readme_command "$strategy" "$node_rank") || { fail "no README line for $strategy node $node_rank"; return 1; }
  line=${line//10.0.0.1/$addr}; line=${line//29400/$p}; line=${line//29401/$q}
  line=${line//runs\//$T/$variant/}
  local argv=()
  for word in $line; do
    if [ "$word" = ringside ]; then argv+=("$RINGSIDE"); else argv+=("$word"); fi
  done
  timeout 120 "$@" "${argv[@]}" "${SHORT[@]}" >"$T/$variant.$strategy.node$node_rank.log" 2>&1 &
}

# reference STRATEGY OUT ARGS...: the same job under one launcher (4 ranks, 127.0.0.1).
reference() {
  local strategy=$1 out=$2; shift 2
  timeout 120 "$RINGSIDE" launch --standalone --nproc_per_node=4 -- "$RINGSIDE" train \
    --strategy="$strategy" "$@" --out="$out" "${SHORT[@]}" >"$out.log" 2>&1 \
    || { fail "$strategy: one-launcher reference exited $?"; tail -n 5 "$out.log"; return 1; }
}

# two_nodes VARIANT ADDR0 NETNS0 NETNS1: each README pair on two launchers (in the
# namespaces if given, "" for none), each launcher's exit status checked, the result
# compared with the reference.
two_nodes() {
  local variant=$1 addr=$2 ns0=$3 ns1=$4 strategy p q pid0 pid1 rc0 rc1
  local pre0=() pre1=()
  [ -n "$ns0" ] && pre0=(ip netns exec "$ns0" env "RINGSIDE_HOSTNAME=$addr")
  [ -n "$ns1" ] && pre1=(ip netns exec "$ns1" env "RINGSIDE_HOSTNAME=$ADDR1")
  for strategy in ddp ps; do
    p=$(free_port "$ns0"); q=$(free_port "$ns0")
    while [ "$q" = "$p" ]; do q=$(free_port "$ns0"); done
    run_node "$variant" "$strategy" 0 "$addr" "$p" "$q" "${pre0[@]}"; pid0=$!
    run_node "$variant" "$strategy" 1 "$addr" "$p" "$q" "${pre1[@]}"; pid1=$!
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

# The references, once.
reference ddp "$T/ref_ddp"
reference ps "$T/ref_ps" --workers=3 --ps_servers=127.0.0.1:"$(free_port)"

# 1. Both launchers on 127.0.0.1.
two_nodes loopback 127.0.0.1 "" ""

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
  echo "SKIP netns variant: needs root and ip netns (ran the 127.0.0.1 variant only)"
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
