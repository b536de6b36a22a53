#include "experiments/demo_command.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/calibrate_command.h"
#include "experiments/compare_command.h"
#include "experiments/emulated_launch.h"
#include "experiments/simulate_command.h"
#include "experiments/network_emulator.h"
#include "experiments/report_command.h"

namespace ringside {

std::string DemoSpec(const std::string& network) {
  std::string spec = R"pb(# The README's demo (`ringside demo`): single process, a parameter server with one
# master, and DDP, with 1, 2 and 4 workers, training the Fashion-MNIST MLP (weak
# scaling: 128 samples per worker per step), on emulated 1 Gbit links where root
# allows (every process in its own network namespace), on loopback otherwise.
name: "demo"
strategies { kind: "single" }
strategies { kind: "ps" ps_shards: 1 ps_sync: "bsp" label: "ps-1-master" }
strategies { kind: "ddp" backend: "gloo" }
workers: 1
workers: 2
workers: 4
model: "mlp:784-256-256-10"
dataset: "fashion-mnist"
batch_per_worker: 128
steps: 150
lr: 0.02
momentum: 0.9
)pb";
  if (!network.empty()) spec += "network: \"" + network + "\"\n";
  return spec;
}

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
  {
    std::ofstream out(spec_path, std::ios::trunc);
    out << DemoSpec(network);
    if (!out.flush()) return absl::PermissionDeniedError(absl::StrCat("cannot write ", spec_path));
  }
  absl::FPrintF(stderr, "demo: single, PS with one master and DDP on 1, 2 and 4 workers (Fashion-MNIST MLP), %s\n",
                network.empty() ? absl::StrCat("on loopback (", privileges.message(), ")")
                                : "each process on its own emulated 1 Gbit link");
  // The cost model's constants, measured here once (kept on re-runs).
  const std::string calibration_path = out_dir + "/calibration.json";
  if (!std::filesystem::exists(calibration_path)) {
    absl::FPrintF(stderr, "demo: calibrating the cost model (ringside calibrate)\n");
    CalibrateOptions co;
    absl::StatusOr<std::string> self = SelfExePath();
    if (!self.ok()) return self.status();
    co.self_exe = *self;
    co.work_dir = out_dir + "/calibration.runs";
    absl::StatusOr<Calibration> calibration = Calibrate(co);
    if (!calibration.ok()) return calibration.status();
    if (absl::Status s = WriteCalibrationFile(*calibration, calibration_path); !s.ok()) return s;
  }
  CompareOptions o;
  o.spec_path = spec_path;
  o.out_dir = out_dir;
  if (absl::Status s = RunCompare(o); !s.ok()) return s;
  if (absl::Status s = RunReport(out_dir); !s.ok()) return s;
  absl::StatusOr<std::vector<CellResult>> results = ReadCellResults(out_dir);
  if (!results.ok()) return results.status();
  absl::PrintF("%-14s %7s %9s %11s %8s %10s %16s\n", "strategy", "workers", "step ms", "samples/s",
               "speedup", "efficiency", "busiest MB in/out");
  std::vector<ReportPoint> points = BuildPoints(*results);
  SortPointsBySpec(DemoSpec(network), &points);
  for (const ReportPoint& p : points) {
    if (p.ok_repeats == 0) {
      absl::PrintF("%-14s %7d  failed: %s\n", p.label, p.workers, p.failure);
      continue;
    }
    absl::PrintF("%-14s %7d %9.2f %11.0f %8.2f %9.0f%% %8.2f / %-6.2f\n", p.label, p.workers, p.step_ms,
                 p.samples_per_sec, p.speedup, 100 * p.efficiency, p.busiest_bytes_in / 1e6,
                 p.busiest_bytes_out / 1e6);
  }
  absl::PrintF("report: %s/report.html (and report.md, summary.csv)\n", out_dir);
  return absl::OkStatus();
}

}  // namespace ringside
