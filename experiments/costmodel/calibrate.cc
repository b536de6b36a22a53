#include "experiments/costmodel/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "experiments/netem/cpu_share.h"
#include "experiments/bench/bench.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/sys/median.h"
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
// The sweeps start where a message costs its latency alone (a few microseconds of
// transfer), so that the fit's intercept (alpha) rests on sizes that measure it
// rather than on the difference of two large numbers.
constexpr int64_t kPushPullMinBytes = 4 << 10;
constexpr int kPushPullFactor = 4;
constexpr int64_t kAllReduceMinBytes = 4 << 10;
constexpr int kAllReduceFactor = 2;
// From this size up, a sweep times a quarter of the calls: each call is long enough to
// be steady. The push-pull sweep (here) times at least kLargePushPullIters after a
// single warm-up; the all-reduce bench does the same with at least kLargeAllReduceIters
// (allreduce_bench.cc's rule) after its usual warm-up.
constexpr int64_t kLargeMessageBytes = int64_t{16} << 20;
constexpr int kLargePushPullIters = 3;
constexpr int kLargeAllReduceIters = 5;

// gamma's buffers: 16 MB each, out of cache.
constexpr size_t kReduceFloats = 4 << 20;
constexpr int kReduceRuns = 7;

// One line per phase on `out` (nullptr: silent), then the phase's constants one per
// indented line and any warning. A terminal sees the phase line start with the phase
// and end with its result; anything else gets each line whole at the end, so a log
// never holds half a line.
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

  // A whole line of its own (after Finish).
  void Line(const std::string& line) {
    if (out_ == nullptr) return;
    absl::FPrintF(out_, "%s\n", line);
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

// Each constant's repeats are summarised (median and spread) into the measurement,
// printed one per line under the phase's line, with a warning for an unsteady one.
// Returns the medians in the order of `repeats`.
absl::StatusOr<std::vector<double>> KeepMedians(
    const std::vector<std::pair<std::string, std::vector<double>>>& repeats,
    PhaseProgress* progress, CalibrationMeasurement* measurement) {
  std::vector<double> medians;
  std::vector<std::string> warnings;
  for (const auto& [name, values] : repeats) {
    RINGSIDE_ASSIGN_OR_RETURN(ConstantSpread spread, SummarizeRepeats(name, values));
    progress->Line("  " + DescribeSpread(spread));
    if (IsUnsteady(spread)) warnings.push_back(SpreadWarning(spread));
    medians.push_back(spread.median);
    measurement->spreads.push_back(std::move(spread));
  }
  for (const std::string& w : warnings) progress->Line(w);
  return medians;
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

// " on a node of 0.4 CPU" or "".
std::string NodeText(double node_cpus) {
  return node_cpus > 0 ? absl::StrFormat(" on a node of %g CPU", node_cpus) : "";
}

// Expected seconds of `messages` transfers of `bytes` each way on loopback.
double TransferSeconds(double messages, double bytes) {
  return messages * (kNominalMessageSeconds + bytes / kNominalLoopbackBytesPerS);
}

// Timed calls at `bytes` of a sweep whose small sizes get `iters`, at least `least`
// from kLargeMessageBytes up.
int ItersAt(int64_t bytes, int iters, int least) {
  return bytes >= kLargeMessageBytes ? std::max(least, iters / 4) : iters;
}

// The sweep min, min x factor, ... up to `max_bytes`.
std::vector<int64_t> SweepSizes(int64_t min_bytes, int factor, int64_t max_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t b = min_bytes; b <= max_bytes; b *= factor) sizes.push_back(b);
  return sizes;
}

// (message bytes, seconds) samples of a sweep.
using Samples = std::vector<std::pair<double, double>>;

// A sweep whose times do not fit (e.g. do not grow with size: a busy machine's noise
// swamped them) runs again, up to this many times in all.
constexpr int kSweepAttempts = 3;

// Runs `sweep` and fits its samples with `fit`, again while the fit fails (a failing
// sweep ends it at once); adds the sweeps run to `*sweeps`. The last fit's result.
template <typename Sweep, typename Fit>
absl::StatusOr<PathCalibration> SweepAndFit(const Sweep& sweep, const Fit& fit, int* sweeps) {
  for (int attempt = 1;; ++attempt) {
    ++*sweeps;
    RINGSIDE_ASSIGN_OR_RETURN(Samples samples, sweep());
    absl::StatusOr<PathCalibration> path = fit(samples);
    if (path.ok() || attempt == kSweepAttempts) return path;
  }
}

// Said beside a result that took more sweeps than repeats.
std::string SweepsNote(int sweeps, int repeats) {
  return sweeps > repeats
             ? absl::StrFormat(" (%d sweeps for %d repeat(s): %d did not fit, noise)", sweeps, repeats,
                               sweeps - repeats)
             : "";
}

absl::Status CheckOptions(const CalibrateOptions& o) {
  if (o.batch < 1 || o.threads < 1 || o.steps < 1 || o.warmup_steps < 0 || o.repeats < 1) {
    return absl::InvalidArgumentError(
        "calibrate needs --batch >= 1, --threads >= 1, --steps >= 1, warm-up >= 0, repeats >= 1");
  }
  if (o.calibration_repeats < 1) {
    return absl::InvalidArgumentError(absl::StrCat("calibrate needs --calibration_repeats >= 1, got ",
                                                   o.calibration_repeats));
  }
  // A few sizes at least, for the fits.
  constexpr int64_t kLeastMaxBytes = 256 << 10;
  if (o.max_message_bytes != 0 && o.max_message_bytes < kLeastMaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibrate: the largest message must be at least ", kLeastMaxBytes, " bytes"));
  }
  return absl::OkStatus();
}

// Phase 1: compute, backward and SGD on the model, options.calibration_repeats rounds;
// sets compute_s, backward_s, update_s_per_byte (medians) and model_bytes.
absl::Status MeasureCompute(const CalibrateOptions& o, PhaseProgress* progress, CalibrationRun* run) {
  Calibration* c = &run->calibration;
  StepBenchOptions so;
  so.model = o.model;
  so.batch = o.batch;
  so.threads = o.threads;
  so.warmup = o.warmup_steps;
  so.steps = o.steps;
  so.repeats = o.calibration_repeats;
  so.measure_floor = false;
  // Expected: the steps' GEMM work at a nominal rate.
  RINGSIDE_ASSIGN_OR_RETURN(ModelWeight weight, WeighModel(o.model, o.batch));
  const double cpus = o.node_cpus > 0 ? std::min<double>(o.threads, o.node_cpus) : o.threads;
  const double expected = o.calibration_repeats * (o.warmup_steps + o.steps) * weight.gemm_flops /
                          (kNominalGemmFlopsPerThread * cpus);
  progress->Start(1, absl::StrFormat("compute: %s at batch %d, %d thread(s)%s, %d x (%d + %d) steps", o.model,
                                     o.batch, o.threads, NodeText(o.node_cpus), o.calibration_repeats,
                                     o.warmup_steps, o.steps),
                  expected);
  absl::StatusOr<StepBenchResult> step = MeasureStepBench(so);
  if (!step.ok()) {
    return progress->Fail("calibrate: compute", step.status());
  }
  c->model_bytes = 4.0 * step->num_params;
  std::vector<double> compute, backward, update;
  for (const StepRound& r : step->rounds) {
    compute.push_back(r.compute_ms / 1e3);
    backward.push_back(std::min(r.backward_ms, r.compute_ms) / 1e3);
    update.push_back(r.update_ms / 1e3 / c->model_bytes);
  }
  // Each round's backward is at most its compute, so the medians keep that order.
  progress->Finish(absl::StrFormat("forward+backward %.3f ms (backward %.3f ms), SGD %.3f ms on M = %s",
                                   Median(compute) * 1e3, Median(backward) * 1e3,
                                   Median(update) * c->model_bytes * 1e3, Megabytes(c->model_bytes)));
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<double> medians,
                            KeepMedians({{"compute_s", compute},
                                         {"backward_s", backward},
                                         {"update_s_per_byte", update}},
                                        progress, &run->measurement));
  c->compute_s = medians[0];
  c->backward_s = medians[1];
  c->update_s_per_byte = medians[2];
  return absl::OkStatus();
}

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

// Phase 2: gamma, options.calibration_repeats times; sets reduce_s_per_byte.
absl::Status MeasureGamma(const CalibrateOptions& o, PhaseProgress* progress, CalibrationRun* run) {
  progress->Start(2, absl::StrFormat("gamma: summing two %s buffers%s, %d x %d times",
                                     Binary(kReduceFloats * 4), NodeText(o.node_cpus),
                                     o.calibration_repeats, kReduceRuns),
                  0);
  std::vector<double> gamma;
  for (int r = 0; r < o.calibration_repeats; ++r) gamma.push_back(MeasureReducePerByte());
  progress->Finish(absl::StrFormat("%.3f ns per byte", Median(gamma) * 1e9));
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<double> medians,
                            KeepMedians({{"reduce_s_per_byte", gamma}}, progress, &run->measurement));
  run->calibration.reduce_s_per_byte = medians[0];
  return absl::OkStatus();
}

// A sweep whose largest message is below the model's: one line saying so.
void SayIfExtrapolated(const char* sweep, int64_t reached, const Calibration& c, PhaseProgress* progress) {
  if (reached >= c.model_bytes) return;
  progress->Line(absl::StrFormat("calibrate: the %s sweep reached %s, the model is %s: bandwidth extrapolated",
                                 sweep, Binary(reached), Megabytes(c.model_bytes)));
}

// The median alpha and the median bandwidth of the fits (each on its own).
PathCalibration MedianPath(const std::vector<PathCalibration>& fits) {
  std::vector<double> alpha, bandwidth;
  for (const PathCalibration& p : fits) {
    alpha.push_back(p.alpha_s);
    bandwidth.push_back(p.bytes_per_s);
  }
  return PathCalibration{Median(alpha), Median(bandwidth)};
}

// One fitted path per repeat, summarised as "<prefix>.alpha_s" and
// "<prefix>.bytes_per_s"; returns the medians as a path.
absl::StatusOr<PathCalibration> KeepPathMedians(const std::string& prefix,
                                                const std::vector<PathCalibration>& fits,
                                                PhaseProgress* progress, CalibrationMeasurement* measurement) {
  std::vector<double> alpha, bandwidth;
  for (const PathCalibration& p : fits) {
    alpha.push_back(p.alpha_s);
    bandwidth.push_back(p.bytes_per_s);
  }
  RINGSIDE_ASSIGN_OR_RETURN(
      std::vector<double> medians,
      KeepMedians({{prefix + ".alpha_s", alpha}, {prefix + ".bytes_per_s", bandwidth}}, progress, measurement));
  return PathCalibration{medians[0], medians[1]};
}

// One push-pull sweep over `sizes`: the large sizes with fewer calls (ItersAt).
absl::StatusOr<Samples> PushPullSweep(const PushPullBenchOptions& base, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> small, large;
  for (int64_t b : sizes) (b >= kLargeMessageBytes ? large : small).push_back(b);
  Samples samples;
  for (const std::vector<int64_t>* part : {&small, &large}) {
    if (part->empty()) continue;
    PushPullBenchOptions po = base;
    if (part == &large) {
      po.iters = ItersAt(kLargeMessageBytes, base.iters, kLargePushPullIters);
      po.warmup = 1;
    }
    RINGSIDE_ASSIGN_OR_RETURN(std::vector<PushPullRow> rows, RunPushPullSweep(po, *part));
    for (const PushPullRow& r : rows) samples.push_back({static_cast<double>(r.bytes), r.median_ms / 1e3});
  }
  return samples;
}

// Phase 3: one worker's push-pull against one shard, 4 KiB x4 up to the largest
// message, options.calibration_repeats sweeps; sets push_pull (needs
// update_s_per_byte: the shard runs SGD).
absl::Status MeasurePushPullPath(const CalibrateOptions& o, PhaseProgress* progress, CalibrationRun* run) {
  Calibration* c = &run->calibration;
  const std::vector<int64_t> sizes = SweepSizes(
      kPushPullMinBytes, kPushPullFactor, SweepMaxBytes(o.max_message_bytes, kPushPullMinBytes, kPushPullFactor, c->model_bytes));
  run->measurement.push_pull_max_bytes = static_cast<double>(sizes.back());
  PushPullBenchOptions po;
  po.iters = o.repeats;
  po.server_in_process = true;
  double expected = 0;
  // Per size: warm-up and timed push-pulls (both ways) and as many plain pushes.
  for (int64_t b : sizes) {
    const int calls = b >= kLargeMessageBytes ? 1 + ItersAt(b, po.iters, kLargePushPullIters)
                                              : po.warmup + po.iters;
    expected += o.calibration_repeats * TransferSeconds(3.0 * calls, b);
  }
  progress->Start(3, absl::StrFormat("push-pull: 1 worker, 1 shard, %d x %d sizes %s-%s, %d + %d calls each",
                                     o.calibration_repeats, sizes.size(), Binary(sizes.front()),
                                     Binary(sizes.back()), po.warmup, po.iters),
                  expected);
  std::vector<PathCalibration> fits;
  int sweeps = 0;
  for (int r = 0; r < o.calibration_repeats; ++r) {
    absl::StatusOr<PathCalibration> path = SweepAndFit(
        [&]() { return PushPullSweep(po, sizes); },
        [&](const Samples& samples) { return FitPushPullPath(samples, c->update_s_per_byte); }, &sweeps);
    if (!path.ok()) return progress->Fail("calibrate: push-pull sweep", path.status());
    fits.push_back(*path);
  }
  progress->Finish(PathText(MedianPath(fits)) + SweepsNote(sweeps, o.calibration_repeats));
  RINGSIDE_ASSIGN_OR_RETURN(c->push_pull, KeepPathMedians("push_pull", fits, progress, &run->measurement));
  SayIfExtrapolated("push-pull", sizes.back(), *c, progress);
  return absl::OkStatus();
}

// Phase 4: a ring all-reduce sweep of 2 ranks, 4 KiB x2 up to the largest message,
// options.calibration_repeats sweeps; sets allreduce (needs reduce_s_per_byte). The
// ring: the algorithm the model extrapolates to N ranks (kAuto would run recursive
// doubling).
absl::Status MeasureAllReducePath(const CalibrateOptions& o, PhaseProgress* progress, CalibrationRun* run) {
  Calibration* c = &run->calibration;
  AllReduceBenchOptions ao;
  ao.min_bytes = kAllReduceMinBytes;
  ao.max_bytes = SweepMaxBytes(o.max_message_bytes, kAllReduceMinBytes, kAllReduceFactor, c->model_bytes);
  ao.iters = o.repeats;
  ao.warmup = std::min(ao.warmup, o.repeats);
  ao.algorithm = AllReduceAlgorithm::kRing;
  const std::vector<int64_t> sizes = SweepSizes(ao.min_bytes, kAllReduceFactor, ao.max_bytes);
  run->measurement.allreduce_max_bytes = static_cast<double>(sizes.back());
  double expected = 0;
  for (int64_t b : sizes) {
    expected += o.calibration_repeats *
                TransferSeconds(ao.warmup + ItersAt(b, ao.iters, kLargeAllReduceIters), 2.0 * b);
  }
  progress->Start(4, absl::StrFormat("all-reduce: %d ranks (threads), ring, %d x %d sizes %s-%s, %d + %d each",
                                     kAllReduceRanks, o.calibration_repeats, sizes.size(),
                                     Binary(sizes.front()), Binary(sizes.back()), ao.warmup, ao.iters),
                  expected);
  std::vector<PathCalibration> fits;
  int sweeps = 0;
  for (int r = 0; r < o.calibration_repeats; ++r) {
    absl::StatusOr<PathCalibration> path = SweepAndFit(
        [&]() -> absl::StatusOr<Samples> {
          RINGSIDE_ASSIGN_OR_RETURN(AllReduceBenchResult sweep, MeasureAllReduceInProcess(kAllReduceRanks, ao));
          Samples samples;
          for (const AllReduceRow& row : sweep.rows) {
            if (row.wrong != 0) {
              return absl::InternalError(absl::StrCat(row.wrong, " wrong elements at ", row.bytes, " bytes"));
            }
            samples.push_back({static_cast<double>(row.bytes), row.us / 1e6});
          }
          return samples;
        },
        [&](const Samples& samples) {
          return FitAllReducePath(samples, kAllReduceRanks, Strategy::kRing, c->reduce_s_per_byte);
        },
        &sweeps);
    if (!path.ok()) return progress->Fail("calibrate: all-reduce sweep", path.status());
    fits.push_back(*path);
  }
  progress->Finish(PathText(MedianPath(fits)) + SweepsNote(sweeps, o.calibration_repeats));
  RINGSIDE_ASSIGN_OR_RETURN(c->allreduce, KeepPathMedians("allreduce", fits, progress, &run->measurement));
  SayIfExtrapolated("all-reduce", sizes.back(), *c, progress);
  return absl::OkStatus();
}

// CPU time the machine spent busy, and in all, in jiffies since boot: /proc/stat's
// first line ("cpu  user nice system idle iowait irq softirq steal ..."); busy is all
// but idle and iowait. nullopt where it cannot be read.
struct CpuTimes {
  double busy = 0, total = 0;
};
std::optional<CpuTimes> ReadCpuTimes() {
  absl::StatusOr<std::string> text = ReadFile("/proc/stat");
  if (!text.ok()) return std::nullopt;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(*text).substr(0, text->find('\n')), ' ', absl::SkipEmpty());
  // "cpu" and user, nice, system, idle, iowait, irq, softirq, steal (guest time is
  // already counted in user).
  constexpr int kFields = 8;
  if (fields.size() < kFields + 1 || fields[0] != "cpu") return std::nullopt;
  CpuTimes t;
  for (int i = 1; i <= kFields; ++i) {
    double v = 0;
    if (!absl::SimpleAtod(fields[i], &v)) return std::nullopt;
    t.total += v;
    if (i != 4 && i != 5) t.busy += v;
  }
  return t;
}

// While this process waits between phases: how many CPUs the machine's other
// processes keep busy.
constexpr absl::Duration kBusyProbe = absl::Milliseconds(250);
// From this fraction of the machine's CPUs busy elsewhere, calibrate warns: other work
// makes the waiting ranks and the shard's threads wake late (on this 2-core VM under
// load 4.9 the same 4 KiB all-reduce took 130 us in one run and 4 ms in the next), so
// the paths' constants jump, and compute and gamma share the cores and the memory bus.
constexpr double kBusyFraction = 0.25;

// Before phase `phase`: probes the other processes' CPU use (this process idle), keeps
// the most seen in the measurement, and says so in one line above kBusyFraction.
void ProbeOthers(int phase, PhaseProgress* progress, CalibrationMeasurement* measurement) {
  const std::optional<CpuTimes> before = ReadCpuTimes();
  absl::SleepFor(kBusyProbe);
  const std::optional<CpuTimes> after = ReadCpuTimes();
  if (!before || !after || after->total <= before->total) return;
  const int cpus = MachineCpus();
  const double busy = cpus * (after->busy - before->busy) / (after->total - before->total);
  measurement->busy_cpus_elsewhere = std::max(measurement->busy_cpus_elsewhere, busy);
  if (busy < kBusyFraction * cpus) return;
  progress->Line(absl::StrFormat(
      "calibrate: warning: other processes kept %.2f of %d CPU(s) busy before phase %d/%d: expect the "
      "constants to vary; calibrate on a quiet machine",
      busy, cpus, phase, kPhases));
}

}  // namespace

int64_t SweepMaxBytes(int64_t requested_bytes, int64_t min_bytes, int factor, double model_bytes) {
  if (requested_bytes > 0) return requested_bytes;
  int64_t b = min_bytes;
  while (b < kMaxSweepBytes && (b < kDefaultSweepBytes || b < model_bytes)) b *= factor;
  return std::min(b, kMaxSweepBytes);
}

absl::StatusOr<CalibrationRun> CalibrateWithSpreads(const CalibrateOptions& o) {
  RINGSIDE_RETURN_IF_ERROR(CheckOptions(o));
  // A model that does not build is refused before anything is printed.
  RINGSIDE_RETURN_IF_ERROR(WeighModel(o.model, o.batch).status());
  CalibrationRun run;
  Calibration& c = run.calibration;
  c.model = o.model;
  c.batch = o.batch;
  c.threads = o.threads;
  run.measurement.repeats = o.calibration_repeats;
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
  ProbeOthers(1, &progress, &run.measurement);
  RINGSIDE_RETURN_IF_ERROR(MeasureCompute(o, &progress, &run));
  ProbeOthers(2, &progress, &run.measurement);
  RINGSIDE_RETURN_IF_ERROR(MeasureGamma(o, &progress, &run));
  if (node != nullptr) RINGSIDE_RETURN_IF_ERROR(node->Teardown());
  ProbeOthers(3, &progress, &run.measurement);
  RINGSIDE_RETURN_IF_ERROR(MeasurePushPullPath(o, &progress, &run));
  ProbeOthers(4, &progress, &run.measurement);
  RINGSIDE_RETURN_IF_ERROR(MeasureAllReducePath(o, &progress, &run));
  RINGSIDE_RETURN_IF_ERROR(ValidateCalibration(c));
  return run;
}

absl::StatusOr<Calibration> Calibrate(const CalibrateOptions& o) {
  RINGSIDE_ASSIGN_OR_RETURN(CalibrationRun run, CalibrateWithSpreads(o));
  return std::move(run.calibration);
}

}  // namespace ringside
