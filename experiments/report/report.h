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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/matrix/cluster_emulation.h"
#include "experiments/matrix/experiment.pb.h"
#include "experiments/report/points.h"

namespace ringside {

// The single process's compute may drift this far from the host step measured when a
// cluster's dilation was set before the report says the host did not hold the profile.
inline constexpr double kHostDriftFraction = kPaceDriftFraction;

// The record that stands for a matrix whose cells each measured their own dilation
// (compare.cc): `first` (DIR/dilation.textproto) with the median cell's d and links,
// its host step scaled alike, and a description giving the cells' range of d. `first`
// as is when the cells ran on one dilation.
DilationRecord MedianCellDilation(const DilationRecord& first, const std::vector<CellResult>& results);

// Whether the host held a dilated cluster's profile while the cells ran: the
// single-process cell's median compute against the compute measured when d was set
// (DilationRecord.host_compute_ms). One sentence; bold, and saying the speedups are not
// the cluster's, when they drift by more than kHostDriftFraction.
std::string HostHeldCluster(const DilationRecord& dilation, const std::vector<ReportPoint>& points);
// Cluster runs: " " and a sentence on how many cells computed more than
// kHostDriftFraction from the pace their links were shaped for (points.h
// MeasureLinkPaceDrift), or that none did; in bold, disowning the speedups, where more
// than 1 / kMaxStrayedCellsDenominator of them did. "" where no cell has a forward pace.
inline constexpr int kMaxStrayedCellsDenominator = 4;
std::string LinkPaceSentence(const std::vector<CellResult>& results);

// Reads everything a report shows from the compare directory `dir`: its cells' results,
// spec.textproto, and, if present, calibration.json (predictions) and dilation.textproto
// (a cluster's emulation, stated on every page and plot). NotFound without finished
// cells.
absl::StatusOr<ReportData> LoadReportData(const std::string& dir);

// Writes DIR/report.md and DIR/report.html (plots and their script under
// DIR/report_plots/). Blocks while gnuplot runs; FailedPrecondition if it is missing.
absl::Status RunReport(const std::string& dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_REPORT_H_
