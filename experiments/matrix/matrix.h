// experiments/matrix/: experiment matrices. Door of the folder.
//   experiment.proto  ExperimentSpec (strategies x worker counts x model x data x
//                     network) and CellResult
//   spec.h            loading and checking a spec; its cells and their command lines
//   cluster_emulation.h  a spec's cluster as dilated links (DIR/dilation.textproto)
//   compare.h         `ringside compare`: every cell as its own job, resumable
//   summary.h         a cell's records reduced to a result; summary.csv
//   builtin_specs.h   the specs compiled in (the demo's), embedded from specs/
//   specs/            demo.textproto, quick.textproto, validate.textproto, gpu.textproto
#ifndef RINGSIDE_EXPERIMENTS_MATRIX_MATRIX_H_
#define RINGSIDE_EXPERIMENTS_MATRIX_MATRIX_H_

#include "experiments/matrix/builtin_specs.h"
#include "experiments/matrix/cluster_emulation.h"
#include "experiments/matrix/compare.h"
#include "experiments/matrix/spec.h"
#include "experiments/matrix/summary.h"

#endif  // RINGSIDE_EXPERIMENTS_MATRIX_MATRIX_H_
