// report.html: report.md rendered to one self-contained page by cmark-gfm (GitHub's
// CommonMark library, with its table extension), so the page says everything the
// Markdown says; the plots' SVGs are inlined side by side where the Markdown shows
// their images.
#ifndef RINGSIDE_EXPERIMENTS_REPORT_HTML_H_
#define RINGSIDE_EXPERIMENTS_REPORT_HTML_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringside {

// The page for `markdown` (ReportMarkdown's), reading each plot image
// `kPlotDir/NAME.svg` from `plot_dir`/NAME.svg. Internal if a plot is missing.
absl::StatusOr<std::string> ReportHtml(const std::string& markdown, const std::string& plot_dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_HTML_H_
