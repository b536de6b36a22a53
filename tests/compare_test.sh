#!/usr/bin/env bash
# `ringside compare`: bad specs fail before any process starts; a matrix runs every
# cell, keeps each cell's records and writes the summary; a failing cell is recorded
# with its reason while the rest run; output to a file is plain lines ending with the
# summary table and the next command; an interrupted matrix resumes without re-running
# finished cells.
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

spec() {  # spec FILE EXTRA...: a small valid spec plus extra lines
  local f="$1"; shift
  {
    echo 'name: "t"'
    echo 'strategies { kind: "single" }'
    echo 'strategies { kind: "ps" ps_shards: 1 }'
    echo 'strategies { kind: "ddp" }'
    echo 'workers: 1 workers: 2'
    echo 'model: "mlp:784-32-10"'
    echo 'dataset: "synthetic:train=2048,test=128"'
    echo 'batch_per_worker: 32'
    echo 'steps: 12'
    printf '%s\n' "$@"
  } >"$f"
}

# Bad input: one error line, exit 1, and no cell started.
refused() {  # refused NAME REGEX ARGS...: `ringside compare ARGS`, as expect_error, and stderr one line
  local name="$1" regex="$2"; shift 2
  "$RINGSIDE" compare "$@" >"$T/$name.out" 2>"$T/$name.err" &
  WANT=1 expect_error "$name" $! "$T/$name.err" "^ringside: error: .*$regex"
  [ "$(wc -l <"$T/$name.err")" -eq 1 ] || fail "$name: stderr is not one line: $(cat "$T/$name.err")"
}
sed 's/kind: "ddp"/kind: "allreduce"/' <(spec /dev/stdout) >"$T/unknown.textproto"
refused unknown_strategy "unknown strategy 'allreduce'" --spec="$T/unknown.textproto" --out="$T/o1"
spec "$T/zero.textproto" 'workers: 0'
refused zero_workers "worker count must be in \\[1, 1024\\], got 0" --spec="$T/zero.textproto" --out="$T/o2"
echo 'strategies { kind: "single" ' >"$T/garbage.textproto"
refused unparsable "not a valid experiment spec" --spec="$T/garbage.textproto" --out="$T/o3"
refused missing_spec "cannot read" --spec="$T/nope.textproto" --out="$T/o4"
spec "$T/ok.textproto"
mkdir -p "$T/ro"; touch "$T/ro/file"
refused unwritable "cannot create|not writable" --spec="$T/ok.textproto" --out="$T/ro/file/sub"
for d in o1 o2 o3 o4; do [ ! -e "$T/$d/cells" ] || fail "$d: cells were created for a bad spec"; done

# Strong scaling: a global batch of 64 split over the workers.
cat >"$T/strong.textproto" <<'SPEC'
strategies { kind: "ddp" }
workers: 1 workers: 2
model: "mlp:784-32-10"
dataset: "synthetic:train=2048,test=128"
global_batch: 64
steps: 5
SPEC
timeout 300 "$RINGSIDE" compare --spec="$T/strong.textproto" --out="$T/strong" >/dev/null 2>&1 || fail "strong scaling exited $?"
grep -q -- '--batch=64 ' "$T/strong/cells/ddp-n1-r0/command.txt" || fail "1 worker should take the whole global batch"
grep -q -- '--batch=32 ' "$T/strong/cells/ddp-n2-r0/command.txt" || fail "2 workers should take 32 each"
echo 'strategies { kind: "ddp" } workers: 3 model: "mlp:784-32-10" global_batch: 64 steps: 5' >"$T/strong_bad.textproto"
refused strong_indivisible "does not divide by 3 workers" --spec="$T/strong_bad.textproto" --out="$T/o5"

# A spec whose DDP reduces with NCCL on the CPU is refused before any cell runs.
spec "$T/nccl_cpu.textproto" 'strategies { kind: "ddp" backend: "nccl" label: "ddp-nccl" }'
refused nccl_on_cpu "backend nccl needs device cuda" --spec="$T/nccl_cpu.textproto" --out="$T/o6"
[ ! -e "$T/o6/cells" ] || fail "nccl_on_cpu: cells were created for a refused spec"

# A matrix with a failing cell (a consistency mode train refuses): recorded, the rest run.
spec "$T/mixed.textproto" 'strategies { kind: "ps" ps_sync: "bogus" label: "ps-bad" }'
timeout 300 "$RINGSIDE" compare --spec="$T/mixed.textproto" --out="$T/mixed" >"$T/mixed.log" 2>&1 \
  || fail "compare with a failing cell exited $?: $(tail -3 "$T/mixed.log")"
csv="$T/mixed/summary.csv"
[ "$(grep -c ',ok,' "$csv")" -eq 5 ] || fail "expected 5 ok cells: $(cat "$csv")"
[ "$(grep -c ',failed,' "$csv")" -eq 2 ] || fail "expected 2 failed cells: $(cat "$csv")"
grep ',failed,' "$csv" | grep -q 'ps_sync' || fail "failed cells do not say why: $(grep failed "$csv")"
for c in single-n1-r0 ps-s1-bsp-n2-r0 ddp-n2-r0; do
  [ -s "$T/mixed/cells/$c/metrics.jsonl" ] || [ -s "$T/mixed/cells/$c/metrics.rank0.jsonl" ] \
    || fail "$c kept no step records"
done
[ -s "$T/mixed/cells/ps-s1-bsp-n2-r0/metrics.shard0.jsonl" ] || fail "ps cell kept no shard records"

# Output that is not a terminal: plain lines (no carriage returns), one per cell as it
# starts; it ends with the summary table (a row per cell, failed ones with their
# reason), where the CSV is, and the report command to run next.
grep -q $'\r' "$T/mixed.log" && fail "compare wrote carriage returns to a file: $(cat -A "$T/mixed.log" | head -3)"
[ "$(grep -c '^compare: cell [1-7]/7 ' "$T/mixed.log")" -eq 7 ] || fail "expected a line per cell: $(cat "$T/mixed.log")"
[ "$(tail -n 1 "$T/mixed.log")" = "next: ringside report $T/mixed" ] || fail "last line is not the next command: $(tail -n 3 "$T/mixed.log")"
[ "$(tail -n 2 "$T/mixed.log" | head -n 1)" = "summary: $T/mixed/summary.csv" ] || fail "no summary path: $(tail -n 3 "$T/mixed.log")"
table=$(sed -n '/^cell  *workers repeat  *step ms/,/^$/p' "$T/mixed.log")
[ "$(grep -c -- '-r0 ' <<<"$table")" -eq 7 ] || fail "summary table misses cells: $table"
[ "$(grep -c 'failed: .*ps_sync' <<<"$table")" -eq 2 ] || fail "summary table does not say why cells failed: $table"
grep -Eq '^single-n1-r0 +1 +0 +[0-9.]+ +[0-9]+ +1\.00 +100% ' <<<"$table" || fail "single cell row: $table"

# Interrupt after the first cells finished, then resume: finished cells are kept.
spec "$T/resume.textproto"
"$RINGSIDE" compare --spec="$T/resume.textproto" --out="$T/resume" >"$T/r1.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  [ "$(ls "$T"/resume/cells/*/result.textproto 2>/dev/null | wc -l)" -ge 2 ] && break
  sleep 0.05
done
kill -INT "$pid"
wait "$pid"; rc=$?
[ "$rc" -ne 0 ] || fail "interrupted compare exited 0"
grep -q "resume" "$T/r1.log" || fail "interrupted compare did not say how to resume: $(tail -2 "$T/r1.log")"
before=$(ls "$T"/resume/cells/*/result.textproto | wc -l)
[ "$before" -ge 2 ] && [ "$before" -lt 5 ] || fail "expected 2-4 finished cells before resuming, got $before"
stamps=$(stat -c '%n %Y.%y' "$T"/resume/cells/*/result.textproto)
timeout 300 "$RINGSIDE" compare --spec="$T/resume.textproto" --out="$T/resume" >"$T/r2.log" 2>&1 \
  || fail "resumed compare exited $?"
grep -q "$before kept from an earlier run" "$T/r2.log" || fail "resume did not keep $before cells: $(tail -1 "$T/r2.log")"
while read -r line; do
  f=${line%% *}
  [ "$(stat -c '%n %Y.%y' "$f")" = "$line" ] || fail "finished cell re-run: $f"
done <<<"$stamps"
[ "$(grep -c ',ok,' "$T/resume/summary.csv")" -eq 5 ] || fail "resumed summary incomplete: $(cat "$T/resume/summary.csv")"

# The report of the matrix with a failed strategy: every point, the failure and its
# reason, seven inline plots, working trace links.
"$RINGSIDE" report "$T/mixed" >"$T/report.log" 2>&1 || fail "report exited $?: $(cat "$T/report.log")"
md="$T/mixed/report.md"; html="$T/mixed/report.html"
[ "$(grep -c '^| ' "$md")" -ge 8 ] || fail "report.md misses rows: $(cat "$md")"
grep -q '^| ps-bad | 2 | cpu | failed: .*ps_sync' "$md" || fail "report.md does not show the failed cell's reason"
grep -q 'busiest shard moves 2.00 x M' "$md" || fail "findings miss the master's N x M load: $(sed -n '/Findings/,/Summary/p' "$md")"
[ "$(grep -o '<svg' "$html" | wc -l)" -eq 7 ] || fail "report.html does not inline 7 plots"
for link in $(grep -o 'href="cells/[^"]*"' "$html" | sed 's/href="//; s/"$//'); do
  [ -s "$T/mixed/$link" ] || case "$link" in *ps-bad*) ;; *) fail "broken trace link $link" ;; esac
done
"$RINGSIDE" report "$T/nothing" >/dev/null 2>"$T/report_err" && fail "report of a missing directory succeeded"
grep -q "^ringside: error: .*no cells" "$T/report_err" || fail "report of a missing directory: $(cat "$T/report_err")"

# Emulated links (root only): the namespaces, veths and qdiscs a matrix creates are
# gone after it, whether its cells succeeded, failed or were interrupted.
if [ "$(id -u)" -eq 0 ] && ip netns add rs_probe_$$ 2>/dev/null && ip netns del rs_probe_$$; then
  before_ns=$(ip netns list | sort); before_links=$(ip -o link | wc -l)
  spec "$T/net.textproto" 'network: "bw=200mbit"' 'strategies { kind: "ps" ps_sync: "bogus" label: "ps-bad" }'
  timeout 300 "$RINGSIDE" compare --spec="$T/net.textproto" --out="$T/net" >"$T/net.log" 2>&1 \
    || fail "compare on emulated links exited $?: $(tail -3 "$T/net.log")"
  [ "$(grep -c ',ok,' "$T/net/summary.csv")" -eq 5 ] || fail "emulated-link cells did not run: $(cat "$T/net/summary.csv")"
  [ "$(ip netns list | sort)" = "$before_ns" ] || fail "namespaces left after a finished matrix: $(ip netns list)"
  cat >"$T/net2.textproto" <<'SPEC'
strategies { kind: "ps" ps_shards: 1 }
workers: 2
model: "mlp:784-32-10"
dataset: "synthetic:train=2048,test=128"
batch_per_worker: 32
steps: 100000
epochs: 1000
network: "bw=200mbit"
SPEC
  "$RINGSIDE" compare --spec="$T/net2.textproto" --out="$T/net2" >"$T/net2.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do [ -n "$(ip netns list)" ] && break; sleep 0.05; done
  sleep 1
  [ -n "$(ip netns list)" ] || fail "no namespaces seen while an emulated cell ran"
  kill -INT "$pid"; wait "$pid"
  sleep 0.5
  [ "$(ip netns list | sort)" = "$before_ns" ] || fail "namespaces left after an interrupted matrix: $(ip netns list)"
  [ "$(ip -o link | wc -l)" -eq "$before_links" ] || fail "host links changed: $(ip -o link | tail -3)"

  # A cluster (docs/cluster.md): the links are the profile's NIC / d, d measured here on
  # a node's share; dilation.textproto keeps the first, the first cell runs on it, every
  # later cell measures its own just before it runs, every cell records its d and links,
  # the report states them and whether the host held the profile, and a resumed matrix
  # starts from the kept record and measures again for the cell it runs.
  cat >"$T/tiny-cluster.textproto" <<'PROFILE'
name: "tiny-cluster"
source: "compare_test.sh"
device_tflops: 0.01
nic { bandwidth: "20mbit" latency_us: 10 }
PROFILE
  cat >"$T/cluster.textproto" <<SPEC
strategies { kind: "single" }
strategies { kind: "ddp" }
workers: 2
model: "mlp:784-32-10"
dataset: "synthetic:train=2048,test=128"
batch_per_worker: 32
steps: 6
node_cpus: "0.5"
cluster: "$T/tiny-cluster.textproto"
SPEC
  timeout 300 "$RINGSIDE" compare --spec="$T/cluster.textproto" --out="$T/cl" >"$T/cl.log" 2>&1 \
    || fail "compare on a cluster exited $?: $(tail -3 "$T/cl.log")"
  grep -q 'cluster tiny-cluster emulated with dilation d = ' "$T/cl.log" || fail "compare did not state the dilation: $(head -5 "$T/cl.log")"
  net=$(sed -n 's/^network: "\(.*\)"$/\1/p' "$T/cl/dilation.textproto")
  case "$net" in bw=*) ;; *) fail "dilation.textproto has no dilated links: $(cat "$T/cl/dilation.textproto")" ;; esac
  factor=$(sed -n 's/^factor: \(.*\)$/\1/p' "$T/cl/dilation.textproto")
  grep -q "^dilation: $factor\$" "$T/cl/cells/single-n1-r0/result.textproto" \
    || fail "the first cell (single) did not run on the dilation just measured ($factor): $(grep '^dilation' "$T/cl/cells/single-n1-r0/result.textproto")"
  grep -q 'measuring the host again for cell ddp-n2-r0' "$T/cl.log" || fail "the second cell did not measure its own dilation: $(grep -c measuring "$T/cl.log")"
  grep -q '^network: "bw=' "$T/cl/cells/ddp-n2-r0/result.textproto" || fail "the DDP cell did not run on dilated links"
  grep -q '^cluster: "tiny-cluster"' "$T/cl/cells/ddp-n2-r0/result.textproto" || fail "the cell does not record its cluster"
  grep -q '^dilation: ' "$T/cl/cells/ddp-n2-r0/result.textproto" || fail "the cell does not record its dilation"
  "$RINGSIDE" report "$T/cl" >/dev/null 2>&1 || fail "report of the cluster matrix failed"
  grep -q '^\*\*cluster tiny-cluster emulated with dilation d = ' "$T/cl/report.md" || fail "report.md does not state the cluster"
  grep -Eq 'The host (held|did not hold) cluster tiny-cluster' "$T/cl/report.md" || fail "report.md does not say whether the host held the profile"
  rm -rf "$T/cl/cells/ddp-n2-r0"
  timeout 300 "$RINGSIDE" compare --spec="$T/cluster.textproto" --out="$T/cl" >"$T/cl2.log" 2>&1 \
    || fail "resuming the cluster matrix exited $?: $(tail -3 "$T/cl2.log")"
  grep -q "kept from $T/cl" "$T/cl2.log" || fail "the resumed matrix measured a new dilation: $(head -3 "$T/cl2.log")"
  grep -q 'measuring the host again for cell ddp-n2-r0' "$T/cl2.log" || fail "the resumed cell did not measure its own dilation"
  grep -q '^network: "bw=' "$T/cl/cells/ddp-n2-r0/result.textproto" || fail "the resumed cell did not run on dilated links"
  [ "$(ip netns list | sort)" = "$before_ns" ] || fail "namespaces left after the cluster matrix: $(ip netns list)"
else
  skip_part "the emulated-link checks need root and network namespaces"
fi

# A cluster that is neither a preset nor a file, or one beside a network: one line, no
# directory.
spec "$T/badcl.textproto" 'cluster: "no-such-cluster"' 'node_cpus: "0.5"'
refused unknown_cluster 'cluster "no-such-cluster" is neither a preset' --spec="$T/badcl.textproto" --out="$T/badcl"
[ -e "$T/badcl" ] && fail "a refused cluster created its output directory"
spec "$T/clnet.textproto" 'cluster: "gige-cpu"' 'node_cpus: "0.5"' 'network: "bw=1gbit"'
refused cluster_and_network 'exclude each other' --spec="$T/clnet.textproto" --out="$T/clnet"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
