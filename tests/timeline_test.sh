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
# For the zoomed viewer: a model whose backward lasts tens of milliseconds (the one
# above takes tens of microseconds, less than a thread's wake-up; 784-256-256-10 at
# batch 64 took 0.2-0.9 ms, and on CI's busy host no step's all-reduce started inside
# it), so bucket 0's all-reduce (the last layer, 40 KB) starts well inside it beside
# two busy loops too (0.1-7 ms into a 17-29 ms backward); the later options override
# the common ones.
run zoom --strategy=ddp --workers=2 --model=mlp:784-1024-1024-10 --batch=128 --steps=8 \
  --bucket_cap_mb=0.25 --first_bucket_mb=0.01

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
  # Zoomed to one step ("#step=K"): the page draws that step's window (spans of the
  # steps beside it only faded, at its edges), and bucket 0's all-reduce is drawn
  # starting inside the step's backward (of the rank that launched it last). K is the
  # first step from 2 on whose records (timeline.json) show that overlap on some rank:
  # beside other work one step's all-reduce may start only after backward ended (the
  # host's timing, not the viewer's), and what is checked here is that the viewer draws
  # the overlap the records hold.
  if [ -s "$T/zoom/timeline.html" ]; then
    zoom_step=$($PY - "$T/zoom/timeline.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
spans = {}  # (step, pid) -> backward starts and ends, bucket 0's start
for e in events:
    if e.get("ph") != "X" or "step" not in e.get("args", {}):
        continue
    s = spans.setdefault((e["args"]["step"], e["pid"]), {"back": [], "ar": None})
    if e["name"] == "backward":
        s["back"].append((e["ts"], e["ts"] + e["dur"]))
    elif e["name"] == "all-reduce bucket 0":
        s["ar"] = e["ts"]
for step in sorted({k[0] for k in spans}):
    if step < 2:
        continue
    for (st, pid), s in spans.items():
        if st == step and s["back"] and s["ar"] is not None and \
                min(b for b, _ in s["back"]) < s["ar"] < max(e for _, e in s["back"]):
            print(step)
            sys.exit(0)
print("none")
PY
)
    if [ "$zoom_step" = none ]; then
      fail "zoom: in no step from 2 on did bucket 0's all-reduce start inside backward (records of $T/zoom)"
      zoom_step=5
    fi
    echo "zoom: step $zoom_step (the first from 2 whose records show the overlap)"
    timeout 120 "$CHROMIUM" "${flags[@]}" --virtual-time-budget=5000 --dump-dom \
      "file://$T/zoom/timeline.html#step=$zoom_step" >"$T/zoom.dom" 2>"$T/zoom.chromium.log" \
      || fail "zoom: chromium exited $?"
    ZOOM_STEP=$zoom_step $PY - "$T/zoom.dom" <<'PY' || fail "zoomed viewer"
import os, re, sys
K = os.environ["ZOOM_STEP"]
dom = open(sys.argv[1]).read()
m = re.search(r'<pre id="summary"([^>]*)>', dom)
summary = dict(re.findall(r'data-(\w+)="([^"]*)"', m.group(1))) if m else {}
if summary.get("zoom") != K or summary.get("errors") != "0":
    sys.exit("FAIL: zoom: summary %s" % summary)
rects = [dict(re.findall(r'([\w-]+)="([^"]*)"', r)) for r in re.findall(r'<rect ([^>]*)>', dom)]
steps = {r.get("data-step") for r in rects if r.get("data-context") != "1"}
if not rects or steps - {K, None}:
    sys.exit("FAIL: zoom: drew steps %s unfaded, expected only %s (and spans without a step)" % (sorted(map(str, steps)), K))
inside = []
for pid in sorted({r["data-track"].split(":")[0] for r in rects}):
    mine = [r for r in rects if r["data-track"].split(":")[0] == pid and r.get("data-step") == K]
    back = [r for r in mine if r["data-phase"] == "backward"]
    ar = [r for r in mine if r["data-name"] == "all-reduce bucket 0"]
    if not back or len(ar) != 1:
        sys.exit("FAIL: zoom: process %s: %d backward spans, %d of bucket 0's all-reduce" % (pid, len(back), len(ar)))
    b0 = min(float(r["x"]) for r in back)
    b1 = max(float(r["x"]) + float(r["width"]) for r in back)
    a0 = float(ar[0]["x"])
    start = float(ar[0]["data-start"])
    bstart = min(float(r["data-start"]) for r in back)
    bend = max(float(r["data-end"]) for r in back)
    print("process %s, step %s: bucket 0's all-reduce drawn from x=%.1f, backward x=%.1f-%.1f "
          "(%.3f ms, backward %.3f-%.3f ms)" % (pid, K, a0, b0, b1, start, bstart, bend))
    if b1 - b0 < 20:
        sys.exit("FAIL: zoom: process %s: backward is %.1f px wide: not zoomed" % (pid, b1 - b0))
    inside.append(b0 < a0 < b1 and bstart < start < bend)
# The all-reduce starts once every rank has launched it: inside the backward of the rank
# that launched it last. On a busy host the ranks drift apart and the first rank's
# backward may have ended before its partner's began; the last one's never has.
if not any(inside):
    sys.exit("FAIL: zoom: on no rank does bucket 0's all-reduce start inside backward")
PY
    # The same page as a picture, for a person to look at (bazel-testlogs/.../outputs).
    shot="${TEST_UNDECLARED_OUTPUTS_DIR:-$T}/ddp-step$zoom_step.png"
    timeout 120 "$CHROMIUM" "${flags[@]}" --virtual-time-budget=5000 --window-size=1440,700 \
      --screenshot="$shot" "file://$T/zoom/timeline.html#step=$zoom_step" >/dev/null 2>&1 && [ -s "$shot" ] \
      || fail "zoom: no screenshot"
  fi
fi

[ "$failures" -eq 0 ] && echo PASS || { echo "$failures failure(s)"; exit 1; }
