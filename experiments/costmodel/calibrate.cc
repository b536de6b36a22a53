#include "experiments/costmodel/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "experiments/netem/cpu_share.h"
#include "experiments/bench/bench.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

// Rough rates behind the progress lines' "about N s" (this 2-core VM does better on
// each; a phase that takes far longer than announced says something about the machine).
constexpr double kNominalGemmFlopsPerThread = 40e9;
constexpr double kNominalLoopbackBytesPerS = 1e9;
constexpr double kNominalMessageSeconds = 0.3e-3;

constexpr int kPhases = 4;
constexpr int kAllReduceRanks = 2;
constexpr int64_t kPushPullMinBytes = 64 << 10;
constexpr int64_t kAllReduceMinBytes = 64 << 10;  // Below: latency noise, not the fit's range.

// gamma's buffers: 16 MB each, out of cache.
constexpr size_t kReduceFloats = 4 << 20;
constexpr int kReduceRuns = 7;

// One line per phase on `out` (nullptr: silent). A terminal sees the line start with
// the phase and end with its result; anything else gets each line whole at the end,
// so a log never holds half a line.
class PhaseProgress {
 public:
  explicit PhaseProgress(FILE* out) : out_(out), terminal_(out != nullptr && IsTerminal(out)) {}

  void Start(int phase, const std::string& what, double expected_s) {
    start_ = absl::Now();
    head_ = absl::StrFormat("calibrate [%d/%d] %s (expect %s)", phase, kPhases, what,
                            expected_s < 1 ? std::string("under 1 s")
                                           : absl::StrFormat("about %.0f s", std::ceil(expected_s)));
    if (terminal_) {
      absl::FPrintF(out_, "%s ... ", head_);
      fflush(out_);
    }
  }

  // Ends the phase's line with `result` and the time it took.
  void Finish(const std::string& result) {
    if (out_ == nullptr) return;
    const double took = absl::ToDoubleSeconds(absl::Now() - start_);
    if (terminal_) {
      absl::FPrintF(out_, "%s [%.1f s]\n", result, took);
    } else {
      absl::FPrintF(out_, "%s: %s [%.1f s]\n", head_, result, took);
    }
    fflush(out_);
  }

  // Finish for a failing phase; returns `s` with `what` (the measurement) before its
  // message.
  absl::Status Fail(const std::string& what, const absl::Status& s) {
    Finish("failed");
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }

 private:
  FILE* const out_;
  const bool terminal_;
  absl::Time start_;
  std::string head_;
};

// gamma: seconds per byte to add one float buffer into another (out of cache).
double MeasureReducePerByte() {
  std::vector<float> a(kReduceFloats, 1.0f), b(kReduceFloats, 2.0f);
  std::vector<double> runs;
  for (int r = 0; r < kReduceRuns; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < kReduceFloats; ++i) a[i] += b[i];
    runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  volatile float sink = a[kReduceFloats / 2];
  (void)sink;
  return Median(runs) / (kReduceFloats * sizeof(float));
}

std::string Megabytes(double bytes) { return absl::StrFormat("%.2f MB", bytes / 1e6); }

// A message size of the sweeps: "64 KiB", "16 MiB".
std::string Binary(int64_t bytes) {
  if (bytes >= (1 << 20)) return absl::StrFormat("%.4g MiB", bytes / 1048576.0);
  return absl::StrFormat("%.4g KiB", bytes / 1024.0);
}

// "alpha 120.0 us, 1.23 GB/s".
std::string PathText(const PathCalibration& p) {
  return absl::StrFormat("alpha %.1f us, %.3f GB/s", p.alpha_s * 1e6, p.bytes_per_s / 1e9);
}

// Expected seconds of `messages` transfers of `bytes` each way on loopback.
double TransferSeconds(double messages, double bytes) {
  return messages * (kNominalMessageSeconds + bytes / kNominalLoopbackBytesPerS);
}

// (message bytes, seconds) samples of a sweep.
using Samples = std::vector<std::pair<double, double>>;

// A sweep whose times do not fit (e.g. do not grow with size: a busy machine's noise
// swamped them) runs again, up to this many times in all.
constexpr int kSweepAttempts = 3;

// Runs `sweep` and fits its samples with `fit`, again while the fit fails (a failing
// sweep ends it at once); sets `*sweeps` to the sweeps run. The last fit's result.
template <typename Sweep, typename Fit>
absl::StatusOr<PathCalibration> SweepAndFit(const Sweep& sweep, const Fit& fit, int* sweeps) {
  for (*sweeps = 1;; ++*sweeps) {
    RINGSIDE_ASSIGN_OR_RETURN(Samples samples, sweep());
    absl::StatusOr<PathCalibration> path = fit(samples);
    if (path.ok() || *sweeps == kSweepAttempts) return path;
  }
}

// Said beside a result that took more than one sweep.
std::string SweepsNote(int sweeps) {
  return sweeps > 1 ? absl::StrFormat(" (%d sweeps: the earlier ones did not fit, noise)", sweeps) : "";
}

absl::Status CheckOptions(const CalibrateOptions& o) {
  if (o.batch < 1 || o.threads < 1 || o.steps < 1 || o.warmup_steps < 0 || o.repeats < 1) {
    return absl::InvalidArgumentError(
        "calibrate needs --batch >= 1, --threads >= 1, --steps >= 1, warm-up >= 0, repeats >= 1");
  }
  // Two push-pull sizes at least, for the fit.
  if (o.max_message_bytes < 4 * kPushPullMinBytes) {
    return absl::InvalidArgumentError(absl::StrCat("calibrate: the largest message must be at least ",
                                                   4 * kPushPullMinBytes, " bytes"));
  }
  return absl::OkStatus();
}

// Phase 1: compute, backward and SGD on the model; sets compute_s, backward_s,
// update_s_per_byte and model_bytes.
absl::Status MeasureCompute(const CalibrateOptions& o, PhaseProgress* progress, Calibration* c) {
  StepBenchOptions so;
  so.model = o.model;
  so.batch = o.batch;
  so.threads = o.threads;
  so.warmup = o.warmup_steps;
  so.steps = o.steps;
  so.measure_floor = false;
  // Expected: the steps' GEMM work at a nominal rate.
  RINGSIDE_ASSIGN_OR_RETURN(ModelWeight weight, WeighModel(o.model, o.batch));
  const double cpus = o.node_cpus > 0 ? std::min<double>(o.threads, o.node_cpus) : o.threads;
  const double expected = (o.warmup_steps + o.steps) * weight.gemm_flops / (kNominalGemmFlopsPerThread * cpus);
  progress->Start(1, absl::StrFormat("compute: %s at batch %d, %d thread(s)%s, %d + %d steps", o.model, o.batch,
                                     o.threads,
                                     o.node_cpus > 0 ? absl::StrFormat(" on a node of %g CPU", o.node_cpus) : "",
                                     o.warmup_steps, o.steps),
                  expected);
  absl::StatusOr<StepBenchResult> step = MeasureStepBench(so);
  if (!step.ok()) {
    return progress->Fail("calibrate: compute", step.status());
  }
  const StepRound& r = step->rounds.front();
  c->model_bytes = 4.0 * step->num_params;
  c->compute_s = r.compute_ms / 1e3;
  c->backward_s = std::min(r.backward_ms / 1e3, c->compute_s);
  c->update_s_per_byte = r.update_ms / 1e3 / c->model_bytes;
  progress->Finish(absl::StrFormat("forward+backward %.3f ms (backward %.3f ms), SGD %.3f ms on M = %s",
                                   r.compute_ms, r.backward_ms, r.update_ms, Megabytes(c->model_bytes)));
  return absl::OkStatus();
}

// Phase 3: one worker's push-pull against one shard, model sizes 64 KiB x4 up to the
// largest message; sets push_pull (needs update_s_per_byte: the shard runs SGD).
absl::Status MeasurePushPullPath(const CalibrateOptions& o, PhaseProgress* progress, Calibration* c) {
  std::vector<int64_t> sizes;
  for (int64_t b = kPushPullMinBytes; b <= o.max_message_bytes; b *= 4) sizes.push_back(b);
  PushPullBenchOptions po;
  po.iters = o.repeats;
  po.server_in_process = true;
  double expected = 0;
  // Per size: warm-up and timed push-pulls (both ways) and as many plain pushes.
  for (int64_t b : sizes) expected += TransferSeconds(3.0 * (po.warmup + po.iters), b);
  progress->Start(3, absl::StrFormat("push-pull: 1 worker, 1 shard, %d sizes %s-%s, %d + %d calls each",
                                     sizes.size(), Binary(sizes.front()), Binary(sizes.back()),
                                     po.warmup, po.iters),
                  expected);
  int sweeps = 0;
  absl::StatusOr<PathCalibration> path = SweepAndFit(
      [&]() -> absl::StatusOr<Samples> {
        RINGSIDE_ASSIGN_OR_RETURN(std::vector<PushPullRow> rows, RunPushPullSweep(po, sizes));
        Samples samples;
        for (const PushPullRow& r : rows) samples.push_back({static_cast<double>(r.bytes), r.median_ms / 1e3});
        return samples;
      },
      [&](const Samples& samples) { return FitPushPullPath(samples, c->update_s_per_byte); }, &sweeps);
  if (!path.ok()) return progress->Fail("calibrate: push-pull sweep", path.status());
  c->push_pull = *path;
  progress->Finish(PathText(c->push_pull) + SweepsNote(sweeps));
  return absl::OkStatus();
}

// Phase 4: a ring all-reduce sweep of 2 ranks, 64 KiB x2 up to the largest message;
// sets allreduce (needs reduce_s_per_byte). The ring: the algorithm the model
// extrapolates to N ranks (kAuto would run recursive doubling).
absl::Status MeasureAllReducePath(const CalibrateOptions& o, PhaseProgress* progress, Calibration* c) {
  AllReduceBenchOptions ao;
  ao.min_bytes = kAllReduceMinBytes;
  ao.max_bytes = o.max_message_bytes;
  ao.iters = o.repeats;
  ao.warmup = std::min(ao.warmup, o.repeats);
  ao.algorithm = AllReduceAlgorithm::kRing;
  double expected = 0;
  int sizes = 0;
  for (int64_t b = ao.min_bytes; b <= ao.max_bytes; b *= 2, ++sizes) {
    expected += TransferSeconds(ao.warmup + ao.iters, 2.0 * b);
  }
  progress->Start(4, absl::StrFormat("all-reduce: %d ranks (threads), ring, %d sizes %s-%s, %d + %d each",
                                     kAllReduceRanks, sizes, Binary(ao.min_bytes),
                                     Binary(ao.max_bytes), ao.warmup, ao.iters),
                  expected);
  int sweeps = 0;
  absl::StatusOr<PathCalibration> path = SweepAndFit(
      [&]() -> absl::StatusOr<Samples> {
        RINGSIDE_ASSIGN_OR_RETURN(AllReduceBenchResult sweep, MeasureAllReduceInProcess(kAllReduceRanks, ao));
        Samples samples;
        for (const AllReduceRow& r : sweep.rows) {
          if (r.wrong != 0) {
            return absl::InternalError(absl::StrCat(r.wrong, " wrong elements at ", r.bytes, " bytes"));
          }
          samples.push_back({static_cast<double>(r.bytes), r.us / 1e6});
        }
        return samples;
      },
      [&](const Samples& samples) {
        return FitAllReducePath(samples, kAllReduceRanks, Strategy::kRing, c->reduce_s_per_byte);
      },
      &sweeps);
  if (!path.ok()) return progress->Fail("calibrate: all-reduce sweep", path.status());
  c->allreduce = *path;
  progress->Finish(PathText(c->allreduce) + SweepsNote(sweeps));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Calibration> Calibrate(const CalibrateOptions& o) {
  RINGSIDE_RETURN_IF_ERROR(CheckOptions(o));
  Calibration c;
  c.model = o.model;
  c.batch = o.batch;
  c.threads = o.threads;
  PhaseProgress progress(o.progress);
  // The CPU-bound phases on an emulated node: this process in a cgroup of that share,
  // moved back out (and the cgroup removed) before the paths are measured.
  std::unique_ptr<EmulatedCpuShares> node;
  if (o.node_cpus > 0) {
    RINGSIDE_RETURN_IF_ERROR(CheckCpuSharePrivileges());
    RemoveStaleCpuShares().IgnoreError();
    RINGSIDE_ASSIGN_OR_RETURN(node, EmulatedCpuShares::Create(o.node_cpus, 1, CpuSharePeriodFor(o.node_cpus)));
    RINGSIDE_RETURN_IF_ERROR(node->JoinNode(0));
    c.node_cpus = o.node_cpus;
  }
  RINGSIDE_RETURN_IF_ERROR(MeasureCompute(o, &progress, &c));
  progress.Start(2, absl::StrFormat("gamma: summing two %s buffers, %d times", Binary(kReduceFloats * 4),
                                    kReduceRuns),
                 0);
  c.reduce_s_per_byte = MeasureReducePerByte();
  progress.Finish(absl::StrFormat("%.3f ns per byte", c.reduce_s_per_byte * 1e9));
  if (node != nullptr) RINGSIDE_RETURN_IF_ERROR(node->Teardown());
  RINGSIDE_RETURN_IF_ERROR(MeasurePushPullPath(o, &progress, &c));
  RINGSIDE_RETURN_IF_ERROR(MeasureAllReducePath(o, &progress, &c));
  RINGSIDE_RETURN_IF_ERROR(ValidateCalibration(c));
  return c;
}

}  // namespace ringside
