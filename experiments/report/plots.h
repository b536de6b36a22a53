// The report's plots: one gnuplot script for every plot of a report, run by gnuplot
// into SVG files (speedup, efficiency, throughput, steptime, breakdown, bytes,
// accuracy), which report.html inlines.
#ifndef RINGSIDE_EXPERIMENTS_REPORT_PLOTS_H_
#define RINGSIDE_EXPERIMENTS_REPORT_PLOTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "experiments/report/points.h"

namespace ringside {

// The plots' names, in the order the report shows them; each is written as NAME.svg.
inline constexpr const char* kPlotNames[] = {"speedup",   "efficiency", "throughput", "steptime",
                                             "breakdown", "bytes",      "accuracy"};

// The gnuplot script for `data`'s plots, writing NAME.svg into gnuplot's working
// directory.
std::string PlotScript(const ReportData& data);

// Writes the script to `plot_dir`/plots.gp and runs /usr/bin/gnuplot on it there
// (blocks). FailedPrecondition if gnuplot is not installed; Internal, naming
// `plot_dir`/gnuplot.log, if it fails.
absl::Status RenderPlots(const ReportData& data, const std::string& plot_dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_PLOTS_H_
