// `ringside compare --spec=FILE --out=DIR`: runs every cell of an experiment matrix
// (strategy x worker count x repeat), each as its own `ringside train` job whose raw
// step records, traces and log stay in DIR/cells/<cell>/, and writes DIR/summary.csv;
// the verb ends with the summary table and the report command to run next.
// An interrupted matrix resumes: cells with a result are kept, the rest run. A cell
// whose processes fail is recorded as failed with the reason; the others go on.
#ifndef RINGSIDE_EXPERIMENTS_MATRIX_COMPARE_H_
#define RINGSIDE_EXPERIMENTS_MATRIX_COMPARE_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "experiments/matrix/experiment.pb.h"

namespace ringside {

struct CompareOptions {
  std::string spec_path;
  std::string out_dir;
  std::string self_exe = "/proc/self/exe";  // The ringside binary that runs the cells.
  // One line per cell as it starts (redrawn in place on a terminal, plain lines
  // otherwise) and the counts at the end; nullptr: silent.
  FILE* progress = stderr;
  // After a matrix that ran to the end: the summary table (SummaryTable), where the CSV
  // is, and the next command (`next: ringside report DIR`); nullptr: nothing.
  FILE* summary = nullptr;
};

// A spec with cells on the GPU is refused with one error line, before any directory
// or cell is made, in a build without CUDA or on a machine without a usable GPU
// (CheckGpuCellsCanRun).
// Blocks until every cell ran (or was kept from an earlier run). Cancelled after
// SIGINT / SIGTERM (the running cell is stopped and left without a result, so the next
// run re-runs it). Returns OK even if cells failed; they are in the summary.
absl::Status RunCompare(const CompareOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_MATRIX_COMPARE_H_
