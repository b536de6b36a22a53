#include "experiments/costmodel/simulate.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/costmodel/calibration_json.h"
#include "experiments/costmodel/cost_model.h"
#include "experiments/netem/bandwidth.h"
#include "experiments/sys/files.h"

namespace ringside {
namespace {

constexpr int kCellWidth = 20;  // "%11.3f %7.2fx"

std::string FormatBytes(double bytes) {
  if (bytes >= 1e9) return absl::StrFormat("%.2f GB", bytes / 1e9);
  if (bytes >= 1e6) return absl::StrFormat("%.2f MB", bytes / 1e6);
  if (bytes >= 1e3) return absl::StrFormat("%.2f kB", bytes / 1e3);
  return absl::StrFormat("%.0f B", bytes);
}

std::string FormatRate(double bytes_per_s) {
  if (bytes_per_s <= 0) return "not calibrated";
  if (bytes_per_s >= 1e9) return absl::StrFormat("%.2f GB/s", bytes_per_s / 1e9);
  return absl::StrFormat("%.1f MB/s", bytes_per_s / 1e6);
}

std::string FormatPath(const PathCalibration& p) {
  return absl::StrFormat("alpha %.1f us, %s", p.alpha_s * 1e6, FormatRate(p.bytes_per_s));
}

std::string Centered(const std::string& s, int width) {
  if (static_cast<int>(s.size()) >= width) return s;
  const int left = (width - static_cast<int>(s.size())) / 2;
  return std::string(left, ' ') + s + std::string(width - left - s.size(), ' ');
}

absl::Status PrintOneLink(const SimulateOptions& options, double model_bytes, double link,
                          FILE* out) {
  SweepOptions sweep;
  sweep.model_bytes = model_bytes;
  sweep.link_bytes_per_s = link;
  sweep.link_latency_s = options.link_latency_s;
  sweep.master_link_bytes_per_s = options.master_link_bytes_per_s;
  sweep.path_limits = options.path_limits;
  sweep.overlap = options.overlap;
  sweep.workers = options.workers;
  sweep.shards = options.shards;
  sweep.colocated = options.colocated;
  sweep.node_cpus = options.node_cpus;
  sweep.slow_node_fraction = options.slow_node_fraction;
  absl::StatusOr<std::vector<Curve>> curves = PredictCurves(options.calibration, sweep);
  if (!curves.ok()) return curves.status();

  const Calibration& c = options.calibration;
  if (link > 0) {
    absl::FPrintF(out, "== link %s (%s each way)", FormatBandwidth(link), FormatRate(link));
  } else {
    absl::FPrintF(out, "== calibrated paths (no link speed given)");
  }
  absl::FPrintF(out, ", model %s ==\n", FormatBytes(model_bytes));
  if (options.master_link_bytes_per_s > 0) {
    absl::FPrintF(out, "PS server links: %s\n", FormatBandwidth(options.master_link_bytes_per_s));
  }
  if (link > 0 || options.link_latency_s >= 0) {
    absl::FPrintF(out, "%s\n",
                  options.path_limits
                      ? "bandwidth = min(link, calibrated path); latency = calibrated alpha"
                        " + link latency (twice for a push-pull)"
                      : "link numbers alone (calibrated paths ignored)");
  }
  if (options.link_latency_s >= 0) {
    absl::FPrintF(out, "link latency %.1f us one way, node to node\n",
                  options.link_latency_s * 1e6);
  }
  if (options.node_cpus > 0 || options.slow_node_fraction < 1) {
    absl::FPrintF(out, "emulated nodes: %g CPU each%s (compute measured on %s)\n", options.node_cpus,
                  options.slow_node_fraction < 1 ? absl::StrFormat(", one at %g of that", options.slow_node_fraction) : "",
                  c.node_cpus > 0 ? absl::StrFormat("a node of %g CPU", c.node_cpus) : std::string("the machine's cores"));
  }
  Scenario on_node;  // The single baseline: one node of the share, full speed.
  on_node.node_cpus = options.node_cpus;
  const Calibration baseline = CalibrationOnNode(c, on_node);
  const double single = SingleProcessStepSeconds(baseline, model_bytes);
  absl::FPrintF(out,
                "single process: %.3f ms/step (compute %.3f ms + update %.3f ms); DDP "
                "overlap %s\n",
                single * 1e3, baseline.compute_s * 1e3, baseline.update_s_per_byte * model_bytes * 1e3,
                options.overlap ? "on" : "off");
  absl::FPrintF(out, "step time ms and speedup (weak scaling: N x single / step)\n");

  absl::FPrintF(out, "%6s %10s", "N", "single ms");
  for (const Curve& curve : *curves) {
    absl::FPrintF(out, " |%s", Centered(curve.label, kCellWidth));
  }
  absl::FPrintF(out, " | fastest\n");
  const std::vector<int>& workers = curves->front().workers;
  for (size_t k = 0; k < workers.size(); ++k) {
    absl::FPrintF(out, "%6d %10.3f", workers[k], single * 1e3);
    size_t best = 0;
    for (size_t i = 0; i < curves->size(); ++i) {
      const Curve& curve = (*curves)[i];
      absl::FPrintF(out, " |%11.3f %7.2fx", curve.predictions[k].step_s * 1e3,
                    curve.speedups[k]);
      if (curve.predictions[k].step_s < (*curves)[best].predictions[k].step_s) best = i;
    }
    const Curve& winner = (*curves)[best];
    absl::FPrintF(out, " | %s (%s)\n", winner.label, winner.predictions[k].bottleneck);
  }

  const std::vector<Crossover> crossovers = FindCrossovers(*curves);
  if (crossovers.empty()) {
    absl::FPrintF(out, "crossover: none for N = %d..%d (no pair of curves changes order)\n",
                  workers.front(), workers.back());
  }
  for (const Crossover& x : crossovers) {
    absl::FPrintF(out,
                  "crossover: %s overtakes %s between N=%d and N=%d (interpolated N ~ %.1f)\n",
                  x.faster_after, x.faster_before, x.workers_before, x.workers,
                  x.workers_interpolated);
  }
  absl::FPrintF(out, "\n");
  return absl::OkStatus();
}

}  // namespace

absl::Status RunSimulate(const SimulateOptions& options, FILE* out) {
  const Calibration& c = options.calibration;
  if (!options.model.empty() || options.batch > 0) {
    absl::Status fits = CheckCalibrationFits(c, options.model.empty() ? c.model : options.model,
                                             options.batch > 0 ? options.batch : c.batch);
    if (!fits.ok()) return absl::FailedPreconditionError(absl::StrCat("simulate: ", fits.message()));
  }
  const double model_bytes =
      options.model_bytes > 0 ? options.model_bytes : options.calibration.model_bytes;
  if (!(model_bytes > 0) || !std::isfinite(model_bytes)) {
    return absl::InvalidArgumentError(
        "simulate: no model size (give model_bytes or calibrate with a model)");
  }
  if (c.model.empty() || c.batch <= 0) {
    absl::FPrintF(out, "calibration of an unknown model and batch (written by an older ringside "
                       "calibrate; re-run `ringside calibrate --model=... --batch=...` to record "
                       "them)\n");
  } else {
    absl::FPrintF(out, "calibration measured with %s at batch %d, %d thread(s)%s\n", c.model, c.batch,
                  c.threads, model_bytes != c.model_bytes
                                 ? absl::StrCat("; predicting for a model of ", FormatBytes(model_bytes),
                                                " with its compute times")
                                 : "");
  }
  absl::FPrintF(out,
                "calibration: compute %.3f ms/step (backward %.3f ms), update %.3f ns/byte, "
                "reduce %.3f ns/byte\n",
                c.compute_s * 1e3, c.backward_s * 1e3, c.update_s_per_byte * 1e9,
                c.reduce_s_per_byte * 1e9);
  absl::FPrintF(out,
                "  push-pull: %s, +%.1f us per further call at a node; all-reduce: %s; "
                "halving-doubling: %s\n\n",
                FormatPath(c.push_pull), c.push_pull_per_call_s * 1e6, FormatPath(c.allreduce),
                c.halving_doubling.bytes_per_s > 0 ? FormatPath(c.halving_doubling)
                                                   : std::string("as all-reduce"));
  const std::vector<double> links =
      options.link_bytes_per_s.empty() ? std::vector<double>{0} : options.link_bytes_per_s;
  for (double link : links) {
    absl::Status st = PrintOneLink(options, model_bytes, link, out);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::StatusOr<Calibration> ReadCalibrationFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("calibration file ", text.status().message()));
  absl::StatusOr<Calibration> c = CalibrationFromJson(*text);
  if (!c.ok()) {
    return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  }
  return c;
}

absl::Status WriteCalibrationFile(const Calibration& calibration, const std::string& path) {
  return WriteFileAtomically(path, CalibrationToJson(calibration));
}

}  // namespace ringside
