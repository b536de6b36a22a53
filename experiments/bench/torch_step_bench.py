#!/usr/bin/python3
"""PyTorch reference for `ringside bench step`: the same model, batch, optimizer and
thread count, timed the same way (untimed warm-up, then per-step wall times; median
and spread). On the CPU (the default) run with Debian's python3-torch.

`--device=cuda` (any CUDA build of torch, e.g. on the GPU machine through the bundle's
gpu_check.sh): each timed step is zero_grad, forward, cross-entropy, backward, SGD step,
then `loss.item()` (ringside reads its loss back every step too) and
torch.cuda.synchronize() before the step's end time. `--precision`: fp32 (TF32 off for
cuBLAS and cuDNN: comparable with ringside's default), tf32 (TF32 on for both) or bf16
(autocast to bfloat16 for the matmuls and convolutions).

The last line is machine-readable:
  result: impl=torch model=M batch=B device=D precision=P step_ms=<median> tflops=<x>
where tflops is the step's GEMM flops over the median step time: for every Linear(in,
out), 2*B*in*out times 3 (forward, input gradient, weight gradient), times 2 for the
first layer (its input gradient is not needed); Conv2d likewise with
2*B*Ho*Wo*Cout*Cin*k*k."""
import argparse
import contextlib
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


def gemm_flops(net, x):
    """The step's GEMM flops (module docstring) for input batch `x`, found by one
    forward pass with hooks that record each Linear's and Conv2d's output shape."""
    layers = []

    def hook(module, inputs, output):
        layers.append((module, tuple(output.shape)))

    handles = [m.register_forward_hook(hook) for m in net.modules()
               if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))]
    with torch.no_grad():
        net(x)
    for h in handles:
        h.remove()
    total = 0
    for i, (m, out) in enumerate(layers):
        passes = 2 if i == 0 else 3
        batch = out[0]
        if isinstance(m, torch.nn.Linear):
            total += 2 * batch * m.in_features * m.out_features * passes
        else:
            kh, kw = m.kernel_size
            cin = m.in_channels // m.groups
            total += 2 * batch * out[2] * out[3] * m.out_channels * cin * kh * kw * passes
    return total


def set_precision(device, precision):
    if device != "cuda":
        if precision != "fp32":
            raise SystemExit("--precision other than fp32 needs --device=cuda")
        return
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp:784-512-512-10")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32")
    p.add_argument("--cuda_graph", action="store_true",
                   help="cuda: capture the whole step (forward, backward, SGD) in one CUDA "
                        "graph and time its replays (PyTorch's whole-network capture)")
    a = p.parse_args()
    if a.cuda_graph and a.device != "cuda":
        raise SystemExit("--cuda_graph needs --device=cuda")
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"torch {torch.__version__}: no CUDA device "
                         f"(built with CUDA {torch.version.cuda})")
    set_precision(a.device, a.precision)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net, shape, classes = build(a.model)
    dev = torch.device(a.device)
    net = net.to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, *shape).to(dev)
    y = torch.randint(0, classes, (a.batch,)).to(dev)
    flops = gemm_flops(net, x)
    # bf16: autocast the matmuls and convolutions (CUDA only; fp32 and tf32 need none).
    def autocast():
        if a.precision == "bf16":
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    if a.device == "cpu":
        one_step = step
    elif not a.cuda_graph:
        def one_step():
            step().item()
            torch.cuda.synchronize()
    else:
        # Warm up on a side stream (creates the momentum buffers and picks kernels),
        # then capture one whole step; gradients allocated inside the capture stay in
        # the graph's pool (step() sets them to None before its backward).
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = step()

        def one_step():
            graph.replay()
            static_loss.item()
            torch.cuda.synchronize()
    if a.device == "cuda":
        torch.cuda.synchronize()
    times = []
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        one_step()
        t1 = time.perf_counter()
        if s >= a.warmup:
            times.append((t1 - t0) * 1e3)
    times.sort()
    med = statistics.median(times)
    where = (f"threads {a.threads}" if a.device == "cpu" else
             f"device {torch.cuda.get_device_name(dev)} precision {a.precision}")
    graphed = " (one CUDA graph per step)" if a.cuda_graph else ""
    print(f"torch {torch.__version__}{graphed} model {a.model} batch {a.batch} {where}: "
          f"median {med:.3f} ms  p10 {times[len(times) // 10]:.3f}  "
          f"p90 {times[len(times) * 9 // 10]:.3f}  {a.batch / med * 1e3:.0f} samples/s")
    impl = "torch-graph" if a.cuda_graph else "torch"
    print(f"result: impl={impl} model={a.model} batch={a.batch} device={a.device} "
          f"precision={a.precision} step_ms={med:.4f} tflops={flops / (med * 1e-3) / 1e12:.4f}")


if __name__ == "__main__":
    main()
