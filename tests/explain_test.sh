#!/usr/bin/env bash
# `ringside explain` (issue 22): the ring all-reduce step by step for 2..8 ranks and
# element counts that do not divide by the ranks, each ending with its check against
# the Gloo backend (bit for bit, on the readable input and on random floats); the
# frames as SVG (well-formed XML, one frame per step plus the start) and HTML (the
# same frames inline; opened in headless Chromium where installed: its script shows
# the frame the address names); one BSP parameter-server step with 4 workers and 1 or
# 4 shards, checked against a real run's shard metrics, and the bottleneck line; bad
# input: one error line, exit status 2.
set -uo pipefail
RINGSIDE="$1"
PY=/usr/bin/python3
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

# explain NAME ARGS...: runs `ringside explain ARGS` into $T/NAME.out; must exit 0.
explain() {
  local name=$1 rc; shift
  timeout 120 "$RINGSIDE" explain "$@" >"$T/$name.out" 2>"$T/$name.err"; rc=$?
  [ "$rc" -eq 0 ] || { fail "$name: explain $* exited $rc"; tail -3 "$T/$name.out" "$T/$name.err"; return 1; }
}
# expect NAME REGEX: a line of $T/NAME.out matches.
expect() { grep -qE -- "$2" "$T/$1.out" || fail "$1: no line matches /$2/"; }

# The ring: every world size 2..8, E = 2N + 1 and N - 1 (never a multiple of N).
for N in 2 3 4 5 6 7 8; do
  for E in $((2 * N + 1)) $((N - 1)); do
    name="ring${N}x$E"
    explain "$name" ring --ranks="$N" --elements="$E" || continue
    expect "$name" "^check: the Gloo ring all-reduce on the same input gives the same $N buffers, bit for bit$"
    expect "$name" "^check: its Work::bytes\(\) count the same traffic on every rank"
    [ "$E" -gt 0 ] && expect "$name" "^check: so it does on random floats"
    expect "$name" "^traffic: each rank sent 2\(N-1\) = $((2 * (N - 1))) chunks"
    [ "$(grep -c '^reduce-scatter step ' "$T/$name.out")" -eq $((N - 1)) ] || fail "$name: not $((N - 1)) reduce-scatter steps"
    [ "$(grep -c '^all-gather step ' "$T/$name.out")" -eq $((N - 1)) ] || fail "$name: not $((N - 1)) all-gather steps"
  done
done
echo "ring: 2..8 ranks checked"
# The worked example of the tutorial: its first reduce-scatter line and the sum.
if explain ring3x7 ring --ranks=3 --elements=7; then
  expect ring3x7 '^  rank 0 sends chunk 0 \[0 1\] to rank 1; gets chunk 2 from rank 2: \[4 5 6\] \+ \[24 25 26\] = \[28 30 32\]$'
  expect ring3x7 '^result: every rank holds the sum \[30 33 \| 36 39 \| 42 45 48\]$'
fi

# Frames: 4 ranks -> 1 + 2 x 3 frames.
if explain svg ring --ranks=4 --elements=10 --frames="$T/ring.svg"; then
  expect svg "^frames: $T/ring.svg \(7 frames\)$"
  $PY - "$T/ring.svg" <<'PY' || fail "ring.svg"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
frames = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "frame"]
arrows = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "arrow"]
if len(frames) != 7 or len(arrows) != 6 * 4:
    sys.exit("FAIL: ring.svg has %d frames and %d arrows, expected 7 and 24" % (len(frames), len(arrows)))
print("ring.svg: well-formed, %d frames, %d arrows" % (len(frames), len(arrows)))
PY
fi
if explain html ring --ranks=4 --elements=10 --frames="$T/ring.html"; then
  expect html "^frames: $T/ring.html \(7 frames\)$"
  [ "$(grep -o '<svg class="frame"' "$T/ring.html" | wc -l)" -eq 7 ] || fail "ring.html: not 7 inline frames"
  grep -qE '(src|href)=' "$T/ring.html" && fail "ring.html refers to another file"
fi

# The page in headless Chromium: its script ran and shows the frame "#3" names.
CHROMIUM=$(command -v chromium || true)
if [ -z "$CHROMIUM" ]; then
  skip_part "the html viewer part: chromium is not installed (scripts/setup.sh installs it)"
elif [ -s "$T/ring.html" ]; then
  export HOME="$T"
  timeout 120 "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --no-first-run \
    --disable-extensions --user-data-dir="$T/profile" --enable-logging=stderr --v=0 \
    --virtual-time-budget=3000 --dump-dom "file://$T/ring.html#3" >"$T/ring.dom" 2>"$T/chromium.log" \
    || { fail "chromium exited $?"; tail -5 "$T/chromium.log"; }
  grep -q 'data-shown="3">frame 3 of 7<' "$T/ring.dom" || fail "ring.html: the script did not show frame 3 of 7"
  [ "$(grep -o 'class="frame shown"' "$T/ring.dom" | wc -l)" -eq 1 ] || fail "ring.html: not exactly one frame shown"
  grep -E 'CONSOLE|Uncaught' "$T/chromium.log" && fail "ring.html: console messages"
  echo "html viewer: $(grep -o 'frame 3 of 7' "$T/ring.dom" | head -1)"
fi
# The parameter server's step drawn the same way: its page opens on frame 2 without a
# script error.
if [ -n "$CHROMIUM" ] && explain pshtml ps --workers=4 --shards=2 --frames="$T/ps.html"; then
  n=$(sed -nE "s#^frames: $T/ps.html \(([0-9]+) frames\)\$#\1#p" "$T/pshtml.out")
  [ -n "$n" ] && [ "$n" -ge 3 ] || fail "ps.html: no 'frames: ... (N frames)' line with N >= 3"
  timeout 120 "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --no-first-run \
    --disable-extensions --user-data-dir="$T/profile" --enable-logging=stderr --v=0 \
    --virtual-time-budget=3000 --dump-dom "file://$T/ps.html#2" >"$T/ps.dom" 2>"$T/ps.chromium.log" \
    || fail "chromium exited $? on ps.html"
  grep -q "data-shown=\"2\">frame 2 of ${n:-?}<" "$T/ps.dom" || fail "ps.html: the script did not show frame 2 of $n"
  [ "$(grep -o 'class="frame shown"' "$T/ps.dom" | wc -l)" -eq 1 ] || fail "ps.html: not exactly one frame shown"
  grep -E 'CONSOLE|Uncaught' "$T/ps.chromium.log" && fail "ps.html: console messages"
  echo "ps html viewer: frame 2 of $n"
fi

# The parameter server: 4 workers with 1 shard, then 4 shards; each checked by a real run.
mb() { grep -oE "$2 [0-9.]+ MB" "$T/$1.out" | head -1 | grep -oE '[0-9.]+'; }
if explain ps4x1 ps --workers=4 --shards=1; then
  expect ps4x1 '^4 workers, 1 shard: the master moves [0-9.]+ MB per step \(in \+ out\); with 4 shards each moves [0-9.]+ MB$'
  expect ps4x1 '^  shard 0 step 1: predicted in [0-9,]+ out [0-9,]+, measured in [0-9,]+ out [0-9,]+$'
  expect ps4x1 '^check: every shard.s bytes in and out per step, measured by the real run, are within 1% of the prediction$'
  expect ps4x1 '^  ([0-9]+) of \1 records exact to the byte$'
fi
if explain ps4x4 ps --workers=4 --shards=4; then
  expect ps4x4 '^4 workers, 4 shards: each shard moves [0-9.]+ MB per step'
  expect ps4x4 '^  shard 3 step 1: predicted'
  expect ps4x4 '^check: every shard.s bytes in and out per step, measured by the real run, are within 1% of the prediction$'
  expect ps4x4 '^  ([0-9]+) of \1 records exact to the byte$'
fi
if [ -s "$T/ps4x1.out" ] && [ -s "$T/ps4x4.out" ]; then
  one=$(mb ps4x1 "master moves"); each=$(mb ps4x4 "each shard moves")
  $PY -c "import sys; r = $one / $each; print('master %s MB vs each of 4 shards %s MB: %.2fx' % ('$one', '$each', r)); sys.exit(0 if 3.9 < r < 4.1 else 1)" \
    || fail "4 shards do not split the master's bytes by 4"
fi

# Bad input: one error line, exit status 2.
bad() {
  local name=$1 regex=$2 rc; shift 2
  timeout 60 "$RINGSIDE" "$@" >"$T/$name.out" 2>"$T/$name.err"; rc=$?
  if [ "$rc" -ne 2 ]; then
    fail "$name: exit status $rc, expected 2"; cat "$T/$name.err"
  elif [ "$(wc -l <"$T/$name.err")" -ne 1 ] || ! grep -qE -- "^ringside: error: .*$regex" "$T/$name.err"; then
    fail "$name: expected one error line matching /$regex/, got:"; cat "$T/$name.err"
  else
    echo "ok   $name: $(cat "$T/$name.err")"
  fi
}
bad no_subject 'ring|ps|what to explain' explain
bad bad_subject "ring or .*ps" explain tree
bad ranks0 '--ranks' explain ring --ranks=0
bad elements_negative '--elements' explain ring --elements=-1
bad workers0 '--workers' explain ps --workers=0
bad shards0 '--shards' explain ps --shards=0
bad too_many_processes '--workers \+ --shards' explain ps --workers=30 --shards=3
bad bad_model 'mlp:100-10|784|input' explain ps --model=mlp:100-10
bad frames_png '\.svg.*\.html' explain ring --frames="$T/ring.png"

[ "$failures" -eq 0 ] && echo PASS || { echo "$failures failure(s)"; exit 1; }
