#include "experiments/report/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/output_files.h"
#include "common/status_macros.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/costmodel/simulate.h"
#include "experiments/matrix/matrix.h"
#include "experiments/netem/network_emulator.h"
#include "experiments/report/findings.h"
#include "experiments/report/html.h"
#include "experiments/report/markdown.h"
#include "experiments/report/plots.h"
#include "experiments/sys/files.h"
#include "google/protobuf/text_format.h"

namespace ringside {

std::string HostHeldCluster(const DilationRecord& dilation, const std::vector<ReportPoint>& points) {
  const ReportPoint* single = nullptr;
  for (const ReportPoint& p : points) {
    if (p.kind == "single" && p.ok_repeats > 0) single = &p;
  }
  if (single == nullptr || single->compute_ms <= 0 || dilation.host_compute_ms() <= 0) {
    return absl::StrFormat("The host's hold on cluster %s cannot be checked: no single-process cell finished.",
                           dilation.cluster());
  }
  const double drift = single->compute_ms / dilation.host_compute_ms() - 1;
  if (std::fabs(drift) > kHostDriftFraction) {
    return absl::StrFormat(
        "**The host did not hold cluster %s's profile: the single process computed %.1f ms per step, %+.0f%% "
        "from the %.1f ms measured when d = %.2f was set (a busier or faster host meanwhile), so "
        "communication over compute is not the cluster's: these speedups are not %s's. Run it again on "
        "a quieter host.**",
        dilation.cluster(), single->compute_ms, 100 * drift, dilation.host_compute_ms(), dilation.factor(),
        dilation.cluster());
  }
  return absl::StrFormat(
      "The host held cluster %s's profile: the single process computed %.1f ms per step, %+.0f%% from the "
      "%.1f ms measured when d = %.2f was set (within %.0f%%).",
      dilation.cluster(), single->compute_ms, 100 * drift, dilation.host_compute_ms(), dilation.factor(),
      100 * kHostDriftFraction);
}

DilationRecord MedianCellDilation(const DilationRecord& first, const std::vector<CellResult>& results) {
  std::vector<std::pair<double, std::string>> by_d;  // (d, links), a cell each
  for (const CellResult& r : results) {
    if (r.dilation() > 0 && !r.network().empty()) by_d.push_back({r.dilation(), r.network()});
  }
  std::sort(by_d.begin(), by_d.end());
  if (!(first.factor() > 0) || by_d.empty() || by_d.front().first == by_d.back().first) return first;
  // The cell MedianLinkDilation names (points.h), whose d the points' model steps use.
  const auto& [d, links] = by_d[by_d.size() / 2];
  DilationRecord median = first;
  const double scale = d / first.factor();
  median.set_factor(d);
  median.set_network(links);
  median.set_host_step_ms(first.host_step_ms() * scale);
  median.set_host_compute_ms(first.host_compute_ms() * scale);
  median.set_description(absl::StrCat(
      first.description(),
      absl::StrFormat("; re-measured before each cell: d = %.2f to %.2f over %d cells with links, median %.2f (its links, "
                      "%s, stand for the matrix; each speedup is taken in the cluster's time, %s)",
                      by_d.front().first, by_d.back().first, by_d.size(), d, links,
                      std::any_of(results.begin(), results.end(),
                                  [](const CellResult& r) { return r.forward_ms() > 0; })
                          ? "a DDP cell's time over the host's pace during it, its forward pass against its round's "
                            "single process's (a phase no all-reduce shares), a PS cell's over the single process at "
                            "the host step its own probe measured just before it (the one its links were shaped for)"
                          : "each cell's time over the host's pace around it: the median of the d before the "
                            "previous cell, before it and after it")));
  return median;
}

std::string LinkPaceSentence(const std::vector<CellResult>& results) {
  const LinkPaceDrift drift = MeasureLinkPaceDrift(results, kHostDriftFraction);
  if (drift.cells == 0) return "";
  // Cells compare ran again because their pace strayed from their probe's (compare.cc).
  int rerun = 0, extra_runs = 0;
  for (const CellResult& r : results) {
    if (r.pace_attempts() > 1) {
      ++rerun;
      extra_runs += r.pace_attempts() - 1;
    }
  }
  const std::string retried =
      rerun == 0 ? ""
                 : absl::StrFormat(" (compare ran %d of them again, %d more run%s, each on a fresh probe: %s "
                                   "first run's pace had strayed)",
                                   rerun, extra_runs, extra_runs == 1 ? "" : "s", rerun == 1 ? "its" : "their");
  if (drift.strayed == 0) {
    return absl::StrFormat(
        " Every DDP cell computed within %.0f%% of the pace its links were shaped for (the farthest, %s, %.0f%%)%s.",
        100 * kHostDriftFraction, drift.worst_cell, 100 * drift.worst, retried);
  }
  const std::string what = absl::StrFormat(
      "%d of %d DDP cells computed more than %.0f%% from the pace their links were shaped for (the farthest, %s, "
      "%.0f%%): the host's pace moved between a cell's probe and its run, so those cells' links ran that much "
      "fast or slow for the cluster%s",
      drift.strayed, drift.cells, 100 * kHostDriftFraction, drift.worst_cell, 100 * drift.worst, retried);
  if (drift.strayed * kMaxStrayedCellsDenominator > drift.cells) {
    return absl::StrCat(" **The host did not hold the profile while the cells ran: ", what,
                        ". These speedups are not the cluster's. Run it again on a quieter host.**");
  }
  return absl::StrCat(" ", what, "; their repeats' range shows what it cost.");
}

namespace {

// Each point's cells' trace for the table's links, relative to `dir`: the cell's merged
// timeline of all its processes (experiments/timeline), else its worker 0 / rank 0 trace
// (output_files.h), else the single process's.
void SetTracePaths(const std::string& dir, std::vector<ReportPoint>* points) {
  namespace fs = std::filesystem;
  for (ReportPoint& p : *points) {
    for (const std::string& c : p.cells) {
      const std::string rank0 = OutputFileName(OutputFile::kTrace, OutputOwner::kRank, 0);
      const std::string single = OutputFileName(OutputFile::kTrace, OutputOwner::kSingle, 0);
      const std::string cell_dir = absl::StrCat("cells/", c, "/");
      const auto has = [&](const std::string& name) {
        return fs::exists(absl::StrCat(dir, "/", cell_dir, name));
      };
      p.trace_paths.push_back(cell_dir + (has("timeline.json") ? "timeline.json"
                                          : has(rank0)         ? rank0
                                                               : single));
    }
  }
}

// A cluster's dilation as the cells ran it (`spec` parsed, `spec_ok`, and naming a
// cluster): the one compare recorded in `dir`, its links and factor the median cell's;
// `spec`'s network becomes those links. NotFound without a cluster; a recorded dilation
// that cannot be read is warned about on stderr and returned as the error.
absl::StatusOr<DilationRecord> CellsDilation(const std::string& dir, const std::vector<CellResult>& results,
                                             bool spec_ok, ExperimentSpec* spec) {
  // A cluster: the links the cells ran on are the dilated ones compare recorded.
  absl::StatusOr<DilationRecord> dilation = absl::NotFoundError("no cluster");
  if (spec_ok && !spec->cluster().empty()) {
    dilation = ReadDilation(dir);
    if (dilation.ok()) {
      *dilation = MedianCellDilation(*dilation, results);
      spec->set_network(dilation->network());
    } else {
      absl::FPrintF(stderr, "ringside: warning: %s: the spec names cluster %s but %s\n", dir, spec->cluster(),
                    dilation.status().message());
    }
  }
  return dilation;
}

// The findings' context apart from `cores` (left as made): the data's parameters and
// scaling, the cluster and its dilation (where `dilation` is ok), and the links of
// `spec`'s enabled network (none where `spec_ok` is false).
FindingsContext MakeFindingsContext(const ReportData& data, const absl::StatusOr<DilationRecord>& dilation,
                                    bool spec_ok, const ExperimentSpec& spec) {
  FindingsContext context;
  context.num_params = data.num_params;
  context.cores = static_cast<int>(std::thread::hardware_concurrency());
  context.strong_scaling = data.strong_scaling;
  if (dilation.ok()) {
    context.cluster = dilation->cluster();
    context.dilation = dilation->factor();
  }
  if (absl::StatusOr<NetworkProfile> profile = ParseNetworkProfile(spec_ok ? spec.network() : "");
      profile.ok() && profile->enabled) {
    context.link_bytes_per_s = profile->link.bits_per_sec / 8;
    context.master_link_bytes_per_s = LinkForRole(*profile, "master").bits_per_sec / 8;
  }
  return context;
}

// Predicts `data`'s points from `dir`/calibration.json where there is one and it fits
// `spec`'s model and batch (with the CPU share compare resolved, `node_cpus`, and
// `cores`); one that does not fit is left out with its reason in `data` and on stderr.
void AddPrediction(const std::string& dir, const ExperimentSpec& spec, bool spec_ok, double node_cpus, int cores,
                   ReportData* data) {
  namespace fs = std::filesystem;
  if (fs::exists(dir + "/calibration.json")) {
    absl::StatusOr<Calibration> calibration = ReadCalibrationFile(dir + "/calibration.json");
    // A calibration of another model or batch is left out, loudly (strong scaling: the
    // global batch, which its 1-worker cells run).
    const int batch = spec.batch_per_worker() > 0 ? spec.batch_per_worker() : spec.global_batch();
    absl::Status fits = !calibration.ok() ? calibration.status()
                        : spec_ok         ? CheckCalibrationFits(*calibration, spec.model(), batch)
                                          : absl::FailedPreconditionError("spec.textproto does not parse");
    if (!fits.ok()) {
      data->no_prediction_reason = absl::StrCat("calibration.json was left out: ", fits.message());
      absl::FPrintF(stderr, "ringside: warning: %s/%s\n", dir, data->no_prediction_reason);
    } else {
      // The share compare resolved and recorded ("auto" depends on the machine).
      ExperimentSpec resolved = spec;
      if (node_cpus > 0) resolved.set_node_cpus(absl::StrCat(node_cpus));
      data->compute_basis = PredictPoints(*calibration, resolved, cores, &data->points);
      data->calibration_node_cpus = calibration->node_cpus;
      data->transports_beside_raw_tcp = TransportsBesideRawTcp(*calibration);
      data->predicted = true;
    }
  }
}

}  // namespace

absl::StatusOr<ReportData> LoadReportData(const std::string& dir) {
  namespace fs = std::filesystem;
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<CellResult> results, ReadCellResults(dir));
  ReportData data;
  data.name = fs::path(dir).filename().string();
  data.spec_text = ReadFile(dir + "/spec.textproto").value_or("");
  ExperimentSpec spec;
  const bool spec_ok = google::protobuf::TextFormat::ParseFromString(data.spec_text, &spec);
  const absl::StatusOr<DilationRecord> dilation = CellsDilation(dir, results, spec_ok, &spec);
  data.points = BuildPoints(results, dilation.ok() ? dilation->target_step_ms() : 0);
  for (const CellResult& r : results) data.num_params = std::max(data.num_params, r.num_params());
  SortPointsBySpec(data.spec_text, &data.points);
  SetTracePaths(dir, &data.points);
  data.network = "loopback (no emulated links)";
  if (spec_ok && !spec.network().empty()) {
    data.network = absl::StrCat("emulated links `", spec.network(),
                                "`, every process in its own network namespace");
  }
  data.strong_scaling = spec_ok && spec.global_batch() > 0;
  double node_cpus = 0;  // As resolved by compare ("auto" is a number in the results).
  for (const CellResult& r : results) node_cpus = std::max(node_cpus, r.node_cpus());
  if (spec_ok) {
    const DilationRecord* d = dilation.ok() ? &*dilation : nullptr;
    data.emulation = DescribeEmulation(spec, node_cpus, d);
    data.emulation_short = DescribeEmulationShort(spec, node_cpus, d);
  }
  if (dilation.ok()) data.host_check = HostHeldCluster(*dilation, data.points) + LinkPaceSentence(results);
  FindingsContext context = MakeFindingsContext(data, dilation, spec_ok, spec);
  AddPrediction(dir, spec, spec_ok, node_cpus, context.cores, &data);
  // With emulated nodes every worker computes on a CPU share of its own, not on cores
  // shared with the others.
  if (node_cpus > 0) context.cores = 0;
  data.findings = Findings(data.points, context);
  return data;
}

absl::Status RunReport(const std::string& dir) {
  RINGSIDE_ASSIGN_OR_RETURN(ReportData data, LoadReportData(dir));
  // Nothing finished: no curve to draw and no table to read; say so instead of handing
  // gnuplot empty plots.
  if (std::none_of(data.points.begin(), data.points.end(), [](const ReportPoint& p) { return p.ok_repeats > 0; })) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": no cell finished ok, nothing to report (each cell's reason: ", dir, "/cells/*/log.txt)"));
  }
  const std::string plot_dir = absl::StrCat(dir, "/", kPlotDir);
  RINGSIDE_RETURN_IF_ERROR(RenderPlots(data, plot_dir));
  const std::string markdown = ReportMarkdown(data);
  RINGSIDE_RETURN_IF_ERROR(WriteFileAtomically(dir + "/report.md", markdown));
  RINGSIDE_ASSIGN_OR_RETURN(std::string html, ReportHtml(markdown, plot_dir));
  return WriteFileAtomically(dir + "/report.html", html);
}

}  // namespace ringside
