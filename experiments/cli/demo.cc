// `ringside demo`: the preset comparison behind the README's main command. Single
// process, a parameter server with one master, and DDP, with 1, 2 and 4 workers,
// training the Fashion-MNIST MLP (matrix/specs/demo.textproto); runs the matrix
// (`compare`), calibrates the cost model, writes the report, prints the summary table
// and where the report is.
#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/matrix/matrix.h"
#include "experiments/netem/network_emulator.h"
#include "experiments/report/report.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

// The demo's spec: the compiled-in file, on `network` links ("" for loopback).
std::string DemoSpec(const std::string& network) {
  std::string spec(DemoSpecText());
  if (!network.empty()) spec += "network: \"" + network + "\"\n";
  return spec;
}

// Prints the summary table of the demo's report.
absl::Status PrintSummary(const std::string& out_dir, const std::string& spec) {
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<CellResult> results, ReadCellResults(out_dir));
  absl::PrintF("%-14s %7s %9s %11s %8s %10s %16s\n", "strategy", "workers", "step ms", "samples/s",
               "speedup", "efficiency", "busiest MB in/out");
  std::vector<ReportPoint> points = BuildPoints(results);
  SortPointsBySpec(spec, &points);
  for (const ReportPoint& p : points) {
    if (p.ok_repeats == 0) {
      absl::PrintF("%-14s %7d  failed: %s\n", p.label, p.workers, p.failure);
      continue;
    }
    absl::PrintF("%-14s %7d %9.2f %11.0f %8.2f %9.0f%% %8.2f / %-6.2f\n", p.label, p.workers, p.step_ms,
                 p.samples_per_sec, p.speedup, 100 * p.efficiency, p.busiest_bytes_in / 1e6,
                 p.busiest_bytes_out / 1e6);
  }
  return absl::OkStatus();
}

// Runs the matrix, the calibration and the report, resuming an interrupted demo in
// `out_dir`; blocks until done.
absl::Status RunDemo(const std::string& out_dir) {
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", out_dir, ": ", error.message()));
  }
  // Emulated 1 Gbit links need root (network namespaces); loopback otherwise. (A
  // delay would need the netem qdisc, which not every kernel has.)
  const absl::Status privileges = CheckNetworkPrivileges();
  const std::string network = privileges.ok() ? "bw=1gbit" : "";
  const std::string spec_path = out_dir + "/demo.textproto";
  RINGSIDE_RETURN_IF_ERROR(WriteFileAtomically(spec_path, DemoSpec(network)));
  absl::FPrintF(stderr, "demo: single, PS with one master and DDP on 1, 2 and 4 workers (Fashion-MNIST MLP), %s\n",
                network.empty() ? absl::StrCat("on loopback (", privileges.message(), ")")
                                : "each process on its own emulated 1 Gbit link");
  // The cost model's constants, measured here once (kept on re-runs).
  const std::string calibration_path = out_dir + "/calibration.json";
  if (!std::filesystem::exists(calibration_path)) {
    absl::FPrintF(stderr, "demo: calibrating the cost model (ringside calibrate)\n");
    CalibrateOptions co;  // The demo spec's model and batch are calibrate's defaults.
    co.progress = stderr;
    absl::StatusOr<Calibration> calibration = Calibrate(co);
    if (!calibration.ok()) return calibration.status();
    if (absl::Status s = WriteCalibrationFile(*calibration, calibration_path); !s.ok()) return s;
  }
  CompareOptions o;
  o.spec_path = spec_path;
  o.out_dir = out_dir;
  if (absl::Status s = RunCompare(o); !s.ok()) return s;
  if (absl::Status s = RunReport(out_dir); !s.ok()) return s;
  RINGSIDE_RETURN_IF_ERROR(PrintSummary(out_dir, DemoSpec(network)));
  absl::PrintF("report: %s/report.html (and report.md, summary.csv)\n", out_dir);
  return absl::OkStatus();
}

}  // namespace

// `ringside demo [--out=DIR]`: the README's main command.
absl::Status RunDemoVerb(const CommandArgs& args) {
  const std::string out = absl::GetFlag(FLAGS_out).empty() ? "runs/demo" : absl::GetFlag(FLAGS_out);
  return RunDemo(out);
}

}  // namespace ringside
