#include "experiments/report/markdown.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "experiments/matrix/summary.h"
#include "experiments/report/findings.h"
#include "experiments/report/plots.h"

namespace ringside {
namespace {

// Text safe inside a table cell: '|' would end the cell, a newline the row.
std::string Cell(const std::string& text) {
  return absl::StrReplaceAll(text, {{"|", "\\|"}, {"\n", " "}});
}

std::string TraceLinks(const ReportPoint& p) {
  std::vector<std::string> links;
  for (size_t i = 0; i < p.cells.size() && i < p.trace_paths.size(); ++i) {
    links.push_back(absl::StrCat("[", p.cells[i], "](", p.trace_paths[i], ")"));
  }
  return absl::StrJoin(links, " ");
}

std::string SummaryTable(const ReportData& data) {
  std::string md =
      "| strategy | workers | device | step ms (range over repeats) | predicted ms (error) | samples/s | "
      "speedup (range) | efficiency | "
      "data | compute | communicate | wait | update | busiest node MB in/out | test acc | repeats | traces |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const ReportPoint& p : data.points) {
    if (p.ok_repeats == 0) {
      absl::StrAppendFormat(&md, "| %s | %d | %s | failed: %s | | | | | | | | | | | | 0/%d | %s |\n", p.label,
                            p.workers, Cell(PointDevice(p)), Cell(p.failure), p.failed_repeats, TraceLinks(p));
      continue;
    }
    // Medians, with the spread over repeats where there are several.
    std::string step = absl::StrFormat("%.2f", p.step_ms);
    std::string speedup = absl::StrFormat("%.2f", p.speedup);
    if (p.ok_repeats > 1) {
      absl::StrAppendFormat(&step, " (%.1f-%.1f)", p.step_ms_min, p.step_ms_max);
      absl::StrAppendFormat(&speedup, " (%.2f-%.2f)", p.speedup_min, p.speedup_max);
    }
    absl::StrAppendFormat(&md, "| %s | %d | %s | %s | %s | %.0f | %s | %.0f%% | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f | %.4f | %d/%d | %s |\n",
                          p.label, p.workers, Cell(PointDevice(p)), step, PredictionCell(p), p.samples_per_sec, speedup,
                          100 * p.efficiency, p.data_ms, p.compute_ms, p.comm_ms, p.wait_ms, p.update_ms,
                          p.busiest_bytes_in / 1e6, p.busiest_bytes_out / 1e6, p.test_accuracy,
                          p.ok_repeats, p.ok_repeats + p.failed_repeats, TraceLinks(p));
  }
  return md;
}

// Whether some point was read at the single process's pace (ReportPoint.paced_step_ms).
bool PacedPoints(const std::vector<ReportPoint>& points) {
  return std::any_of(points.begin(), points.end(), [](const ReportPoint& p) { return p.paced_step_ms > 0; });
}

std::string PredictionNote(const ReportData& data) {
  if (data.predicted) {
    return absl::StrCat(
        "Predictions: the cost model (docs/cost_model.md) with calibration.json (measured by `ringside "
        "calibrate` with this spec's model and batch: its paths on loopback, compute ",
        data.calibration_node_cpus > 0 ? absl::StrFormat("on an emulated node of %g CPU", data.calibration_node_cpus)
                                       : std::string("on the machine's cores"),
        "), the spec's links, ",
        data.emulation.empty() ? "and compute slowed by workers / cores where workers outnumber cores"
                               : "and the emulated nodes' CPU share (PS pushes overlapping backward)",
        data.compute_basis.single_ms > 0
            ? absl::StrFormat("; compute per step from this matrix's single-process cells (%.1f ms, measured "
                              "beside the others; calibrate measured %.1f ms on that share)",
                              data.compute_basis.single_ms, data.compute_basis.calibrated_ms)
            : std::string(),
        "; error = (predicted - measured) / measured",
        data.transports_beside_raw_tcp.empty()
            ? std::string()
            : absl::StrCat("; the paths it measured, per byte each way, beside the bare socket in the same run: ",
                           data.transports_beside_raw_tcp),
        PacedPoints(data.points)
            ? ", measured at the single process's pace where the cells ran on a dilation (the step x the "
              "single's forward pass over the cell's own: the host's drift between cells taken out)."
            : ".");
  }
  if (!data.no_prediction_reason.empty()) return absl::StrCat("No predictions: ", data.no_prediction_reason);
  return "No predictions: there is no calibration.json (`ringside calibrate --model=MODEL --batch=BATCH "
         "--out=DIR/calibration.json` with the spec's model and batch adds them).";
}

}  // namespace

std::string DevicesLine(const std::vector<ReportPoint>& points) {
  std::vector<std::string> devices;                  // In order of appearance.
  std::map<std::string, std::vector<std::string>> labels;  // Device -> strategies on it.
  std::vector<std::string> emulated;
  for (const ReportPoint& p : points) {
    const std::string device = p.device.empty() ? "cpu" : p.device;
    if (labels.find(device) == labels.end()) devices.push_back(device);
    std::vector<std::string>& l = labels[device];
    if (std::find(l.begin(), l.end(), p.label) == l.end()) l.push_back(p.label);
    if (p.emulated) emulated.push_back(absl::StrCat(p.label, " at ", p.workers, " (", EmulationNote(p.kind, p.workers, p.gpus), ")"));
  }
  std::string out = "Devices: ";
  if (devices.size() == 1 && devices[0] == "cpu") {
    absl::StrAppend(&out, "cpu.");
  } else {
    std::vector<std::string> parts;
    for (const std::string& d : devices) parts.push_back(absl::StrCat(d, " (", absl::StrJoin(labels[d], ", "), ")"));
    absl::StrAppend(&out, absl::StrJoin(parts, "; "), "; PS shards always on the CPU.");
  }
  if (!emulated.empty()) {
    absl::StrAppend(&out, " **Emulated cells: ", absl::StrJoin(emulated, "; "),
                    ". Their times are the emulation's (ranks time-slicing one GPU), not those of one "
                    "GPU per rank.**");
  }
  return out;
}

std::string PredictionCell(const ReportPoint& p) {
  // The cost model has no DataParallel formula (threads of one process sharing its
  // cores and memory); say so rather than leave the cell blank.
  if (p.kind == "dp") return "not modelled";
  const double measured = StepForModel(p);
  if (p.predicted_step_ms <= 0 || measured <= 0) return "";
  const double error = (p.predicted_step_ms - measured) / measured;
  // A miss is marked (findings.h kPredictionMissFraction; the findings name its cause).
  return absl::StrFormat("%.2f (%+.0f%%)%s", p.predicted_step_ms, 100 * error,
                         std::fabs(error) > kPredictionMissFraction ? " !" : "");
}

std::string ReportMarkdown(const ReportData& data) {
  std::string spec = data.spec_text;
  if (!spec.empty() && spec.back() != '\n') spec.push_back('\n');
  std::string md = absl::StrCat("# ringside report: ", data.name, "\n\n", "Network: ", data.network, ". ",
                                data.strong_scaling ? "Strong scaling (the global batch is fixed and split "
                                                      "over the workers)."
                                                    : "Weak scaling (each worker's batch is fixed).",
                                " ", DevicesLine(data.points), "\n\n");
  absl::StrAppend(&md, "**",
                  data.emulation.empty() ? "No emulated nodes: every process shared this machine's cores"
                                         : data.emulation,
                  ".**\n\n");
  if (!data.host_check.empty()) absl::StrAppend(&md, data.host_check, "\n\n");
  // A calibration left out is said first, in bold, not only beside the table.
  if (!data.no_prediction_reason.empty()) {
    absl::StrAppend(&md, "**Warning: no predictions: ", data.no_prediction_reason, "**\n\n");
  }
  absl::StrAppend(&md, "## Findings\n\n", data.findings, "## Plots\n\n");
  std::vector<std::string> images;
  for (const char* name : kPlotNames) images.push_back(absl::StrCat("![", name, "](", kPlotDir, "/", name, ".svg)"));
  absl::StrAppend(&md, absl::StrJoin(images, "\n"), "\n\n## Summary\n\n", SummaryTable(data));
  absl::StrAppendFormat(&md,
                        "\nTimes are medians in ms per step of worker 0 / rank 0; data is gathering or "
                        "generating the batch, compute is forward and backward. Model: %d parameters "
                        "(M = %.2f MB). %s Traces open in [Perfetto](https://ui.perfetto.dev) or "
                        "chrome://tracing.\n\n## Spec\n\n```\n%s```\n",
                        data.num_params, 4.0 * data.num_params / 1e6, PredictionNote(data), spec);
  return md;
}

}  // namespace ringside
