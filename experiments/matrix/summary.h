// A finished cell's raw records (step metrics of every process, its log) reduced to one
// CellResult (experiment.proto), and the matrix's summary table.
#ifndef RINGSIDE_EXPERIMENTS_MATRIX_SUMMARY_H_
#define RINGSIDE_EXPERIMENTS_MATRIX_SUMMARY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "experiments/matrix/experiment.pb.h"
#include "experiments/matrix/spec.h"

namespace ringside {

// A cell's result, in its directory (text format); a cell with one is finished.
inline constexpr char kCellResultFile[] = "result.textproto";

// Reads a finished cell's records (metrics of worker/rank 0, shard or rank byte
// counters, log) into a result. `exit_ok`: the job exited 0.
CellResult SummarizeCell(const Cell& cell, const std::string& cell_dir, bool exit_ok,
                         const std::string& exit_reason, double wall_s);

// The label of an emulated cell: "emulated: 4 ranks share one GPU, NCCL over sockets"
// (ddp), "emulated: 2 workers share one GPU" (ps); `gpus` > 1 names the count.
std::string EmulationNote(const std::string& kind, int workers, int gpus);
// The cell's device, with EmulationNote in parentheses when emulated:
// "cuda:0 (emulated: 2 ranks share one GPU, NCCL over sockets)", "cpu".
std::string DeviceNote(const CellResult& r);

// Each cell's speedup (samples/s against the single-process cell, or the median of the
// 1-worker cells of the same strategy; 0 for a failed cell), in `results`' order.
std::vector<double> Speedups(const std::vector<CellResult>& results);

// Writes the summary table as CSV: one row per cell, with speedup and efficiency
// (speedup / workers), device, emulated (0/1) and gpus.
absl::Status WriteSummaryCsv(const std::vector<CellResult>& results, const std::string& path);

// The same table for a terminal or a log: a header line, then one line per cell (its
// id, workers, repeat, step ms, samples/s, speedup, efficiency, compute, comm and wait
// ms, and the device with the emulation said (DeviceNote); or "failed: <reason>").
std::string SummaryTable(const std::vector<CellResult>& results);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_MATRIX_SUMMARY_H_
