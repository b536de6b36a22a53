// Lab 2: DataParallel (one process, a replica per thread, the master replicates the
// parameters, scatters the batch, reduces the gradients and steps alone) against DDP
// (a process per replica, all-reduce, an optimizer each), at the same global batch,
// and DP again with the interpreter-lock emulation that stands for Python's GIL.
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/labs/labs.h"

namespace ringside {
namespace {

constexpr int kReplicas = 2;
constexpr int kSteps = 16;
constexpr int kWarmup = 4;

absl::StatusOr<std::vector<StepMetrics>> RunOne(const LabContext& lab, const std::string& name,
                                                const std::vector<std::string>& strategy,
                                                OutputOwner owner) {
  RINGSIDE_ASSIGN_OR_RETURN(
      LabJob job, RunLabJob(lab, name,
                            With(With({"train"}, strategy),
                                 With({absl::StrFormat("--workers=%d", kReplicas),
                                       absl::StrFormat("--steps=%d", kSteps), "--batch=64"},
                                      LabCommonFlags()))));
  return JobMetrics(job, owner, 0);
}

}  // namespace

absl::StatusOr<LabVerdict> CheckDpVsDdp(const LabContext& lab) {
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> dp,
                            RunOne(lab, "dp", {"--strategy=dp"}, OutputOwner::kSingle));
  RINGSIDE_ASSIGN_OR_RETURN(
      std::vector<StepMetrics> dp_lock,
      RunOne(lab, "dp-lock", {"--strategy=dp", "--dp_interpreter_lock"}, OutputOwner::kSingle));
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> ddp,
                            RunOne(lab, "ddp", {"--strategy=ddp"}, OutputOwner::kRank));
  auto step = [](const StepMetrics& m) { return m.step_ms(); };
  const double dp_ms = MedianAfter(dp, kWarmup, step);
  const double lock_ms = MedianAfter(dp_lock, kWarmup, step);
  const double ddp_ms = MedianAfter(ddp, kWarmup, step);
  LabVerdict v;
  v.shown = lock_ms > ddp_ms;
  v.effect = absl::StrFormat("median step: DP %.1f ms, DP with the interpreter-lock emulation %.1f ms, DDP %.1f ms",
                             dp_ms, lock_ms, ddp_ms);
  return v;
}

}  // namespace ringside
