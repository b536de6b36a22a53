#include "experiments/costmodel/calibrate.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/metrics.h"
#include "common/ops_factory.h"
#include "common/random.h"
#include "common/output_files.h"
#include "common/run_config.h"
#include "common/status_macros.h"
#include "common/wire_format.h"
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/lossy_compressor.h"
#include "ddp_ring/store.h"
#include "experiments/bench/bench.h"
#include "experiments/cluster/cluster.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/netem/netem.h"
#include "experiments/sys/median.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

// Rough rates behind the progress lines' "about N s" (this 2-core VM does better on
// each; a phase that takes far longer than announced says something about the machine).
constexpr double kNominalGemmFlopsPerThread = 40e9;
constexpr double kNominalLoopbackBytesPerS = 1e9;
constexpr double kNominalMessageSeconds = 0.3e-3;

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
// Raw TCP's message (one frame): at loopback rates tens of milliseconds, so the
// connection's latency is under 1% of it and the rate is the socket's slope.
constexpr int64_t kRawTcpBytes = int64_t{16} << 20;
constexpr int kLargeAllReduceIters = 5;

// gamma's buffers: 16 MB each, out of cache.
constexpr size_t kReduceFloats = 4 << 20;
constexpr int kReduceRuns = 7;
// The least wall time of one codec run (MeasureCodecPerValue): ten of a node share's 5-ms
// periods.
constexpr double kCodecRunSeconds = 0.05;
// The PS CPU phase through a shaped link: the shard's port in its node's network
// namespace, which this calibration made and nothing else listens in.
constexpr int kShapedShardPort = 7000;
// Bound on one transport's run of that phase (a few seconds of steps at a node's share).
constexpr absl::Duration kShapedPsCpuTimeout = absl::Minutes(5);

// The PS CPU phase's steps (at least; a quarter of the compute phase's where more),
// after its warm-up ones, per transport.
constexpr int kPsCpuSteps = 5;
constexpr int kPsCpuWarmupSteps = 2;
// The BSP join's PS runs through that link (PsJoinRuns): steps, the first ones not
// counted, and a bound on each run.
constexpr int kJoinSteps = 30;
// Their chunks: small, so that the last chunk's reply, which waits on no other worker
// (the model's unpipelined term), is a few percent of a shard's slice at 1 and 2 shards.
constexpr int kJoinChunkKb = 64;
constexpr int kJoinWarmupSteps = 3;
constexpr absl::Duration kJoinRunTimeout = absl::Minutes(3);
constexpr double kJoinRunStartSeconds = 4;  // A run's start and end (for the phase's estimate).
// Of the machine's CPUs, the most the join's four nodes may hold: the rest is the
// kernel's network path (the demo's rule, docs/cluster.md).
constexpr double kJoinMachineShare = 0.75;
// Below this fraction of the link's time left after backward, the join is not measured:
// the streams hide behind backward, and what the runs would show is the compute's own
// step-to-step variation, which the model leaves out (for DDP too).
constexpr double kJoinMinExposedFraction = 0.25;

// One line per phase of every round on `out` (nullptr: silent), "calibrate [P/4] ...
// (round R/N)", and lines of their own (the constants, warnings). A terminal sees the
// phase line start with the phase and end with its result; anything else gets each line
// whole at the end, so a log never holds half a line.
class PhaseProgress {
 public:
  // `phases`: how many phases a round has.
  PhaseProgress(FILE* out, int rounds, int phases)
      : out_(out), terminal_(out != nullptr && IsTerminal(out)), rounds_(rounds), phases_(phases) {}

  void Start(int phase, int round, const std::string& what, double expected_s) {
    start_ = absl::Now();
    head_ = absl::StrFormat("calibrate [%d/%d] %s (round %d/%d; expect %s)", phase, phases_, what, round, rounds_,
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
  const int rounds_;
  const int phases_;
  absl::Time start_;
  std::string head_;
};

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

// Said beside a result that took more than one sweep.
std::string SweepsNote(int sweeps) {
  return sweeps > 1 ? absl::StrFormat(" (%d sweeps: the earlier ones did not fit, noise)", sweeps) : "";
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

// gamma: seconds per byte to add one float buffer into another (out of cache).
absl::StatusOr<double> MeasureReducePerByte() {
  // The shard's sum (ps_server/ordered_sum.cc): the CPU ops' Axpy with alpha 1, not a
  // loop of this file's (whose speed would be this file's optimisation level's).
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 0));
  std::vector<float> a(kReduceFloats, 1.0f), b(kReduceFloats, 2.0f);
  std::vector<double> runs;
  for (int r = 0; r < kReduceRuns; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ops->Axpy(static_cast<int64_t>(kReduceFloats), 1.0f, b.data(), a.data());
    runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  volatile float sink = a[kReduceFloats / 2];
  (void)sink;
  return Median(runs) / (kReduceFloats * sizeof(float));
}

// The compressed ring's codec (common/wire_format.h): seconds to encode one float32
// value into `format` and decode it back, on buffers as large as gamma's (out of
// cache). Each of the kReduceRuns runs passes over the buffer until kCodecRunSeconds
// have gone by, so that on a node it averages over many of the share's periods (a
// single pass of a few ms runs at full speed or waits out a period, by chance); the
// median run is kept.
// The median over kReduceRuns runs of `pass`'s seconds, each run repeating it until
// kCodecRunSeconds went by (a pass of a few ms on a node share runs at full speed or
// waits out a period, by chance).
double SecondsPerPass(const std::function<void()>& pass) {
  std::vector<double> runs;
  for (int r = 0; r < kReduceRuns; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    double seconds = 0;
    int64_t passes = 0;
    do {
      pass();
      ++passes;
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (seconds < kCodecRunSeconds);
    runs.push_back(seconds / passes);
  }
  return Median(runs);
}

// gamma's buffer of values, not all alike.
std::vector<float> CodecValues() {
  std::vector<float> values(kReduceFloats);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1e-3f * static_cast<float>(i % 4099) - 2.0f;
  return values;
}

double MeasureCodecPerValue(WireFormat format) {
  const std::vector<float> values = CodecValues();
  std::vector<float> back(kReduceFloats);
  std::vector<uint16_t> wire(kReduceFloats);
  const double seconds = SecondsPerPass([&]() {
    EncodeWire(format, values.data(), static_cast<int64_t>(kReduceFloats), wire.data());
    DecodeWire(format, wire.data(), static_cast<int64_t>(kReduceFloats), back.data());
  });
  volatile float sink = back[kReduceFloats / 2];
  (void)sink;
  return seconds / kReduceFloats;
}

// A lossy compressor's whole reduction of one bucket (ddp_ring/lossy_compressor.h: error
// feedback, top-k's momentum correction, selection and decode, or PowerSGD's GEMMs,
// orthonormalisation and copies) on a group of one rank, whose collectives move
// nothing: seconds per pass, measured as SecondsPerPass does.
absl::StatusOr<double> LossyReduceSeconds(const Compression& compression, const std::vector<ParamTensor>& tensors,
                                          int64_t n) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  ProcessGroupOptions po;
  po.world_size = 1;
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> group, NewGlooProcessGroup(store.get(), po));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<LossyCompressor> compressor,
                            LossyCompressor::Create(compression, group.get(), {{0, n}}, tensors, /*seed=*/1,
                                                    /*momentum=*/0.9f));
  // Gradient-like values: random, as real gradients are. A regular pattern makes top-k's
  // selection 4.5x faster (its comparisons predictable, its accesses in order) than on
  // gradients, which the first calibrations here under-predicted by as much.
  std::vector<float> values(n), data(n);
  Rng rng(7);
  for (float& v : values) v = 1e-3f * rng.Normal();
  absl::Status status;
  const double seconds = SecondsPerPass([&]() {
    std::copy(values.begin(), values.end(), data.begin());
    absl::Status s = compressor->Launch(0, data.data())->Wait();
    if (status.ok()) status = s;
  });
  RINGSIDE_RETURN_IF_ERROR(status);
  return seconds;
}

// Top-k's encode and decode (topk:0.01 with error feedback and momentum correction) per
// value of a bucket of gamma's 16 MiB.
absl::StatusOr<double> MeasureTopKPerValue() {
  Compression c;
  c.method = Compression::Method::kTopK;
  c.topk_fraction = 0.01;
  const int64_t n = static_cast<int64_t>(kReduceFloats);
  RINGSIDE_ASSIGN_OR_RETURN(const double seconds, LossyReduceSeconds(c, {{{0, n}, 0}}, n));
  return seconds / n;
}

// PowerSGD's encode and decode of a kPowerSgdSide-square weight at rank kPowerSgdRank, per
// flop of its GEMMs (6 m n r).
constexpr int kPowerSgdSide = 1024, kPowerSgdRank = 4;
absl::StatusOr<double> MeasurePowerSgdPerFlop() {
  Compression c;
  c.method = Compression::Method::kPowerSgd;
  c.powersgd_rank = kPowerSgdRank;
  const int64_t n = int64_t{kPowerSgdSide} * kPowerSgdSide;
  RINGSIDE_ASSIGN_OR_RETURN(const double seconds, LossyReduceSeconds(c, {{{0, n}, kPowerSgdSide}}, n));
  return seconds / (6.0 * n * kPowerSgdRank);
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

// A sweep whose largest message is below the model's: one line saying so.
void SayIfExtrapolated(const char* sweep, double reached, const Calibration& c, PhaseProgress* progress) {
  if (reached >= c.model_bytes) return;
  progress->Line(absl::StrFormat("calibrate: the %s sweep reached %s, the model is %s: bandwidth extrapolated",
                                 sweep, Binary(static_cast<int64_t>(reached)), Megabytes(c.model_bytes)));
}

// What one round measured: one value of every constant.
// The CPU a rank spends per byte it sends in a ring all-reduce (its reduction and the
// kernel's socket work that its process is charged for included): the in-process
// sweep's CPU (every rank's: the ranks are threads of this process) over the bytes all
// ranks send, 2 (N - 1) / N x the message each, median over the sizes of at least
// kCpuPerByteMinBytes (below, per-message costs dominate). 0 if no size is that large.
constexpr int64_t kCpuPerByteMinBytes = 1 << 20;
double AllReduceCpuPerByte(const AllReduceBenchResult& sweep) {
  std::vector<double> per_byte;
  const int n = sweep.ranks;
  for (const AllReduceRow& row : sweep.rows) {
    if (row.bytes < kCpuPerByteMinBytes || n < 2) continue;
    const double sent = n * 2.0 * (n - 1) / n * static_cast<double>(row.bytes);
    per_byte.push_back(row.process_cpu_us / 1e6 / sent);
  }
  return Median(std::move(per_byte));
}

struct Round {
  double compute_s = 0, backward_s = 0, update_s_per_byte = 0;
  double step_mean_s = 0;  // Phase 1's mean wall time per step (the PS CPU phase's pace).
  double step_s = 0;       // Its median step (forward, backward, SGD): the dilation's host step.
  double gemm_flops = 0;   // One step's GEMM work (the target's step from a FLOP rate).
  double reduce_s_per_byte = 0;
  double fp16_codec_s_per_value = 0, bf16_codec_s_per_value = 0;
  double topk_codec_s_per_value = 0, powersgd_codec_s_per_flop = 0;
  double allreduce_cpu_s_per_byte = 0;
  double push_pull_cpu_s_per_byte = 0, push_pull_tcp_cpu_s_per_byte = 0;
  PathCalibration push_pull, push_pull_tcp, allreduce;
  double raw_tcp_bytes_per_s = 0;  // Raw TCP one way, measured after the TCP sweep.
  double ps_join_sigma = 0;  // The BSP join, from PS runs through a cluster's link (PsJoinRuns).
};

// The rounds of a calibration, measured phase by phase. Each round runs the four phases
// in order, so that R rounds spread over the whole calibration rather than over a few
// seconds of one phase: a change of the machine's speed while calibrate runs (another
// job starting, the host's other tenants) shows as a spread instead of shifting every
// repeat of one phase alike.
class Rounds {
 public:
  // `node`: the emulated node the CPU-bound phases run on (null: none); not owned,
  // outlives this.
  Rounds(const CalibrateOptions& o, PhaseProgress* progress, CalibrationRun* run, EmulatedCpuShares* node)
      : o_(o), progress_(progress), run_(run), node_(node) {}

  // Phase 1: compute, backward and SGD on the model (one step-bench round); sets the
  // model's bytes (M) the first time.
  absl::Status Compute(int round, Round* r) {
    StepBenchOptions so;
    so.model = o_.model;
    so.batch = o_.batch;
    so.threads = o_.threads;
    so.warmup = o_.warmup_steps;
    so.steps = o_.steps;
    so.measure_floor = false;
    // Expected: the steps' GEMM work at a nominal rate.
    RINGSIDE_ASSIGN_OR_RETURN(ModelWeight weight, WeighModel(o_.model, o_.batch));
    const double cpus = o_.node_cpus > 0 ? std::min<double>(o_.threads, o_.node_cpus) : o_.threads;
    progress_->Start(1, round, absl::StrFormat("compute: %s at batch %d, %d thread(s)%s, %d + %d steps", o_.model,
                                               o_.batch, o_.threads, NodeText(o_.node_cpus), o_.warmup_steps, o_.steps),
                     (o_.warmup_steps + o_.steps) * weight.gemm_flops / (kNominalGemmFlopsPerThread * cpus));
    absl::StatusOr<StepBenchResult> step = MeasureStepBench(so);
    if (!step.ok()) return progress_->Fail("calibrate: compute", step.status());
    const StepRound& sr = step->rounds.front();
    Calibration& c = run_->calibration;
    c.model_bytes = 4.0 * step->num_params;
    r->compute_s = sr.compute_ms / 1e3;
    r->backward_s = std::min(sr.backward_ms, sr.compute_ms) / 1e3;
    r->update_s_per_byte = sr.update_ms / 1e3 / c.model_bytes;
    r->step_mean_s = sr.mean_step_ms / 1e3;
    r->step_s = sr.step_ms / 1e3;
    r->gemm_flops = step->gemm_flops;
    progress_->Finish(absl::StrFormat("forward+backward %.3f ms (backward %.3f ms), SGD %.3f ms on M = %s",
                                      sr.compute_ms, sr.backward_ms, sr.update_ms, Megabytes(c.model_bytes)));
    return absl::OkStatus();
  }

  // Phase 2: gamma.
  absl::Status Gamma(int round, Round* r) {
    progress_->Start(2, round,
                     absl::StrFormat("gamma: summing two %s buffers%s, %d times, then the fp16 and bf16 codecs, top-k and PowerSGD", Binary(kReduceFloats * 4),
                                     NodeText(o_.node_cpus), kReduceRuns),
                     0);
    absl::StatusOr<double> gamma = MeasureReducePerByte();
    if (!gamma.ok()) return progress_->Fail("calibrate: gamma", gamma.status());
    r->reduce_s_per_byte = *gamma;
    r->fp16_codec_s_per_value = MeasureCodecPerValue(WireFormat::kFp16);
    r->bf16_codec_s_per_value = MeasureCodecPerValue(WireFormat::kBf16);
    absl::StatusOr<double> topk = MeasureTopKPerValue();
    if (!topk.ok()) return progress_->Fail("calibrate: gamma", topk.status());
    r->topk_codec_s_per_value = *topk;
    absl::StatusOr<double> powersgd = MeasurePowerSgdPerFlop();
    if (!powersgd.ok()) return progress_->Fail("calibrate: gamma", powersgd.status());
    r->powersgd_codec_s_per_flop = *powersgd;
    progress_->Finish(absl::StrFormat("%.3f ns per byte; encode + decode %.3f ns per value in fp16, %.3f in bf16; "
                                      "top-k %.3f ns per value, PowerSGD %.1f GFLOP/s (their whole encode and decode)",
                                      r->reduce_s_per_byte * 1e9, r->fp16_codec_s_per_value * 1e9,
                                      r->bf16_codec_s_per_value * 1e9, r->topk_codec_s_per_value * 1e9,
                                      1e-9 / r->powersgd_codec_s_per_flop));
    return absl::OkStatus();
  }

  // Phase 3, on an emulated node only: what the PS's transfers cost the node's CPU, over
  // gRPC and over the TCP data plane. The model's steps again (kPsCpuSteps), with one
  // worker's push-pulls of M against a shard, both in this process on the same node,
  // back to back beside them (PushPullsBeside): the node's quota goes to the compute and
  // to both ends of the push-pulls, so the pace the steps lost is what the push-pulls
  // took, cache and scheduler effects included. A push-pull moves M each way through the
  // worker's end and through the shard's, 4 M in all, so per byte an end sends or
  // receives:
  //   cpu = c x (1 - t_alone / t_beside) x seconds / (4 M x push-pulls),
  // c the CPUs the compute fills (min(threads, node share)), t the steps' mean wall time
  // (phase 1's, and with the push-pulls beside). 0 where the node's share exceeds the
  // compute's threads (the compute leaves CPU idle; the transfers need not slow it).
  // With o_.cluster the shard sits on a second emulated node behind the cluster's
  // dilated link and the steps and the worker's end run in a child on this node
  // (ShapedPushPullsBeside): the bytes arrive at the link's pace, in the small reads
  // and wake-ups the cells' nodes pay for, which cost 1.5-3x what the same bytes cost
  // back to back on loopback (docs/cost_model.md).
  absl::Status PsCpu(int round, Round* r) {
    const double cpus = std::min<double>(std::max(1, o_.threads), o_.node_cpus);
    StepBenchOptions so;
    so.model = o_.model;
    so.batch = o_.batch;
    so.threads = o_.threads;
    so.warmup = kPsCpuWarmupSteps;
    so.steps = std::max(kPsCpuSteps, o_.steps / 4);
    // With a cluster, the join's two PS runs: their steps at the link's pace (known from
    // round 2 on) and each run's start.
    const double link = run_->calibration.ps_cpu_link_bytes_per_s;
    const double wire_s = link > 0 ? run_->calibration.model_bytes / link : 0;
    const bool join_runs = !o_.cluster.empty() && (link == 0 || wire_s - r->backward_s >= kJoinMinExposedFraction * wire_s);
    const double join_s = join_runs ? 2 * (kJoinRunStartSeconds + kJoinSteps * (r->step_mean_s + wire_s)) : 0;
    progress_->Start(3, round,
                     absl::StrFormat("PS CPU: %d + %d steps beside push-pulls of M over gRPC, then TCP%s%s",
                                     so.warmup, so.steps, NodeText(o_.node_cpus),
                                     o_.cluster.empty() ? "" : "; the PS with 1 and 2 workers for the BSP join"),
                     2 * 2 * (so.warmup + so.steps) * r->step_mean_s + join_s);
    if (o_.node_cpus > std::max(1, o_.threads)) {
      progress_->Finish("not measured: the node's share exceeds the compute's threads");
      return absl::OkStatus();
    }
    std::string result;
    if (!o_.cluster.empty() && link_ == nullptr) {
      if (absl::Status s = MakeShapedLink(*r); !s.ok()) return progress_->Fail("calibrate: PS CPU", s);
    }
    if (link_ != nullptr) {
      result = absl::StrFormat("through %s links to a shard on a second node: ",
                               FormatBandwidth(run_->calibration.ps_cpu_link_bytes_per_s));
    }
    for (const char* transport : {kPsTransportGrpc, kPsTransportTcp}) {
      PushPullBenchOptions po;
      po.bytes = static_cast<int64_t>(run_->calibration.model_bytes) / 4 * 4;
      po.transport = transport;
      double beside_s = 0;
      absl::StatusOr<PushPullLoad> load;
      if (link_ != nullptr) {
        load = ShapedPushPullsBeside(po, so, &beside_s);
      } else {
        absl::StatusOr<StepBenchResult> step;
        load = PushPullsBeside(po, [&]() {
          step = MeasureStepBench(so);
          return step.status();
        });
        if (load.ok()) beside_s = step->rounds.front().mean_step_ms / 1e3;
      }
      if (!load.ok()) return progress_->Fail("calibrate: PS CPU", load.status());
      const double lost = beside_s > 0 ? std::max(0.0, 1.0 - r->step_mean_s / beside_s) : 0;
      const double moved = 4.0 * static_cast<double>(po.bytes) * static_cast<double>(load->push_pulls);
      const double cpu = moved > 0 ? cpus * lost * load->seconds / moved : 0;
      const bool tcp = transport == std::string(kPsTransportTcp);
      (tcp ? r->push_pull_tcp_cpu_s_per_byte : r->push_pull_cpu_s_per_byte) = cpu;
      absl::StrAppend(&result, transport == std::string(kPsTransportGrpc) ? "" : "; ",
                      absl::StrFormat("%s %.2f ns per byte an end moves (%d push-pulls in %.1f s, steps %.0f%% slower)",
                                      tcp ? "TCP" : "gRPC", cpu * 1e9, load->push_pulls, load->seconds,
                                      100 * (beside_s / std::max(1e-12, r->step_mean_s) - 1)));
    }
    if (link_ != nullptr) {
      // The wire time backward does not hide (the PS pushes during backward).
      const double wire_s = run_->calibration.model_bytes / run_->calibration.ps_cpu_link_bytes_per_s;
      const double exposed_s = wire_s - r->backward_s;
      if (4 * o_.node_cpus > kJoinMachineShare * MachineCpus()) {
        absl::StrAppend(&result, absl::StrFormat("; BSP join not measured: its 4 nodes of %g CPU exceed %.0f%% of "
                                                 "this machine's %d",
                                                 o_.node_cpus, 100 * kJoinMachineShare, MachineCpus()));
      } else if (exposed_s < kJoinMinExposedFraction * wire_s) {
        absl::StrAppend(&result, absl::StrFormat("; BSP join not measured: backward (%.1f ms) hides most of the "
                                                 "link's %.1f ms",
                                                 r->backward_s * 1e3, wire_s * 1e3));
      } else {
        double one_s = 0, two_s = 0;
        if (absl::Status s = PsJoinRuns(&one_s, &two_s); !s.ok()) return progress_->Fail("calibrate: PS CPU", s);
        r->ps_join_sigma = std::max(0.0, two_s - one_s) / (ExpectedMaxOfNormals(2) * exposed_s);
        absl::StrAppend(&result, absl::StrFormat("; BSP join: the PS through that link communicates %.1f ms a step "
                                                 "with 1 worker, %.1f with 2 (wire %.1f, %.1f after backward): "
                                                 "sigma %.3f",
                                                 one_s * 1e3, two_s * 1e3, wire_s * 1e3, exposed_s * 1e3,
                                                 r->ps_join_sigma));
      }
    }
    progress_->Finish(result);
    return absl::OkStatus();
  }

  // Phases 3 and 4 (4 and 5 on a node): one worker's push-pull against one shard over
  // `transport` (gRPC, then the TCP data plane), 4 KiB x4 up to the largest message,
  // fitted with this round's update_s_per_byte (the shard runs SGD), taken at full speed.
  absl::Status PushPull(int round, const std::string& transport, Round* r) {
    const bool tcp = transport == kPsTransportTcp;
    const std::vector<int64_t> sizes =
        SweepSizes(kPushPullMinBytes, kPushPullFactor,
                   SweepMaxBytes(o_.max_message_bytes, kPushPullMinBytes, kPushPullFactor,
                                 run_->calibration.model_bytes));
    run_->measurement.push_pull_max_bytes = static_cast<double>(sizes.back());
    PushPullBenchOptions po;
    po.iters = o_.repeats;
    po.server_in_process = true;
    po.transport = transport;
    double expected = 0;
    // Per size: warm-up and timed push-pulls (both ways) and as many plain pushes.
    for (int64_t b : sizes) {
      const int calls = b >= kLargeMessageBytes ? 1 + ItersAt(b, po.iters, kLargePushPullIters)
                                                : po.warmup + po.iters;
      expected += TransferSeconds(3.0 * calls, b);
    }
    progress_->Start(PathPhase() + (tcp ? 1 : 0), round,
                     absl::StrFormat("push-pull over %s: 1 worker, 1 shard, %d sizes %s-%s, %d + %d calls each",
                                     tcp ? "TCP" : "gRPC", sizes.size(), Binary(sizes.front()),
                                     Binary(sizes.back()), po.warmup, po.iters),
                     expected);
    // The sweep's shard runs SGD outside the node (this process left it), at full
    // speed: the update measured on a node of C < 1 CPU took 1 / C as long (one
    // thread), so C of it is what the sweep's slope holds.
    const double shard_sgd_s_per_byte =
        o_.node_cpus > 0 ? r->update_s_per_byte * std::min(1.0, o_.node_cpus) : r->update_s_per_byte;
    int sweeps = 0;
    absl::StatusOr<PathCalibration> path = SweepAndFit(
        [&]() { return PushPullSweep(po, sizes); },
        [&](const Samples& samples) { return FitPushPullPath(samples, shard_sgd_s_per_byte); }, &sweeps);
    if (!path.ok()) {
      return progress_->Fail(tcp ? "calibrate: push-pull sweep over TCP" : "calibrate: push-pull sweep",
                             path.status());
    }
    (tcp ? r->push_pull_tcp : r->push_pull) = *path;
    std::string raw;
    if (tcp) {
      // The bare socket under both of the PS's paths and the ring's: one connection,
      // 16 MiB frames one way, beside the sweep it is compared with.
      RawTcpBenchOptions ro;
      ro.bytes = kRawTcpBytes;
      absl::StatusOr<RawTcpResult> bare = MeasureRawTcp(ro);
      if (!bare.ok()) return progress_->Fail("calibrate: raw TCP", bare.status());
      r->raw_tcp_bytes_per_s = bare->bytes_per_s;
      raw = absl::StrFormat("; raw TCP %.3f GB/s one way", bare->bytes_per_s / 1e9);
    }
    progress_->Finish(PathText(*path) + raw + SweepsNote(sweeps));
    return absl::OkStatus();
  }

  // Phase 5 (6 on a node): a ring all-reduce sweep of 2 ranks, 4 KiB x2 up to the largest message,
  // fitted with this round's gamma at full speed. The ring: the algorithm the model
  // extrapolates to N ranks (kAuto would run recursive doubling).
  absl::Status AllReduce(int round, Round* r) {
    AllReduceBenchOptions ao;
    ao.min_bytes = kAllReduceMinBytes;
    ao.max_bytes = SweepMaxBytes(o_.max_message_bytes, kAllReduceMinBytes, kAllReduceFactor,
                                 run_->calibration.model_bytes);
    ao.iters = o_.repeats;
    ao.warmup = std::min(ao.warmup, o_.repeats);
    ao.algorithm = AllReduceAlgorithm::kRing;
    const std::vector<int64_t> sizes = SweepSizes(ao.min_bytes, kAllReduceFactor, ao.max_bytes);
    run_->measurement.allreduce_max_bytes = static_cast<double>(sizes.back());
    double expected = 0;
    for (int64_t b : sizes) {
      expected += TransferSeconds(ao.warmup + ItersAt(b, ao.iters, kLargeAllReduceIters), 2.0 * b);
    }
    progress_->Start(PathPhase() + 2, round,
                     absl::StrFormat("all-reduce: %d ranks (threads), ring, %d sizes %s-%s, %d + %d each",
                                     kAllReduceRanks, sizes.size(), Binary(sizes.front()), Binary(sizes.back()),
                                     ao.warmup, ao.iters),
                     expected);
    // The sweep's ranks sum at full speed (this process left the node): gamma measured on
    // a node of C < 1 CPU took 1 / C as long (one thread), so C of it is what the
    // sweep's slope holds, as for the push-pull's SGD. Subtracting the node's gamma
    // whole left a slope for the transfers that shrank with the share (at 0.15 CPU the
    // all-reduce path came out 2.2-6.9 GB/s, at 0.30 CPU 0.7-1.6).
    const double sweep_gamma =
        o_.node_cpus > 0 ? r->reduce_s_per_byte * std::min(1.0, o_.node_cpus) : r->reduce_s_per_byte;
    int sweeps = 0;
    double cpu_s_per_byte = 0;
    absl::StatusOr<PathCalibration> path = SweepAndFit(
        [&]() -> absl::StatusOr<Samples> {
          RINGSIDE_ASSIGN_OR_RETURN(AllReduceBenchResult sweep, MeasureAllReduceInProcess(kAllReduceRanks, ao));
          cpu_s_per_byte = AllReduceCpuPerByte(sweep);
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
          return FitAllReducePath(samples, kAllReduceRanks, Strategy::kRing, sweep_gamma);
        },
        &sweeps);
    if (!path.ok()) return progress_->Fail("calibrate: all-reduce sweep", path.status());
    r->allreduce = *path;
    r->allreduce_cpu_s_per_byte = cpu_s_per_byte;
    progress_->Finish(absl::StrCat(PathText(r->allreduce), SweepsNote(sweeps),
                                   absl::StrFormat("; CPU %.2f ns per byte a rank sends", cpu_s_per_byte * 1e9)));
    return absl::OkStatus();
  }

 private:
  // The first phase that measures a path: 3, after the PS CPU phase on a node.
  int PathPhase() const { return o_.node_cpus > 0 ? 4 : 3; }

  // The PS CPU phase's link (o_.cluster set): made in the first round, at the rate of
  // that round's step; node 0 is this node, node 1 the shard's.
  absl::Status MakeShapedLink(const Round& r) {
    RINGSIDE_RETURN_IF_ERROR(CheckNetworkPrivileges());
    RINGSIDE_ASSIGN_OR_RETURN(ClusterProfile profile, LoadClusterProfile(o_.cluster));
    RINGSIDE_ASSIGN_OR_RETURN(double target_s, TargetStepSeconds(profile, o_.model, o_.batch, r.gemm_flops));
    RINGSIDE_ASSIGN_OR_RETURN(Dilation d, ComputeDilation(profile, r.step_s, target_s, o_.node_cpus,
                                                          /*can_delay=*/false));
    RemoveStaleNetworks().IgnoreError();
    NetworkProfile net;
    net.enabled = true;
    net.link.bits_per_sec = std::floor(d.nic.bytes_per_s * 8 / 1e3) * 1e3;  // Whole kbit/s, as the cells'.
    RINGSIDE_ASSIGN_OR_RETURN(link_, EmulatedNetwork::Create(net, {"worker", "server"}));
    run_->calibration.ps_cpu_link_bytes_per_s = net.link.bits_per_sec / 8;
    return absl::OkStatus();
  }

  // The BSP join's runs (cost_model.h ps_join_sigma): the PS itself (`ringside train
  // --strategy=ps`: the TCP data plane, standalone shards, chunks of kJoinChunkKb, this
  // model and batch on synthetic data) with every worker and shard on an emulated node of this share,
  // through links at this phase's rate, first 1 worker and 1 shard, then 2 and 2. Every
  // link carries M each way in both, so what the second adds is the wait for the slower
  // worker's stream. Sets each run's median over its workers' counted steps of the
  // communication after backward (StepMetrics.comm_ms), seconds. Blocks for both runs
  // (each bounded by kJoinRunTimeout); Internal with the run's last words on failure.
  absl::Status PsJoinRuns(double* one_s, double* two_s) {
    RINGSIDE_ASSIGN_OR_RETURN(std::string self, SelfExePath());
    for (int workers : {1, 2}) {
      RINGSIDE_ASSIGN_OR_RETURN(ScopedTempDir dir, ScopedTempDir::Create("ringside-calibrate-join"));
      const std::vector<std::string> argv = {
          self,
          "train",
          "--strategy=ps",
          "--ps_sync=bsp",
          absl::StrCat("--ps_transport=", kPsTransportTcp),
          absl::StrCat("--workers=", workers),
          absl::StrCat("--ps_shards=", workers),
          absl::StrCat("--ps_chunk_kb=", kJoinChunkKb),
          absl::StrCat("--model=", o_.model),
          absl::StrCat("--batch=", o_.batch),
          absl::StrCat("--threads=", std::max(1, o_.threads)),
          absl::StrCat("--dataset=synthetic:train=", int64_t{workers} * o_.batch * (kJoinSteps + 1),
                       ",test=", o_.batch),
          absl::StrCat("--steps=", kJoinSteps),
          "--epochs=1",
          absl::StrCat("--node_cpus=", o_.node_cpus),
          // Whole kbit/s, as MakeShapedLink shaped this phase's link.
          absl::StrFormat("--network=bw=%.0fkbit", run_->calibration.ps_cpu_link_bytes_per_s * 8 / 1e3),
          absl::StrCat("--out=", dir.path()),
      };
      RINGSIDE_ASSIGN_OR_RETURN(CommandOutput run, RunCommand(argv, kJoinRunTimeout));
      if (!run.ok()) {
        std::vector<absl::string_view> lines =
            absl::StrSplit(absl::StripTrailingAsciiWhitespace(run.stdout_text + run.stderr_text), '\n');
        return absl::InternalError(absl::StrCat("the PS run with ", workers, " worker(s) through a shaped link (",
                                                absl::StrJoin(argv.begin() + 1, argv.end(), " "), ") failed: ",
                                                lines.empty() ? "no output" : lines.back()));
      }
      std::vector<double> comm_s;
      for (int w = 0; w < workers; ++w) {
        const std::string path = absl::StrCat(
            dir.path(), "/",
            OutputFileName(OutputFile::kMetrics, workers == 1 ? OutputOwner::kSingle : OutputOwner::kRank, w));
        RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> records, ReadMetricsFile(path));
        for (const StepMetrics& m : records) {
          if (m.role() == "worker" && m.step() >= kJoinWarmupSteps) comm_s.push_back(m.comm_ms() / 1e3);
        }
      }
      if (comm_s.empty()) {
        return absl::InternalError(absl::StrCat("the PS run with ", workers, " worker(s) through a shaped link "
                                                "recorded no step past its first ", kJoinWarmupSteps));
      }
      (workers == 1 ? *one_s : *two_s) = Median(comm_s);
    }
    return absl::OkStatus();
  }

  // The compute's steps `so` beside push-pulls `po` through the shaped link: the shard
  // (`bench pushpull-server`) in node 1's namespace, the steps and the worker's end
  // (`bench pushpull-beside`) in node 0's, both processes on this node's CPU share.
  // Blocks until both exit (bounded); Internal with a child's last words on failure.
  absl::StatusOr<PushPullLoad> ShapedPushPullsBeside(const PushPullBenchOptions& po, const StepBenchOptions& so,
                                                     double* beside_step_s) {
    RINGSIDE_ASSIGN_OR_RETURN(std::string self, SelfExePath());
    const std::string server = absl::StrCat(link_->address(1), ":", kShapedShardPort);
    const std::vector<std::string> common = {absl::StrCat("--size_bytes=", po.bytes),
                                             absl::StrCat("--ps_chunk_kb=", po.chunk_bytes / 1024),
                                             absl::StrCat("--ps_transport=", po.transport)};
    auto on_node = [&](int net_node, std::vector<std::string> args) {
      std::vector<std::string> argv = node_->CommandPrefix(0);  // The cgroup first (see network_placement.cc).
      const std::vector<std::string> enter = link_->CommandPrefix(net_node);
      argv.insert(argv.end(), enter.begin(), enter.end());
      argv.push_back(self);
      argv.insert(argv.end(), args.begin(), args.end());
      argv.insert(argv.end(), common.begin(), common.end());
      return argv;
    };
    SpawnOptions shard;
    shard.argv = on_node(1, {"bench", "pushpull-server", absl::StrCat("--listen=", server)});
    shard.stdin_null = true;
    shard.out = ChildStream::kNull;
    shard.err = ChildStream::kNull;
    shard.die_with_parent = true;
    RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> shard_process, Subprocess::Spawn(shard));
    RINGSIDE_ASSIGN_OR_RETURN(
        CommandOutput out,
        RunCommand(on_node(0, {"bench", "pushpull-beside", absl::StrCat("--ps_servers=", server),
                               absl::StrCat("--model=", so.model), absl::StrCat("--batch=", so.batch),
                               absl::StrCat("--threads=", so.threads), absl::StrCat("--warmup=", so.warmup),
                               absl::StrCat("--steps=", so.steps)}),
                   kShapedPsCpuTimeout));
    // The worker said goodbye when it succeeded: the shard exits.
    if (!shard_process->WaitUntil(absl::Now() + absl::Seconds(10)).ok()) shard_process->Signal(SIGKILL);
    shard_process->Wait();
    if (!out.ok()) {
      std::vector<absl::string_view> lines =
          absl::StrSplit(absl::StripTrailingAsciiWhitespace(out.stderr_text), '\n');
      return absl::InternalError(absl::StrCat("bench pushpull-beside through a shaped link failed: ",
                                              lines.empty() ? "no output" : lines.back()));
    }
    PushPullLoad load;
    double step_ms = 0;
    RINGSIDE_RETURN_IF_ERROR(ParsePushPullsBeside(out.stdout_text, &load, &step_ms));
    *beside_step_s = step_ms / 1e3;
    return load;
  }

  const CalibrateOptions& o_;
  PhaseProgress* const progress_;
  CalibrationRun* const run_;
  EmulatedCpuShares* const node_;
  std::unique_ptr<EmulatedNetwork> link_;
};

// Every constant the median of its rounds, each printed with its spread (and a warning
// where unsteady), recorded in the measurement. Each round's backward is at most its
// compute, so the medians keep that order.
// `on_node`: the rounds ran the PS CPU phase (its constants are kept too).
absl::Status KeepMedians(const std::vector<Round>& rounds, bool on_node, PhaseProgress* progress,
                         CalibrationRun* run) {
  struct Scalar {
    const char* name;
    double Round::*measured;
    double Calibration::*kept;
  };
  std::vector<Scalar> scalars = {
      {"compute_s", &Round::compute_s, &Calibration::compute_s},
      {"backward_s", &Round::backward_s, &Calibration::backward_s},
      {"update_s_per_byte", &Round::update_s_per_byte, &Calibration::update_s_per_byte},
      {"reduce_s_per_byte", &Round::reduce_s_per_byte, &Calibration::reduce_s_per_byte},
      {"fp16_codec_s_per_value", &Round::fp16_codec_s_per_value, &Calibration::fp16_codec_s_per_value},
      {"bf16_codec_s_per_value", &Round::bf16_codec_s_per_value, &Calibration::bf16_codec_s_per_value},
      {"topk_codec_s_per_value", &Round::topk_codec_s_per_value, &Calibration::topk_codec_s_per_value},
      {"powersgd_codec_s_per_flop", &Round::powersgd_codec_s_per_flop, &Calibration::powersgd_codec_s_per_flop},
      {"allreduce_cpu_s_per_byte", &Round::allreduce_cpu_s_per_byte, &Calibration::allreduce_cpu_s_per_byte},
      {"raw_tcp_bytes_per_s", &Round::raw_tcp_bytes_per_s, &Calibration::raw_tcp_bytes_per_s},
  };
  if (on_node) {
    scalars.push_back(
        {"push_pull_cpu_s_per_byte", &Round::push_pull_cpu_s_per_byte, &Calibration::push_pull_cpu_s_per_byte});
    scalars.push_back({"push_pull_tcp_cpu_s_per_byte", &Round::push_pull_tcp_cpu_s_per_byte,
                       &Calibration::push_pull_tcp_cpu_s_per_byte});
    scalars.push_back({"ps_join_sigma", &Round::ps_join_sigma, &Calibration::ps_join_sigma});
  }
  const std::pair<const char*, PathCalibration Round::*> paths[] = {
      {"push_pull", &Round::push_pull},
      {"push_pull_tcp", &Round::push_pull_tcp},
      {"allreduce", &Round::allreduce},
  };
  std::vector<std::pair<std::string, std::vector<double>>> repeats;
  for (const Scalar& scalar : scalars) {
    std::vector<double> values;
    for (const Round& r : rounds) values.push_back(r.*scalar.measured);
    repeats.push_back({scalar.name, std::move(values)});
  }
  for (const auto& [name, field] : paths) {
    std::vector<double> alpha, bandwidth;
    for (const Round& r : rounds) {
      alpha.push_back((r.*field).alpha_s);
      bandwidth.push_back((r.*field).bytes_per_s);
    }
    repeats.push_back({absl::StrCat(name, ".alpha_s"), std::move(alpha)});
    repeats.push_back({absl::StrCat(name, ".bytes_per_s"), std::move(bandwidth)});
  }
  progress->Line(absl::StrFormat("calibrate: every constant the median of %d round(s) (min-max, spread):",
                                 rounds.size()));
  std::map<std::string, double> median;  // By the constant's name.
  std::vector<std::string> warnings;
  for (auto& [name, values] : repeats) {
    RINGSIDE_ASSIGN_OR_RETURN(ConstantSpread spread, SummarizeRepeats(name, std::move(values)));
    progress->Line("  " + DescribeSpread(spread));
    if (IsUnsteady(spread)) warnings.push_back(SpreadWarning(spread));
    median[name] = spread.median;
    run->measurement.spreads.push_back(std::move(spread));
  }
  for (const std::string& w : warnings) progress->Line(w);
  Calibration& c = run->calibration;
  for (const Scalar& scalar : scalars) c.*scalar.kept = median[scalar.name];
  const auto path = [&median](const std::string& name) {
    return PathCalibration{median[name + ".alpha_s"], median[name + ".bytes_per_s"]};
  };
  c.push_pull = path("push_pull");
  c.push_pull_tcp = path("push_pull_tcp");
  c.allreduce = path("allreduce");
  return absl::OkStatus();
}

// CPU time the machine spent busy, in all, and in this process, in clock ticks
// (USER_HZ) since boot: /proc/stat's first line ("cpu  user nice system idle iowait irq
// softirq steal ..."; busy is all but idle and iowait) and /proc/self/stat's utime and
// stime. nullopt where either cannot be read.
struct CpuTimes {
  double busy = 0, total = 0, self = 0;
};
std::optional<CpuTimes> ReadCpuTimes() {
  absl::StatusOr<std::string> machine = ReadFile("/proc/stat");
  absl::StatusOr<std::string> self = ReadFile("/proc/self/stat");
  if (!machine.ok() || !self.ok()) return std::nullopt;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(*machine).substr(0, machine->find('\n')), ' ', absl::SkipEmpty());
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
  // After the command name in parentheses (which may hold spaces): state is field 3,
  // utime and stime fields 14 and 15.
  const size_t paren = self->rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  const std::vector<absl::string_view> own =
      absl::StrSplit(absl::string_view(*self).substr(paren + 1), ' ', absl::SkipEmpty());
  double utime = 0, stime = 0;
  if (own.size() < 13 || !absl::SimpleAtod(own[11], &utime) || !absl::SimpleAtod(own[12], &stime)) {
    return std::nullopt;
  }
  t.self = utime + stime;
  return t;
}

// While this process waits between rounds: how many CPUs the machine's other
// processes keep busy.
constexpr absl::Duration kBusyProbe = absl::Milliseconds(250);
// From this fraction of the machine's CPUs busy elsewhere, calibrate warns: other work
// makes the waiting ranks and the shard's threads wake late (on this 2-core VM under
// load 4.9 the same 4 KiB all-reduce took 130 us in one run and 4 ms in the next), so
// the paths' constants jump, and compute and gamma share the cores and the memory bus.
constexpr double kBusyFraction = 0.25;

// Before round `round`: probes the other processes' CPU use (the machine's less this
// process's, which should be idle but may have threads winding down), keeps the most
// seen in the measurement, and says so in one line from kBusyFraction up.
void ProbeOthers(int round, int rounds, PhaseProgress* progress, CalibrationMeasurement* measurement) {
  const std::optional<CpuTimes> before = ReadCpuTimes();
  absl::SleepFor(kBusyProbe);
  const std::optional<CpuTimes> after = ReadCpuTimes();
  if (!before || !after || after->total <= before->total) return;
  const int cpus = MachineCpus();
  const double busy = std::max(0.0, cpus * (after->busy - before->busy - (after->self - before->self)) /
                                        (after->total - before->total));
  measurement->busy_cpus_elsewhere = std::max(measurement->busy_cpus_elsewhere, busy);
  if (busy < kBusyFraction * cpus) return;
  progress->Line(absl::StrFormat(
      "calibrate: warning: other processes kept %.2f of %d CPU(s) busy before round %d/%d: expect the "
      "constants to vary; calibrate on a quiet machine",
      busy, cpus, round, rounds));
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
  PhaseProgress progress(o.progress, o.calibration_repeats, o.node_cpus > 0 ? 6 : 5);
  // The CPU-bound phases on an emulated node: this process joins a cgroup of that
  // share for them in every round and leaves it before the paths are measured.
  std::unique_ptr<EmulatedCpuShares> node;
  if (o.node_cpus > 0) {
    RINGSIDE_RETURN_IF_ERROR(CheckCpuSharePrivileges());
    RemoveStaleCpuShares().IgnoreError();
    RINGSIDE_ASSIGN_OR_RETURN(node, EmulatedCpuShares::Create(o.node_cpus, 1, CpuSharePeriodFor(o.node_cpus)));
    c.node_cpus = o.node_cpus;
  }
  Rounds phases(o, &progress, &run, node.get());
  std::vector<Round> rounds(o.calibration_repeats);
  for (int i = 0; i < o.calibration_repeats; ++i) {
    Round& r = rounds[i];
    ProbeOthers(i + 1, o.calibration_repeats, &progress, &run.measurement);
    if (node != nullptr) RINGSIDE_RETURN_IF_ERROR(node->JoinNode(0));
    RINGSIDE_RETURN_IF_ERROR(phases.Compute(i + 1, &r));
    RINGSIDE_RETURN_IF_ERROR(phases.Gamma(i + 1, &r));
    if (node != nullptr) {
      RINGSIDE_RETURN_IF_ERROR(phases.PsCpu(i + 1, &r));
      RINGSIDE_RETURN_IF_ERROR(node->LeaveNode());
    }
    RINGSIDE_RETURN_IF_ERROR(phases.PushPull(i + 1, kPsTransportGrpc, &r));
    RINGSIDE_RETURN_IF_ERROR(phases.PushPull(i + 1, kPsTransportTcp, &r));
    RINGSIDE_RETURN_IF_ERROR(phases.AllReduce(i + 1, &r));
  }
  if (node != nullptr) RINGSIDE_RETURN_IF_ERROR(node->Teardown());
  RINGSIDE_RETURN_IF_ERROR(KeepMedians(rounds, node != nullptr, &progress, &run));
  SayIfExtrapolated("push-pull", run.measurement.push_pull_max_bytes, c, &progress);
  progress.Line(absl::StrFormat(
      "calibrate: push-pull over TCP at %.0f%% of gRPC's rate and %.0f%% of the all-reduce path's (per byte "
      "each way)",
      100 * c.push_pull_tcp.bytes_per_s / c.push_pull.bytes_per_s,
      100 * c.push_pull_tcp.bytes_per_s / c.allreduce.bytes_per_s));
  progress.Line("calibrate: " + TransportsBesideRawTcp(c));
  SayIfExtrapolated("all-reduce", run.measurement.allreduce_max_bytes, c, &progress);
  RINGSIDE_RETURN_IF_ERROR(ValidateCalibration(c));
  return run;
}

absl::StatusOr<Calibration> Calibrate(const CalibrateOptions& o) {
  RINGSIDE_ASSIGN_OR_RETURN(CalibrationRun run, CalibrateWithSpreads(o));
  return std::move(run.calibration);
}

}  // namespace ringside
