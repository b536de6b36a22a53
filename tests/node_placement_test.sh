#!/usr/bin/env bash
# Emulated nodes with several processes (--ranks_per_node), a slow node (--slow_node),
# the single baseline on a node (--strategy=single --node_cpus) and `ringside launch`
# with the same flags: bad values end with one error line and exit 1 before anything
# is created; the processes of one node share its cgroup, whose quota is the one asked
# for (F x the others' on the slow node); nothing is left after the runs. Needs root
# and a cgroup cpu controller; otherwise SKIPPED, loudly.
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

source "$(dirname "$0")/cpu_share_util.sh"  # ROOT, ours; skips without root.
before=$(ours)
nets_before=$(netns_ours)
data=(--dataset=synthetic:train=60000,test=100 --model=mlp:784-128-10 --threads=1 --batch=32)
cores=$(nproc)

# 1. Bad values: one line, exit 1, nothing created.
check_bad() {  # NAME REGEX VERB ARGS...
  local name=$1 regex=$2 rc; shift 2
  timeout 60 "$RINGSIDE" "$@" >"$T/$name.out" 2>&1; rc=$?
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, expected 1: $(cat "$T/$name.out")"
  [ "$(wc -l <"$T/$name.out")" -eq 1 ] || fail "$name: not one line: $(cat "$T/$name.out")"
  grep -qE "^ringside: error: .*$regex" "$T/$name.out" || fail "$name: $(cat "$T/$name.out")"
  [ -z "$(new_since "$before")" ] || fail "$name: cgroups were created: $(ours)"
  [ -z "$(added "$nets_before" "$(netns_ours)")" ] || fail "$name: namespaces were created: $(netns_ours)"
  echo "ok   $name: $(cat "$T/$name.out")"
}
tr=(train --steps=3 "${data[@]}")
check_bad ddp_k_not_dividing 'does not divide the 3 ranks' "${tr[@]}" --strategy=ddp --workers=3 --ranks_per_node=2 --node_cpus=0.2
check_bad ps_k_not_dividing 'does not divide the 3 processes' "${tr[@]}" --strategy=ps --workers=2 --ps_shards=1 --ranks_per_node=2 --node_cpus=0.2
check_bad k_zero 'ranks_per_node must be >= 1' "${tr[@]}" --strategy=ddp --workers=2 --ranks_per_node=0
check_bad slow_no_rank 'there is no rank 2' "${tr[@]}" --strategy=ddp --workers=2 --node_cpus=0.5 --slow_node=2:0.5
check_bad slow_no_worker 'there is no worker 2' "${tr[@]}" --strategy=ps --workers=2 --node_cpus=0.5 --slow_node=2:0.5
check_bad slow_f_zero 'F must be in \(0, 1\]' "${tr[@]}" --strategy=ddp --workers=2 --node_cpus=0.5 --slow_node=1:0
check_bad slow_f_big 'F must be in \(0, 1\]' "${tr[@]}" --strategy=ddp --workers=2 --node_cpus=0.5 --slow_node=1:1.5
check_bad slow_malformed 'expected R:F' "${tr[@]}" --strategy=ddp --workers=2 --node_cpus=0.5 --slow_node=one
check_bad slow_no_cpus 'slow_node needs --node_cpus' "${tr[@]}" --strategy=ddp --workers=2 --slow_node=1:0.5
check_bad too_many_cpus "but this machine has $cores" "${tr[@]}" --strategy=ddp --workers=4 --ranks_per_node=2 --node_cpus="$cores"
check_bad single_k 'single is one process on one node' "${tr[@]}" --strategy=single --node_cpus=0.5 --ranks_per_node=2
check_bad single_slow 'slow_node needs --strategy=ps or ddp' "${tr[@]}" --strategy=single --node_cpus=0.5 --slow_node=0:0.5
check_bad launch_nnodes 'need --nnodes=1' launch --nnodes=2 --node_cpus=0.5 -- true
check_bad launch_k 'does not divide the 3 ranks' launch --nproc_per_node=3 --ranks_per_node=2 --node_cpus=0.2 -- true

# watch_job NAME NGROUPS ARGS...: runs ringside ARGS in the background and records,
# once NGROUPS of our cgroups hold processes, each one's quota, period and process
# count ("group quota period procs" lines in NAME.groups).
watch_job() {
  local name=$1 ngroups=$2; shift 2
  timeout 180 "$RINGSIDE" "$@" >"$T/$name.out" 2>&1 &
  local pid=$! seen="" g
  for _ in $(seq 300); do
    seen=$(for g in $(ours); do
      [ "$(grep -c . "$ROOT/$g/cgroup.procs" 2>/dev/null)" -ge 1 ] && echo "$g"; done)
    [ "$(grep -c . <<<"$seen")" -ge "$ngroups" ] && break
    sleep 0.05
  done
  sleep 0.5  # Every process of a node joins its cgroup before exec; let them all start.
  for g in $seen; do
    local procs; procs=$(grep -c . "$ROOT/$g/cgroup.procs")
    if [ -e "$ROOT/$g/cpu.cfs_quota_us" ]; then
      echo "$g $(cat "$ROOT/$g/cpu.cfs_quota_us") $(cat "$ROOT/$g/cpu.cfs_period_us") $procs"
    else
      echo "$g $(cat "$ROOT/$g/cpu.max") $procs"
    fi
  done >"$T/$name.groups"
  echo "$pid" >"$T/$name.pid"
}
finish() {  # NAME NGROUPS: waits for the job; checks exit 0, NGROUPS groups, none left
  local name=$1 ngroups=$2 rc
  wait "$(cat "$T/$name.pid")"; rc=$?
  [ "$rc" -eq 0 ] || fail "$name: exit $rc: $(tail -3 "$T/$name.out")"
  [ "$(wc -l <"$T/$name.groups")" -eq "$ngroups" ] || fail "$name: expected $ngroups node cgroups: $(cat "$T/$name.groups")"
  [ -z "$(new_since "$before")" ] || fail "$name: cgroups left after the run: $(ours)"
}

# 2. DDP, 4 ranks, 2 per node at 0.5 CPU: two cgroups of two processes each.
watch_job ddp_k2 2 train "${data[@]}" --strategy=ddp --workers=4 --ranks_per_node=2 --node_cpus=0.5 --steps=300
finish ddp_k2 2
while read -r g quota period procs; do
  [ "$((quota * 2))" -eq "$period" ] || fail "ddp_k2: $g quota $quota of $period is not 0.5 CPU"
  [ "$procs" -eq 2 ] || fail "ddp_k2: $g holds $procs processes, expected 2"
done <"$T/ddp_k2.groups"
grep -q '^ringside: nodes: node 0 = rank 0 + rank 1, node 1 = rank 2 + rank 3 (2 per node)' "$T/ddp_k2.out" ||
  fail "ddp_k2: no placement summary: $(head -3 "$T/ddp_k2.out")"
grep -q 'test accuracy' "$T/ddp_k2.out" || fail "ddp_k2: did not train: $(tail -3 "$T/ddp_k2.out")"
echo "ok   ddp K=2: $(tr '\n' ';' <"$T/ddp_k2.groups") removed after the run"

# 3. PS, 2 shards + 2 workers, 2 per node: shard i and worker i on node i.
watch_job ps_k2 2 train "${data[@]}" --strategy=ps --workers=2 --ps_shards=2 --ranks_per_node=2 --node_cpus=0.5 --steps=300
finish ps_k2 2
while read -r g quota period procs; do
  [ "$procs" -eq 2 ] || fail "ps_k2: $g holds $procs processes, expected 2"
done <"$T/ps_k2.groups"
grep -q '^ringside: nodes: node 0 = shard 0 + worker 0, node 1 = shard 1 + worker 1' "$T/ps_k2.out" ||
  fail "ps_k2: no placement summary: $(head -3 "$T/ps_k2.out")"
echo "ok   ps K=2: $(tr '\n' ';' <"$T/ps_k2.groups") removed after the run"

# 4. A slow node: rank 1's node at 0.5 x 0.5 CPU, the other at 0.5.
watch_job slow 2 train "${data[@]}" --strategy=ddp --workers=2 --node_cpus=0.5 --slow_node=1:0.5 --steps=200
finish slow 2
mapfile -t rows <"$T/slow.groups"
read -r g0 q0 p0 _ <<<"${rows[0]}"
read -r g1 q1 p1 _ <<<"${rows[1]}"
[ "$p0" -eq "$p1" ] || fail "slow: periods differ: ${rows[*]}"
[ "$((q0 * 2))" -eq "$p0" ] || fail "slow: node 0 quota $q0 of $p0 is not 0.5 CPU"
[ "$((q1 * 2))" -eq "$q0" ] || fail "slow: node 1 quota $q1 is not 0.5 x node 0's $q0"
grep -q 'slow node: node 1 (holding rank 1) at 0.5 x 0.5 = 0.25 CPU' "$T/slow.out" ||
  fail "slow: banner does not name it: $(head -3 "$T/slow.out")"
echo "ok   slow node: ${rows[*]}; $(grep -o 'slow node:.*' "$T/slow.out")"

# 5. The single baseline on a node: one cgroup with the quota, output unprefixed.
watch_job single 1 train "${data[@]}" --strategy=single --node_cpus=0.5 --steps=3000
finish single 1
read -r g quota period procs <"$T/single.groups"
[ "$((quota * 2))" -eq "$period" ] || fail "single: quota $quota of $period is not 0.5 CPU"
[ "$procs" -eq 1 ] || fail "single: $procs processes in its cgroup"
grep -q '^test accuracy: ' "$T/single.out" || fail "single: output: $(tail -3 "$T/single.out")"
echo "ok   single on a node: $g $quota/$period, removed after the run"

# 5b. Single: a failure and SIGINT leave nothing; after SIGKILL the next start cleans up.
timeout 60 "$RINGSIDE" train --strategy=single --node_cpus=0.5 --steps=3 --dataset="$T/no-such-dir" \
  --model=mlp:784-128-10 >"$T/single_failed.out" 2>&1 && fail "single failed: exit 0"
[ -z "$(new_since "$before")" ] || fail "single failed: cgroups left: $(ours)"
watch_job single_int 1 train "${data[@]}" --strategy=single --node_cpus=0.5 --steps=100000
pid=$(cat "$T/single_int.pid")
kill -INT "$(pgrep -P "$pid" | head -1)" 2>/dev/null
wait "$pid"
for _ in $(seq 100); do [ -z "$(new_since "$before")" ] && break; sleep 0.1; done
[ -z "$(new_since "$before")" ] || fail "single SIGINT: cgroups left: $(ours)"
watch_job single_kill 1 train "${data[@]}" --strategy=single --node_cpus=0.5 --steps=100000
pid=$(cat "$T/single_kill.pid")
launcher=$(pgrep -P "$pid" | head -1)
pkill -KILL -P "$launcher"; kill -KILL "$launcher"; wait "$pid" 2>/dev/null
[ -n "$(new_since "$before")" ] || fail "single SIGKILL: expected leftovers of the killed launcher"
timeout 60 "$RINGSIDE" train --strategy=single --node_cpus=0.5 --steps=3 "${data[@]}" >"$T/single_next.out" 2>&1 ||
  fail "single next start: $(tail -2 "$T/single_next.out")"
[ -z "$(new_since "$before")" ] || fail "single SIGKILL: the next start left $(ours)"
echo "ok   single: failure, SIGINT and SIGKILL (next start) leave nothing"

# 6. `ringside launch` with the same flags: 4 processes, 2 per node, a slow node.
watch_job launch 2 launch --nproc_per_node=4 --ranks_per_node=2 --node_cpus=0.5 --slow_node=3:0.5 \
  --standalone -- sh -c 'echo "rank $RANK up"; exec sleep 2'
finish launch 2
mapfile -t rows <"$T/launch.groups"
for row in "${rows[@]}"; do
  read -r g q p procs <<<"$row"
  [ "$procs" -eq 2 ] || fail "launch: $g holds $procs processes, expected 2"
done
[ "$(grep -c 'up$' "$T/launch.out")" -eq 4 ] || fail "launch: $(cat "$T/launch.out")"
grep -q 'slow node: node 1 (holding rank 3)' "$T/launch.out" || fail "launch: banner: $(head -3 "$T/launch.out")"
echo "ok   launch: ${rows[*]}"

# 7. With emulated links (if namespaces work here): two DDP ranks and a PS shard+worker
# share a namespace, so each must bind its own port on the node's address.
if ip netns add "rs_probe_$$" 2>/dev/null && ip netns del "rs_probe_$$"; then
  watch_job ddp_net 2 train "${data[@]}" --strategy=ddp --workers=4 --ranks_per_node=2 --node_cpus=0.5 --network=bw=1gbit --steps=200
  finish ddp_net 2
  grep -q 'test accuracy' "$T/ddp_net.out" || fail "ddp_net: $(tail -3 "$T/ddp_net.out")"
  watch_job ps_net 2 train "${data[@]}" --strategy=ps --workers=2 --ps_shards=2 --ranks_per_node=2 --node_cpus=0.5 --network=bw=1gbit --steps=200
  finish ps_net 2
  grep -q 'test accuracy' "$T/ps_net.out" || fail "ps_net: $(tail -3 "$T/ps_net.out")"
  watch_job launch_net 1 launch --nproc_per_node=2 --ranks_per_node=2 --node_cpus=0.5 --network=bw=1gbit \
    --standalone -- sh -c 'echo "rank $RANK at $RINGSIDE_HOSTNAME master $MASTER_ADDR"; sleep 1'
  finish launch_net 1
  [ "$(grep -c 'at 10\..* master 10\.' "$T/launch_net.out")" -eq 2 ] || fail "launch_net: $(cat "$T/launch_net.out")"
  [ -z "$(added "$nets_before" "$(netns_ours)")" ] || fail "namespaces left: $(netns_ours)"
  echo "ok   links: DDP and PS with 2 per node trained; launch gave node addresses"
else
  skip_part "links: network namespaces unavailable here (needs root and iproute2)"
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
