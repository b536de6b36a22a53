#!/usr/bin/env bash
# Emulated nodes with a CPU share (--node_cpus): bad values end with one error line and
# exit 1 before anything is created; the processes of a DDP and a PS job run inside
# their node's cgroup with the quota asked for; the cgroups are gone after a normal
# end, a failed job and a SIGINT, and those a SIGKILLed launcher left are removed at
# the next start; calibrate's PS CPU phase through a cluster's link. Needs root and a cgroup cpu controller; otherwise SKIPPED, loudly.
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

source "$(dirname "$0")/cpu_share_util.sh"  # ROOT, ours; skips without root.
before=$(ours)
data=(--dataset=synthetic:train=60000,test=100 --model=mlp:784-128-10 --threads=1 --batch=32)

# 1. Bad values: one line, exit 1, nothing created.
check_bad() {  # NAME REGEX ARGS...
  local name=$1 regex=$2 rc; shift 2
  timeout 60 "$RINGSIDE" train --steps=3 "${data[@]}" "$@" >"$T/$name.out" 2>&1; rc=$?
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, expected 1: $(cat "$T/$name.out")"
  [ "$(wc -l <"$T/$name.out")" -eq 1 ] || fail "$name: not one line: $(cat "$T/$name.out")"
  grep -qE "^ringside: error: .*$regex" "$T/$name.out" || fail "$name: $(cat "$T/$name.out")"
  [ -z "$(new_since "$before")" ] || fail "$name: cgroups were created: $(ours)"
  echo "ok   $name: $(cat "$T/$name.out")"
}
check_bad zero 'needs more than 0 CPUs' --strategy=ddp --workers=2 --node_cpus=0
check_bad negative 'needs more than 0 CPUs' --strategy=ddp --workers=2 --node_cpus=-1
check_bad word 'expected "auto", "none" or a number' --strategy=ddp --workers=2 --node_cpus=lots
cores=$(nproc)
check_bad too_many "but this machine has $cores" --strategy=ddp --workers=2 --node_cpus="$cores"

# 2. A DDP job of 2 nodes at 0.5 CPU: every rank in its own node's cgroup, quota 0.5 x
# period; nothing left after it ends.
watch_job() {  # NAME NPROC ARGS...: runs the job, records each of our cgroups' quota and members
  local name=$1 nproc=$2; shift 2
  timeout 120 "$RINGSIDE" train "${data[@]}" "$@" >"$T/$name.out" 2>&1 &
  local pid=$! seen=""
  for _ in $(seq 200); do
    seen=$(for g in $(ours); do
      [ "$(grep -c . "$ROOT/$g/cgroup.procs" 2>/dev/null)" -ge 1 ] && echo "$g"; done)
    [ "$(grep -c . <<<"$seen")" -ge "$nproc" ] && break
    sleep 0.05
  done
  for g in $seen; do
    if [ -e "$ROOT/$g/cpu.cfs_quota_us" ]; then
      echo "$g $(cat "$ROOT/$g/cpu.cfs_quota_us") $(cat "$ROOT/$g/cpu.cfs_period_us")"
    else
      echo "$g $(cat "$ROOT/$g/cpu.max")"
    fi
  done >"$T/$name.groups"
  echo "$pid" >"$T/$name.pid"
}
watch_job ddp 2 --strategy=ddp --workers=2 --node_cpus=0.5 --steps=400
wait "$(cat "$T/ddp.pid")"; rc=$?
[ "$rc" -eq 0 ] || fail "ddp: exit $rc: $(tail -3 "$T/ddp.out")"
[ "$(wc -l <"$T/ddp.groups")" -eq 2 ] || fail "ddp: expected 2 node cgroups with processes: $(cat "$T/ddp.groups")"
while read -r g quota period; do
  [ "$((quota * 2))" -eq "$period" ] || fail "ddp: $g quota $quota of period $period is not 0.5 CPU"
done <"$T/ddp.groups"
[ -z "$(new_since "$before")" ] || fail "ddp: cgroups left after a normal end: $(ours)"
echo "ok   ddp: $(tr '\n' ';' <"$T/ddp.groups") removed after the run"

# 2b. With emulated links too: each rank in its cgroup AND its network namespace (the
# cgroup is joined first: inside `ip netns exec` the cgroup tree is not mounted).
if ip netns add "rs_probe_$$" 2>/dev/null && ip netns del "rs_probe_$$"; then
  watch_job both 2 --strategy=ddp --workers=2 --node_cpus=0.5 --network=bw=1gbit --steps=300
  wait "$(cat "$T/both.pid")"; rc=$?
  [ "$rc" -eq 0 ] || fail "links+cpu: exit $rc: $(tail -3 "$T/both.out")"
  [ "$(wc -l <"$T/both.groups")" -eq 2 ] || fail "links+cpu: expected 2 node cgroups: $(cat "$T/both.groups")"
  [ -z "$(new_since "$before")" ] || fail "links+cpu: cgroups left: $(ours)"
  echo "ok   links+cpu: $(tr '\n' ';' <"$T/both.groups") removed after the run"
else
  skip_part "links+cpu: network namespaces unavailable here (needs root and iproute2)"
fi

# 3. A PS job (1 shard + 2 workers = 3 nodes) with auto: machine cores / 3 each.
watch_job ps 3 --strategy=ps --workers=2 --ps_shards=1 --node_cpus=auto --steps=300
wait "$(cat "$T/ps.pid")"; rc=$?
[ "$rc" -eq 0 ] || fail "ps: exit $rc: $(tail -3 "$T/ps.out")"
[ "$(wc -l <"$T/ps.groups")" -eq 3 ] || fail "ps: expected 3 node cgroups: $(cat "$T/ps.groups")"
[ -z "$(new_since "$before")" ] || fail "ps: cgroups left: $(ours)"
echo "ok   ps: $(tr '\n' ';' <"$T/ps.groups") removed after the run"

# 4. A failed job (the ranks cannot read the dataset): nothing left.
timeout 60 "$RINGSIDE" train --strategy=ddp --workers=2 --node_cpus=0.5 --steps=3 \
  --dataset="$T/no-such-dir" >"$T/failed.out" 2>&1 && fail "failed: exit 0"
[ -z "$(new_since "$before")" ] || fail "failed: cgroups left: $(ours)"
echo "ok   failed job: exit non-zero, nothing left"

# 5. SIGINT to the launcher mid-run: it stops the ranks and removes the cgroups.
watch_job sigint 2 --strategy=ddp --workers=2 --node_cpus=0.5 --steps=100000
pid=$(cat "$T/sigint.pid")
kill -INT "$(pgrep -P "$pid" | head -1)" 2>/dev/null
wait "$pid"
for _ in $(seq 100); do [ -z "$(new_since "$before")" ] && break; sleep 0.1; done
[ -z "$(new_since "$before")" ] || fail "sigint: cgroups left: $(ours)"
echo "ok   SIGINT: nothing left"

# 6. SIGKILL to the launcher: its cgroups stay (nobody can clean up), and the next
# start removes them once their creator is gone.
watch_job sigkill 2 --strategy=ddp --workers=2 --node_cpus=0.5 --steps=100000
pid=$(cat "$T/sigkill.pid")
launcher=$(pgrep -P "$pid" | head -1)
# The launcher first: killed after its ranks, it could see them die and tear its nodes
# down before its own SIGKILL landed (CI saw no leftovers once). Its ranks after it.
kids=$(pgrep -P "$launcher")
kill -KILL "$launcher"
[ -n "$kids" ] && kill -KILL $kids 2>/dev/null
wait "$pid" 2>/dev/null
left=$(ours)
[ -n "$(added "$before" "$left")" ] || fail "sigkill: expected leftovers of the killed launcher"
timeout 60 "$RINGSIDE" train --strategy=ddp --workers=2 --node_cpus=0.5 --steps=3 "${data[@]}" \
  >"$T/next.out" 2>&1 || fail "next start: $(tail -2 "$T/next.out")"
[ -z "$(new_since "$before")" ] || fail "sigkill: the next start left $(ours) (had $left)"
echo "ok   SIGKILL: $(tr '\n' ' ' <<<"$left")removed by the next start"

# 7. calibrate on a node with a cluster: the PS CPU phase moves its bytes through that
# cluster's dilated link to a shard on a second emulated node (children in both nodes'
# namespaces, on this node's share), then runs the PS itself with 1 and 2 workers
# through that link for the BSP join (4 nodes of 0.3 CPU: within this machine); the file
# records the link; nothing left after it. Without --node_cpus, --cluster is refused in
# one line.
nets_before=$(netns_ours)
timeout 150 "$RINGSIDE" calibrate --model=cnn:lenet --batch=32 --steps=4 --calibration_repeats=1 \
  --node_cpus=0.3 --cluster=gige-cpu --out="$T/cal.json" >"$T/cal.out" 2>&1 || fail "calibrate: $(tail -2 "$T/cal.out")"
line=$(grep 'PS CPU' "$T/cal.out")
grep -qE 'through [0-9.]+ [MG]bit/s links to a shard on a second node: gRPC [0-9.]+ ns per byte .* TCP [0-9.]+ ns' <<<"$line" \
  || fail "calibrate: PS CPU line: $line"
grep -qE 'BSP join: the PS through that link communicates [0-9.]+ ms a step with 1 worker, [0-9.]+ with 2 \(wire [0-9.]+, [0-9.]+ after backward\): sigma [0-9.]+|BSP join not measured: backward \([0-9.]+ ms\) hides most of the link' <<<"$line" \
  || fail "calibrate: no BSP join in the PS CPU line: $line"
rate=$(sed -n 's/.*"ps_cpu_link_bytes_per_s": \([0-9.e+]*\).*/\1/p' "$T/cal.json")
[ -n "$rate" ] && awk -v r="$rate" 'BEGIN { exit !(r > 125e3 && r <= 125e6) }' \
  || fail "calibrate: ps_cpu_link_bytes_per_s '$rate' (expected the dilated 1 Gbit/s NIC)"
grep -q '"push_pull_tcp_cpu_s_per_byte"' "$T/cal.json" || fail "calibrate: no TCP CPU per byte in the file"
[ -z "$(new_since "$before")" ] || fail "calibrate: cgroups left: $(ours)"
[ -z "$(added "$nets_before" "$(netns_ours)")" ] || fail "calibrate: namespaces left: $(netns_ours)"
echo "ok   calibrate --cluster: ${line#*: }"
timeout 60 "$RINGSIDE" calibrate --model=cnn:lenet --cluster=gige-cpu --out="$T/no.json" >"$T/no.out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$(wc -l <"$T/no.out")" -eq 1 ] && grep -q 'needs --node_cpus' "$T/no.out" && [ ! -e "$T/no.json" ] \
  || fail "calibrate --cluster without --node_cpus: exit $rc: $(cat "$T/no.out")"
echo "ok   calibrate --cluster without --node_cpus: $(cat "$T/no.out")"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
