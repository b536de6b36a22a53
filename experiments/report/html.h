// report.html: one self-contained page (the plots' SVGs inline), with findings, the
// summary table and links to every cell's Chrome trace.
#ifndef RINGSIDE_EXPERIMENTS_REPORT_HTML_H_
#define RINGSIDE_EXPERIMENTS_REPORT_HTML_H_

#include <string>

#include "absl/status/statusor.h"
#include "experiments/report/points.h"

namespace ringside {

std::string HtmlEscape(const std::string& s);

// The page for `data`, reading the rendered plots from `plot_dir`/NAME.svg and linking
// each cell's trace relative to the compare directory `dir`. Internal if a plot is
// missing.
absl::StatusOr<std::string> ReportHtml(const ReportData& data, const std::string& dir,
                                       const std::string& plot_dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_HTML_H_
