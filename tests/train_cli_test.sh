#!/usr/bin/env bash
# `ringside train` end to end on synthetic data: outputs exist and parse, and a run
# interrupted after k steps and resumed ends with a checkpoint byte-identical to a run
# of 2k steps straight.
set -euo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
flags=(train --strategy=single --model=mlp:784-64-10 --epochs=3 --batch=50 --lr=0.05
       --momentum=0.9 --seed=4 --threads=1
       --dataset=synthetic:train=1000,test=200,seed=2)
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error
FAIL_FAST=1  # fail ends the test.

"$RINGSIDE" "${flags[@]}" --steps=30 --out="$T/split" >"$T/a.out" 2>"$T/a.err"
"$RINGSIDE" "${flags[@]}" --steps=60 --out="$T/split" --resume >"$T/b.out" 2>"$T/b.err"
"$RINGSIDE" "${flags[@]}" --steps=60 --out="$T/straight" >"$T/c.out" 2>"$T/c.err"
grep -q '^steps: 60 (30 this run)' "$T/b.out" || fail "resumed run: $(cat "$T/b.out")"
cmp "$T/split/checkpoint.bin" "$T/straight/checkpoint.bin" || fail "resumed checkpoint differs"
grep -q '^test accuracy: 0\.[0-9]\{4\}$' "$T/c.out" || fail "no accuracy line"
[ "$(wc -l <"$T/straight/metrics.jsonl")" -eq 60 ] || fail "metrics lines"
[ "$(wc -l <"$T/split/metrics.jsonl")" -eq 60 ] || fail "resumed metrics lines"
grep -q 'epoch 1/3  step' "$T/c.err" || fail "no progress line"
grep -q 'ETA' "$T/c.err" || fail "no ETA in progress"
/usr/bin/python3 - "$T/straight" <<'PY'
import json, sys
d = sys.argv[1]
recs = [json.loads(l) for l in open(d + "/metrics.jsonl")]
assert [r["step"] for r in recs] == list(range(60)), "steps"
for r in recs:
    for k in ("data_ms", "forward_ms", "backward_ms", "update_ms", "step_ms", "loss"):
        assert isinstance(r[k], (int, float)) and r[k] >= 0, (k, r)
    assert r["samples"] == 50 and r["role"] == "single"
    assert r["device"] == "cpu" and r["emulated"] is False, r
    assert r["forward_ms"] + r["backward_ms"] + r["update_ms"] <= r["step_ms"] + 0.01, r
events = json.load(open(d + "/trace.json"))
names = {e["name"] for e in events if e["ph"] == "X"}
assert {"data", "forward", "backward", "update"} <= names, names
assert sum(1 for e in events if e.get("name") == "forward") == 60
print("outputs ok")
PY
echo "PASS"
