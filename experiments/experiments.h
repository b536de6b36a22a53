// experiments/: the ringside command line and everything it runs, above the two
// strategies. Door of the layer; each room is a Bazel package with a door of its own.
//   cli/        the command line: a command table, one file per verb, the flags and
//               their one mapping to a RunConfig                      (cli/cli.h)
//   launch/     starting a job's processes: the torchrun-style launcher, the PS and
//               DDP process plans on one machine, ranks on emulated nodes (launch/launch.h)
//   sys/        the OS layer: subprocesses, signals, files, this process (sys/sys.h)
//   netem/      emulated cluster networks and the link-rate grammar  (netem/netem.h)
//   costmodel/  the calibrated cost model: calibrate, simulate    (costmodel/costmodel.h)
//   matrix/     experiment specs, `compare`, cell results            (matrix/matrix.h)
//   report/     `report`: points, findings, plots, Markdown, HTML    (report/report.h)
//   bench/      `bench step|allreduce|pushpull` and their PyTorch peers (bench/bench.h)
//   timeline/   one Perfetto timeline of a run's processes           (timeline/timeline.h)
//   explain/    `explain ring|ps`: a step at a time, checked against the real thing
//                                                                    (explain/explain.h)
//   labs/       the labs of docs/labs/ and `lab check N`             (labs/labs.h)
//   train_command.h  `train --strategy=single`
//   ringside_main.cc the binary: process-wide tuning, then cli::RunCli
// Dependencies point down: cli -> (launch, matrix, report, costmodel, bench, explain,
// labs) -> (netem, sys); report -> (matrix, costmodel); labs -> matrix; nothing here is
// used by the strategies.
#ifndef RINGSIDE_EXPERIMENTS_EXPERIMENTS_H_
#define RINGSIDE_EXPERIMENTS_EXPERIMENTS_H_

#include "experiments/cli/cli.h"

#endif  // RINGSIDE_EXPERIMENTS_EXPERIMENTS_H_
