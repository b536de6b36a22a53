#include "experiments/costmodel/calibrate.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/metrics.h"
#include "common/ringside.pb.h"
#include "common/status_macros.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

// Each measurement is a child process of the ringside binary; none may take longer.
constexpr absl::Duration kMeasurementTimeout = absl::Minutes(10);

// Runs `argv` and returns its stdout; the measurement's name and the child's last error
// line if it fails.
absl::StatusOr<std::string> Capture(const std::vector<std::string>& argv, const std::string& what) {
  absl::StatusOr<CommandOutput> out = RunCommand(argv, kMeasurementTimeout);
  if (!out.ok()) return absl::Status(out.status().code(), absl::StrCat(what, ": ", out.status().message()));
  if (!out->ok()) {
    absl::string_view err = absl::StripTrailingAsciiWhitespace(out->stderr_text);
    err = err.substr(err.rfind('\n') == absl::string_view::npos ? 0 : err.rfind('\n') + 1);
    return absl::InternalError(absl::StrCat(what, " failed (", absl::StrJoin(argv, " "), "): ", err));
  }
  return out->stdout_text;
}

// gamma: seconds per byte to add one float buffer into another (out of cache).
double MeasureReducePerByte() {
  const size_t n = 4 << 20;  // 16 MB per buffer.
  std::vector<float> a(n, 1.0f), b(n, 2.0f);
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i) a[i] += b[i];
    runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  volatile float sink = a[n / 2];
  (void)sink;
  return Median(runs) / (n * sizeof(float));
}

}  // namespace

absl::StatusOr<Calibration> Calibrate(const CalibrateOptions& o) {
  Calibration c;
  std::error_code error;
  std::filesystem::create_directories(o.work_dir, error);
  // 1. Compute, backward and SGD time: a single-process run.
  const std::string single_dir = o.work_dir + "/single";
  RINGSIDE_RETURN_IF_ERROR(
      Capture({o.self_exe, "train", "--strategy=single", absl::StrCat("--model=", o.model),
               absl::StrCat("--dataset=", o.dataset), absl::StrCat("--batch=", o.batch),
               absl::StrCat("--steps=", o.steps), "--epochs=1000", absl::StrCat("--threads=", o.threads),
               "--eval_batch=256", absl::StrCat("--out=", single_dir)},
              "calibrate: single-process run")
          .status());
  std::vector<double> compute, backward, update;
  {
    std::ifstream in(single_dir + "/metrics.jsonl");
    std::string line;
    int i = 0;
    while (std::getline(in, line)) {
      StepMetrics m;
      if (!FromJsonLine(line, &m).ok() || i++ < o.steps / 10) continue;
      compute.push_back((m.forward_ms() + m.backward_ms()) / 1e3);
      backward.push_back(m.backward_ms() / 1e3);
      update.push_back(m.update_ms() / 1e3);
    }
  }
  if (compute.empty()) return absl::InternalError("calibrate: the single-process run wrote no records");
  c.compute_s = Median(compute);
  c.backward_s = std::min(Median(backward), c.compute_s);
  // 2. gamma.
  c.reduce_s_per_byte = MeasureReducePerByte();
  // 3. Push-pull sweep (model bytes, seconds).
  RINGSIDE_ASSIGN_OR_RETURN(std::string sweep,
                            Capture({o.self_exe, "bench", "pushpull", "--sizes_mb=0.25,1,4,16", "--repeats=10"},
                                    "calibrate: push-pull sweep"));
  std::vector<std::pair<double, double>> pp;
  for (absl::string_view line : absl::StrSplit(sweep, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double bytes, ms;
    if (f.size() >= 3 && absl::SimpleAtod(f[0], &bytes) && absl::SimpleAtod(f[2], &ms)) {
      pp.push_back({bytes, ms / 1e3});
    }
  }
  // 4. All-reduce sweep with 2 ranks (bytes, seconds), 64 KB and up, of the ring: the
  // algorithm the model extrapolates to N ranks (kAuto would run recursive doubling).
  RINGSIDE_ASSIGN_OR_RETURN(std::string ar, Capture({o.self_exe, "bench", "allreduce", "--workers=2",
                                                     "--allreduce=ring"},
                                                    "calibrate: all-reduce sweep"));
  std::vector<std::pair<double, double>> allreduce;
  for (absl::string_view line : absl::StrSplit(ar, '\n', absl::SkipEmpty())) {
    if (const size_t at = line.find("] "); at != absl::string_view::npos) line.remove_prefix(at + 2);
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double bytes, us;
    if (f.size() >= 3 && absl::SimpleAtod(f[0], &bytes) && absl::SimpleAtod(f[2], &us) && bytes >= 65536) {
      allreduce.push_back({bytes, us / 1e6});
    }
  }
  // M, for the SGD time per byte: the MLP's parameter count from its spec.
  int64_t params = 0;
  if (o.model.rfind("mlp:", 0) == 0) {
    std::vector<int64_t> widths;
    for (absl::string_view w : absl::StrSplit(o.model.substr(4), '-')) {
      int64_t x;
      if (absl::SimpleAtoi(w, &x)) widths.push_back(x);
    }
    for (size_t i = 0; i + 1 < widths.size(); ++i) params += widths[i] * widths[i + 1] + widths[i + 1];
  }
  if (params == 0) return absl::InvalidArgumentError("calibrate measures MLP models (mlp:...) only");
  c.model_bytes = 4.0 * params;
  c.update_s_per_byte = Median(update) / c.model_bytes;
  RINGSIDE_ASSIGN_OR_RETURN(c.push_pull, FitPushPullPath(pp, c.update_s_per_byte));
  RINGSIDE_ASSIGN_OR_RETURN(c.allreduce, FitAllReducePath(allreduce, 2, Strategy::kRing, c.reduce_s_per_byte));
  return c;
}

}  // namespace ringside
