#!/usr/bin/env bash
# `ringside train --strategy=dp` (DataParallel: replica threads of one process) end to
# end on synthetic data: the summary prints the phases, the records carry them and the
# bytes replicate and reduce move, the trace draws them; --dp_interpreter_lock runs and
# is labelled in the progress, the records and the summary; bad input ends with one
# error line and a non-zero exit.
set -euo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
flags=(train --strategy=dp --workers=2 --model=mlp:784-64-10 --epochs=1 --steps=20 --batch=25
       --lr=0.05 --momentum=0.9 --seed=4 --threads=1
       --dataset=synthetic:train=1000,test=200,seed=2)
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error
FAIL_FAST=1  # fail ends the test.

timeout 120 "$RINGSIDE" "${flags[@]}" --out="$T/dp" >"$T/a.out" 2>"$T/a.err" ||
  fail "dp run: $(cat "$T/a.err")"
cat "$T/a.err" "$T/a.out"
grep -q '^dp: 2 replicas (threads of this process), batch 25 per replica, global batch 50; interpreter lock: off$' "$T/a.err" ||
  fail "no dp line on stderr"
grep -q '^dp phases (ms per step, median of 20): replicate [0-9.]*, scatter [0-9.]*, apply [0-9.]* (master forward [0-9.]*, backward [0-9.]*), reduce [0-9.]*, update [0-9.]*; step [0-9.]* (mean)$' "$T/a.out" ||
  fail "no phases line"
grep -q '^test accuracy: 0\.[0-9]\{4\}$' "$T/a.out" || fail "no accuracy line"
if grep -q 'interpreter lock (emulated)' "$T/a.out"; then fail "lock named without the lock"; fi

timeout 120 "$RINGSIDE" "${flags[@]}" --dp_interpreter_lock --out="$T/gil" >"$T/b.out" 2>"$T/b.err" ||
  fail "dp run with the lock: $(cat "$T/b.err")"
cat "$T/b.out"
grep -q 'interpreter lock: ON (emulated' "$T/b.err" || fail "the progress does not name the lock"
grep -q '^interpreter lock (emulated): ON, the replicas waited [0-9.]* ms per step' "$T/b.out" ||
  fail "the summary does not name the lock"

/usr/bin/python3 - "$T/dp" "$T/gil" <<'PY'
import json, sys
for d, locked in ((sys.argv[1], False), (sys.argv[2], True)):
    recs = [json.loads(l) for l in open(d + "/metrics.jsonl")]
    assert [r["step"] for r in recs] == list(range(20)), "steps"
    for r in recs:
        assert r["role"] == "dp" and r["samples"] == 50, r
        assert r.get("emulated", False) is locked, r
        for k in ("replicate_ms", "scatter_ms", "apply_ms", "reduce_ms", "update_ms", "step_ms"):
            assert isinstance(r.get(k, 0), (int, float)) and r.get(k, 0) >= 0, (k, r)
        assert r["apply_ms"] > 0, r
        # CPU time of the replicas' threads in apply: some, and with the lock at most
        # one core's worth (one replica computes at a time; 20% slack for the short
        # unlocked stretches and the lock's spin).
        assert r.get("apply_cpu_ms", 0) > 0, r
        if locked:
            assert r["apply_cpu_ms"] <= 1.2 * r["apply_ms"] + 0.2, r
            assert r.get("lock_wait_ms", 0) >= 0, r
        else:
            assert r.get("lock_wait_ms", 0) == 0, r
        # 784*64+64 + 64*10+10 parameters, one copy each way (2 replicas).
        params = 784 * 64 + 64 + 64 * 10 + 10
        assert int(r["bytes_sent"]) == 4 * params and int(r["bytes_received"]) == 4 * params, r
        phases = sum(r.get(k, 0) for k in ("replicate_ms", "scatter_ms", "apply_ms", "reduce_ms", "update_ms"))
        assert phases <= r["step_ms"] + 0.05, r
    events = json.load(open(d + "/trace.json"))
    names = {e["name"] for e in events if e["ph"] == "X"}
    assert {"replicate", "scatter", "forward", "backward", "reduce", "update"} <= names, names
    tracks = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "replica 1" in tracks, tracks
print("records and traces ok")
PY

# Bad input: one "ringside: error:" line, last, and a non-zero exit.
bad() {
  local name="$1"; shift
  local rc=0
  timeout 60 "$RINGSIDE" train --strategy=dp --model=mlp:784-10 --steps=1 \
    --dataset=synthetic:train=100,test=10 "$@" >"$T/$name.out" 2>"$T/$name.err" || rc=$?
  [ "$rc" -ne 0 ] || fail "$name: exit 0"
  [ "$(grep -ci error "$T/$name.err")" -eq 1 ] || fail "$name: not one error line: $(cat "$T/$name.err")"
  tail -n 1 "$T/$name.err" | grep -q '^ringside: error: ' || fail "$name: $(cat "$T/$name.err")"
  echo "ok   $name ($rc): $(tail -n 1 "$T/$name.err")"
}
bad workers0 --workers=0
bad workers65 --workers=65
bad network --workers=2 --network=bw=1gbit
bad node_cpus --workers=2 --node_cpus=0.5
bad grad_accum --workers=2 --grad_accum=2
bad cuda --workers=2 --device=cuda
rc=0
timeout 60 "$RINGSIDE" train --strategy=single --dp_interpreter_lock --steps=1 \
  --dataset=synthetic:train=100,test=10 >/dev/null 2>"$T/lock.err" || rc=$?
[ "$rc" -ne 0 ] && grep -q 'dp_interpreter_lock needs --strategy=dp' "$T/lock.err" ||
  fail "--dp_interpreter_lock with single: $(cat "$T/lock.err")"
echo "PASS"
