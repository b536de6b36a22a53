#include "experiments/report/html.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/output_files.h"
#include "experiments/report/markdown.h"
#include "experiments/report/plots.h"
#include "experiments/sys/files.h"

namespace ringside {
namespace {

constexpr char kHead[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ringside report</title>\n"
    "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
    "table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
    "th{background:#f0f0f0}.plots{display:flex;flex-wrap:wrap;gap:12px}.plot svg{max-width:100%;height:auto}"
    "pre{background:#f6f6f6;padding:8px}</style></head><body>\n";

// After layout, each plot records its rendered size in data-rendered (checked by
// tests/report_html_test.sh through headless Chromium's DOM dump).
constexpr char kSizeScript[] =
    "<script>window.addEventListener('load', function () {\n"
    "  document.querySelectorAll('.plot').forEach(function (plot) {\n"
    "    var box = plot.querySelector('svg').getBoundingClientRect();\n"
    "    plot.setAttribute('data-rendered', Math.round(box.width) + 'x' + Math.round(box.height));\n"
    "  });\n});</script>\n";

// The findings' paragraphs, with **label** in bold.
std::string FindingsHtml(const std::string& findings) {
  std::string html;
  for (absl::string_view para : absl::StrSplit(findings, "\n\n", absl::SkipEmpty())) {
    std::string p = HtmlEscape(std::string(para));
    for (size_t at; (at = p.find("**")) != std::string::npos;) {
      const size_t end = p.find("**", at + 2);
      if (end == std::string::npos) break;
      p = absl::StrCat(p.substr(0, at), "<b>", p.substr(at + 2, end - at - 2), "</b>", p.substr(end + 2));
    }
    absl::StrAppend(&html, "<p>", p, "</p>\n");
  }
  return html;
}

// One table row per point, with links to its cells' traces.
std::string SummaryRows(const ReportData& data, const std::string& dir) {
  namespace fs = std::filesystem;
  std::string html;
  for (const ReportPoint& p : data.points) {
    std::string traces;
    for (const std::string& c : p.cells) {
      const std::string rank0 = OutputFileName(OutputFile::kTrace, OutputOwner::kRank, 0);
      const std::string rel =
          fs::exists(absl::StrCat(dir, "/cells/", c, "/", rank0))
              ? absl::StrCat("cells/", c, "/", rank0)
              : absl::StrCat("cells/", c, "/",
                             OutputFileName(OutputFile::kTrace, OutputOwner::kSingle, 0));
      absl::StrAppend(&traces, "<a href=\"", HtmlEscape(rel), "\">", HtmlEscape(c), "</a> ");
    }
    if (p.ok_repeats == 0) {
      absl::StrAppendFormat(&html, "<tr><td>%s</td><td>%d</td><td colspan=\"11\">failed: %s</td><td>%s</td></tr>\n",
                            HtmlEscape(p.label), p.workers, HtmlEscape(p.failure), traces);
      continue;
    }
    absl::StrAppendFormat(&html, "<tr><td>%s</td><td>%d</td><td>%.2f</td><td>%s</td><td>%.0f</td><td>%.2f</td><td>%.0f%%</td>"
                          "<td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f / %.2f</td><td>%.4f</td><td>%s</td></tr>\n",
                          HtmlEscape(p.label), p.workers, p.step_ms, PredictionCell(p), p.samples_per_sec, p.speedup,
                          100 * p.efficiency, p.compute_ms, p.comm_ms, p.wait_ms, p.update_ms,
                          p.busiest_bytes_in / 1e6, p.busiest_bytes_out / 1e6, p.test_accuracy, traces);
  }
  return html;
}

}  // namespace

std::string HtmlEscape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

absl::StatusOr<std::string> ReportHtml(const ReportData& data, const std::string& dir,
                                       const std::string& plot_dir) {
  std::string html = absl::StrCat(kHead, "<h1>ringside report: ", HtmlEscape(data.name), "</h1>\n<p>Network: ",
                                  HtmlEscape(absl::StrReplaceAll(data.network, {{"`", ""}})),
                                  ".</p>\n<h2>Findings</h2>\n", FindingsHtml(data.findings));
  absl::StrAppend(&html, "<h2>Plots</h2>\n<div class=\"plots\">\n");
  for (const char* name : kPlotNames) {
    absl::StatusOr<std::string> svg = ReadFile(absl::StrCat(plot_dir, "/", name, ".svg"));
    if (!svg.ok()) return absl::InternalError(absl::StrCat("gnuplot wrote no ", name, ".svg"));
    std::string body = *svg;
    if (const size_t at = body.find("<svg"); at != std::string::npos) body = body.substr(at);
    absl::StrAppend(&html, "<div class=\"plot\" id=\"plot-", name, "\">", body, "</div>\n");
  }
  absl::StrAppend(&html, "</div>\n<h2>Summary</h2>\n<table><tr><th>strategy</th><th>workers</th><th>step ms</th>"
                  "<th>predicted ms (error)</th><th>samples/s</th><th>speedup</th><th>efficiency</th><th>compute</th><th>communicate</th>"
                  "<th>wait</th><th>update</th><th>busiest node MB in/out</th><th>test acc</th><th>traces</th></tr>\n",
                  SummaryRows(data, dir));
  absl::StrAppendFormat(&html, "</table>\n<p>Model: %d parameters (M = %.2f MB). Chrome traces open in "
                        "<a href=\"https://ui.perfetto.dev\">Perfetto</a> or chrome://tracing.</p>\n"
                        "<h2>Spec</h2>\n<pre>%s</pre>\n%s</body></html>\n",
                        data.num_params, 4.0 * data.num_params / 1e6, HtmlEscape(data.spec_text), kSizeScript);
  return html;
}

}  // namespace ringside
