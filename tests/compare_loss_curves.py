#!/usr/bin/python3
"""Compares a distributed job's per-step training loss with a single-process reference's.

usage: compare_loss_curves.py TOLERANCE EXACT_STEPS REFERENCE_METRICS JOB_METRICS...
The job's loss at a step is the sample-weighted mean of the losses its workers (or
ranks) recorded for that step (metrics*.jsonl: "step", "loss", "samples"); the
reference's is the one record of that step. Every step below EXACT_STEPS must match
within TOLERANCE relative (|job - ref| / |ref|); later steps are reported only: the
first step past TOLERANCE and the largest difference. Exits 1 (saying which step) when
a step below EXACT_STEPS differs, or when a step is missing on either side.

Why only a prefix: the job and the reference sum the same gradients in a different
order, and a 1e-7 rounding difference can tip a ReLU on one sample a few hundred steps
in; from there the two trajectories part (measured: a 16-worker PS at step ~460 of
1000, docs/testing.md). A bug (a lost or doubled push, a wrong scale, a stale
parameter) shows at 1e-3 or more from the step it happens.
"""
import json
import sys


def load(paths):
    """{step: (loss sum weighted by samples, samples)} over all records in `paths`."""
    steps = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                d = json.loads(line)
                n = d.get("samples", 1) or 1
                s, c = steps.get(d["step"], (0.0, 0))
                steps[d["step"]] = (s + d["loss"] * n, c + n)
    return {k: s / c for k, (s, c) in steps.items()}


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__.strip().splitlines()[2])
    tol, exact = float(sys.argv[1]), int(sys.argv[2])
    ref, job = load([sys.argv[3]]), load(sys.argv[4:])
    missing = sorted(set(range(exact)) - set(ref)) + sorted(set(range(exact)) - set(job))
    if missing:
        print("FAIL: step %d missing from the %s metrics" %
              (missing[0], "reference" if missing[0] not in ref else "job"))
        sys.exit(1)
    worst_exact, worst, first_past = 0.0, 0.0, None
    for step in sorted(set(ref) & set(job)):
        rel = abs(job[step] - ref[step]) / max(abs(ref[step]), 1e-30)
        if step < exact:
            if rel > tol:
                print("FAIL: step %d: loss %.9g, reference %.9g: relative difference %.3g > %g" %
                      (step, job[step], ref[step], rel, tol))
                sys.exit(1)
            worst_exact = max(worst_exact, rel)
        if rel > tol and first_past is None:
            first_past = step
        worst = max(worst, rel)
    later = ("first past %g at step %d, largest %.3g" % (tol, first_past, worst)
             if first_past is not None else "all within %g" % tol)
    print("loss per step: steps 0..%d within %.3g of the reference (bound %g); later steps: %s"
          % (exact - 1, worst_exact, tol, later))


if __name__ == "__main__":
    main()
