#!/usr/bin/python3
"""Checks that the parameter-server master bottleneck is measured.

usage: check_shard_bytes.py N NUM_PARAMS S [--steps=K] SHARD_METRICS...
Each SHARD_METRICS file is DIR/metrics.shard<s>.jsonl of a BSP run with N workers and S
shards over a model of NUM_PARAMS floats. Every step's record must count, in and out,
the serialized chunks of all N workers: N * 4 * NUM_PARAMS / S bytes within 1% (the
shards' slices differ by at most one float; the rest is protobuf framing). With
--steps=K each file must hold exactly the steps 0..K-1, once each.
Exits 1 naming the first offending record.
"""
import json
import re
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
    if len(args) < 4:
        sys.exit(__doc__)
    n, num_params, s = int(args[0]), int(args[1]), int(args[2])
    files = args[3:]
    steps = int(opts["steps"]) if "steps" in opts else None
    expected = n * 4.0 * num_params / s
    ok = True
    seen_shards = set()
    for path in files:
        m = re.search(r"metrics\.shard(\d+)\.jsonl$", path)
        if not m:
            print("FAIL: %s is not a metrics.shard<s>.jsonl file" % path)
            ok = False
            continue
        shard = int(m.group(1))
        seen_shards.add(shard)
        # The exact slice, for the report: [floor(s*P/S), floor((s+1)*P/S)).
        exact = n * 4 * (num_params * (shard + 1) // s - num_params * shard // s)
        records = [json.loads(line) for line in open(path) if line.strip()]
        if not records:
            print("FAIL: %s has no records" % path)
            ok = False
            continue
        worst = 0.0
        for r in records:
            if r.get("role") != "server" or r.get("rank") != shard:
                print("FAIL: %s step %s: role %r rank %r, expected server %d" %
                      (path, r.get("step"), r.get("role"), r.get("rank"), shard))
                ok = False
                continue
            for field in ("bytes_received", "bytes_sent"):
                got = int(r.get(field, 0))
                rel = abs(got - expected) / expected
                worst = max(worst, rel)
                if rel > 0.01:
                    print("FAIL: %s step %d: %s = %d, expected N*4*M/S = %d*4*%d/%d = %.0f (+-1%%)" %
                          (path, r["step"], field, got, n, num_params, s, expected))
                    ok = False
        got_steps = sorted(int(r.get("step", 0)) for r in records)
        if steps is not None and got_steps != list(range(steps)):
            print("FAIL: %s holds steps %s, expected 0..%d once each" % (path, got_steps, steps - 1))
            ok = False
        print("%s: %d steps, %d bytes in / %d out per step (exact slice x N: %d, N*4*M/S: %.0f), "
              "worst deviation %.3f%%" % ("/".join(path.split("/")[-2:]), len(records),
                                          records[0].get("bytes_received", 0),
                                          records[0].get("bytes_sent", 0), exact, expected,
                                          100 * worst))
    if seen_shards != set(range(s)):
        print("FAIL: shard files %s, expected one per shard 0..%d" % (sorted(seen_shards), s - 1))
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
