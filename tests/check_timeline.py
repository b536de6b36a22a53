#!/usr/bin/env python3
"""Checks a merged timeline written by `ringside timeline` (experiments/timeline).

usage: check_timeline.py [--processes=NAME,NAME,...] [--flows=NAME,...] TIMELINE.json

The file must load as a Chrome trace in JSON object format ({"traceEvents": [...]})
and hold:
  - one process track per process: every pid of an event has exactly one
    process_name and one process_sort_index, no two processes share a name, and
    --processes (if given) lists exactly the names;
  - spans ("X") with a category, disjoint or nested on every (pid, tid);
  - flows ("s" / "f", one id each): both ends exist, share the name, the end binds
    with "bp":"e", and each end lies strictly inside a span of its own track that
    holds no other span (so it binds to that span alone); --flows names the flows
    that must occur at least once;
  - counters ("C"): an "in flight" (bytes) and a "queue" (depth) series on every
    process that has communication spans.
Prints one summary line (processes, threads, spans, flows, counter tracks) as JSON.
Exits 1 naming the first problems.
"""
import bisect
import collections
import json
import sys


def main(argv):
    expect_processes = None
    expect_flows = []
    paths = []
    for a in argv[1:]:
        if a.startswith("--processes="):
            expect_processes = sorted(a.split("=", 1)[1].split(","))
        elif a.startswith("--flows="):
            expect_flows = a.split("=", 1)[1].split(",")
        else:
            paths.append(a)
    if len(paths) != 1:
        print(__doc__)
        return 2
    problems = []
    with open(paths[0]) as f:
        root = json.load(f)
    if not isinstance(root, dict) or not isinstance(root.get("traceEvents"), list):
        print("FAIL: %s is not a JSON object with a traceEvents array" % paths[0])
        return 1
    events = root["traceEvents"]
    names = collections.defaultdict(list)
    sort_index = collections.defaultdict(list)
    pids = set()
    tracks = collections.defaultdict(list)
    flows = collections.defaultdict(dict)
    counters = collections.defaultdict(set)
    for e in events:
        ph = e.get("ph")
        pids.add(e.get("pid"))
        if ph == "M" and e["name"] == "process_name":
            names[e["pid"]].append(e["args"]["name"])
        elif ph == "M" and e["name"] == "process_sort_index":
            sort_index[e["pid"]].append(e["args"]["sort_index"])
        elif ph == "X":
            if not e.get("cat"):
                problems.append("span %r has no category" % e.get("name"))
            tracks[(e["pid"], e["tid"])].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]))
        elif ph in ("s", "f"):
            if ph in flows[e["id"]]:
                problems.append("flow %s has two %r events" % (e["id"], ph))
            flows[e["id"]][ph] = e
        elif ph == "C":
            for series in e["args"]:
                counters[e["pid"]].add("%s %s" % (e["name"], series))
    for pid in sorted(pids, key=str):
        if len(names[pid]) != 1 or len(sort_index[pid]) != 1:
            problems.append("pid %s has %d process names and %d sort indices"
                            % (pid, len(names[pid]), len(sort_index[pid])))
    all_names = sorted(n for ns in names.values() for n in ns)
    if len(set(all_names)) != len(all_names):
        problems.append("process names repeat: %s" % all_names)
    if expect_processes is not None and all_names != expect_processes:
        problems.append("processes %s, expected %s" % (all_names, expect_processes))
    # Nesting, and per track the spans by start for the flow ends.
    leaves = {}
    for track, spans in tracks.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for i, (start, end, name) in enumerate(spans):
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                problems.append("track %s: %r overlaps %r partially" % (track, name, stack[-1][2]))
            stack.append((start, end, name))
        leaves[track] = spans

    def innermost_leaf(p):
        spans = leaves.get((p["pid"], p["tid"]), [])
        ts = float(p["ts"])
        holders = [s for s in spans[:bisect.bisect_left(spans, (ts, float("inf")))]
                   if s[0] < ts < s[1]]
        if not holders:
            return None
        inner = min(holders, key=lambda s: s[1] - s[0])
        lo = bisect.bisect_left(spans, (inner[0], -float("inf")))
        for s in spans[lo:]:
            if s[0] >= inner[1]:
                break
            if s is not inner and s[0] >= inner[0] and s[1] <= inner[1]:
                return None
        return inner

    flow_names = collections.Counter()
    for fid, ends in flows.items():
        if set(ends) != {"s", "f"}:
            problems.append("flow %s lacks an end: has %s" % (fid, sorted(ends)))
            continue
        s, f = ends["s"], ends["f"]
        if s["name"] != f["name"] or s.get("cat") != f.get("cat"):
            problems.append("flow %s: ends differ in name or category" % fid)
        if f.get("bp") != "e":
            problems.append("flow %s: its end does not bind to the enclosing slice" % fid)
        a, b = innermost_leaf(s), innermost_leaf(f)
        if a is None or b is None:
            problems.append("flow %s (%s): an end is not inside a leaf span of its track" % (fid, s["name"]))
            continue
        if b[0] < a[0]:
            problems.append("flow %s (%s): its end's span starts before its start's" % (fid, s["name"]))
        flow_names[s["name"]] += 1
    for name in expect_flows:
        if flow_names[name] == 0:
            problems.append("no %r flow (flows: %s)" % (name, dict(flow_names)))
    comm_pids = {t[0] for t, spans in tracks.items() if spans}
    for pid in comm_pids:
        has_comm = any(e.get("ph") == "X" and e["pid"] == pid and e.get("cat") == "comm"
                       and "bytes" in e.get("args", {}) for e in events)
        if has_comm and not {"in flight bytes", "queue depth"} <= counters[pid]:
            problems.append("%s: no in-flight / queue counters (has %s)"
                            % (names[pid], sorted(counters[pid])))
    summary = {"processes": len(names), "threads": len(tracks),
               "spans": sum(len(s) for s in tracks.values()),
               "flows": sum(flow_names.values()),
               "counters": sum(len(c) for c in counters.values()),
               "flow_names": dict(flow_names)}
    print(json.dumps(summary, sort_keys=True))
    if problems:
        for p in problems[:20]:
            print("FAIL: %s" % p)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
