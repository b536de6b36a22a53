#!/usr/bin/env bash
# A cluster with several devices per node (docs/cluster.md, "Devices per node"): a
# device is a rank, so `train --cluster` and `compare` put devices_per_node ranks on
# each emulated node, measure the dilation on one device's share, shape each node's
# NIC to the profile's / d and its loopback to the intra-node path's (or say it is not
# emulated), and refuse, in one line naming both numbers and before anything is
# created, a job whose ranks do not fill whole nodes or an explicit --ranks_per_node
# that differs. The refusals need nothing; the runs need root (cgroups, namespaces).
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error
nets_before=$(netns_ours)

# Two devices per node; the tiny MLP's step from a FLOP rate (d is whatever this host
# gives: the NIC stays between 1 Mbit/s and what half a CPU drives for host steps of
# 0.01 to 20 ms).
cat >"$T/pairs.textproto" <<'PROFILE'
name: "pairs"
source: "cluster_devices_test.sh"
device_tflops: 0.01
devices_per_node: 2
nic { bandwidth: "20mbit" latency_us: 10 }
intra_node { bandwidth: "40mbit" latency_us: 1 }
PROFILE
train=(train --strategy=ddp --cluster="$T/pairs.textproto" --node_cpus=0.5 --model=mlp:784-32-10
       --dataset=synthetic:train=2048,test=128 --batch=32 --steps=6 --threads=1)

# 1. Refusals: one line, the numbers named, a non-zero exit, nothing created.
refused() {  # NAME EXPECTED_RC REGEX OUT_DIR ARGS...
  local name=$1 want=$2 regex=$3 out=$4 rc; shift 4
  timeout 60 "$RINGSIDE" "$@" >"$T/$name.log" 2>&1; rc=$?
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, expected $want: $(cat "$T/$name.log")"
  [ "$(wc -l <"$T/$name.log")" -eq 1 ] || fail "$name: not one line: $(cat "$T/$name.log")"
  grep -qE "^ringside: error: .*$regex" "$T/$name.log" || fail "$name: $(cat "$T/$name.log")"
  [ ! -e "$out" ] || fail "$name: $out was created"
  [ -z "$(added "$nets_before" "$(netns_ours)")" ] || fail "$name: namespaces were created: $(netns_ours)"
  echo "ok   $name: $(cat "$T/$name.log")"
}
refused ddp_3_ranks 2 'cluster pairs has 2 devices per node: the 3 ranks of --workers=3 do not fill whole nodes \(3 is not a multiple of 2\)' \
  "$T/r1" "${train[@]}" --workers=3 --out="$T/r1"
refused ps_3_processes 2 'the 3 processes of --ps_shards=1 and --workers=2 do not fill whole nodes \(3 is not a multiple of 2\)' \
  "$T/r2" train --strategy=ps --ps_shards=1 "${train[@]:2}" --workers=2 --out="$T/r2"
refused other_ranks_per_node 2 '--ranks_per_node=4 differs from cluster pairs.s 2 devices per node' \
  "$T/r3" "${train[@]}" --workers=4 --ranks_per_node=4 --out="$T/r3"
cat >"$T/spec3.textproto" <<SPEC
strategies { kind: "single" }
strategies { kind: "ddp" }
workers: 2 workers: 3
model: "mlp:784-32-10"
dataset: "synthetic:train=2048,test=128"
batch_per_worker: 32
steps: 6
node_cpus: "0.5"
cluster: "$T/pairs.textproto"
SPEC
refused compare_3_ranks 1 'spec3.textproto: cluster pairs has 2 devices per node: the 3 ranks of ddp at 3 workers do not fill whole nodes \(3 is not a multiple of 2\)' \
  "$T/c3" compare --spec="$T/spec3.textproto" --out="$T/c3"

source "$(dirname "$0")/cpu_share_util.sh"  # ROOT, ours; skips the runs without root.
before=$(ours)

# 2. train --cluster: 4 ranks, 2 per node; the dilation line names the device's share,
# the shared NIC and the intra-node path; the links carry lo.bw exactly when it says
# the loopback is shaped.
timeout 120 "$RINGSIDE" "${train[@]}" --workers=4 --out="$T/t4" >"$T/t4.log" 2>&1 || fail "train on pairs exited $?: $(tail -3 "$T/t4.log")"
grep -q '^ringside: nodes: node 0 = rank 0 + rank 1, node 1 = rank 2 + rank 3 (2 per node); links bw=' "$T/t4.log" \
  || fail "the job did not run 2 ranks per node: $(grep '^ringside' "$T/t4.log")"
line=$(grep '^ringside: cluster pairs emulated with dilation d = ' "$T/t4.log")
[ -n "$line" ] || fail "no dilation line: $(head -3 "$T/t4.log")"
grep -q 'on 0.25 CPU, one of 2 devices of a node of 0.50 CPU' <<<"$line" || fail "the host step was not one device's: $line"
grep -q "NIC 20 Mbit/s -> .* shaped, shared by the node's 2 ranks" <<<"$line" || fail "the NIC is not the node's: $line"
links=$(sed -n 's/^ringside: nodes: .*; links //p' "$T/t4.log")
if grep -q "intra-node 40 Mbit/s -> .* per device, 2 x that = .* shaped on each node's loopback" <<<"$line"; then
  case "$links" in *,lo.bw=*) ;; *) fail "the loopback was said shaped but the links are $links" ;; esac
elif grep -q 'intra-node path not emulated: loopback is slower than 2 x 40 Mbit/s / d' <<<"$line"; then
  case "$links" in *lo.bw=*) fail "the loopback was said unshaped but the links are $links" ;; esac
else
  fail "the dilation line says nothing of the intra-node path: $line"
fi
grep -q '^\[rank 0\] steps: 6' "$T/t4.log" || fail "rank 0 did not finish: $(tail -3 "$T/t4.log")"
echo "ok   train: $line"

# 3. compare: the DDP cell runs 2 ranks on 1 node on the dilated links; the single
# baseline on one device's share; the record keeps the layout.
sed 's/workers: 2 workers: 3/workers: 2/' "$T/spec3.textproto" >"$T/spec2.textproto"
timeout 180 "$RINGSIDE" compare --spec="$T/spec2.textproto" --out="$T/c2" >"$T/c2.log" 2>&1 || fail "compare on pairs exited $?: $(tail -3 "$T/c2.log")"
grep -q "2 processes per node, one per device (the single baseline on one device's share, 0.25 CPU)" "$T/c2.log" \
  || fail "compare did not state the layout: $(grep '^compare' "$T/c2.log" | head -3)"
r="$T/c2/cells/ddp-n2-r0/result.textproto"
grep -q '^ranks_per_node: 2$' "$r" && grep -q '^nodes: 1$' "$r" || fail "the DDP cell did not run 2 ranks on 1 node: $(grep -E 'ranks_per_node|nodes' "$r")"
grep -q -- '--ranks_per_node=2' "$T/c2/cells/ddp-n2-r0/command.txt" || fail "the DDP cell was not given --ranks_per_node=2"
grep -q '^node_cpus: 0.25$' "$T/c2/cells/single-n1-r0/result.textproto" || fail "the single baseline is not on one device's share"
grep -q '^devices_per_node: 2$' "$T/c2/dilation.textproto" || fail "dilation.textproto does not keep the layout"
grep -q '^status: "ok"' "$r" || fail "the DDP cell failed: $(grep reason "$r")"
echo "ok   compare: $(grep -c ',ok,' "$T/c2/summary.csv") cells ok"

[ -z "$(new_since "$before")" ] || fail "cgroups left: $(new_since "$before")"
[ -z "$(added "$nets_before" "$(netns_ours)")" ] || fail "namespaces left: $(netns_ours)"
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
