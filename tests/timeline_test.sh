#!/usr/bin/env bash
# One timeline per run (issue 21): a PS job (2 workers, 2 shards, BSP) and a DDP job
# (2 ranks, several buckets) on loopback each end with DIR/timeline.json merged from
# every process's trace, and `ringside timeline` writes the same again. The merged file
# (check_timeline.py): valid Chrome-trace JSON, one named process track per process,
# flows push -> aggregate -> pull and bucket ready -> all-reduce whose ends exist and
# lie inside spans, in-flight and queue counters. A trace cut short (a killed process)
# still merges. The viewer page (timeline.html) opens in headless Chromium without a
# script error and reads as many tracks and flows as the checker counted (that part
# skips, saying so, where Chromium is not installed).
set -uo pipefail
RINGSIDE="$1"; CHECK="$2"
PY=/usr/bin/python3
T="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5
        --epochs=1 --lr=0.05 --momentum=0.9 --seed=3 --threads=1 --eval_batch=240
        --batch=8 --steps=12 --timeout_s=30)
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

run() {  # run NAME ARGS...: one training job writing to $T/NAME.
  local name=$1 rc; shift
  timeout 120 "$RINGSIDE" train "${common[@]}" "$@" --out="$T/$name" >"$T/$name.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || { fail "$name exited $rc"; tail -5 "$T/$name.log"; return 1; }
  grep -q "^timeline: $T/$name/timeline.json " "$T/$name.log" || fail "$name: train printed no timeline line"
  [ -s "$T/$name/timeline.json" ] && [ -s "$T/$name/timeline.html" ] || { fail "$name: no timeline.json/html"; return 1; }
}
check() {  # check WHAT ARGS...: check_timeline.py must pass; its summary goes to $T/WHAT.sum.
  local what=$1; shift
  $PY "$CHECK" "$@" >"$T/$what.sum" || { fail "$what"; cat "$T/$what.sum"; return 1; }
  echo "$what: $(head -1 "$T/$what.sum")"
}

ps_flows="push -> aggregate,aggregate -> pull"
if run ps --strategy=ps --workers=2 --ps_shards=2 --ps_sync=bsp; then
  check ps --processes="shard 0,shard 1,worker 0,worker 1" --flows="$ps_flows" "$T/ps/timeline.json"
  # The command, on its own, to another file: the same timeline.
  "$RINGSIDE" timeline --run="$T/ps" --out="$T/ps-again.json" >"$T/again.log" 2>&1 || fail "timeline exited $?"
  [ -s "$T/ps-again.html" ] || fail "timeline --out wrote no viewer beside it"
  cmp -s "$T/ps/timeline.json" "$T/ps-again.json" || fail "timeline --run differs from train's"
  # A worker killed mid-write: its file lacks the "]" and ends inside a batch.
  mkdir -p "$T/cut" && cp "$T/ps"/trace*.json "$T/cut/"
  size=$(stat -c %s "$T/cut/trace.rank1.json")
  truncate -s $((size * 2 / 3)) "$T/cut/trace.rank1.json"
  if "$RINGSIDE" timeline --run="$T/cut" >"$T/cut.log" 2>&1; then
    grep -q "trace.rank1.json" "$T/cut.log" || fail "the cut trace was not reported: $(cat "$T/cut.log")"
    check cut --processes="shard 0,shard 1,worker 0,worker 1" --flows="$ps_flows" "$T/cut/timeline.json"
  else
    fail "timeline of a cut trace exited $?: $(cat "$T/cut.log")"
  fi
fi

# Three buckets (one per layer), all-reduced while backward goes on.
if run ddp --strategy=ddp --workers=2 --bucket_cap_mb=0.001 --first_bucket_mb=0.001; then
  check ddp --processes="rank 0,rank 1" --flows="ready -> all-reduce" "$T/ddp/timeline.json"
fi

"$RINGSIDE" timeline >/dev/null 2>"$T/usage.err"
[ $? -eq 2 ] || fail "timeline without --run: not a usage error"
"$RINGSIDE" timeline --run="$T/nothing-here" >/dev/null 2>"$T/missing.err"
[ $? -eq 1 ] && [ "$(wc -l <"$T/missing.err")" -eq 1 ] || fail "timeline of a missing dir: not one error line"

# The viewer in headless Chromium: what it read equals what the checker counted.
CHROMIUM=$(command -v chromium || true)
if [ -z "$CHROMIUM" ]; then
  skip_part "the viewer part: chromium is not installed (scripts/setup.sh installs it)"
else
  export HOME="$T"
  flags=(--headless=new --no-sandbox --disable-gpu --no-first-run --disable-extensions
         --user-data-dir="$T/profile" --enable-logging=stderr --v=0)
  for name in ps ddp; do
    [ -s "$T/$name/timeline.html" ] && [ -s "$T/$name.sum" ] || continue
    timeout 120 "$CHROMIUM" "${flags[@]}" --virtual-time-budget=5000 --dump-dom \
      "file://$T/$name/timeline.html" >"$T/$name.dom" 2>"$T/$name.chromium.log" \
      || { fail "$name: chromium exited $?"; tail -5 "$T/$name.chromium.log"; continue; }
    $PY - "$T/$name.dom" "$T/$name.sum" "$name" <<'PY' || fail "$name: viewer"
import json, re, sys
dom, want, name = open(sys.argv[1]).read(), json.loads(open(sys.argv[2]).readline()), sys.argv[3]
m = re.search(r'<pre id="summary"([^>]*)>([^<]*)</pre>', dom)
if not m:
    sys.exit("FAIL: %s: no summary in the rendered page" % name)
got = dict(re.findall(r'data-(\w+)="([^"]*)"', m.group(1)))
print("%s viewer: %s" % (name, m.group(2)))
bad = ["%s=%s (checker: %s)" % (k, got.get(k), want[k]) for k in ("processes", "threads", "spans", "flows", "counters")
       if got.get(k) != str(want[k])]
if got.get("errors") != "0" or got.get("dangling") != "0":
    bad.append("errors=%s dangling=%s" % (got.get("errors"), got.get("dangling")))
if int(got.get("drawn", "0")) == 0 or dom.count("<rect") == 0:
    bad.append("nothing drawn")
if bad:
    sys.exit("FAIL: %s viewer: %s" % (name, "; ".join(bad)))
PY
    if grep -E 'CONSOLE|Uncaught' "$T/$name.chromium.log" >"$T/$name.console"; then
      fail "$name: console messages:"; cat "$T/$name.console"
    fi
  done
fi

[ "$failures" -eq 0 ] && echo PASS || { echo "$failures failure(s)"; exit 1; }
