#!/usr/bin/python3
"""Samples the resident memory of a launched job's processes and checks it stays flat.

usage: rss_watch.py ROOT_PID STEPS LABEL=RANK:METRICS... [--interval=S] [--warmup=F]
                    [--max_growth_mib=M] [--max_growth_frac=G] [--samples=TSV]
                    [--find_s=T] [--run_s=T]

ROOT_PID is the launcher (or a timeout(1) wrapping it). Each LABEL=RANK:METRICS names the
descendant of ROOT_PID whose environment holds RANK=<RANK> (what the launcher gives each
process it starts) and the metrics file that process appends one line per step to (its
line count is the step the process has reached). Every --interval seconds (default 0.05)
each process's VmRSS (/proc/<pid>/status) is read with its step, until every watched
process has ended (or --run_s, default 600, passed: exit 2).

Then, per process: "warm" is the median VmRSS over the samples taken in steps
[F * STEPS, (F + 0.1) * STEPS) (--warmup F, default 0.2: after the warm-up), "end" the
median over steps [0.9 * STEPS, STEPS) (still training: teardown may free what a leak
holds); medians, as the shards' RSS moves by about 1 MiB from sample to sample (gRPC
buffers). The growth end - warm must be below max(--max_growth_mib, --max_growth_frac *
warm) (defaults 4 MiB and 0.1); either window without a sample fails (the run was too fast
to sample). Prints one line per process with the numbers; exits 1 naming each process
that grew too much or could not be sampled. --samples writes every sample as TSV.
Reads /proc only; starts, stops and signals nothing.
"""
import os
import sys
import time


def median(values):
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def parse_args(argv):
    opts = {"interval": "0.05", "warmup": "0.2", "max_growth_mib": "4",
            "max_growth_frac": "0.1", "samples": "", "find_s": "60", "run_s": "600"}
    pos = []
    for a in argv:
        if a.startswith("--"):
            k, _, v = a[2:].partition("=")
            if k not in opts:
                sys.exit("rss_watch.py: unknown flag --%s\n%s" % (k, __doc__))
            opts[k] = v
        else:
            pos.append(a)
    if len(pos) < 3:
        sys.exit(__doc__)
    watched = []
    for spec in pos[2:]:
        label, _, rest = spec.partition("=")
        rank, _, metrics = rest.partition(":")
        watched.append({"label": label, "rank": rank, "metrics": metrics})
    return int(pos[0]), int(pos[1]), watched, opts


def ppid_and_state(pid):
    """(ppid, state letter) of pid, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # After "pid (comm) ".
    return int(fields[1]), fields[0]


def alive(pid):
    s = ppid_and_state(pid)
    return s is not None and s[1] not in ("Z", "X")


def descendants(root):
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = ppid_and_state(int(name))
            if s is not None:
                children.setdefault(s[0], []).append(int(name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def rank_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    for e in env:
        if e.startswith(b"RANK="):
            return e[5:].decode()
    return None


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class LineCounter:
    """Counts the lines of a file that another process appends to, reading only what
    was added since the last call."""

    def __init__(self, path):
        self.path, self.offset, self.lines = path, 0, 0

    def count(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return self.lines
        self.offset += len(data)
        self.lines += data.count(b"\n")
        return self.lines


def main():
    root, steps, watched, opts = parse_args(sys.argv[1:])
    interval = float(opts["interval"])
    # Find every watched process (the launcher starts them within a second or two).
    deadline = time.time() + float(opts["find_s"])
    while any("pid" not in w for w in watched):
        if time.time() > deadline or not alive(root):
            missing = [w["label"] for w in watched if "pid" not in w]
            print("FAIL: rss_watch: no process for %s under %d" % (", ".join(missing), root))
            sys.exit(1)
        for pid in descendants(root):
            r = rank_of(pid)
            for w in watched:
                if "pid" not in w and r == w["rank"]:
                    w["pid"] = pid
        time.sleep(0.02)
    for w in watched:
        w["counter"] = LineCounter(w["metrics"])
        w["samples"] = []  # (seconds since start, step, VmRSS KiB)
    start = time.time()
    deadline = start + float(opts["run_s"])
    while True:
        live = 0
        for w in watched:
            if not alive(w["pid"]):
                continue
            kib = rss_kib(w["pid"])
            step = w["counter"].count()
            if kib is not None and alive(w["pid"]):
                w["samples"].append((time.time() - start, step, kib))
                live += 1
        if live == 0:
            break
        if time.time() > deadline:
            print("FAIL: rss_watch: the processes still ran after %s s" % opts["run_s"])
            sys.exit(2)
        time.sleep(interval)

    if opts["samples"]:
        with open(opts["samples"], "w") as f:
            f.write("label\tpid\tt_s\tstep\tvmrss_kib\n")
            for w in watched:
                for t, s, k in w["samples"]:
                    f.write("%s\t%d\t%.2f\t%d\t%d\n" % (w["label"], w["pid"], t, s, k))
    warm_lo, warm_hi = float(opts["warmup"]) * steps, (float(opts["warmup"]) + 0.1) * steps
    end_lo = 0.9 * steps
    ok = True
    for w in watched:
        samples = w["samples"]
        # Windows of steps, still training (the end window stops before the last step:
        # teardown may free what a leak holds).
        warm = [x for x in samples if warm_lo <= x[1] < warm_hi]
        end = [x for x in samples if end_lo <= x[1] < steps]
        if not warm or not end:
            print("FAIL: %s (pid %d): %d samples in steps [%d, %d), %d in [%d, %d): the run "
                  "was too fast to sample (--interval %s s)" %
                  (w["label"], w["pid"], len(warm), warm_lo, warm_hi, len(end), end_lo, steps,
                   opts["interval"]))
            ok = False
            continue
        warm_kib, end_kib = median([x[2] for x in warm]), median([x[2] for x in end])
        growth = end_kib - warm_kib
        bound = max(float(opts["max_growth_mib"]) * 1024, float(opts["max_growth_frac"]) * warm_kib)
        good = growth < bound
        print("%s %s (pid %d): median VmRSS %.2f MiB in steps [%d, %d) (%d samples), %.2f MiB "
              "in [%d, %d) (%d samples): %+.2f MiB (bound %.1f MiB); peak %.2f MiB, last "
              "%.2f MiB at step %d" %
              ("ok  " if good else "FAIL:", w["label"], w["pid"], warm_kib / 1024, warm_lo,
               warm_hi, len(warm), end_kib / 1024, end_lo, steps, len(end), growth / 1024,
               bound / 1024, max(x[2] for x in samples) / 1024, samples[-1][2] / 1024,
               samples[-1][1]))
        ok &= good
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
