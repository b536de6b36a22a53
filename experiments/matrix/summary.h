// A finished cell's raw records (step metrics of every process, its log) reduced to one
// CellResult (experiment.proto), and the matrix's summary table.
#ifndef RINGSIDE_EXPERIMENTS_MATRIX_SUMMARY_H_
#define RINGSIDE_EXPERIMENTS_MATRIX_SUMMARY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/ringside.pb.h"
#include "experiments/matrix/experiment.pb.h"
#include "experiments/matrix/spec.h"

namespace ringside {

// Who the others waited for, from a cell's step records (CellResult.late_*).
struct LateRanks {
  // The DDP rank(s) / PS worker(s) most often last, ascending: the named set when
  // `named`, else the single most often last one (empty: nothing compared).
  std::vector<int> ranks;
  bool named = false;        // The evidence is clear (LateRankOptions).
  double share = 0;          // Steps in which one of `ranks` was last / steps compared.
  double wait_ms = 0;        // Median over steps of the others' mean wait for them (>= 0).
  double wait_fraction = 0;  // wait_ms / the median step.
  int steps = 0;             // Steps compared.
};

// When the evidence names late ranks. A set of k of the n ranks is named when it was
// last in at least min_share of the steps and that many steps lie at least min_sigmas
// standard deviations above chance (k / n of them; binomial), each member was last in at
// least half its even part of them (so that a set is not one late rank plus a bystander),
// at least min_steps steps were compared, and the others waited a median of at least
// min_wait_ms and min_wait_fraction of the median step for them. k runs from 1 to n / 2
// (two slow ranks on one slow node); the smallest k that passes is named.
struct LateRankOptions {
  double min_share = 0.6;
  double min_sigmas = 3;
  int min_steps = 5;
  double min_wait_ms = 1.0;
  double min_wait_fraction = 0.05;
};

// DDP. `ranks[r]`: rank r's step records (any subset of steps; warm-up already dropped).
// Compares the steps every rank recorded. A ring all-reduce cannot tell who was late,
// but the late rank is the one that waits least: per step the last rank is the one with
// the smallest allreduce_wait_ms (ringside.proto StepMetrics), and the others' wait for
// the named set is their allreduce_wait_ms beyond the smallest of the set's.
LateRanks FindLateDdpRanks(const std::vector<std::vector<StepMetrics>>& ranks,
                           const LateRankOptions& options = {});

// Parameter server. `workers[w]`: worker w's step records; `shards[s]`: shard s's
// (warm-up dropped). The last worker of step t is the late_worker most shards recorded
// for it (among equals, the one with the smallest pull_ms in step t + 1; without shard
// records: the worker with the smallest pull_ms in step t + 1).
// The wait for it shows in the next step's pull (a worker's step t + 1 forward waits
// for the update of step t): the others' wait is their pull_ms beyond the smallest of
// the named set's in step t + 1. Under SSP:K a fast worker's pull waits for the update
// K steps back, which for a persistent straggler is the same worker. Under ASP nobody
// waits, so nobody is named.
LateRanks FindLatePsWorkers(const std::vector<std::vector<StepMetrics>>& workers,
                            const std::vector<std::vector<StepMetrics>>& shards,
                            const LateRankOptions& options = {});

// A cell's result, in its directory (text format); a cell with one is finished.
inline constexpr char kCellResultFile[] = "result.textproto";

// Reads a finished cell's records (metrics of worker/rank 0, shard or rank byte
// counters, log) into a result; PS and DDP cells also get who the others waited for
// (late_*: FindLatePsWorkers / FindLateDdpRanks over every process's records after
// warm-up). `exit_ok`: the job exited 0.
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
// (speedup / workers), device, emulated (0/1), gpus, and late (the named late ranks,
// ';'-separated; empty when none is clearly late), late_share, late_wait_ms and
// late_wait_fraction.
absl::Status WriteSummaryCsv(const std::vector<CellResult>& results, const std::string& path);

// The same table for a terminal or a log: a header line, then one line per cell (its
// id, workers, repeat, step ms, samples/s, speedup, efficiency, compute, comm and wait
// ms, and the device with the emulation said (DeviceNote); or "failed: <reason>").
std::string SummaryTable(const std::vector<CellResult>& results);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_MATRIX_SUMMARY_H_
