#!/usr/bin/python3
"""PyTorch reference for `ringside bench allreduce`: torch.distributed all_reduce
(gloo) over the same sizes, timed the same way (barrier, then one all-reduce; median
per rank, slowest rank's median reported), with a correctness column. Launch one
process per rank with torchrun-style variables, e.g.
  ringside launch --nproc_per_node=2 --master_port=0 -- /usr/bin/python3 torch_allreduce_bench.py [GAP_US]
GAP_US (default 0): idle microseconds between the barrier and each timed all-reduce.
"""
import os
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    gap_s = (int(sys.argv[1]) if len(sys.argv) > 1 else 0) / 1e6
    if rank == 0:
        print("# torch %s all_reduce (sum, float32), gloo, %d ranks, %d us idle before each" %
              (torch.__version__, n, gap_s * 1e6))
        print("# %12s %12s %10s %10s %10s %8s" % ("bytes", "floats", "time(us)", "algbw(GB/s)",
                                                 "busbw(GB/s)", "#wrong"))
    size = 1 << 10
    while size <= 64 << 20:
        count = size // 4
        iters = 5 if size >= 16 << 20 else 20
        idx = torch.arange(count) % 7
        want = (n * (n + 1) // 2 + n * idx).float()
        times, wrong = [], 0
        for it in range(5 + iters):
            data = (rank + 1 + idx).float()
            dist.barrier()
            if gap_s > 0:
                time.sleep(gap_s)
            t0 = time.perf_counter()
            dist.all_reduce(data)
            t1 = time.perf_counter()
            if it >= 5:
                times.append((t1 - t0) * 1e6)
                wrong += int((data != want).sum())
        med = torch.tensor([statistics.median(times)])
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        w = torch.tensor([wrong])
        dist.all_reduce(w)
        us = float(med)
        algbw = size / (us * 1e3)
        if rank == 0:
            print("  %12d %12d %10.1f %10.3f %10.3f %8d" % (size, count, us, algbw,
                                                          algbw * 2 * (n - 1) / n, int(w)))
        size *= 2
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
