#!/usr/bin/env bash
# The HTML report opens in headless Chromium without console errors and its plots
# render: the DOM after load holds seven inline SVG plots with drawn paths, Chromium logs
# no console message, and a screenshot of the page is not blank. Skipped (counted so)
# where Chromium is not installed (scripts/setup.sh installs it).
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error
CHROMIUM=$(command -v chromium || true)
[ -n "$CHROMIUM" ] || skip "chromium is not installed (scripts/setup.sh installs it)"
cat >"$T/spec.textproto" <<'SPEC'
name: "html"
strategies { kind: "single" }
strategies { kind: "ps" ps_shards: 1 }
strategies { kind: "ddp" }
workers: 1 workers: 2
model: "mlp:784-32-10"
dataset: "synthetic:train=2048,test=128"
batch_per_worker: 32
steps: 12
SPEC
timeout 300 "$RINGSIDE" compare --spec="$T/spec.textproto" --out="$T/run" >/dev/null 2>&1 || { echo "FAIL: compare"; exit 1; }
"$RINGSIDE" report "$T/run" >/dev/null || { echo "FAIL: report"; exit 1; }
export HOME="$T"  # Chromium's profile and crash dumps stay in the sandbox.
flags=(--headless=new --no-sandbox --disable-gpu --no-first-run --disable-extensions
       --user-data-dir="$T/profile" --enable-logging=stderr --v=0)
timeout 120 "$CHROMIUM" "${flags[@]}" --virtual-time-budget=3000 --dump-dom "file://$T/run/report.html" \
  >"$T/dom.html" 2>"$T/chromium.log" || { echo "FAIL: chromium exited $?"; tail -5 "$T/chromium.log"; exit 1; }
failures=0
svgs=$(grep -o '<svg' "$T/dom.html" | wc -l)
[ "$svgs" -eq 7 ] || { echo "FAIL: $svgs plots in the rendered DOM, expected 7"; failures=$((failures + 1)); }
/usr/bin/python3 - "$T/dom.html" <<'PY' || failures=$((failures + 1))
import re, sys
dom = open(sys.argv[1]).read()
plots = re.findall(r'<div class="plot" id="plot-(\w+)"[^>]*>(.*?)</svg>', dom, re.S)
bad = [name for name, svg in plots if svg.count('<path') < 5]
if len(plots) != 7 or bad:
    print("FAIL: plots without drawn paths: %s (found %d plots)" % (bad, len(plots)))
    sys.exit(1)
# The page's load handler records each plot's laid-out size: a plot that collapsed
# (or a script that failed) shows here.
sizes = dict(re.findall(r'id="plot-(\w+)" data-rendered="(\d+x\d+)"', dom)) or \
        {k: v for v, k in re.findall(r'data-rendered="(\d+x\d+)" id="plot-(\w+)"', dom)}
small = {k: v for k, v in sizes.items() if int(v.split("x")[0]) < 300 or int(v.split("x")[1]) < 180}
if len(sizes) != 7 or small:
    print("FAIL: plots not laid out at a readable size: %s (all: %s)" % (small, sizes))
    sys.exit(1)
PY
# One text: every paragraph and table row of report.md is in report.html (rendered from it).
/usr/bin/python3 - "$T/run/report.md" "$T/run/report.html" <<'PY' || failures=$((failures + 1))
import html, re, sys
md, page = open(sys.argv[1]).read(), open(sys.argv[2]).read()
text = html.unescape(re.sub(r"<[^>]+>", "", page))
text = re.sub(r"\s+", " ", text)
missing = []
for block in md.split("\n\n"):
    block = block.strip()
    if not block or block.startswith("```") or block.startswith("!["):
        continue
    # Table rows and list items one by one (a list's "- " is markup, like "**").
    for line in block.split("\n") if block.startswith(("|", "- ")) else [block]:
        if re.fullmatch(r"\|[-|]+\|", line):
            continue
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line)  # [text](link) -> text
        plain = plain.replace("**", "").replace("`", "").replace("\\|", "|").lstrip("# ")
        plain = re.sub(r"^- ", "", plain)
        cells = [c.strip() for c in plain.strip("|").split("|")] if line.startswith("|") else [plain]
        for c in cells:
            if c and re.sub(r"\s+", " ", c) not in text:
                missing.append(c)
if missing:
    print("FAIL: report.html lacks what report.md says: %s" % missing[:5])
    sys.exit(1)
first = md.split("## Findings\n\n")[1].split("\n\n")[0]
if "fastest" not in first and "Only" not in first:
    print("FAIL: the findings do not open with the verdict: %s" % first)
    sys.exit(1)
PY
if grep -E 'CONSOLE|Uncaught|ERROR:.*(console|javascript)' "$T/chromium.log" | grep -v 'dbus\|gpu\|GPU\|sandbox\|crashpad\|Fontconfig\|zygote' >"$T/console.txt"; then
  if [ -s "$T/console.txt" ]; then echo "FAIL: console messages:"; cat "$T/console.txt"; failures=$((failures + 1)); fi
fi
timeout 120 "$CHROMIUM" "${flags[@]}" --window-size=1200,2400 --screenshot="$T/shot.png" \
  "file://$T/run/report.html" >/dev/null 2>&1 || { echo "FAIL: screenshot"; failures=$((failures + 1)); }
# A blank page compresses to a few KB; seven plots and tables do not.
size=$(stat -c %s "$T/shot.png" 2>/dev/null || echo 0)
[ "$size" -gt 40000 ] || { echo "FAIL: screenshot is $size bytes (blank?)"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] || exit 1
echo PASS
