// Lab 2: DataParallel (one process, a replica per thread; the master replicates the
// parameters, scatters the batch, reduces the gradients and steps alone) against DDP
// (a process per replica, all-reduce, an optimizer each), at the same batch per
// replica, and DP again with the interpreter-lock emulation that stands for Python's
// GIL.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/labs/labs.h"

namespace ringside {
namespace {

constexpr int kReplicas = 2;
constexpr int kSteps = 16;
constexpr int kWarmup = 4;
constexpr int kBatch = 256;

absl::StatusOr<std::vector<StepMetrics>> RunOne(const LabContext& lab, const std::string& name,
                                                const std::vector<std::string>& strategy,
                                                OutputOwner owner) {
  RINGSIDE_ASSIGN_OR_RETURN(
      LabJob job, RunLabJob(lab, name,
                            With(With({"train"}, strategy),
                                 With({absl::StrFormat("--workers=%d", kReplicas),
                                       absl::StrFormat("--steps=%d", kSteps),
                                       absl::StrFormat("--batch=%d", kBatch)},
                                      LabCommonFlags(kReplicas * kBatch * kSteps)))));
  return JobMetrics(job, owner, 0);
}

// DP's phases, medians over the steps after warm-up.
struct DpPhases {
  double step = 0, replicate = 0, scatter = 0, apply = 0, reduce = 0, update = 0;
  double Serial() const { return replicate + scatter + reduce + update; }
};

DpPhases Phases(const std::vector<StepMetrics>& r) {
  DpPhases p;
  p.step = MedianAfter(r, kWarmup, [](const StepMetrics& m) { return m.step_ms(); });
  p.replicate = MedianAfter(r, kWarmup, [](const StepMetrics& m) { return m.replicate_ms(); });
  p.scatter = MedianAfter(r, kWarmup, [](const StepMetrics& m) { return m.scatter_ms(); });
  p.apply = MedianAfter(r, kWarmup, [](const StepMetrics& m) { return m.apply_ms(); });
  p.reduce = MedianAfter(r, kWarmup, [](const StepMetrics& m) { return m.reduce_ms(); });
  p.update = MedianAfter(r, kWarmup, [](const StepMetrics& m) { return m.update_ms(); });
  return p;
}

void PrintPhases(const LabContext& lab, const DpPhases& p) {
  absl::FPrintF(lab.out,
                "    step %.1f ms: replicate %.2f, scatter %.2f, parallel apply %.1f, reduce "
                "%.2f, update %.2f ms (medians); serial part %.0f%%\n",
                p.step, p.replicate, p.scatter, p.apply, p.reduce, p.update,
                100 * p.Serial() / std::max(p.step, 1e-9));
}

}  // namespace

absl::StatusOr<LabVerdict> CheckDpVsDdp(const LabContext& lab) {
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> dp_records,
                            RunOne(lab, "dp", {"--strategy=dp"}, OutputOwner::kSingle));
  const DpPhases dp = Phases(dp_records);
  PrintPhases(lab, dp);
  RINGSIDE_ASSIGN_OR_RETURN(
      std::vector<StepMetrics> lock_records,
      RunOne(lab, "dp-lock", {"--strategy=dp", "--dp_interpreter_lock"}, OutputOwner::kSingle));
  const DpPhases lock = Phases(lock_records);
  PrintPhases(lab, lock);
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> ddp_records,
                            RunOne(lab, "ddp", {"--strategy=ddp"}, OutputOwner::kRank));
  const double ddp = MedianAfter(ddp_records, kWarmup, [](const StepMetrics& m) { return m.step_ms(); });
  absl::FPrintF(lab.out, "    step %.1f ms (median)\n", ddp);
  LabVerdict v;
  // The lock serialises the replicas' compute: parallel apply takes longer, and DP
  // falls behind DDP, whose processes compute side by side.
  v.shown = lock.apply > 1.3 * dp.apply && lock.step > ddp && dp.Serial() > 0;
  v.effect = absl::StrFormat(
      "median step, %d replicas of %d samples: DP %.1f ms (%.0f%% of it serial on the master), "
      "DP with the interpreter-lock emulation %.1f ms (parallel apply %.1f -> %.1f ms), DDP %.1f ms",
      kReplicas, kBatch, dp.step, 100 * dp.Serial() / std::max(dp.step, 1e-9), lock.step, dp.apply,
      lock.apply, ddp);
  return v;
}

}  // namespace ringside
