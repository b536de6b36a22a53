// `ringside simulate`: prints the cost model's predicted step time and speedup of every
// strategy for N = 1 .. 1024 workers at one or more link speeds, and where the curves
// cross. The model itself is experiments/cost_model.h; its derivation docs/cost_model.md.
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_SIMULATE_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_SIMULATE_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/costmodel/cost_model.h"

namespace ringside {

struct SimulateOptions {
  Calibration calibration;
  // The model and per-worker batch to predict for; empty / 0: the calibration's own.
  // Either given: the calibration must have been measured with them (refused
  // otherwise, see CheckCalibrationFits).
  std::string model;
  int batch = 0;
  double model_bytes = 0;  // 0: calibration.model_bytes.
  // One table per entry, bytes/s per direction. Empty: one table on the calibrated paths.
  std::vector<double> link_bytes_per_s;
  std::vector<int> workers;          // Empty: 1, 2, 4, ..., 1024.
  std::vector<int> shards = {1, 2};  // Standalone PS columns.
  bool colocated = true;             // A "PS S=N colocated" column.
  double link_latency_s = -1;        // As in Scenario (one way, node to node).
  double master_link_bytes_per_s = 0;
  bool path_limits = true;
  bool overlap = true;
  // Emulated nodes (cost_model.h Scenario): every node's CPU share (0: none) and the
  // slow node's fraction of it (1: none); the single baseline runs on one such node.
  double node_cpus = 0;
  double slow_node_fraction = 1;
};

// Writes what the calibration was measured with, the tables and "crossover: ..." lines
// to `out` (borrowed). FailedPrecondition (CheckCalibrationFits's message) when
// options.model or options.batch is not what the calibration was measured with, or the
// calibration does not say; InvalidArgument for a model of 0 bytes or anything Predict
// rejects. Nothing is printed for a sweep that fails before its table starts.
absl::Status RunSimulate(const SimulateOptions& options, FILE* out);

// File helpers for the CLI: the JSON of CalibrationToJson. NotFound / Internal for I/O
// errors; CalibrationFromJson's errors for bad content.
absl::StatusOr<Calibration> ReadCalibrationFile(const std::string& path);
absl::Status WriteCalibrationFile(const Calibration& calibration, const std::string& path);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_SIMULATE_H_
