#!/usr/bin/python3
"""Checks that a ringside checkpoint holds only finite parameters, written before a step.

usage: check_finite_checkpoint.py CHECKPOINT MAX_STEP
Exits 1 (one line saying why) if a parameter is NaN or +-Inf, or if the checkpoint's
step (the steps it has run) is above MAX_STEP. Reads the file with
compare_checkpoints.py's reader, so the layout is described in one place.
"""
import importlib.util
import os
import sys

import numpy as np

spec = importlib.util.spec_from_file_location(
    "compare_checkpoints", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "compare_checkpoints.py"))
reader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reader)


def main():
    params, step = reader.load(sys.argv[1])
    max_step = int(sys.argv[2])
    bad = int(np.count_nonzero(~np.isfinite(params)))
    if bad:
        print("%s: %d of %d parameters are not finite" % (sys.argv[1], bad, params.size))
        sys.exit(1)
    if step > max_step:
        print("%s: written at step %d, after step %d" % (sys.argv[1], step, max_step))
        sys.exit(1)
    print("%s: %d finite parameters, step %d" % (sys.argv[1], params.size, step))


if __name__ == "__main__":
    main()
