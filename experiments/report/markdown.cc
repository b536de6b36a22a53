#include "experiments/report/markdown.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringside {

std::string PredictionCell(const ReportPoint& p) {
  if (p.predicted_step_ms <= 0 || p.step_ms <= 0) return "";
  return absl::StrFormat("%.2f (%+.0f%%)", p.predicted_step_ms,
                         100 * (p.predicted_step_ms - p.step_ms) / p.step_ms);
}

std::string ReportMarkdown(const ReportData& data) {
  std::string md = absl::StrCat("# ringside report: ", data.name, "\n\n", "Network: ", data.network, ".\n\n");
  absl::StrAppend(&md, "## Findings\n\n", data.findings, "## Summary\n\n",
                  "| strategy | workers | step ms | predicted ms (error) | samples/s | speedup | efficiency | compute | communicate | wait | update | busiest node MB in/out | test acc | repeats |\n",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const ReportPoint& p : data.points) {
    if (p.ok_repeats == 0) {
      absl::StrAppendFormat(&md, "| %s | %d | failed: %s | | | | | | | | | | | 0/%d |\n", p.label, p.workers,
                            p.failure, p.failed_repeats);
      continue;
    }
    absl::StrAppendFormat(&md, "| %s | %d | %.2f | %s | %.0f | %.2f | %.0f%% | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f | %.4f | %d/%d |\n",
                          p.label, p.workers, p.step_ms, PredictionCell(p), p.samples_per_sec, p.speedup,
                          100 * p.efficiency, p.compute_ms, p.comm_ms, p.wait_ms, p.update_ms,
                          p.busiest_bytes_in / 1e6, p.busiest_bytes_out / 1e6, p.test_accuracy,
                          p.ok_repeats, p.ok_repeats + p.failed_repeats);
  }
  absl::StrAppendFormat(&md, "\nModel: %d parameters (M = %.2f MB). %s Plots: report.html. Spec:\n\n```\n%s```\n",
                        data.num_params, 4.0 * data.num_params / 1e6,
                        data.predicted
                            ? "Predictions: the cost model (docs/cost_model.md) with calibration.json "
                              "(measured on loopback by `ringside calibrate`), the spec's links, and "
                              "compute slowed by workers / cores where workers outnumber cores; error = "
                              "(predicted - measured) / measured."
                            : "No calibration.json: run `ringside calibrate --out=DIR/calibration.json` "
                              "for the cost model's predictions.",
                        data.spec_text);
  return md;
}

}  // namespace ringside
