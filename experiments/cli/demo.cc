// `ringside demo`: the preset comparison behind the README's main command. Single
// process, DDP, a parameter server with one master and one with a shard per worker,
// on 2 and 4 emulated nodes (single: 1) standing for a named cluster (default
// gige-cpu: CPU servers on Gigabit Ethernet), training LeNet on Fashion-MNIST
// (matrix/specs/demo.textproto). Each node gets a CPU share and a link shaped by time
// dilation (matrix/cluster_emulation.h), so the speedups are the cluster's whatever
// this host's speed. Calibrates the cost model, runs the matrix (`compare`), writes the
// report, prints the summary table with the model's error beside every point, and
// where the report is.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/matrix/matrix.h"
#include "experiments/netem/netem.h"
#include "experiments/report/report.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

// The cluster the demo stands for unless --cluster names another.
constexpr char kDemoCluster[] = "gige-cpu";

// The demo's spec: the compiled-in file, emulating `cluster` ("" for loopback) on nodes
// of `node_cpus` ("" for none).
std::string DemoSpec(const std::string& cluster, const std::string& node_cpus) {
  std::string spec(DemoSpecText());
  if (!cluster.empty()) spec += "cluster: \"" + cluster + "\"\n";
  if (!node_cpus.empty()) spec += "node_cpus: \"" + node_cpus + "\"\n";
  return spec;
}

// The part of the machine the nodes of the demo's largest cell take together when
// --node_cpus is not given. A node's share is a cap, not a reservation: the kernel's
// network path (veth, bridge, tc) and ringside's launcher run outside the nodes'
// cgroups and need the rest. With the whole machine in quotas (2 cores / 5 nodes), DDP
// at 4 nodes computed 20% slower than the single process while at half that share it
// did not (docs/cluster.md).
constexpr double kDemoMachineShare = 0.75;

// --node_cpus's default: kDemoMachineShare x the machine's CPUs / the most nodes a cell
// of the demo uses, to 0.01 CPU.
absl::StatusOr<std::string> DefaultNodeCpus(const std::string& cluster) {
  RINGSIDE_ASSIGN_OR_RETURN(ExperimentSpec spec, ParseSpec(DemoSpec(cluster, ""), "demo"));
  int nodes = 1;
  for (const Cell& c : ExpandCells(spec)) nodes = std::max(nodes, c.nodes);
  return absl::StrFormat("%.2f", std::floor(100 * kDemoMachineShare * MachineCpus() / nodes) / 100);
}

// Prints the summary table of the demo's report, with the emulation in force and the
// cost model's error beside every point.
absl::Status PrintSummary(const std::string& out_dir) {
  RINGSIDE_ASSIGN_OR_RETURN(ReportData data, LoadReportData(out_dir));
  absl::PrintF("%s\n", data.emulation.empty() ? "no emulated nodes: every process shared this machine"
                                              : data.emulation);
  if (!data.host_check.empty()) absl::PrintF("%s\n", absl::StrReplaceAll(data.host_check, {{"**", ""}}));
  absl::PrintF("%-12s %7s %9s %13s %11s %8s %13s %10s %17s %9s %7s\n", "strategy", "workers", "step ms",
               "(range)", "samples/s", "speedup", "(range)", "efficiency", "busiest MB in/out", "model ms", "error");
  for (const ReportPoint& p : data.points) {
    if (p.ok_repeats == 0) {
      absl::PrintF("%-12s %7d  failed: %s\n", p.label, p.workers, p.failure);
      continue;
    }
    std::string model = "-", error = "-";
    if (p.predicted_step_ms > 0) {
      model = absl::StrFormat("%.1f", p.predicted_step_ms);
      error = absl::StrFormat("%+.0f%%", 100 * (p.predicted_step_ms - p.step_ms) / p.step_ms);
    }
    const std::string step_range = absl::StrFormat("%.0f-%.0f", p.step_ms_min, p.step_ms_max);
    const std::string speedup_range = absl::StrFormat("%.2f-%.2f", p.speedup_min, p.speedup_max);
    absl::PrintF("%-12s %7d %9.1f %13s %11.0f %8.2f %13s %9.0f%% %8.2f / %-6.2f %9s %7s\n", p.label, p.workers,
                 p.step_ms, step_range, p.samples_per_sec, p.speedup, speedup_range, 100 * p.efficiency,
                 p.busiest_bytes_in / 1e6, p.busiest_bytes_out / 1e6, model, error);
  }
  return absl::OkStatus();
}

// Runs the matrix, the calibration and the report, resuming an interrupted demo in
// `out_dir`; blocks until done. `cluster`: the profile the nodes stand for;
// `node_cpus`: each node's CPU share (a number, or "auto": the machine's cores / the largest cell's
// nodes).
absl::Status RunDemo(const std::string& out_dir, const std::string& cluster, const std::string& node_cpus_flag) {
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", out_dir, ": ", error.message()));
  }
  // Emulated nodes need root: network namespaces for the links and cgroups for the CPU
  // shares. Without it the demo runs on loopback with the machine's cores shared, and
  // says so.
  const absl::Status net_ok = CheckNetworkPrivileges();
  const absl::Status cpu_ok = CheckCpuSharePrivileges();
  const bool emulated = net_ok.ok() && cpu_ok.ok();
  const std::string spec_cluster = emulated ? cluster : "";
  const std::string node_cpus = emulated ? node_cpus_flag : "";
  const std::string spec_path = out_dir + "/demo.textproto";
  RINGSIDE_RETURN_IF_ERROR(WriteFileAtomically(spec_path, DemoSpec(spec_cluster, node_cpus)));
  absl::FPrintF(stderr, "demo: single (1 node), DDP, PS with one master and PS with a shard per worker on 2 and 4 %s, 3 times each\n",
                emulated
                    ? absl::StrCat("emulated nodes of cluster ", cluster, " (a CPU share each, links shaped by time dilation)")
                    : absl::StrCat("workers, NOT on emulated nodes: ", !net_ok.ok() ? net_ok.message() : "",
                                   !net_ok.ok() && !cpu_ok.ok() ? "; " : "", !cpu_ok.ok() ? cpu_ok.message() : ""));
  // The cost model's constants, measured here once (kept on re-runs).
  const std::string calibration_path = out_dir + "/calibration.json";
  if (!std::filesystem::exists(calibration_path)) {
    absl::FPrintF(stderr, "demo: calibrating the cost model (ringside calibrate)\n");
    CalibrateOptions co;  // The demo spec's model and batch; a short step phase.
    co.model = "cnn:lenet";
    co.batch = 256;
    co.warmup_steps = 3;
    co.steps = 12;
    co.repeats = 5;
    co.max_message_bytes = int64_t{4} << 20;  // The model's 2.33 MB.
    // Compute measured on a node of the cells' share (throttling included).
    if (!node_cpus.empty()) {
      RINGSIDE_ASSIGN_OR_RETURN(ExperimentSpec spec, ParseSpec(DemoSpec(spec_cluster, node_cpus), "demo"));
      std::vector<Cell> cells = ExpandCells(spec);
      RINGSIDE_RETURN_IF_ERROR(ResolveCellEmulation(spec, MachineCpus(), &cells));
      co.node_cpus = cells.empty() ? 0 : cells[0].node_cpus;
      // The PS's transfers' CPU through the cluster's dilated links, as the cells move
      // their bytes.
      co.cluster = spec_cluster;
    }
    co.progress = stderr;
    // Its repeats' spreads recorded beside the medians (calibration_json.h).
    RINGSIDE_ASSIGN_OR_RETURN(CalibrationRun run, CalibrateWithSpreads(co));
    RINGSIDE_RETURN_IF_ERROR(
        WriteFileAtomically(calibration_path, CalibrationToJson(run.calibration, run.measurement)));
  }
  CompareOptions o;
  o.spec_path = spec_path;
  o.out_dir = out_dir;
  if (absl::Status s = RunCompare(o); !s.ok()) return s;
  if (absl::Status s = RunReport(out_dir); !s.ok()) return s;
  RINGSIDE_RETURN_IF_ERROR(PrintSummary(out_dir));
  absl::PrintF("report: %s/report.html (and report.md, summary.csv)\n", out_dir);
  return absl::OkStatus();
}

}  // namespace

// `ringside demo [--out=DIR]`: the README's main command.
absl::Status RunDemoVerb(const CommandArgs& args) {
  const std::string out = absl::GetFlag(FLAGS_out).empty() ? "runs/demo" : absl::GetFlag(FLAGS_out);
  const std::string cluster = absl::GetFlag(FLAGS_cluster).empty() ? kDemoCluster : absl::GetFlag(FLAGS_cluster);
  std::string node_cpus = absl::GetFlag(FLAGS_node_cpus);
  if (node_cpus.empty()) {
    RINGSIDE_ASSIGN_OR_RETURN(node_cpus, DefaultNodeCpus(cluster));
  }
  return RunDemo(out, cluster, node_cpus);
}

}  // namespace ringside
