#!/usr/bin/python3
"""PyTorch reference for `ringside bench allreduce`: torch.distributed all_reduce
(gloo, or nccl on GPUs) over the same sizes, timed the same way (barrier, then one
all-reduce, completed on the device for nccl; median per rank, slowest rank's median
reported), with a correctness column. Launch one process per rank with torchrun-style
variables, e.g.
  ringside launch --nproc_per_node=2 --master_port=0 -- /usr/bin/python3 torch_allreduce_bench.py [GAP_US] [--backend=nccl]
GAP_US (default 0): idle microseconds between the barrier and each timed all-reduce.
--backend=nccl: rank r uses GPU LOCAL_RANK % GPUs; where ranks outnumber GPUs each
rank sets its own NCCL_HOSTID, as `ringside bench allreduce --backend=nccl` does
(NCCL over sockets: emulated), and the sweep goes to 256 MiB, as ringside's.
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
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    backend = "nccl" if "--backend=nccl" in sys.argv[1:] else "gloo"
    placement = ""
    max_bytes = 64 << 20
    dev = torch.device("cpu")
    if backend == "nccl":
        gpus = torch.cuda.device_count()
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        local_n = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
        dev = torch.device("cuda", local_rank % gpus)
        torch.cuda.set_device(dev)
        if local_n > gpus:
            os.environ["NCCL_HOSTID"] = "torch-rank%s" % os.environ["RANK"]
            placement = " (emulated: %d ranks on %d GPU(s), NCCL over sockets)" % (local_n, gpus)
        max_bytes = 256 << 20
    dist.init_process_group(backend, init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    gap_s = (int(args[0]) if args else 0) / 1e6
    if rank == 0:
        print("# torch %s all_reduce (sum, float32), %s, %d ranks%s, %d us idle before each" %
              (torch.__version__, backend, n, placement, gap_s * 1e6))
        print("# %12s %12s %10s %10s %10s %8s" % ("bytes", "floats", "time(us)", "algbw(GB/s)",
                                                 "busbw(GB/s)", "#wrong"))
    def done():  # The all-reduce has finished (nccl: on the device).
        if backend == "nccl":
            torch.cuda.synchronize(dev)

    size = 1 << 10
    while size <= max_bytes:
        count = size // 4
        iters = 5 if size >= 16 << 20 else 20
        idx = torch.arange(count, device=dev) % 7
        want = (n * (n + 1) // 2 + n * idx).float()
        times, wrong = [], 0
        for it in range(5 + iters):
            data = (rank + 1 + idx).float()
            done()
            dist.barrier()
            done()
            if gap_s > 0:
                time.sleep(gap_s)
            t0 = time.perf_counter()
            dist.all_reduce(data)
            done()
            t1 = time.perf_counter()
            if it >= 5:
                times.append((t1 - t0) * 1e6)
                wrong += int((data != want).sum())
        med = torch.tensor([statistics.median(times)], device=dev)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        w = torch.tensor([wrong], device=dev)
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
