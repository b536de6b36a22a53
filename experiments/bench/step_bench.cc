#include "experiments/bench/step_bench.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/common.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Times `reps` n x n x n sgemm products (after one untimed warm-up) and appends each
// one's rate in GFLOP/s to `rates`.
absl::Status MeasureSgemmRates(Ops* ops, int n, int reps, std::vector<double>* rates) {
  const int64_t elems = static_cast<int64_t>(n) * n;
  absl::StatusOr<DeviceArray<float>> a = DeviceArray<float>::Create(ops, elems);
  absl::StatusOr<DeviceArray<float>> b = DeviceArray<float>::Create(ops, elems);
  absl::StatusOr<DeviceArray<float>> c = DeviceArray<float>::Create(ops, elems);
  if (!a.ok()) return a.status();
  if (!b.ok()) return b.status();
  if (!c.ok()) return c.status();
  ops->Fill(a->data(), elems, 0.5f);
  ops->Fill(b->data(), elems, 0.25f);
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
  std::vector<double> step, forward, backward, update;
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
    t->backward.push_back(metrics.backward_ms());
    t->update.push_back(finish.update_ms());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunStepBench(const StepBenchOptions& o) {
  if (o.batch < 1 || o.steps < 1 || o.warmup < 0 || o.threads < 1 || o.repeats < 1) {
    return absl::InvalidArgumentError(
        "bench needs --batch >= 1, --steps >= 1, --warmup >= 0, --threads >= 1, --repeats >= 1");
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, o.threads));
  SyntheticOptions synth;
  synth.train_size = o.batch;
  synth.test_size = 1;
  absl::StatusOr<DatasetSplits> data = MakeSyntheticDataset(synth);
  if (!data.ok()) return data.status();
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(o.model, Shape{synth.channels, synth.height, synth.width},
                    synth.num_classes, ops.get());
  if (!model.ok()) return model.status();
  Model& m = **model;

  // One resident batch, as a framework benchmark with a pre-loaded tensor would use:
  // staged by LocalStep::Prefetch before each timed step, which then starts at forward.
  std::vector<int64_t> indices(o.batch);
  for (int i = 0; i < o.batch; ++i) indices[i] = i;
  LocalStep step(&m, ops.get(), data->train.get());

  // The training path itself: the single strategy steps each layer during backward.
  SgdHyper hyper;
  hyper.lr = 0.01f;
  hyper.momentum = 0.9f;
  absl::StatusOr<std::unique_ptr<LocalSgdStrategy>> strategy =
      LocalSgdStrategy::Create(hyper, &m, ops.get());
  if (!strategy.ok()) return strategy.status();

  const double flops = m.GemmFlops(o.batch);
  absl::PrintF("model %s  batch %d  threads %d  params %d  step GEMM work: %.1f MFLOP\n",
               o.model, o.batch, o.threads, m.num_params(), flops / 1e6);

  // Each round brackets its block of steps with sgemm 1024^3 products (kRateReps before,
  // kRateReps after) on the same thread count, so the floor it compares against was
  // measured beside the steps, under the same load from the machine's neighbours. The
  // round's floor uses the median of those rates, as the step uses its median time;
  // the best rate of the whole run gives the peak floor, printed too.
  constexpr int kGemmSize = 1024;
  constexpr int kRateReps = 5;
  std::vector<double> all_rates, ratios, steps, samples_per_s;
  for (int r = 0; r < o.repeats; ++r) {
    std::vector<double> rates;
    if (absl::Status st = MeasureSgemmRates(ops.get(), kGemmSize, kRateReps, &rates); !st.ok()) {
      return st;
    }
    PhaseTimes t;
    RINGSIDE_RETURN_IF_ERROR(TimeSteps(o, indices, &step, strategy->get(), &t));
    if (absl::Status st = MeasureSgemmRates(ops.get(), kGemmSize, kRateReps, &rates); !st.ok()) {
      return st;
    }
    const double med = Percentile(t.step, 0.5);
    const double rate = Percentile(rates, 0.5);
    const double floor_ms = flops / (rate * 1e6);
    all_rates.insert(all_rates.end(), rates.begin(), rates.end());
    ratios.push_back(med / floor_ms);
    steps.push_back(med);
    samples_per_s.push_back(o.batch / (med / 1e3));
    absl::PrintF(
        "step: median %.3f ms  p10 %.3f  p90 %.3f  (forward %.3f, backward %.3f, update in "
        "backward %.3f)  %.0f samples/s  |  sgemm %d^3 %.1f GFLOP/s (range %.1f-%.1f)  "
        "GEMM floor %.3f ms  %.2fx GEMM floor\n",
        med, Percentile(t.step, 0.1), Percentile(t.step, 0.9), Percentile(t.forward, 0.5),
        Percentile(t.backward, 0.5), Percentile(t.update, 0.5), o.batch / (med / 1e3), kGemmSize, rate,
        Percentile(rates, 0.0), Percentile(rates, 1.0), floor_ms, med / floor_ms);
  }
  const double peak = Percentile(all_rates, 1.0);
  const double med = Percentile(steps, 0.5);
  if (o.repeats == 1) {
    absl::PrintF("peak floor (best sgemm %.1f GFLOP/s): %.3f ms, %.2fx\n", peak,
                 flops / (peak * 1e6), med / (flops / (peak * 1e6)));
    return absl::OkStatus();
  }
  absl::PrintF(
      "summary over %d round(s): step median %.3f ms  %.0f samples/s  %.2fx GEMM floor "
      "(median of rounds; sgemm median %.1f GFLOP/s)  %.2fx peak floor (best sgemm %.1f "
      "GFLOP/s, %.3f ms)\n",
      o.repeats, med, Percentile(samples_per_s, 0.5), Percentile(ratios, 0.5),
      Percentile(all_rates, 0.5), med / (flops / (peak * 1e6)), peak, flops / (peak * 1e6));
  return absl::OkStatus();
}

}  // namespace ringside
