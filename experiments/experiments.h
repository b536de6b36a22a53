// experiments/: the ringside command line and what it runs. Door of the folder.
//   train_command.h  `ringside train --strategy=single`
//   launcher.h       `ringside launch` (torchrun-style) and local DDP launches
//   step_bench.h     `ringside bench step`  (training-step time vs the GEMM floor)
//   allreduce_bench.h `ringside bench allreduce` (nccl-tests-style sweep)
//   cpu_pinning.h    one core per end of a loopback benchmark (--pin_cpus)
//   pushpull_bench.h `ringside bench pushpull` (one worker's push-pull vs raw TCP)
//   compare_command.h `ringside compare` (experiment matrix from a spec; experiment.proto)
//   report_command.h  `ringside report` (Markdown + self-contained HTML with gnuplot)
//   demo_command.h    `ringside demo` (the README's preset comparison)
//   network_emulator.h / emulated_launch.h  emulated cluster links (namespaces, tc)
//   cost_model.h, calibrate_command.h, simulate_command.h  the calibrated cost model
//   ringside_main.cc flag parsing and dispatch
#ifndef RINGSIDE_EXPERIMENTS_EXPERIMENTS_H_
#define RINGSIDE_EXPERIMENTS_EXPERIMENTS_H_

#include "experiments/allreduce_bench.h"
#include "experiments/cpu_pinning.h"
#include "experiments/launcher.h"
#include "experiments/pushpull_bench.h"
#include "experiments/step_bench.h"
#include "experiments/train_command.h"

#endif  // RINGSIDE_EXPERIMENTS_EXPERIMENTS_H_
