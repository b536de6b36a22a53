#include "experiments/bench/step_bench.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/common.h"
#include "common/random.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Times `reps` n x n x n sgemm products (after one untimed warm-up) and appends each
// one's rate in GFLOP/s to `rates`. Operands are random (a GPU multiplies constants
// faster than real data).
absl::Status MeasureSgemmRates(Ops* ops, int n, int reps, std::vector<double>* rates) {
  const int64_t elems = static_cast<int64_t>(n) * n;
  absl::StatusOr<DeviceArray<float>> a = DeviceArray<float>::Create(ops, elems);
  absl::StatusOr<DeviceArray<float>> b = DeviceArray<float>::Create(ops, elems);
  absl::StatusOr<DeviceArray<float>> c = DeviceArray<float>::Create(ops, elems);
  if (!a.ok()) return a.status();
  if (!b.ok()) return b.status();
  if (!c.ok()) return c.status();
  std::vector<float> host(elems);
  Rng rng(12345);
  for (float& v : host) v = rng.Uniform(-1.0f, 1.0f);
  RINGSIDE_RETURN_IF_ERROR(ops->CopyToDevice(a->data(), host.data(), elems * sizeof(float)));
  for (float& v : host) v = rng.Uniform(-1.0f, 1.0f);
  RINGSIDE_RETURN_IF_ERROR(ops->CopyToDevice(b->data(), host.data(), elems * sizeof(float)));
  for (int r = 0; r <= reps; ++r) {
    const int64_t t0 = NowMicros();
    ops->Gemm(false, false, n, n, n, 1.0f, a->data(), b->data(), 0.0f, c->data());
    if (absl::Status s = ops->Synchronize(); !s.ok()) return s;
    const int64_t t1 = NowMicros();
    if (r > 0) rates->push_back(2.0 * n * n * n / ((t1 - t0) * 1e3));
  }
  return absl::OkStatus();
}

// Milliseconds per timed step, and of its phases.
struct PhaseTimes {
  std::vector<double> step, forward, backward, compute, update;
};

// Runs o.warmup untimed then o.steps timed training steps on the resident batch
// `indices` (staged by LocalStep::Prefetch before each, so the step starts at forward)
// through the single strategy's hooks, appending each timed step's phases to `t`.
absl::Status TimeSteps(const StepBenchOptions& o, const std::vector<int64_t>& indices,
                       LocalStep* step, LocalSgdStrategy* strategy, PhaseTimes* t) {
  const StepHooks hooks = strategy->hooks();
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    StepMetrics metrics;
    RINGSIDE_RETURN_IF_ERROR(step->Prefetch(indices, &metrics, nullptr));
    metrics.Clear();
    HookTimes hook_times;
    const int64_t t0 = NowMicros();
    RINGSIDE_RETURN_IF_ERROR(step->Run(indices, 1.0f / o.batch, hooks, /*announce=*/true,
                                       hooks.accumulate_gradients, &metrics, nullptr, &hook_times));
    StepMetrics finish;
    RINGSIDE_RETURN_IF_ERROR(strategy->FinishStep(hook_times, &finish, nullptr));
    const int64_t t1 = NowMicros();
    if (s < o.warmup) continue;
    t->step.push_back((t1 - t0) / 1e3);
    t->forward.push_back(metrics.forward_ms());
    // On a GPU, FinishStep's wait for the device is backward's (see LocalSgdStrategy).
    const double backward_ms = metrics.backward_ms() + finish.backward_ms();
    t->backward.push_back(backward_ms);
    t->compute.push_back(metrics.forward_ms() + backward_ms);
    t->update.push_back(finish.update_ms());
  }
  return absl::OkStatus();
}

// Each round brackets its block of steps with sgemm 1024^3 products (kRateReps before,
// kRateReps after) on the same thread count, so the floor it compares against was
// measured beside the steps, under the same load from the machine's neighbours. The
// round's floor uses the median of those rates, as the step uses its median time.
constexpr int kCpuGemmSize = 1024;
constexpr int kGpuGemmSize = 4096;  // 1024^3 is too small to keep a GPU busy.
constexpr int kRateReps = 5;

int GemmSizeFor(const StepBenchOptions& o) {
  return o.device.kind == DeviceKind::kCpu ? kCpuGemmSize : kGpuGemmSize;
}

// One round of o.steps timed steps (and, with o.measure_floor, its sgemm rates, which
// are appended to `all_rates` too).
absl::StatusOr<StepRound> MeasureRound(const StepBenchOptions& o, double flops, Ops* ops,
                                       const std::vector<int64_t>& indices, LocalStep* step,
                                       LocalSgdStrategy* strategy, std::vector<double>* all_rates) {
  std::vector<double> rates;
  if (o.measure_floor) RINGSIDE_RETURN_IF_ERROR(MeasureSgemmRates(ops, GemmSizeFor(o), kRateReps, &rates));
  PhaseTimes t;
  RINGSIDE_RETURN_IF_ERROR(TimeSteps(o, indices, step, strategy, &t));
  if (o.measure_floor) RINGSIDE_RETURN_IF_ERROR(MeasureSgemmRates(ops, GemmSizeFor(o), kRateReps, &rates));
  StepRound r;
  r.step_ms = Percentile(t.step, 0.5);
  for (double ms : t.step) r.mean_step_ms += ms / t.step.size();
  r.p10_ms = Percentile(t.step, 0.1);
  r.p90_ms = Percentile(t.step, 0.9);
  r.forward_ms = Percentile(t.forward, 0.5);
  r.backward_ms = Percentile(t.backward, 0.5);
  r.compute_ms = Percentile(t.compute, 0.5);
  r.update_ms = Percentile(t.update, 0.5);
  r.samples_per_s = o.batch / (r.step_ms / 1e3);
  if (!rates.empty()) {
    r.sgemm_gflops = Percentile(rates, 0.5);
    r.sgemm_min_gflops = Percentile(rates, 0.0);
    r.sgemm_max_gflops = Percentile(rates, 1.0);
    r.floor_ms = flops / (r.sgemm_gflops * 1e6);
    r.floor_ratio = r.step_ms / r.floor_ms;
    all_rates->insert(all_rates->end(), rates.begin(), rates.end());
  }
  return r;
}

}  // namespace

absl::StatusOr<StepBenchResult> MeasureStepBench(const StepBenchOptions& o) {
  if (o.batch < 1 || o.steps < 1 || o.warmup < 0 || o.threads < 1 || o.repeats < 1) {
    return absl::InvalidArgumentError(
        "bench needs --batch >= 1, --steps >= 1, --warmup >= 0, --threads >= 1, --repeats >= 1");
  }
  const bool on_cpu = o.device.kind == DeviceKind::kCpu;
  RINGSIDE_ASSIGN_OR_RETURN(
      std::unique_ptr<Ops> ops,
      NewOps(on_cpu ? "cpu" : "cuda", on_cpu ? 0 : std::max(o.device.index, 0), o.threads,
             o.precision));
  SyntheticOptions synth;
  synth.train_size = o.batch;
  synth.test_size = 1;
  RINGSIDE_ASSIGN_OR_RETURN(DatasetSplits data, MakeSyntheticDataset(synth));
  RINGSIDE_ASSIGN_OR_RETURN(
      std::unique_ptr<Model> model,
      Model::Create(o.model, Shape{synth.channels, synth.height, synth.width}, synth.num_classes,
                    ops.get()));

  // One resident batch, as a framework benchmark with a pre-loaded tensor would use:
  // staged by LocalStep::Prefetch before each timed step, which then starts at forward.
  std::vector<int64_t> indices(o.batch);
  for (int i = 0; i < o.batch; ++i) indices[i] = i;
  LocalStep step(model.get(), ops.get(), data.train.get());

  // The training path itself: the single strategy steps each layer during backward.
  SgdHyper hyper;
  hyper.lr = 0.01f;
  hyper.momentum = 0.9f;
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<LocalSgdStrategy> strategy,
                            LocalSgdStrategy::Create(hyper, model.get(), ops.get()));

  StepBenchResult result;
  result.options = o;
  result.num_params = model->num_params();
  result.device_name = ops->name();
  result.gemm_flops = model->GemmFlops(o.batch);
  std::vector<double> all_rates;
  for (int r = 0; r < o.repeats; ++r) {
    RINGSIDE_ASSIGN_OR_RETURN(StepRound round,
                              MeasureRound(o, result.gemm_flops, ops.get(), indices, &step,
                                           strategy.get(), &all_rates));
    result.rounds.push_back(round);
  }
  if (!all_rates.empty()) {
    result.peak_gflops = Percentile(all_rates, 1.0);
    result.median_gflops = Percentile(all_rates, 0.5);
  }
  return result;
}

void PrintStepBench(const StepBenchResult& result, FILE* out) {
  const StepBenchOptions& o = result.options;
  const double flops = result.gemm_flops;
  const bool on_cpu = o.device.kind == DeviceKind::kCpu;
  const std::string where = on_cpu ? absl::StrCat("threads ", o.threads)
                                   : absl::StrCat("device ", result.device_name, "  precision ",
                                                  GemmPrecisionName(o.precision));
  absl::FPrintF(out, "model %s  batch %d  %s  params %d  step GEMM work: %.1f MFLOP\n", o.model,
                o.batch, where, result.num_params, flops / 1e6);
  std::vector<double> steps, ratios, samples_per_s;
  for (const StepRound& r : result.rounds) {
    steps.push_back(r.step_ms);
    ratios.push_back(r.floor_ratio);
    samples_per_s.push_back(r.samples_per_s);
    absl::FPrintF(out,
                  "step: median %.3f ms  p10 %.3f  p90 %.3f  (forward %.3f, backward %.3f, update "
                  "in backward %.3f)  %.0f samples/s",
                  r.step_ms, r.p10_ms, r.p90_ms, r.forward_ms, r.backward_ms, r.update_ms,
                  r.samples_per_s);
    if (r.sgemm_gflops > 0) {
      absl::FPrintF(out, "  |  sgemm %d^3 %.1f GFLOP/s (range %.1f-%.1f)  GEMM floor %.3f ms  %.2fx GEMM floor",
                    GemmSizeFor(o), r.sgemm_gflops, r.sgemm_min_gflops, r.sgemm_max_gflops, r.floor_ms,
                    r.floor_ratio);
    }
    absl::FPrintF(out, "\n");
  }
  if (result.rounds.empty()) return;
  const double med = Percentile(steps, 0.5);
  if (result.peak_gflops > 0) {
    const double peak = result.peak_gflops;
    const double peak_floor_ms = flops / (peak * 1e6);
    if (result.rounds.size() == 1) {
      absl::FPrintF(out, "peak floor (best sgemm %.1f GFLOP/s): %.3f ms, %.2fx\n", peak,
                    peak_floor_ms, med / peak_floor_ms);
    } else {
      absl::FPrintF(out,
                    "summary over %d round(s): step median %.3f ms  %.0f samples/s  %.2fx GEMM "
                    "floor (median of rounds; sgemm median %.1f GFLOP/s)  %.2fx peak floor (best "
                    "sgemm %.1f GFLOP/s, %.3f ms)\n",
                    result.rounds.size(), med, Percentile(samples_per_s, 0.5),
                    Percentile(ratios, 0.5), result.median_gflops, med / peak_floor_ms, peak,
                    peak_floor_ms);
    }
  }
  // For scripts: the median over rounds and the achieved rate of the step's GEMM work.
  absl::FPrintF(out,
                "result: impl=ringside model=%s batch=%d device=%s precision=%s step_ms=%.4f "
                "tflops=%.3f sgemm_tflops=%.3f\n",
                o.model, o.batch, result.device_name, GemmPrecisionName(o.precision), med,
                flops / (med * 1e9), result.median_gflops / 1e3);
}

absl::Status RunStepBench(const StepBenchOptions& o) {
  RINGSIDE_ASSIGN_OR_RETURN(StepBenchResult result, MeasureStepBench(o));
  PrintStepBench(result, stdout);
  return absl::OkStatus();
}

}  // namespace ringside
