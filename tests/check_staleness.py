#!/usr/bin/python3
"""Checks the SSP staleness bound from per-worker step metrics.

usage: check_staleness.py --slow=W --bound=K --expect=bounded|exceeded WORKER_METRICS...
WORKER_METRICS are DIR/metrics.rank<w>.jsonl, one per worker (the slow worker W among
them). For every step s that a fast worker started at time T (start_us), its lead over
the slow worker is s - (number of steps the slow worker had started by T).
  bounded:  every lead <= K, and the maximum lead is K or K - 1 (the bound was reached,
            so the check is not vacuous);
  exceeded: the maximum lead is > K (the check can fail: e.g. ASP).
Exits 1 with a FAIL line otherwise; with --expect=exceeded, exits 2 with an INCONCLUSIVE
line where the lead stayed within K because the slow worker was not slow: its steps
spanned less than SLOWER_BY times the fastest worker's (the slowing, from outside,
began after most of its steps had run), a run that says nothing about the bound.
"""
import bisect
import json
import re
import sys


# How much longer than the fastest worker's the slow worker's steps must span for a lead
# that never exceeds K to count against an unbounded mode (stopped 40 ms of every 50:
# about 5x when the slowing holds throughout).
SLOWER_BY = 2.0


def span(starts):
    """Microseconds from a worker's first step start to its last."""
    return starts[-1][1] - starts[0][1] if len(starts) > 1 else 0


def main():
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
    files = [a for a in sys.argv[1:] if not a.startswith("--")]
    try:
        slow, bound, expect = int(opts["slow"]), int(opts["bound"]), opts["expect"]
    except (KeyError, ValueError):
        sys.exit(__doc__)
    if expect not in ("bounded", "exceeded"):
        sys.exit(__doc__)
    starts = {}
    for path in files:
        m = re.search(r"\.rank(\d+)\.jsonl$", path)
        if not m:
            sys.exit("FAIL: %s is not a metrics.rank<w>.jsonl file" % path)
        records = [json.loads(line) for line in open(path) if line.strip()]
        starts[int(m.group(1))] = sorted((int(r["step"]), int(r["start_us"])) for r in records)
    if slow not in starts or len(starts) < 2:
        sys.exit("FAIL: need the slow worker %d's metrics and at least one other's" % slow)
    slow_starts = sorted(t for _, t in starts[slow])
    if [s for s, _ in starts[slow]] != list(range(len(slow_starts))):
        sys.exit("FAIL: the slow worker's steps are not 0..%d" % (len(slow_starts) - 1))
    max_lead, where, violations = None, None, []
    for w, recs in sorted(starts.items()):
        if w == slow:
            continue
        for step, t in recs:
            started = bisect.bisect_right(slow_starts, t)  # slow steps with start_us <= t
            lead = step - started
            if max_lead is None or lead > max_lead:
                max_lead, where = lead, (w, step, started)
            if lead > bound:
                violations.append((w, step, started, lead))
    if max_lead is None:
        sys.exit("FAIL: no fast-worker records")
    w, step, started = where
    print("max lead %d over slow worker %d (worker %d started step %d when worker %d had "
          "started %d steps); bound K=%d, %d record(s) over it" %
          (max_lead, slow, w, step, slow, started, bound, len(violations)))
    if expect == "bounded":
        for w, step, started, lead in violations[:5]:
            print("FAIL: worker %d started step %d when slow worker %d had started only %d "
                  "steps: lead %d > K=%d" % (w, step, slow, started, lead, bound))
        if violations:
            sys.exit(1)
        if max_lead not in (bound, bound - 1):
            sys.exit("FAIL: maximum lead %d, expected K=%d or K-1 (bound never reached: the "
                     "check would be vacuous)" % (max_lead, bound))
    elif max_lead <= bound:
        fastest = min(span(recs) for w, recs in starts.items() if w != slow)
        if span(starts[slow]) < SLOWER_BY * fastest:
            print("INCONCLUSIVE: maximum lead %d, but the slow worker's steps spanned %.0f ms against "
                  "the fastest worker's %.0f ms (under %gx): it was slowed too late" %
                  (max_lead, span(starts[slow]) / 1e3, fastest / 1e3, SLOWER_BY))
            sys.exit(2)
        sys.exit("FAIL: maximum lead %d never exceeded K=%d" % (max_lead, bound))
    sys.exit(0)


if __name__ == "__main__":
    main()
