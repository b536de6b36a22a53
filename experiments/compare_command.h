// `ringside compare --spec=FILE --out=DIR`: runs every cell of an experiment matrix
// (strategy x worker count x repeat), each as its own `ringside train` job whose raw
// step records, traces and log stay in DIR/cells/<cell>/, and writes DIR/summary.csv.
// An interrupted matrix resumes: cells with a result are kept, the rest run. A cell
// whose processes fail is recorded as failed with the reason; the others go on.
#ifndef RINGSIDE_EXPERIMENTS_COMPARE_COMMAND_H_
#define RINGSIDE_EXPERIMENTS_COMPARE_COMMAND_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/experiment.pb.h"

namespace ringside {

// Parses a text-format spec and checks it (ValidateSpec). InvalidArgument naming the
// file and the problem.
absl::StatusOr<ExperimentSpec> LoadSpec(const std::string& path);
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

// Reads a finished cell's records (metrics of worker/rank 0, shard or rank byte
// counters, log) into a result. `exit_ok`: the job exited 0.
CellResult SummarizeCell(const Cell& cell, const std::string& cell_dir, bool exit_ok,
                         const std::string& exit_reason, double wall_s);

// Writes the summary table: one row per cell, with speedup and efficiency against
// the single-process cell (or the 1-worker cell of the same strategy).
absl::Status WriteSummaryCsv(const std::vector<CellResult>& results, const std::string& path);

struct CompareOptions {
  std::string spec_path;
  std::string out_dir;
  std::string self_exe = "/proc/self/exe";  // The ringside binary that runs the cells.
  FILE* progress = stderr;
};

// Blocks until every cell ran (or was kept from an earlier run). Cancelled after
// SIGINT / SIGTERM (the running cell is stopped and left without a result, so the next
// run re-runs it). Returns OK even if cells failed; they are in the summary.
absl::Status RunCompare(const CompareOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COMPARE_COMMAND_H_
