#!/usr/bin/env bash
# Traces tell the truth (issue 18): single, DDP (several buckets) and PS BSP runs (with
# --prefetch: the next forward waits for the master's update) write one trace per
# process, named by output_files.h, including one per shard; each loads as JSON, and
# on every track spans are disjoint or nested (check_trace.py). Every process's
# "forward" spans add up to its step records' forward_ms (no wait inside forward); PS
# and DDP traces hold wait spans. A resumed run appends to its metrics and writes a
# second trace beside the first (trace.run2.json) instead of overwriting it.
set -uo pipefail
RINGSIDE="$1"; CHECK="$2"
PY=/usr/bin/python3
T="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5
        --epochs=1 --lr=0.05 --momentum=0.9 --seed=3 --threads=1 --eval_batch=240
        --batch=8)
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

run() {  # run NAME ARGS...: one training run writing to $T/NAME.
  local name=$1 rc; shift
  timeout 120 "$RINGSIDE" train "${common[@]}" "$@" --out="$T/$name" >"$T/$name.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || { fail "$name exited $rc"; tail -5 "$T/$name.log"; return 1; }
}
check() {  # check WHAT ARGS...: check_trace.py must pass.
  local what=$1; shift
  $PY "$CHECK" "$@" || fail "$what"
}

if run single --strategy=single --steps=20; then
  check "single trace" --metrics="$T/single/metrics.jsonl" "$T/single/trace.json"
fi

# Three buckets (one per layer), all-reduced while backward goes on.
if run ddp --strategy=ddp --workers=2 --steps=20 --timeout_s=30 \
     --bucket_cap_mb=0.001 --first_bucket_mb=0.001; then
  for r in 0 1; do
    check "ddp rank $r" --expect_wait --metrics="$T/ddp/metrics.rank$r.jsonl" "$T/ddp/trace.rank$r.json"
  done
fi

if run ps --strategy=ps --workers=2 --ps_shards=2 --ps_sync=bsp --prefetch --steps=20 --timeout_s=30; then
  for w in 0 1; do
    check "ps worker $w" --expect_wait --metrics="$T/ps/metrics.rank$w.jsonl" "$T/ps/trace.rank$w.json"
  done
  for s in 0 1; do
    [ -s "$T/ps/trace.shard$s.json" ] || fail "shard $s wrote no trace"
    [ -s "$T/ps/metrics.shard$s.jsonl" ] || fail "shard $s wrote no metrics"
  done
  check "ps shard traces" "$T/ps/trace.shard0.json" "$T/ps/trace.shard1.json"
fi

# Resume: 10 steps, then on to 20 from the checkpoint.
if run resume --strategy=single --steps=10 && run resume --strategy=single --steps=20 --resume; then
  [ "$(wc -l <"$T/resume/metrics.jsonl")" -eq 20 ] || fail "resumed metrics were not appended"
  check "first run's trace" "$T/resume/trace.json"
  check "both traces" "$T/resume/trace.json" "$T/resume/trace.run2.json"
    # The first file holds steps 0-9, the second 10-19.
  $PY - "$T/resume/trace.json" "$T/resume/trace.run2.json" <<'PYEOF' || fail "resume traces"
import json, sys
steps = [sorted({int(e["args"]["step"]) for e in json.load(open(p)) if e.get("ph") == "X" and e["name"] == "forward"})
         for p in sys.argv[1:]]
assert steps[0] == list(range(10)), steps[0]
assert steps[1] == list(range(10, 20)), steps[1]
PYEOF
fi

[ "$failures" -eq 0 ] && echo PASS || { echo "$failures failure(s)"; exit 1; }
