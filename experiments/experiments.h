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
//   train_command.h  `train --strategy=single`
//   ringside_main.cc the binary: process-wide tuning, then cli::RunCli
// Dependencies point down: cli -> (launch, matrix, report, costmodel, bench) ->
// (netem, sys); report -> (matrix, costmodel); nothing here is used by the strategies.
#ifndef RINGSIDE_EXPERIMENTS_EXPERIMENTS_H_
#define RINGSIDE_EXPERIMENTS_EXPERIMENTS_H_

#include "experiments/cli/cli.h"

#endif  // RINGSIDE_EXPERIMENTS_EXPERIMENTS_H_
