// report.md, the one text of a report: findings, the plots side by side, the summary
// table (the cost model's prediction and its error beside every measured point, links
// to each cell's traces) and the spec. report.html is rendered from it (html.h), so the
// two say the same.
#ifndef RINGSIDE_EXPERIMENTS_REPORT_MARKDOWN_H_
#define RINGSIDE_EXPERIMENTS_REPORT_MARKDOWN_H_

#include <string>
#include <vector>

#include "experiments/report/points.h"

namespace ringside {

// The directory, relative to the compare directory, that holds the plots (NAME.svg).
inline constexpr char kPlotDir[] = "report_plots";

// "2.10 (+5%)": a point's predicted step time and its error against the measured one;
// "" without a prediction.
std::string PredictionCell(const ReportPoint& p);

// The report's device sentence: "Devices: cpu." or "Devices: cuda:0 (single-cuda,
// ddp-nccl); cpu (ddp); PS shards always on the CPU.", then, where any point is
// emulated, "**Emulated cells: ddp-nccl at 2 (emulated: 2 ranks share one GPU, NCCL over
// sockets); ...**".
std::string DevicesLine(const std::vector<ReportPoint>& points);

// GitHub-flavoured Markdown (tables); plots are images `kPlotDir/NAME.svg` in one
// paragraph, traces links relative to the compare directory.
std::string ReportMarkdown(const ReportData& data);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_MARKDOWN_H_
