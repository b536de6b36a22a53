// experiments/bench/: `ringside bench ...`, the measurements behind docs/benchmarks.md.
// Door of the folder.
//   step_bench.h       `bench step`: a training step's time vs its GEMM floor
//   allreduce_bench.h  `bench allreduce`: nccl-tests-style sweep (time, algbw, busbw, #wrong)
//   pushpull_bench.h   `bench pushpull`: one worker's push-pull vs a plain gRPC stream
//   raw_tcp_bench.h    raw TCP on loopback, the rate every transport is set beside
//   cpu_pinning.h      one core per end of a loopback benchmark (--pin_cpus)
//   torch_*_bench.py   the same measurements on PyTorch, the peer they are compared with
#ifndef RINGSIDE_EXPERIMENTS_BENCH_BENCH_H_
#define RINGSIDE_EXPERIMENTS_BENCH_BENCH_H_

#include "experiments/bench/allreduce_bench.h"
#include "experiments/bench/cpu_pinning.h"
#include "experiments/bench/pushpull_bench.h"
#include "experiments/bench/raw_tcp_bench.h"
#include "experiments/bench/step_bench.h"

#endif  // RINGSIDE_EXPERIMENTS_BENCH_BENCH_H_
