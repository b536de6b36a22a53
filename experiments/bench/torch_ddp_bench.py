#!/usr/bin/python3
"""PyTorch DDP reference for ringside's DDP throughput: the same MLP, per-rank batch,
SGD with momentum and thread count, gloo backend, Fashion-MNIST resident in memory
(shuffled and sharded per epoch like DistributedSampler). Prints the global samples/s
over the timed steps (after an untimed warm-up). Launch one process per rank:
  ringside launch --nproc_per_node=2 --master_port=0 -- /usr/bin/python3 torch_ddp_bench.py
"""
import argparse
import gzip
import os
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def load_images(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    n, h, w = np.frombuffer(data, dtype=">i4", count=3, offset=4)
    x = np.frombuffer(data, dtype=np.uint8, offset=16).reshape(n, h * w).astype(np.float32) / 255
    return torch.from_numpy((x - x.mean()) / x.std())


def load_labels(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8, offset=8).astype(np.int64))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--widths", default="784-512-512-10")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--first_bucket_mb", type=float, default=None,
                   help="DDP's first bucket cap (PyTorch's default: 1 MB; the documented "
                        "knob is dist._DEFAULT_FIRST_BUCKET_BYTES); the others stay 25 MB")
    a = p.parse_args()
    if a.first_bucket_mb is not None:
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(a.first_bucket_mb * 1024 * 1024)
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    dist.init_process_group("gloo", init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    x = load_images(os.path.join(a.data, "train-images-idx3-ubyte.gz"))
    y = load_labels(os.path.join(a.data, "train-labels-idx1-ubyte.gz"))
    widths = [int(w) for w in a.widths.split("-")]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(*layers))
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    order = torch.randperm(x.shape[0], generator=g)[rank::n]
    per_epoch = order.numel() // a.batch
    t0 = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            dist.barrier()
            t0 = time.perf_counter()
        i = (step % per_epoch) * a.batch
        idx = order[i:i + a.batch]
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x[idx]), y[idx]).backward()
        opt.step()
    dist.barrier()
    elapsed = torch.tensor([time.perf_counter() - t0])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        print("torch %s DDP gloo: %d ranks, mlp:%s, batch %d per rank, first bucket %.0f MB, "
              "%d timed steps: %.0f samples/s (%.2f ms/step)"
              % (torch.__version__, n, a.widths, a.batch,
                 dist._DEFAULT_FIRST_BUCKET_BYTES / 1024 / 1024, a.steps,
                 n * a.batch * a.steps / float(elapsed), float(elapsed) / a.steps * 1e3))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
