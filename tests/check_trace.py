#!/usr/bin/env python3
"""Checks Chrome trace files written by ringside (common/trace.h).

usage: check_trace.py [--metrics=METRICS.jsonl] [--expect_wait] TRACE.json...

Every TRACE must load as JSON (an array of events), and on every track (pid, tid)
any two complete ("X") events must be disjoint or nested: Perfetto cannot draw
partial overlaps. Every X event carries a category and args.step.

--metrics (one TRACE): per step of the step records, the durations of the trace's
  "forward" spans of that step add up to the record's forward_ms (within 10%, or
  0.05 ms for tiny steps): no wait hides in forward.
--expect_wait: some span has category "wait".
Exits 1 naming the first problems.
"""
import collections
import json
import sys


def load(path):
    with open(path) as f:
        events = json.load(f)
    if not isinstance(events, list):
        raise ValueError("%s: not a JSON array of events" % path)
    return events


def check_nesting(path, events, problems):
    tracks = collections.defaultdict(list)
    for e in events:
        if e.get("ph") != "X":
            continue
        if not e.get("cat"):
            problems.append("%s: %r has no category" % (path, e.get("name")))
        if "step" not in e.get("args", {}):
            problems.append("%s: %r has no args.step" % (path, e.get("name")))
        tracks[(e["pid"], e["tid"])].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]))
    for track, spans in tracks.items():
        # Sorted by start, longest first: each span must end within every open span
        # that it starts in.
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, name in spans:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                problems.append("%s: track %s: %r [%d, %d) overlaps %r [%d, %d) partially"
                                % (path, track, name, start, end, stack[-1][2], stack[-1][0],
                                   stack[-1][1]))
            stack.append((start, end, name))
    return sum(len(s) for s in tracks.values())


def check_forward(path, events, metrics_path, problems):
    forward_us = collections.defaultdict(float)
    for e in events:
        if e.get("ph") == "X" and e["name"] == "forward":
            forward_us[int(e["args"]["step"])] += float(e["dur"])
    with open(metrics_path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    if not records:
        problems.append("%s: no step records" % metrics_path)
    for r in records:
        traced = forward_us.get(r["step"], 0.0) / 1e3
        want = r["forward_ms"]
        if abs(traced - want) > max(0.1 * want, 0.05):
            problems.append("step %d: forward spans add up to %.3f ms, forward_ms is %.3f"
                            % (r["step"], traced, want))


def main(argv):
    metrics = None
    expect_wait = False
    paths = []
    for arg in argv:
        if arg.startswith("--metrics="):
            metrics = arg.split("=", 1)[1]
        elif arg == "--expect_wait":
            expect_wait = True
        else:
            paths.append(arg)
    if not paths or (metrics and len(paths) != 1):
        sys.exit(__doc__)
    problems = []
    waits = 0
    for path in paths:
        try:
            events = load(path)
        except (OSError, ValueError) as e:
            problems.append("%s: %s" % (path, e))
            continue
        if check_nesting(path, events, problems) == 0:
            problems.append("%s: no spans" % path)
        waits += sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "wait")
        if metrics:
            check_forward(path, events, metrics, problems)
    if expect_wait and waits == 0:
        problems.append("no wait span in %s" % " ".join(paths))
    for p in problems[:20]:
        print("FAIL: " + p)
    if problems:
        sys.exit(1)
    print("ok: %d trace file(s)" % len(paths))


if __name__ == "__main__":
    main(sys.argv[1:])
