#!/usr/bin/python3
"""PyTorch reference for `ringside bench step`: the same model, batch, optimizer and
thread count, timed the same way (untimed warm-up, then per-step wall times; median
and spread). Run with Debian's python3-torch (CPU)."""
import argparse
import os
import statistics
import sys
import time


def _threads_from_argv():
    for i, arg in enumerate(sys.argv):
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
    return "1"


# Debian's torch does its GEMMs in the system BLAS (OpenBLAS), whose own thread pool
# ignores torch.set_num_threads: pin it before torch loads, or a "1 thread" run uses
# every core for its GEMMs.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _threads_from_argv()

import torch  # noqa: E402


def build(spec):
    kind, _, rest = spec.partition(":")
    layers = []
    if kind == "mlp":
        widths = [int(w) for w in rest.split("-")]
        for i in range(len(widths) - 1):
            layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
            if i + 2 < len(widths):
                layers.append(torch.nn.ReLU())
        return torch.nn.Sequential(*layers), (widths[0],), widths[-1]
    if spec == "cnn:lenet":
        net = torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 64, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(1024, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 10))
        return net, (1, 28, 28), 10
    raise SystemExit(f"unknown model {spec}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp:784-512-512-10")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=200)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net, shape, classes = build(a.model)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, *shape)
    y = torch.randint(0, classes, (a.batch,))
    times = []
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if s >= a.warmup:
            times.append((t1 - t0) * 1e3)
    times.sort()
    med = statistics.median(times)
    print(f"torch {torch.__version__} model {a.model} batch {a.batch} threads {a.threads}: "
          f"median {med:.3f} ms  p10 {times[len(times) // 10]:.3f}  "
          f"p90 {times[len(times) * 9 // 10]:.3f}  {a.batch / med * 1e3:.0f} samples/s")


if __name__ == "__main__":
    main()
