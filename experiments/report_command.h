// `ringside report DIR`: turns a `ringside compare` directory into DIR/report.md and
// one self-contained DIR/report.html (plots rendered by gnuplot as inline SVG):
// speedup vs workers with the ideal line, scaling efficiency, throughput, the per-step
// time breakdown, bytes per step through the busiest node, accuracy vs wall time, and
// a findings paragraph computed from the numbers. Each cell's Chrome trace is linked.
#ifndef RINGSIDE_EXPERIMENTS_REPORT_COMMAND_H_
#define RINGSIDE_EXPERIMENTS_REPORT_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/cost_model.h"
#include "experiments/experiment.pb.h"

namespace ringside {

// One point of the report: the median over the repeats of a (strategy, workers) pair.
struct ReportPoint {
  std::string label;
  std::string kind;
  int workers = 0;
  int ok_repeats = 0;
  int failed_repeats = 0;
  std::string failure;          // A failed repeat's reason.
  double step_ms = 0;
  double samples_per_sec = 0;
  double speedup = 0;           // Throughput over the single-process baseline's.
  double efficiency = 0;        // speedup / workers.
  double compute_ms = 0, comm_ms = 0, wait_ms = 0, update_ms = 0;
  double busiest_bytes_in = 0, busiest_bytes_out = 0;
  double test_accuracy = 0;
  double wall_s = 0;
  std::vector<std::string> cells;  // Cell ids (for trace links).
  double predicted_step_ms = 0;    // Cost model (0: no calibration or no prediction).
};

// Reads DIR/cells/*/result.textproto. NotFound if there are none.
absl::StatusOr<std::vector<CellResult>> ReadCellResults(const std::string& dir);
// Groups by (label, workers), medians over repeats, speedup against "single" (or the
// strategy's own 1-worker point). Sorted by label order of first appearance, workers.
std::vector<ReportPoint> BuildPoints(const std::vector<CellResult>& results);
// Orders points by the strategies' order in the spec (text format), then workers.
void SortPointsBySpec(const std::string& spec_text, std::vector<ReportPoint>* points);
// The findings paragraph: where each strategy stops scaling and by how much, and what
// dominates its step there.
std::string Findings(const std::vector<ReportPoint>& points, int64_t num_params);

// Fills predicted_step_ms of every point from the cost model: `calibration` measured
// on loopback, the spec's strategies and network, the compute time scaled by
// max(1, processes computing at once / `cores`) for workers sharing one machine.
void PredictPoints(const Calibration& calibration, const ExperimentSpec& spec, int cores,
                   std::vector<ReportPoint>* points);

// Writes DIR/report.md and DIR/report.html (with DIR/calibration.json, if present, the
// cost model's prediction and its error beside every point). FailedPrecondition if gnuplot is missing.
absl::Status RunReport(const std::string& dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_COMMAND_H_
