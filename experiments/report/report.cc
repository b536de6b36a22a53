#include "experiments/report/report.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/costmodel/simulate.h"
#include "experiments/report/findings.h"
#include "experiments/report/html.h"
#include "experiments/report/markdown.h"
#include "experiments/report/plots.h"
#include "experiments/sys/files.h"
#include "google/protobuf/text_format.h"

namespace ringside {

absl::StatusOr<ReportData> LoadReportData(const std::string& dir) {
  namespace fs = std::filesystem;
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<CellResult> results, ReadCellResults(dir));
  ReportData data;
  data.name = fs::path(dir).filename().string();
  data.points = BuildPoints(results);
  for (const CellResult& r : results) data.num_params = std::max(data.num_params, r.num_params());
  data.spec_text = ReadFile(dir + "/spec.textproto").value_or("");
  SortPointsBySpec(data.spec_text, &data.points);
  ExperimentSpec spec;
  const bool spec_ok = google::protobuf::TextFormat::ParseFromString(data.spec_text, &spec);
  data.network = "loopback (no emulated links)";
  if (spec_ok && !spec.network().empty()) {
    data.network = absl::StrCat("emulated links `", spec.network(),
                                "`, every process in its own network namespace");
  }
  if (fs::exists(dir + "/calibration.json")) {
    absl::StatusOr<Calibration> calibration = ReadCalibrationFile(dir + "/calibration.json");
    // A calibration of another model or batch is left out, loudly (strong scaling: the
    // global batch, which its 1-worker cells run).
    const int batch = spec.batch_per_worker() > 0 ? spec.batch_per_worker() : spec.global_batch();
    absl::Status fits = calibration.ok() && spec_ok
                            ? CheckCalibrationFits(*calibration, spec.model(), batch)
                            : absl::OkStatus();
    if (!fits.ok()) {
      absl::FPrintF(stderr, "ringside: warning: %s/calibration.json left out: %s\n", dir, fits.message());
    } else if (calibration.ok() && spec_ok) {
      PredictPoints(*calibration, spec, static_cast<int>(std::thread::hardware_concurrency()),
                    &data.points);
      data.predicted = true;
    }
  }
  data.findings = Findings(data.points, data.num_params);
  return data;
}

absl::Status RunReport(const std::string& dir) {
  RINGSIDE_ASSIGN_OR_RETURN(ReportData data, LoadReportData(dir));
  const std::string plot_dir = dir + "/report_plots";
  RINGSIDE_RETURN_IF_ERROR(RenderPlots(data, plot_dir));
  RINGSIDE_RETURN_IF_ERROR(WriteFileAtomically(dir + "/report.md", ReportMarkdown(data)));
  RINGSIDE_ASSIGN_OR_RETURN(std::string html, ReportHtml(data, dir, plot_dir));
  return WriteFileAtomically(dir + "/report.html", html);
}

}  // namespace ringside
