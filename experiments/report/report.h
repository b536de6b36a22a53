// `ringside report DIR`: turns a `ringside compare` directory into DIR/report.md and
// one self-contained DIR/report.html (plots rendered by gnuplot as inline SVG):
// speedup vs workers with the ideal line, scaling efficiency, throughput, the per-step
// time breakdown, bytes per step through the busiest node, accuracy vs wall time, and
// a findings paragraph computed from the numbers. Each cell's Chrome trace is linked.
//
// experiments/report/, door of the folder:
//   report.h    (this) loading a compare directory and writing the report
//   points.h    the report's data: one point per (strategy, workers); predictions
//   findings.h  the findings, computed from the numbers
//   plots.h     the gnuplot script and its SVGs
//   markdown.h  report.md, the one text;  html.h  report.html rendered from it (cmark-gfm)
#ifndef RINGSIDE_EXPERIMENTS_REPORT_REPORT_H_
#define RINGSIDE_EXPERIMENTS_REPORT_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/report/points.h"

namespace ringside {

// Reads everything a report shows from the compare directory `dir`: its cells' results,
// spec.textproto and, if present, calibration.json (predictions). NotFound without
// finished cells.
absl::StatusOr<ReportData> LoadReportData(const std::string& dir);

// Writes DIR/report.md and DIR/report.html (plots and their script under
// DIR/report_plots/). Blocks while gnuplot runs; FailedPrecondition if it is missing.
absl::Status RunReport(const std::string& dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_REPORT_H_
