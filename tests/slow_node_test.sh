#!/usr/bin/env bash
# A slow node (spec slow_node / --slow_node=R:F) is really slower, and the others wait
# for it: with rank / worker 1's node at a quarter of the others' CPU share, under DDP
# and a BSP parameter server, (almost) every step waits for it; the cell's result names
# it (late_named, late_ranks) with the share of steps it was last (BSP: at least 90%;
# DDP: 70%), and the report says
# so in words. Also the report states the emulation in force. Needs root and a cgroup
# cpu controller; otherwise SKIPPED, loudly.
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

source "$(dirname "$0")/cpu_share_util.sh"  # ROOT, ours; skips without root.
before=$(ours)

cat >"$T/slow.textproto" <<'SPEC'
name: "slow"
strategies { kind: "ddp" label: "ddp" }
strategies { kind: "ps" ps_shards: 1 ps_sync: "bsp" label: "ps-bsp" }
workers: 2
model: "mlp:784-256-10"
dataset: "synthetic:train=60000,test=128"
batch_per_worker: 256
steps: 60
node_cpus: "auto"
slow_node: "1:0.25"
SPEC
timeout 600 "$RINGSIDE" compare --spec="$T/slow.textproto" --out="$T/run" >"$T/compare.out" 2>"$T/compare.err"
rc=$?
[ "$rc" -eq 0 ] || fail "compare exit $rc: $(tail -3 "$T/compare.err")"
grep -q "compare: emulated cluster on one machine: .* CPU per node .*rank/worker 1 slowed to 0.25" "$T/compare.err" ||
  fail "compare did not state the emulation: $(head -3 "$T/compare.err")"

# Under BSP the shards see whose push came last: every step. DDP infers it (the late rank
# waits least in the all-reduce), which scheduling noise on a 2-core machine blurs in up
# to a quarter of the steps (on an AMD EPYC VM: last in 21 of 27 compared steps, 3
# sigma above chance needs 22 of 27), so 60 steps: 70% of them is 3 sigma above chance.
for cell in ddp-n2-r0 ps-bsp-n2-r0; do
  r="$T/run/cells/$cell/result.textproto"
  min_share=0.9
  [ "$cell" = ddp-n2-r0 ] && min_share=0.7
  [ -f "$r" ] || { fail "$cell: no result"; continue; }
  grep -q 'status: "ok"' "$r" || fail "$cell: $(grep reason "$r")"
  grep -q '^slow_node: "1:0.25"' "$r" || fail "$cell: the result does not record the slow node"
  grep -q '^late_named: true' "$r" || fail "$cell: the late rank is not named: $(grep late "$r" | tr '\n' ' ')"
  [ "$(grep -c '^late_ranks:' "$r")" -eq 1 ] && grep -q '^late_ranks: 1$' "$r" ||
    fail "$cell: late_ranks is not exactly [1]: $(grep late_ranks "$r" | tr '\n' ' ')"
  share=$(sed -n 's/^late_share: //p' "$r")
  awk -v s="${share:-0}" -v m="$min_share" 'BEGIN { exit !(s >= m) }' ||
    fail "$cell: rank 1 was last in only ${share:-0} of the steps (< $min_share)"
done

"$RINGSIDE" report "$T/run" >"$T/report.out" 2>&1 || fail "report failed: $(tail -2 "$T/report.out")"
md="$T/run/report.md"
grep -Eq '^- \*\*ddp\*\* x2: rank 1 was last in ([7-9][0-9]|100)% of steps; the others waited a median [0-9.]+ ms per step for it' "$md" ||
  fail "the report does not name rank 1: $(grep -A4 'Late ranks' "$md")"
grep -Eq '^- \*\*ps-bsp\*\* x2 \(BSP\): worker 1 was last in (9[0-9]|100)% of steps' "$md" ||
  fail "the report does not name worker 1: $(grep -A4 'Late ranks' "$md")"
grep -q '^\*\*emulated cluster on one machine: .* CPU per node' "$md" || fail "the report does not state the emulation"
grep -q "set label 1000 'emulated on one machine: " "$T/run/report_plots/plots.gp" || fail "the plots do not state the emulation"

[ -z "$(new_since "$before")" ] || fail "cgroups left behind: $(new_since "$before" | tr '\n' ' ')"
if [ "$failures" -eq 0 ]; then echo "PASS"; exit 0; fi
exit 1
