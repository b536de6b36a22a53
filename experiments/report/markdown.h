// report.md: findings, the summary table (with the cost model's prediction and its
// error beside every measured point) and the spec.
#ifndef RINGSIDE_EXPERIMENTS_REPORT_MARKDOWN_H_
#define RINGSIDE_EXPERIMENTS_REPORT_MARKDOWN_H_

#include <string>

#include "experiments/report/points.h"

namespace ringside {

// "2.10 (+5%)": a point's predicted step time and its error against the measured one;
// "" without a prediction.
std::string PredictionCell(const ReportPoint& p);

std::string ReportMarkdown(const ReportData& data);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_MARKDOWN_H_
