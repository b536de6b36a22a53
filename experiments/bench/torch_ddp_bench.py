#!/usr/bin/python3
"""PyTorch DDP reference for ringside's DDP throughput and step time: the same MLP,
per-rank batch, SGD with momentum and thread count. Two ways to run it:

1. One process per rank from a launcher (torchrun-style variables), CPU and Gloo,
   Fashion-MNIST resident in memory (shuffled and sharded per epoch like
   DistributedSampler); prints the global samples/s over the timed steps:
     ringside launch --nproc_per_node=2 --master_port=0 -- /usr/bin/python3 torch_ddp_bench.py

2. Self-contained, `--spawn N`: N ranks started by torch.multiprocessing.spawn on this
   machine (MASTER_ADDR 127.0.0.1, a free MASTER_PORT picked here), e.g. on the GPU:
     python3 torch_ddp_bench.py --spawn 2 --device=cuda --backend=nccl \\
       --widths=784-4096-4096-4096-10 --batch=256 --synthetic=16384
   Rank r computes on GPU r % GPUs. Where ranks outnumber GPUs each rank sets its own
   NCCL_HOSTID, as ringside does, so NCCL accepts several ranks on one GPU and connects
   them over sockets (the run is "emulated"; ringside's emulated runs are alike).

Either way rank 0 ends with one machine-readable line:
  result: impl=torch backend=B device=D ranks=N gpus=G emulated=0|1 model=mlp:W batch=B
          steps=S step_ms=M step_ms_max=X samples_per_s=T
step_ms: rank 0's median step time over the timed steps (each step timed alone, the
device synchronised before and after it: forward, backward with DDP's overlapped
all-reduce, SGD); step_ms_max: the slowest rank's median. FP32: TF32 is turned off.
--synthetic=N: N random samples generated once on the compute device (no host copies
per step) instead of Fashion-MNIST.
"""
import argparse
import gzip
import os
import socket
import statistics
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--widths", default="784-512-512-10")
    p.add_argument("--batch", type=int, default=128, help="samples per rank per step")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    p.add_argument("--steps", type=int, default=200, help="timed steps")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--synthetic", type=int, default=0,
                   help="N random samples made on the compute device instead of --data")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--backend", choices=("gloo", "nccl"), default=None,
                   help="default: gloo on the CPU, nccl on the GPU")
    p.add_argument("--spawn", type=int, default=0, metavar="N",
                   help="start N ranks here with torch.multiprocessing.spawn")
    p.add_argument("--first_bucket_mb", type=float, default=None,
                   help="DDP's first bucket cap (PyTorch's default: 1 MB; the documented "
                        "knob is dist._DEFAULT_FIRST_BUCKET_BYTES); the others stay 25 MB")
    a = p.parse_args(argv)
    if a.backend is None:
        a.backend = "nccl" if a.device == "cuda" else "gloo"
    if a.backend == "nccl" and a.device != "cuda":
        p.error("--backend=nccl needs --device=cuda")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device=cuda: torch %s sees no GPU" % torch.__version__)
    if a.spawn < 0 or a.batch < 1 or a.steps < 1 or a.warmup < 0:
        p.error("--spawn, --batch, --steps and --warmup must be positive")
    return a


def run_rank(a):
    """One rank; the torchrun-style variables are set (by a launcher or spawn_rank)."""
    if a.first_bucket_mb is not None:
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(a.first_bucket_mb * 1024 * 1024)
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_n = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    dev = torch.device("cpu")
    gpus, emulated = 0, False
    if a.device == "cuda":
        gpus = torch.cuda.device_count()
        dev = torch.device("cuda", local_rank % gpus)
        torch.cuda.set_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = False  # FP32, as ringside's fp32.
        torch.backends.cudnn.allow_tf32 = False
        if a.backend == "nccl" and local_n > gpus:
            # NCCL refuses two ranks of one communicator on one GPU unless they look
            # like different hosts; then it connects them over sockets.
            os.environ["NCCL_HOSTID"] = "torch-ddp-bench-rank%s" % os.environ["RANK"]
            emulated = True
    dist.init_process_group(a.backend, init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    if a.synthetic > 0:
        g = torch.Generator(device=dev).manual_seed(1000 + rank)
        x = torch.randn(a.synthetic, int(a.widths.split("-")[0]), device=dev, generator=g)
        y = torch.randint(0, int(a.widths.split("-")[-1]), (a.synthetic,), device=dev, generator=g)
        order = torch.arange(a.synthetic, device=dev)
    else:
        x = load_images(os.path.join(a.data, "train-images-idx3-ubyte.gz")).to(dev)
        y = load_labels(os.path.join(a.data, "train-labels-idx1-ubyte.gz")).to(dev)
        g = torch.Generator().manual_seed(1)
        order = torch.randperm(x.shape[0], generator=g)[rank::n].to(dev)
    per_epoch = order.numel() // a.batch
    if per_epoch < 1:
        raise SystemExit("torch_ddp_bench: %d samples per rank is less than one batch of %d"
                         % (order.numel(), a.batch))
    widths = [int(w) for w in a.widths.split("-")]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    torch.manual_seed(0)
    net = torch.nn.Sequential(*layers).to(dev)
    model = DDP(net, device_ids=[dev.index] if dev.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    t0 = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            sync()
            dist.barrier()
            t0 = time.perf_counter()
        i = (step % per_epoch) * a.batch
        idx = order[i:i + a.batch]
        sync()
        s0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x[idx]), y[idx]).backward()
        opt.step()
        sync()
        if step >= a.warmup:
            times.append((time.perf_counter() - s0) * 1e3)
    sync()
    dist.barrier()
    elapsed = torch.tensor([time.perf_counter() - t0], device=dev)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    med = statistics.median(times)
    med_max = torch.tensor([med], device=dev)
    dist.all_reduce(med_max, op=dist.ReduceOp.MAX)
    if rank == 0:
        if a.spawn == 0 and a.synthetic == 0 and a.device == "cpu":
            # The launcher mode's line, as scripts/bench_ddp.sh reads it.
            print("torch %s DDP gloo: %d ranks, mlp:%s, batch %d per rank, first bucket %.0f MB, "
                  "%d timed steps: %.0f samples/s (%.2f ms/step)"
                  % (torch.__version__, n, a.widths, a.batch,
                     dist._DEFAULT_FIRST_BUCKET_BYTES / 1024 / 1024, a.steps,
                     n * a.batch * a.steps / float(elapsed), float(elapsed) / a.steps * 1e3))
        where = "%d ranks on %d GPU(s)" % (n, gpus) if a.device == "cuda" else "%d ranks on the CPU" % n
        print("# torch %s DDP %s, %s%s, mlp:%s, batch %d per rank, %d warm-up + %d timed steps"
              % (torch.__version__, a.backend, where,
                 " (emulated: NCCL over sockets)" if emulated else "", a.widths, a.batch,
                 a.warmup, a.steps), flush=True)
        print("result: impl=torch backend=%s device=%s ranks=%d gpus=%d emulated=%d model=mlp:%s "
              "batch=%d steps=%d step_ms=%.3f step_ms_max=%.3f samples_per_s=%.0f"
              % (a.backend, a.device, n, gpus, int(emulated), a.widths, a.batch, a.steps, med,
                 float(med_max), n * a.batch * a.steps / float(elapsed)), flush=True)
    dist.destroy_process_group()


def spawn_rank(rank, a, port):
    """torch.multiprocessing.spawn's entry: rank `rank` of a.spawn on this machine."""
    os.environ.update({
        "RANK": str(rank), "WORLD_SIZE": str(a.spawn), "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(a.spawn), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    })
    run_rank(a)


def main():
    a = parse_args()
    if a.spawn > 0:
        mp.spawn(spawn_rank, args=(a, free_port()), nprocs=a.spawn, join=True)
    else:
        run_rank(a)


if __name__ == "__main__":
    main()
