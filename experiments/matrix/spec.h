// An experiment matrix: the spec (experiment.proto, text format; examples in specs/),
// its cells (strategy x worker count x repeat) and the `ringside train` command line of
// each cell.
#ifndef RINGSIDE_EXPERIMENTS_MATRIX_SPEC_H_
#define RINGSIDE_EXPERIMENTS_MATRIX_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/matrix/experiment.pb.h"

namespace ringside {

// Parses a text-format spec and checks it (ValidateSpec). InvalidArgument naming the
// file and the problem.
absl::StatusOr<ExperimentSpec> LoadSpec(const std::string& path);
// The same for a spec's text; `name` stands for the file in messages.
absl::StatusOr<ExperimentSpec> ParseSpec(const std::string& text, const std::string& name);
absl::Status ValidateSpec(const ExperimentSpec& spec);

// One cell of the matrix.
struct Cell {
  std::string id;        // "<label>-n<N>-r<R>", a directory name.
  StrategySpec strategy;
  std::string label;
  int workers = 1;
  int repeat = 0;
  int batch_per_worker = 0;
  int global_batch = 0;
};

// Cells in run order: strategies in spec order, worker counts ascending, repeats.
std::vector<Cell> ExpandCells(const ExperimentSpec& spec);
// The label a strategy gets when the spec gives none, e.g. "ps-s1-bsp", "ddp".
std::string StrategyLabel(const StrategySpec& s);

// `ringside train` flags for a cell writing to `out_dir`.
std::vector<std::string> CellTrainArgs(const ExperimentSpec& spec, const Cell& cell,
                                       const std::string& out_dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_MATRIX_SPEC_H_
